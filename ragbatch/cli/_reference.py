"""The command-line and environment reference (``docs/reference/cli.md``), generated from the
commands typer builds and the one option list: never written by hand.

``python -m ragbatch.cli._reference`` prints the page; ``--write`` replaces the committed one
(from a source checkout). ``tests/test_cli_reference.py`` fails when the committed page differs
from what the code gives, and checks that every option of every command is on it with its
default, environment variable and help.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import typer

from ragbatch.cli._app import app
from ragbatch.run import ENVIRONMENT, cli_fields, spec_of

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md"
COMMAND = "python -m ragbatch.cli._reference --write"

# Variables read outside the option list: (name, what it does). A test checks that every
# RAGBATCH_ or TYPESAFE_ name in the source is on the page.
OTHER_VARIABLES = (
    ("RAGBATCH_MAX_LINE_BYTES", "The longest dataset line (or JSON array item, or JSON "
     "document) a reader accepts, in bytes; default 64 MiB (67108864). A longer one is an "
     "error naming its file and line."),
    ("HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY", "Proxies for the Jev API and the LLM "
     "judge, in either case (lower case wins), read once for the base URL as curl and requests "
     "read them: the scheme's variable, then ALL_PROXY; NO_PROXY takes names (subdomains "
     "included), IP addresses, CIDR blocks, host:port and `*`; a loopback host is never proxied "
     "(`~/.netrc` is not read)."),
)  # fmt: skip


def _cell(text: str) -> str:
    """``text`` on one line, safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


METAVARS = {Path: "PATH", str: "TEXT", int: "INTEGER", float: "FLOAT"}


def _metavar(param: Any) -> str:
    """PATH, TEXT, INTEGER or FLOAT: the value an option takes (a list's item's)."""
    descriptor = getattr(param, "type_descriptor", None)  # typer >= 0.2x; else click's type
    if descriptor is None:
        name = str(getattr(param.type, "name", "text"))
        return {"integer range": "INTEGER", "float range": "FLOAT"}.get(name, name.upper())
    kind = descriptor.annotation
    while get_args(kind):  # Path | None, list[int]: the one type inside
        kind = next(a for a in get_args(kind) if a is not type(None))
    return METAVARS.get(kind, "TEXT")


def _bound(param: Any, which: str) -> Any:
    """``min`` or ``max``: typer keeps it on the parameter, click on its range type."""
    if hasattr(param, which):
        return getattr(param, which)
    return getattr(getattr(param, "type", None), which, None)


def names(param: Any) -> str:
    """How the parameter is written: ``--out PATH``, ``--adaptive / --no-adaptive``,
    ``DATASET`` for an argument."""
    if param.param_type_name == "argument":
        return f"`{param.name.upper()}`" + (
            " (argument)" if param.required else " (argument, optional)"
        )
    if param.is_flag:
        return " / ".join(f"`{name}`" for name in (*param.opts, *param.secondary_opts))
    return ", ".join(f"`{name} {_metavar(param)}`" for name in param.opts)


def default_text(param: Any) -> str:
    """The default as ``--help`` shows it; ``—`` for none (or one the help states)."""
    if param.required:
        return "required"
    default = param.default
    if getattr(param, "is_flag", False) and isinstance(default, bool):
        if param.secondary_opts:
            return f"`{(param.opts if default else param.secondary_opts)[0]}`"
        return "on" if default else "off"
    shown = getattr(param, "show_default", None)
    if isinstance(shown, str):
        return shown
    if shown is False or default is None or default == [] or default == ():
        return "—"
    if isinstance(default, list | tuple):
        return ", ".join(f"`{value}`" for value in default)
    return f"`{default}`"


def help_text(param: Any) -> str:
    """The parameter's help, with its bounds and (when repeatable) that it may be repeated."""
    text = " ".join((param.help or "").split())
    low, high = _bound(param, "min"), _bound(param, "max")
    if low is not None and high is not None:
        text += f" From {low} to {high}."
    elif low is not None:
        text += f" At least {low}."
    elif high is not None:
        text += f" At most {high}."
    if getattr(param, "multiple", False) and "repeatable" not in text:
        text += " Repeatable."
    return text


