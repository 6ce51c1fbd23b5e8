# The README's two commands: `make serve` and `make test`. Everything else is a step of those.
.PHONY: serve test setup setup-serve golden golden-check protos bench test-python

serve: setup-serve  ## set up what serving needs, then run densewire serve (flags: make serve ARGS='--port 9000')
	@echo "densewire is installed in .venv: run it as .venv/bin/densewire, or '. .venv/bin/activate' puts it on your PATH"
	.venv/bin/densewire serve $(ARGS)

test:  ## set up and run every test of every language (what CI runs)
	bash scripts/test.sh

setup:  ## the Python environment in .venv with the test tools (idempotent)
	bash scripts/setup-python.sh dev

setup-serve:  ## the Python environment in .venv with what serving needs, nothing more (idempotent)
	bash scripts/setup-python.sh serve

golden: setup  ## regenerate testdata/golden/ and README.md's capabilities table from testdata/cases/ and capabilities.toml
	.venv/bin/python testdata/generate.py

golden-check: setup
	.venv/bin/python testdata/generate.py --check

protos: setup  ## regenerate the Python code of proto/inference and proto/tei (the gRPC services) after changing a .proto
	.venv/bin/python proto/generate.py

test-python: setup
	.venv/bin/python -m pytest python/tests

bench: setup  ## the Python published-case benchmark (writes bench/python/RESULTS.md)
	.venv/bin/python bench/python/published_case.py
