"""The layout, checked on the source with ast (nothing is imported):

- the pure modules (``core``, ``metrics``, ``compare``, ``calibrate`` and the pure modules of
  the I/O layers) import no I/O library, do no file I/O and import only pure modules;
- imports point one way, down the ranks below (siblings of one rank never import each other);
- no module is over 500 lines;
- no import cycle among the package's modules (lazy and ``TYPE_CHECKING`` imports included).
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
    "ragbatch.report._models",
    "ragbatch.report._builder",
    "ragbatch.report._modes",
    "ragbatch.report._rows",
    "ragbatch.report._text",
    "ragbatch.report._tables",
    "ragbatch.report._trace_tables",
    "ragbatch.report._markdown",
    "ragbatch.report._inference_view",
    "ragbatch.report._audit_view",
    "ragbatch.report._export",
    "ragbatch.report._export_traces",
    "ragbatch.report._timeline",
    "ragbatch.report._views",
    "ragbatch.providers._mock",
    "ragbatch.providers._baseline",
    "ragbatch.providers._lexical",
    "ragbatch.run._budget",
]
# The four the style guide names, plus the standard ways to reach files, processes or sockets.
FORBIDDEN_MODULES = {
    "httpx",
    "aiohttp",
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


def is_package(module: str) -> bool:
    spec = importlib.util.find_spec(module) if module.startswith("ragbatch.") else None
    return spec is not None and spec.submodule_search_locations is not None


def front_door_sources(package: str, names: list[str]) -> set[str]:
    """The private modules a package's front door takes ``names`` from (read from its own
    imports): a pure module that imports a name through the front door of a package that is
    not pure as a whole depends on the module defining it, not on the package's I/O parts."""
    source, filename = source_of(package)
    wanted, found = set(names), set()
    body = ast.parse(source, filename=filename).body
    # names exported on first use are imported for type checkers under ``if TYPE_CHECKING:``
    lazy = [n for node in body if isinstance(node, ast.If) for n in node.body]
    for node in body + lazy:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if (alias.asname or alias.name) in wanted:
                    found.add(node.module)
                    wanted.discard(alias.asname or alias.name)
    assert not wanted, f"{package} does not export {sorted(wanted)}"
    return found


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
            elif is_package(node.module) and node.module not in PURE:
                names = [a.name for a in node.names]
                imported.update(front_door_sources(node.module, names) if names else {node.module})
            else:
                imported.add(node.module)
    ours = {name for name in imported if name.split(".")[0] == "ragbatch"}
    assert ours <= set(PURE), f"{module} imports non-pure {sorted(ours - set(PURE))}"


def test_a_name_through_an_impure_front_door_is_traced_to_its_module() -> None:
    # guards against a trace that passes everything: the I/O writer is found as impure
    assert front_door_sources("ragbatch.report", ["RowsWriter"]) == {"ragbatch.report._rows_out"}
    assert "ragbatch.report._rows_out" not in PURE


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
        "from ragbatch.core._errors import ConfigError",
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
        "ragbatch.run._job",
        "ragbatch.data._jsonl",
        "ragbatch.cli._app",
        "ragbatch.run._runner",
    ):
        source, filename = source_of(module)
        assert violations(source, filename), module


# -- dependencies point one way ---------------------------------------------------------------
# A module may import its own subpackage and any subpackage of a LOWER rank; equal ranks are
# siblings that must not import each other. ``ragbatch`` itself (the lazy API export) is top.
RANKS = {
    "core": 0,
    "_files": 0.5,  # the atomic output files every I/O layer writes: above core, below all else
    "_lazy": 0.5,  # the front doors' import on first use: imports nothing of ragbatch
    "_gc": 0.5,  # the run's and the program's garbage-collector thresholds: imports nothing
    "providers": 1,
    "data": 1,
    "metrics": 2,
    "report": 3,
    "compare": 4,
    "calibrate": 4,
    "run": 5,
    "_api": 6,
    "watch": 6,  # ragbatch watch: judges with run's judge, below the CLI
    "distributed": 6,
    "cli": 7,
    "testing": 7,
    "pytest_plugin": 7,
    "__main__": 8,
    "": 9,
}


