"""The shape of `connectors/`, read from the source with `ast` (nothing is imported):

- no import circle between its modules (imports inside functions count; `if TYPE_CHECKING:`
  blocks do not, they never run);
- no module imports Spark or Airflow (`connectors` is the lean streaming package);
- each layer imports only the layers below it:
  api → settings → format → sources/state → sinks → signals → snapshot → engine → app.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "connectors"

# layer → the layers it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "api": set(),
    "settings": {"api"},
    "format": {"api", "settings"},
    "state": {"api"},
    "sources": {"api", "settings", "format", "state"},
    "sinks": {"api", "settings", "format", "state"},
    "signals": {"api", "settings", "format", "state", "sources", "sinks"},
    "snapshot": {"api", "settings", "format", "state", "sources", "sinks", "signals"},
    "engine": {"api", "settings", "format", "state", "sources", "sinks", "signals", "snapshot"},
    "app": {"api", "settings", "format", "state", "sources", "sinks", "signals", "snapshot", "engine"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "api"


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def imports(path: Path, modules: set[str]) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import that runs, resolved to a module of `modules`
    when it names one (`from connectors.x import y` is module `connectors.x.y` if that exists)."""
    tree = ast.parse(path.read_text(), str(path))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]

    def walk(node: ast.AST) -> Iterator[ast.AST]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                yield from (n for stmt in child.orelse for n in [stmt, *walk(stmt)])
                continue
            yield child
            yield from walk(child)

    for node in walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield (full if full in modules else base), node.lineno


def graph() -> tuple[dict[str, set[str]], list[str]]:
    files = {module_name(p): p for p in PKG.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in files}
    heavy: list[str] = []
    for mod, path in files.items():
        for target, line in imports(path, set(files)):
            root = target.split(".")[0]
            if root in ("pyspark", "airflow", "delta"):
                heavy.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
            if target in files and target != mod:
                edges[mod].add(target)
    return edges, heavy


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles() -> None:
    edges, _ = graph()
    found = cycles(edges)
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_connectors_import_neither_spark_nor_airflow() -> None:
    _, heavy = graph()
    assert not heavy, "\n".join(heavy)


def test_layers_import_only_the_layers_below() -> None:
    edges, _ = graph()
    assert set(map(layer, edges)) <= set(ALLOWED), sorted(set(map(layer, edges)) - set(ALLOWED))
    bad = [
        f"{m} ({layer(m)}) imports {t} ({layer(t)})"
        for m, ts in sorted(edges.items())
        for t in sorted(ts)
        if layer(t) != layer(m) and layer(t) not in ALLOWED[layer(m)]
    ]
    assert not bad, "\n".join(bad)


def test_the_checker_sees_circles_and_type_checking_blocks(tmp_path: Path) -> None:
    # The analysis itself, on a made-up package: a circle through a function-local import is
    # found, one through an `if TYPE_CHECKING:` import is not.
    edges = {"a": {"b"}, "b": {"a"}, "c": set()}
    assert cycles(edges) == [["a", "b"]]
    pkg = tmp_path / "p.py"
    pkg.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import q\ndef f():\n    import r\n"
    )
    global ROOT
    old, ROOT = ROOT, tmp_path
    try:
        assert [m for m, _ in imports(pkg, set())] == ["typing", "r"]
    finally:
        ROOT = old


def test_the_lean_install_pulls_neither_spark_nor_airflow() -> None:
    """`pip install tidemark` is the streaming connector; Spark and Airflow are the extras."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [d.split("=")[0].split("<")[0].split(">")[0].strip().lower() for d in project["dependencies"]]
    assert not [n for n in names if "spark" in n or "airflow" in n], names
    extras = project["optional-dependencies"]
    assert any(d.startswith("pyspark==") for d in extras["spark"])
    assert any(d.startswith("apache-airflow==") for d in extras["airflow"])
