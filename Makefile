# The README's two commands: `make serve` and `make test`. Everything else is a step of those.
.PHONY: serve test setup golden golden-check bench test-python

serve: setup  ## set up, then run densewire serve on its built-in default model
	.venv/bin/densewire serve $(ARGS)

test:  ## set up and run every test of every language (what CI runs)
	bash scripts/test.sh

setup:  ## the Python environment in .venv (idempotent)
	bash scripts/setup-python.sh

golden: setup  ## regenerate testdata/golden/ and README.md's capabilities table from testdata/cases/ and capabilities.toml
	.venv/bin/python testdata/generate.py

golden-check: setup
	.venv/bin/python testdata/generate.py --check

test-python: setup
	.venv/bin/python -m pytest python/tests

bench: setup  ## the Python published-case benchmark (writes bench/python/RESULTS.md)
	.venv/bin/python bench/python/published_case.py
