"""The shape of ``ragbatch.run``, checked on the source with ast (nothing is imported): no import
cycle (``tests/test_layers.py`` checks the package), one name for each helper, and the shard
decided in one place."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "ragbatch" / "run"


def module_name(path: Path) -> str:
    return "ragbatch.run" if path.stem == "__init__" else f"ragbatch.run.{path.stem}"


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
