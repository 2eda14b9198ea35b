"""``ragbatch --version`` (and ``-h`` beside ``--help``): the program's own facts, no run.

Help is click's plain text (the apps pass ``rich_markup_mode=None``): an option's name and
value type, then its help wrapped below the terminal's width with its default and environment
variable in full; a flag shows no value type. Rich's boxed table gave each column a share of
80 columns, so descriptions wrapped a few words a line, defaults were cut with an ellipsis and
every flag read ``<bool>``, as if it took a value.
"""

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
