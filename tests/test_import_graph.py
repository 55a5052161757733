"""The package's layers, read from its source: no import circle, and each layer's reach.

Every ``import`` counts, at the top of a module or inside a function (a lazy
import hides a circle, it does not remove it), except those under
``if TYPE_CHECKING:``, which never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import nbviz

ROOT = Path(nbviz.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for child in node.body for n in ast.walk(child)}
    return skipped


def import_graph() -> dict[str, set[str]]:
    """Module -> the nbviz modules (and outside top-level packages) it imports."""
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _type_checking_nodes(tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                    base = f"{base}.{node.module}" if node.module else base
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    deps.add(sub if sub in files else base)
        graph[name] = {d for d in deps if d != name}
    return graph


def _nbviz_edges(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    return {m: {d for d in deps if d in graph} for m, deps in graph.items()}


def test_no_module_of_nbviz_takes_part_in_an_import_circle() -> None:
    graph = _nbviz_edges(import_graph())
    assert "nbviz.widgets.export" in graph["nbviz.widgets.dashboard"], "the graph reads imports"
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            circle = path[path.index(name) :] + (name,)
            raise AssertionError("import circle: " + " -> ".join(circle))
        if name not in done:
            for dep in sorted(graph[name]):
                visit(dep, path + (name,))
            done.add(name)

    for name in sorted(graph):
        visit(name, ())


@pytest.mark.parametrize(
    ("layer", "forbidden"),
    [
        ("nbviz.store", ("torch", "ipywidgets", "anywidget", "bqplot", "nbviz.widgets")),
        ("nbviz.analysis", ("torch", "ipywidgets", "anywidget", "nbviz.widgets", "nbviz.probes")),
        ("nbviz.probes", ("ipywidgets", "anywidget", "bqplot", "nbviz.widgets")),
    ],
)
def test_each_layer_imports_only_what_lies_below_it(layer: str, forbidden: tuple[str, ...]) -> None:
    graph = import_graph()
    bad = sorted(
        f"{module} imports {dep}"
        for module, deps in graph.items()
        if module == layer or module.startswith(layer + ".")
        for dep in deps
        if any(dep == f or dep.startswith(f + ".") for f in forbidden)
    )
    assert not bad, bad
