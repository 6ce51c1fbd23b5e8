"""testdata/generate.py --check (SPEC.md section 13, issue 13): against a copy of the tree it passes, and it
fails on a planted wrong spec version, a place that no longer states one, and a stale capabilities table."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """What generate.py reads: testdata/, SPEC.md, README.md and every place capabilities.toml lists."""
    root = tmp_path_factory.mktemp("tree")
    shutil.copytree(REPO / "testdata", root / "testdata", ignore=shutil.ignore_patterns("__pycache__"))
    caps = tomllib.loads((REPO / "testdata" / "capabilities.toml").read_text())
    for rel in ["SPEC.md", "README.md"] + [place["file"] for place in caps["version"]]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / rel, root / rel)
    return root


def check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(root / "testdata" / "generate.py"), "--check"], capture_output=True,
                          text=True, cwd=root, timeout=300)


def planted(root: Path, rel: str, old: str, new: str):
    """A context in which one file of the copy has `old` replaced by `new`."""
    class Planted:
        def __enter__(self):
            self.text = (root / rel).read_text()
            assert self.text.count(old) == 1, f"{rel}: {old!r}"
            (root / rel).write_text(self.text.replace(old, new))

        def __exit__(self, *exc):
            (root / rel).write_text(self.text)
    return Planted()


def spec_version() -> str:
    return re.search(r"^Version \*\*([0-9.]+)\*\*", (REPO / "SPEC.md").read_text(), re.MULTILINE).group(1)


def test_the_tree_as_committed_passes(tree: Path) -> None:
    result = check(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"spec version {spec_version()} everywhere" in result.stdout


def test_a_planted_wrong_version_fails_naming_the_file_and_line(tree: Path) -> None:
    v = spec_version()
    with planted(tree, "ruby/lib/densewire/version.rb", f'SPEC_VERSION = "{v}"', 'SPEC_VERSION = "0.9"'):
        result = check(tree)
    assert result.returncode == 1
    line = next(i + 1 for i, t in enumerate((tree / "ruby/lib/densewire/version.rb").read_text().splitlines())
                if "SPEC_VERSION" in t)
    assert f"ruby/lib/densewire/version.rb:{line}: says spec version 0.9, SPEC.md is {v}" in result.stdout


def test_a_wrong_version_in_a_package_manifest_fails(tree: Path) -> None:
    v = spec_version()
    with planted(tree, "rust/Cargo.toml", f"the densewire {v} codecs", "the densewire 1.0 codecs"):
        result = check(tree)
    assert result.returncode == 1
    assert f"says spec version 1.0, SPEC.md is {v}" in result.stdout and "rust/Cargo.toml" in result.stdout


def test_a_place_that_stops_stating_the_version_fails(tree: Path) -> None:
    with planted(tree, "java/pom.xml", "densewire wire spec", "densewire spec"):
        result = check(tree)
    assert result.returncode == 1
    assert "java/pom.xml: states no spec version matching" in result.stdout


def test_a_stale_capabilities_table_fails(tree: Path) -> None:
    with planted(tree, "README.md", "| `table.server` tables server | 15.9 | ✓ |", "| `table.server` tables server | 15.9 | – |"):
        result = check(tree)
    assert result.returncode == 1
    assert "README.md (capabilities table)" in result.stdout
