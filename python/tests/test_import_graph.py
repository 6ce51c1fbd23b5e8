"""The package's import structure: every module imports on its own, the package-internal import graph
(module-level imports, read from the sources with ``ast``) has no cycle, and no module imports
inside a function except through ``densewire._optional.require``."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import densewire

PACKAGE_DIR = Path(densewire.__file__).resolve().parent
PACKAGE = "densewire"

#: Modules still importing an optional dependency inside a function, and why.
LATE_IMPORTS_ALLOWED = {
    "densewire._arrow": "_pyarrow() names the arrow extra itself; owned by the codec",
    "densewire._client": "httpx and tqdm are imported when a client is built; owned by the client",
}


def module_files(package_dir: Path = PACKAGE_DIR, package: str = PACKAGE) -> dict[str, Path]:
    """Every module of the package: dotted name -> source file."""
    out = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join([package, *parts])] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports run when the module is imported: at the top level, or inside a top-level
    ``if``/``try``/``with`` (not in a function or class body, not under ``if TYPE_CHECKING``)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(stmts: list[ast.stmt]) -> None:
        for node in stmts:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, ast.With):
                visit(node.body)

    visit(tree.body)
    return found


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(package_dir: Path = PACKAGE_DIR, package: str = PACKAGE) -> dict[str, set[str]]:
    """module -> the package modules it imports at module level. ``from X import Y`` counts as an
    import of ``X.Y`` when that is a module, else of ``X``."""
    files = module_files(package_dir, package)
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in _module_level_imports(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = _resolve(mod, path.name == "__init__.py", node)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for t in targets:
                while t and t not in files and "." in t:  # import a.b.c: the deepest package module
                    t = t.rsplit(".", 1)[0]
                if t in files and t != mod:
                    graph[mod].add(t)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = dfs(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = dfs(start)
            if found:
                return found
    return None


def late_imports(package_dir: Path = PACKAGE_DIR, package: str = PACKAGE) -> dict[str, list[str]]:
    """module -> the import statements inside its functions (``line: statement``)."""
    out: dict[str, list[str]] = {}
    for mod, path in module_files(package_dir, package).items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        out.setdefault(mod, []).append(f"{node.lineno}: {ast.unparse(node)}")
    return {m: sorted(set(v), key=lambda s: int(s.split(":")[0])) for m, v in out.items()}


# ------------------------------------------------------------------------------------------ tests
def test_every_module_imports_in_a_fresh_interpreter() -> None:
    """Each module imported first, with no densewire module loaded before it: a cycle that only
    breaks from one entry point shows here. ``densewire.__main__`` runs the CLI, so it is left out."""
    names = [m for m in module_files() if m != "densewire.__main__"]
    script = (
        "import importlib, json, sys, traceback\n"
        "failed = {}\n"
        f"for name in {names!r}:\n"
        "    for loaded in [m for m in sys.modules if m == 'densewire' or m.startswith('densewire.')]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except BaseException:\n"
        "        failed[name] = traceback.format_exc(limit=3)\n"
        "print(json.dumps(failed))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    failed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert failed == {}, "\n".join(f"{k}:\n{v}" for k, v in failed.items())
    assert len(names) > 50  # the walk found the package


def test_the_import_graph_has_no_cycle() -> None:
    graph = import_graph()
    assert "densewire._server.tables.registry" in graph["densewire._server.app"]  # the graph is read
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_a_planted_cycle_is_found(tmp_path: Path) -> None:
    """The checker itself: a package whose modules import each other (absolute, relative and
    ``from package import module`` spellings) is reported; without the back edge it is clean."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import A\n")
    (pkg / "a.py").write_text("from pkg.sub import b\nA = 1\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("import typing\nif typing.TYPE_CHECKING:\n    from ..a import A\n"
                                      "def f():\n    from .. import a\n")
    assert find_cycle(import_graph(pkg, "pkg")) is None  # TYPE_CHECKING and function imports do not count
    (pkg / "sub" / "b.py").write_text("from .. import a\n")
    assert find_cycle(import_graph(pkg, "pkg")) == ["pkg.a", "pkg.sub.b", "pkg.a"]
    (pkg / "sub" / "b.py").write_text("try:\n    from ..a import A\nexcept ImportError:\n    pass\n")
    assert find_cycle(import_graph(pkg, "pkg")) == ["pkg.a", "pkg.sub.b", "pkg.a"]


def test_no_import_inside_a_function_except_through_require() -> None:
    """Imports sit at the top of modules; an optional dependency needed late goes through
    ``densewire._optional.require``, which names the extra to install."""
    found = {m: v for m, v in late_imports().items() if m not in LATE_IMPORTS_ALLOWED}
    assert found == {}, json.dumps(found, indent=1)
    assert set(LATE_IMPORTS_ALLOWED) <= set(late_imports())  # drop an entry once its module is clean
