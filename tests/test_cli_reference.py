"""docs/reference/cli.md is generated from the code, is current, and shows every option of
every command with its default, environment variable and help, and every variable read."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer

from ragbatch.cli._app import app
from ragbatch.cli._reference import COMMAND, PAGE, main, render
from ragbatch.run._options import ENVIRONMENT

ROOT = Path(__file__).resolve().parent.parent
TEXT = render()


def test_the_committed_page_is_what_the_code_gives() -> None:
    committed = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
    assert committed == TEXT, f"docs/reference/cli.md is stale: run `{COMMAND}` and commit it"


def every_command() -> list[tuple[str, Any]]:
    found = []

    def walk(command: Any, path: str) -> None:
        found.append((path, command))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "ragbatch")
    return found


COMMANDS = every_command()


def section(path: str) -> str:
    start = TEXT.index(f"## `{path}`\n")
    end = TEXT.find("\n## ", start + 1)
    return TEXT[start : end if end >= 0 else None]


def row_of(text: str, param: Any) -> str:
    first = param.opts[0]
    if param.param_type_name == "argument":
        first = param.name.upper()
    rows = [line for line in text.splitlines() if re.match(rf"\| `{first}[ `]", line)]
    assert len(rows) == 1, (first, rows)
    return rows[0]


def expected_default(param: Any) -> str | None:
    """The default as the page must show it, worked out from the parameter alone."""
    default, shown = param.default, getattr(param, "show_default", None)
    if param.required:
        return "required"
    if isinstance(shown, str):
        return shown
    if isinstance(default, bool):
        return None  # a flag: on/off or its on/off name, checked below
    if default is None or shown is False:
        return "—"
    if isinstance(default, list):
        return str(default[0])
    return str(default)


def test_the_page_lists_every_command_and_option() -> None:
    assert {path for path, _ in COMMANDS} >= {"ragbatch run", "ragbatch estimate",
                                            "ragbatch cache verify", "ragbatch export"}  # fmt: skip
    checked = 0
    for path, command in COMMANDS:
        text = section(path)
        for param in command.params:
            if param.name == "help":
                continue
            row = row_of(text, param)
            cells = row.split(" | ")
            for flag in (*param.opts, *param.secondary_opts):
                assert flag in cells[0] or param.param_type_name == "argument", (path, flag)
            default = expected_default(param)
            if default is not None:
                assert default in cells[1], (path, param.name, cells[1])
            elif param.secondary_opts:
                assert cells[1] == f"`{(param.opts if param.default else param.secondary_opts)[0]}`"
            else:
                assert cells[1] == ("on" if param.default else "off"), (path, param.name)
            assert cells[2] == (f"`{param.envvar}`" if param.envvar else ""), (path, param.name)
            assert " ".join((param.help or "").split()).replace("|", "\\|") in cells[3]
            checked += 1
    assert checked > 100


def test_estimate_shows_its_source_options_and_the_llm_extractor() -> None:
    text = section("ragbatch estimate")
    for flag in ("--format TEXT", "--mapping TEXT", "--outputs PATH"):
        assert f"| `{flag}` |" in text
    assert "'llm' (an OpenAI-compatible model" in text
    assert "| `--provider TEXT` | `jev` |" in text


def variables_in_the_source() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "ragbatch").rglob("*.py"):
        if "testing" in path.parts:
            continue  # the test servers' own switches, not ragbatch's
        names |= set(re.findall(r"\b(?:RAGBATCH|TYPESAFE)_[A-Z_]+\b", path.read_text()))
    return names


def test_every_environment_variable_is_in_the_table() -> None:
    table = TEXT[TEXT.index("## Environment variables") :]
    found = variables_in_the_source()
    assert set(ENVIRONMENT.values()) <= found
    assert "RAGBATCH_MAX_LINE_BYTES" in found
    for variable in sorted(found | {"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"}):
        assert f"`{variable}`" in table, variable
    for name, variable in ENVIRONMENT.items():
        line = next(x for x in table.splitlines() if x.startswith(f"| `{variable}` |"))
        assert f"`--{name.replace('_', '-')}`" in line


def test_the_generator_refuses_an_unknown_argument(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--nosuch"]) == 2
    assert capsys.readouterr().err == "usage: python -m ragbatch.cli._reference [--write]\n"
