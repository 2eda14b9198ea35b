"""The command line's modules: no import circle (lazy and TYPE_CHECKING imports included), and
what the commands share (``fail``, reading reports, checking output paths) defined once."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = ROOT / "ragbatch" / "cli"


def module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_of(p): p for p in sorted(CLI.glob("*.py"))}


def imports_of(path: Path) -> set[str]:
    """The ``ragbatch.cli`` modules ``path`` imports, wherever the import statement is."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES
                      else node.module for a in node.names}  # fmt: skip
    return {name for name in found if name in MODULES} - {module_of(path)}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every module that reaches itself, with the path back to it."""
    found = []
    for start in graph:
        stack = [(start, [start])]
        seen: set[str] = set()
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    found.append([*path, start])
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    return found


def test_no_import_circle_in_the_command_line() -> None:
    graph = {name: imports_of(path) for name, path in MODULES.items()}
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    # guards against a check that passes everything
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()})
    assert not cycles({"a": {"b"}, "b": set()})


def definitions() -> dict[str, list[str]]:
    names: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef):
                names.setdefault(node.name.lstrip("_"), []).append(name)
    return names


def test_what_the_commands_share_is_defined_once() -> None:
    names = definitions()
    for shared in ("fail", "read_json", "read_report", "check_output_paths"):
        assert names[shared] == ["ragbatch.cli._common"], shared
    # run's check_outputs checks a run's options; the command line's checks (option, path) pairs
    assert "check_outputs" not in names
