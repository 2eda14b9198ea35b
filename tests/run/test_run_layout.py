"""The shape of ``ragbatch.run``, checked on the source with ast (nothing is imported): no import
cycle among its modules, one name for each helper, and the shard decided in one place."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "ragbatch" / "run"


def module_name(path: Path) -> str:
    return "ragbatch.run" if path.stem == "__init__" else f"ragbatch.run.{path.stem}"


def run_imports() -> dict[str, set[str]]:
    """Each module of ``ragbatch.run`` -> the modules of ``ragbatch.run`` it imports anywhere
    (at the top, inside a function, under ``TYPE_CHECKING``)."""
    modules = {module_name(p): p for p in RUN.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
                found |= {f"{node.module}.{a.name}" for a in node.names}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_in_run_lazy_imports_included() -> None:
    assert cycles(run_imports()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    # guards against a check that passes everything
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_each_helper_of_the_run_and_the_api_has_one_name() -> None:
    defined: dict[str, list[str]] = defaultdict(list)
    for path in [*sorted(RUN.glob("*.py")), ROOT / "ragbatch" / "_api.py"]:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined[node.name].append(path.name)
    assert {name: files for name, files in defined.items() if len(files) > 1} == {}


def test_only_the_factory_and_the_parts_read_which_shard_a_run_is() -> None:
    # ``Parts.shard`` (a _shards.Shard) answers which rows, how many, what is kept and
    # written; the rest of the run asks it, not the options
    allowed = {"_options.py", "_preflight.py", "_factory.py", "_parts.py"}
    readers = set()
    for path in RUN.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("shard", "shard_of"):
                scale = node.value
                if isinstance(scale, ast.Attribute) and scale.attr == "scale":
                    readers.add(path.name)
    assert readers <= allowed, sorted(readers - allowed)
