"""``ragbatch --version`` (and ``-h`` beside ``--help``): the program's own facts, no run."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

import typer

HELP_OPTIONS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


def _show_version(value: bool) -> None:
    if value:
        try:  # the installed distribution's version (pyproject.toml's)
            found = version("ragbatch")
        except PackageNotFoundError:
            found = "unknown (not installed)"
        typer.echo(f"ragbatch {found}")
        raise typer.Exit()


VersionFlag = Annotated[
    bool,
    typer.Option("--version", callback=_show_version, is_eager=True,
                 help="Show ragbatch's version and exit."),
]  # fmt: skip