def layer_of(module: str) -> str:
    """``ragbatch.run._job`` -> ``run``; ``ragbatch`` -> ``""``."""
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
    assert upward_imports("ragbatch.core._policy", "from ragbatch.run._job import run_job")
    assert upward_imports("ragbatch.compare._gate", "from ragbatch.calibrate import fit")
    assert upward_imports("ragbatch.metrics._scores", "import ragbatch.report._models")
    assert not upward_imports("ragbatch.run._job", "from ragbatch.core._errors import ConfigError")


def test_core_modules_are_all_checked_for_purity() -> None:
    assert {m for m in ALL_MODULES if layer_of(m) == "core"} <= set(PURE)


def test_no_module_over_500_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert long == {}


# -- private modules stay private ----------------------------------------------------------------
# A module named ``_x`` belongs to the package that holds it: only that package's own modules may
# import it; everyone else goes through the package's front door (its ``__init__``).


def private_imports(module: str, source: str) -> list[str]:
    """Imports of another package's private module, as readable strings."""
    bad = []
    for line, name in ragbatch_imports(source):
        parts = name.split(".")
        private = [i for i, part in enumerate(parts) if part.startswith("_") and part[:2] != "__"]
        if not private:
            continue
        home = ".".join(parts[: private[0]])
        if module != home and not module.startswith(home + "."):
            bad.append(f"line {line}: {module} imports {name}, private to {home}")
    return bad


@pytest.mark.parametrize("module", ALL_MODULES)
def test_no_module_imports_another_packages_private_module(module: str) -> None:
    source, _ = source_of(module)
    assert private_imports(module, source) == []


def test_private_import_check_catches_a_reach_inside() -> None:
    # guards against a check that passes everything
    assert private_imports("ragbatch.run._job", "from ragbatch.core._errors import ConfigError")
    assert private_imports(
        "ragbatch.providers._jev", "from ragbatch.providers.cache._store import X"
    )
    assert private_imports("ragbatch.run._job", "import ragbatch.report._html")
    assert not private_imports("ragbatch.run._job", "from ragbatch.core import ConfigError")
    assert not private_imports("ragbatch.core._policy", "from ragbatch.core._errors import X")
    assert not private_imports(
        "ragbatch.providers.cache._store", "from ragbatch.providers._apikey import R"
    )


def test_every_package_module_but_the_api_is_private() -> None:
    public = {m for m in ALL_MODULES if not any(p.startswith("_") for p in m.split(".")[1:])}
    packages = {m for m in public if (ROOT / Path(*m.split(".")) / "__init__.py").exists()}
    assert public - packages == {"ragbatch.distributed", "ragbatch.pytest_plugin"} | {
        m for m in public if m.startswith("ragbatch.testing.")
    }


# -- no import cycles ------------------------------------------------------------------------------
# Every import statement counts, wherever it is (module top, a function body, ``TYPE_CHECKING``):
# a circle closed by a lazy import is still a circle a reader must hold in their head.


def imported_modules(module: str, source: str) -> set[str]:
    """The package's modules ``source`` imports: ``from pkg import sub`` is the submodule
    ``pkg.sub`` when one exists, else the package's front door."""
    known = set(ALL_MODULES)
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else node.module)
    return {name for name in found if name in known and name != module}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while (top := stack.pop()) != node:
                component.append(top)
            if component:
                found.append(sorted([*component, node]))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_import_cycle_lazy_imports_included() -> None:
    graph = {m: imported_modules(m, source_of(m)[0]) for m in ALL_MODULES}
    assert import_cycles(graph) == []


def test_the_cycle_check_sees_a_lazy_and_a_type_checking_import() -> None:
    # guards against a check that passes everything: the three circles this test was written
    # against, each closed by an import the module only makes when needed
    lazy = "def f():\n    from ragbatch.providers._http_wire import open_wire\n"
    typing_only = "if TYPE_CHECKING:\n    from ragbatch.run._job import run_job\n"
    assert imported_modules("ragbatch.providers._http_client", lazy) == {
        "ragbatch.providers._http_wire"
    }
    assert imported_modules("ragbatch.run._workers", typing_only) == {"ragbatch.run._job"}
    assert imported_modules("ragbatch.cli._tools", "from ragbatch.cli import _labels") == {
        "ragbatch.cli._labels"
    }
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
