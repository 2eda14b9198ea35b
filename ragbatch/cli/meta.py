"""``ragbatch --version`` (and ``-h`` beside ``--help``): the program's own facts, no run."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ragbatch import __version__

HELP_OPTIONS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"ragbatch {__version__}")
        raise typer.Exit()


VersionFlag = Annotated[
    bool,
    typer.Option("--version", callback=_show_version, is_eager=True,
                 help="Show ragbatch's version and exit."),
]  # fmt: skip
