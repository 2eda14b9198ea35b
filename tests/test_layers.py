"""The layout, checked on the source with ast (nothing is imported):

- the pure modules (``core``, ``metrics``, ``compare``, ``calibrate`` and the pure modules of
  the I/O layers) import no I/O library, do no file I/O and import only pure modules;
- imports point one way, down the ranks below (siblings of one rank never import each other);
- no module is over 500 lines.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ragbatch"


def modules_of(package: str) -> list[str]:
    """Every module of a subpackage (its ``__init__`` included), found on disk."""
    found = []
    for path in sorted((PACKAGE / package if package else PACKAGE).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


# Whole subpackages that are pure, then the pure modules of the I/O layers.
PURE = [
    *modules_of("core"),
    *modules_of("metrics"),
    *modules_of("compare"),
    *modules_of("calibrate"),
    "ragbatch.report",
    "ragbatch.report.models",
    "ragbatch.report.builder",
    "ragbatch.report.modes",
    "ragbatch.report.rows",
    "ragbatch.report.text",
    "ragbatch.report.tables",
    "ragbatch.report.markdown",
    "ragbatch.report.export",
    "ragbatch.providers",
    "ragbatch.providers.mock",
    "ragbatch.providers.baseline",
    "ragbatch.providers.lexical",
    "ragbatch.run.budget",
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
        "from ragbatch.core.errors import ConfigError",
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
    for module in (
        "ragbatch.run.job",
        "ragbatch.data.jsonl",
        "ragbatch.cli.app",
        "ragbatch.run.runner",
    ):
        source, filename = source_of(module)
        assert violations(source, filename), module


# -- dependencies point one way ---------------------------------------------------------------
# A module may import its own subpackage and any subpackage of a LOWER rank; equal ranks are
# siblings that must not import each other. ``ragbatch`` itself (the lazy API export) is top.
RANKS = {
    "core": 0,
    "files": 0.5,  # the atomic output files every I/O layer writes: above core, below all else
    "providers": 1,
    "data": 1,
    "metrics": 2,
    "report": 3,
    "compare": 4,
    "calibrate": 4,
    "run": 5,
    "api": 6,
    "distributed": 6,
    "cli": 7,
    "testing": 7,
    "pytest_plugin": 7,
    "__main__": 8,
    "": 9,
}


def layer_of(module: str) -> str:
    """``ragbatch.run.job`` -> ``run``; ``ragbatch`` -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def ragbatch_imports(source: str, filename: str = "<test>") -> list[tuple[int, str]]:
    """Every ``ragbatch`` module the source imports (TYPE_CHECKING and lazy imports included)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "ragbatch":
                found += [(node.lineno, f"ragbatch.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, node.module))
    return [(line, name) for line, name in found if name.split(".")[0] == "ragbatch"]


def upward_imports(module: str, source: str) -> list[str]:
    """Imports of ``module`` that reach a sibling or a higher layer, as readable strings."""
    own = layer_of(module)
    bad = []
    for line, name in ragbatch_imports(source):
        other = layer_of(name)
        if other != own and RANKS[other] >= RANKS[own]:
            bad.append(f"line {line}: {module} ({own}) imports {name} ({other})")
    return bad


ALL_MODULES = [m for m in modules_of("") if m != "ragbatch"] + ["ragbatch"]


def test_every_layer_is_ranked() -> None:
    assert {layer_of(m) for m in ALL_MODULES} <= set(RANKS)


@pytest.mark.parametrize("module", ALL_MODULES)
def test_imports_point_down(module: str) -> None:
    source, _ = source_of(module)
    assert upward_imports(module, source) == []


def test_layer_check_catches_an_upward_import() -> None:
    # guards against a check that passes everything
    assert upward_imports("ragbatch.core.policy", "from ragbatch.run.job import run_job")
    assert upward_imports("ragbatch.compare.gate", "from ragbatch.calibrate import fit")
    assert upward_imports("ragbatch.metrics.scores", "import ragbatch.report.models")
    assert not upward_imports("ragbatch.run.job", "from ragbatch.core.errors import ConfigError")


def test_core_modules_are_all_checked_for_purity() -> None:
    assert {m for m in ALL_MODULES if layer_of(m) == "core"} <= set(PURE)


def test_no_module_over_500_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert long == {}
