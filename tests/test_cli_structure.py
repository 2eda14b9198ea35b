"""The command line's modules: what the commands share (``fail``, reading reports, checking
output paths) is defined once (no import circle: ``tests/test_layers.py`` checks the package)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = ROOT / "ragbatch" / "cli"


def module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_of(p): p for p in sorted(CLI.glob("*.py"))}


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