def commands(command: Any, path: str, parent: Any = None) -> Iterator[tuple[str, Any, Any]]:
    """``(path, command, context)`` for ``command`` and every command under it, in the order
    ``--help`` lists them."""
    ctx = typer.Context(command, info_name=path.rsplit(" ", 1)[-1], parent=parent)
    yield path, command, ctx
    for name in getattr(command, "list_commands", lambda _: [])(ctx):
        yield from commands(command.get_command(ctx, name), f"{path} {name}", ctx)


def usage_pieces(command: Any, ctx: Any) -> list[str]:
    """``[OPTIONS]``, then each argument (``REPORT``, ``[DATASET]``, ``PARTIALS...``), or
    ``COMMAND [ARGS]...`` for a group."""
    pieces = ["[OPTIONS]"]
    for param in command.get_params(ctx):
        if param.param_type_name == "argument":
            name = param.name.upper() + ("..." if param.nargs == -1 else "")
            pieces.append(name if param.required else f"[{name}]")
    if hasattr(command, "list_commands"):
        pieces.append("COMMAND [ARGS]...")
    return pieces


def command_section(path: str, command: Any, ctx: Any) -> list[str]:
    """One command: its usage, its help and a table of its parameters."""
    usage = " ".join([path, *usage_pieces(command, ctx)])
    lines = [f"## `{path}`", "", "```", usage, "```", ""]
    help = (command.help or "").strip()
    for paragraph in help.split("\n\n"):
        lines += [" ".join(paragraph.split()), ""]
    params = [p for p in command.get_params(ctx) if p.name != "help"]
    if params:
        lines += [
            "| option | default | environment | description |",
            "|---|---|---|---|",
        ]
        for p in params:
            env = f"`{p.envvar}`" if isinstance(p.envvar, str) else ""
            lines.append(
                f"| {names(p)} | {_cell(default_text(p))} | {env} | {_cell(help_text(p))} |"
            )
        lines.append("")
    return lines


def environment_section() -> list[str]:
    """Every environment variable ragbatch reads: the options' and the others."""
    flags = {f.name: spec_of(f).flag or "--" + f.name.replace("_", "-") for f in cli_fields()}
    lines = [
        "## Environment variables",
        "",
        "A command-line option wins over its variable. `ragbatch.evaluate` reads the same "
        "variables for the options it is not given.",
        "",
        "| variable | option | what it sets |",
        "|---|---|---|",
    ]
    helps = {f.name: spec_of(f).help for f in cli_fields()}
    for name, variable in sorted(ENVIRONMENT.items(), key=lambda item: item[1]):
        lines.append(f"| `{variable}` | `{flags[name]}` | {_cell(helps[name])} |")
    for variable, what in OTHER_VARIABLES:
        shown = ", ".join(f"`{v}`" for v in variable.split(", "))
        lines.append(f"| {shown} | — | {_cell(what)} |")
    return [*lines, ""]


def render() -> str:
    """The whole page, as Markdown."""
    root = typer.main.get_command(app)
    lines = [
        "# Command-line reference",
        "",
        f"Generated from the code by `{COMMAND}`; do not edit by hand. Every command also "
        "takes `-h`/`--help`. Exit codes: 0 done, 2 bad input or options (one `error:` line "
        "on stderr); `run` and `gate` list their others.",
        "",
    ]
    for path, command, ctx in commands(root, "ragbatch"):
        lines += command_section(path, command, ctx)
    lines += environment_section()
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    """Print the page, or with ``--write`` replace ``docs/reference/cli.md``."""
    text = render()
    if argv == ["--write"]:
        PAGE.parent.mkdir(parents=True, exist_ok=True)
        PAGE.write_text(text, encoding="utf-8")
        print(f"wrote {PAGE}")
    elif argv:
        print("usage: python -m ragbatch.cli._reference [--write]", file=sys.stderr)
        return 2
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
