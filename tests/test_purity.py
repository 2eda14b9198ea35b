"""The pure core imports no I/O library and does no file I/O (checked on the source with ast)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

PURE = [
    "ragbatch.errors",
    "ragbatch.schema",
    "ragbatch.wire",
    "ragbatch.questions",
    "ragbatch.policy",
    "ragbatch.pricing",
    "ragbatch.metrics",
    "ragbatch.report",
    "ragbatch.summarize",
    "ragbatch.outcome",
    "ragbatch.render",
    "ragbatch.providers.base",
    "ragbatch.providers.mock",
    "ragbatch.providers.baseline",
    "ragbatch.claims",
    "ragbatch.claim_metrics",
    "ragbatch.ranking",
    "ragbatch.answer_checks",
    "ragbatch.slices",
    "ragbatch.diagnostics",
    "ragbatch.compare",
    "ragbatch.diff",
    "ragbatch.golden_eval",
    "ragbatch.row_results",
    "ragbatch.budget",
    "ragbatch.drift",
    "ragbatch.providers.lexical",
    "ragbatch.calibrate",
    "ragbatch.calibrate_bounds",
    "ragbatch.calibrate_policy",
    "ragbatch.calibrate_rules",
    "ragbatch.calibrate_search",
    "ragbatch.calibrate_refine",
    "ragbatch.audit",
    "ragbatch.tables",
    "ragbatch.markdown",
    "ragbatch.tradeoff",
]
# The four the style guide names, plus the standard ways to reach files, processes or sockets.
FORBIDDEN_MODULES = {
    "httpx",
    "diskcache",
    "anyio",
    "typer",
    "asyncio",
    "os",
    "io",
    "pathlib",
    "shutil",
    "tempfile",
    "socket",
    "subprocess",
    "urllib",
    "requests",
    "importlib",
}
FILE_METHODS = {"open", "read_text", "read_bytes", "write_text", "write_bytes"}
FORBIDDEN_CALLS = {"open", "__import__", "exec", "eval"}


def source_of(module: str) -> tuple[str, str]:
    """The module's source text and file name, found without importing it."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, f"{module} not found"
    path = Path(spec.origin)
    return path.read_text(encoding="utf-8"), str(path)


def violations(source: str, filename: str = "<test>") -> list[str]:
    """Every import of a forbidden module and every file-I/O call, as readable strings."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                names = [node.module] if node.module and node.level == 0 else []
            for name in names:
                if name.split(".")[0] in FORBIDDEN_MODULES:
                    found.append(f"line {node.lineno}: import {name}")
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in FORBIDDEN_CALLS:
                found.append(f"line {node.lineno}: {func.id}()")
            if isinstance(func, ast.Attribute) and func.attr in FILE_METHODS:
                found.append(f"line {node.lineno}: .{func.attr}()")
    return found


@pytest.mark.parametrize("module", PURE)
def test_pure_module_does_no_io(module: str) -> None:
    source, filename = source_of(module)
    assert violations(source, filename) == []


@pytest.mark.parametrize("module", PURE)
def test_pure_module_imports_only_pure_ragbatch_modules(module: str) -> None:
    source, filename = source_of(module)
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            imported.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, "use absolute imports"
            if node.module == "ragbatch":
                imported.update(f"ragbatch.{a.name}" for a in node.names)
            else:
                imported.add(node.module)
    ours = {name for name in imported if name.split(".")[0] == "ragbatch"}
    assert ours <= set(PURE), f"{module} imports non-pure {sorted(ours - set(PURE))}"


# -- the checker itself catches what it should ----------------------------------------------------


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ("import httpx", "import httpx"),
        ("import anyio.abc", "import anyio.abc"),
        ("from diskcache import Cache", "import diskcache"),
        ("from typer.main import get_command", "import typer.main"),
        ("import os.path as p", "import os.path"),
        ("from pathlib import Path", "import pathlib"),
        ("data = open('x').read()", "open()"),
        ("Path('x').read_text()", ".read_text()"),
        ("p.read_bytes()", ".read_bytes()"),
        ("p.write_text('x')", ".write_text()"),
        ("self.path.write_bytes(b'')", ".write_bytes()"),
        ("with self.path.open('rb') as f: pass", ".open()"),
        ("m = __import__('httpx')", "__import__()"),
    ],
)
def test_checker_catches(snippet: str, expected: str) -> None:
    found = violations(snippet)
    assert len(found) >= 1
    assert expected in found[0]


@pytest.mark.parametrize(
    "snippet",
    [
        "import orjson",
        "from pydantic import BaseModel",
        "from ragbatch.errors import ConfigError",
        "import hashlib, math, fnmatch",
        "reader = opener(x)",
        "x.reopen()",
        "text = data.decode()",
    ],
)
def test_checker_allows(snippet: str) -> None:
    assert violations(snippet) == []


def test_io_edges_are_seen_as_impure() -> None:
    # guards against a checker that passes everything: the I/O modules do fail it
    for module in ("ragbatch.job", "ragbatch.dataset", "ragbatch.cli", "ragbatch.runner"):
        source, filename = source_of(module)
        assert violations(source, filename), module
