"""Option and argument errors as one ``error:`` line with exit 2, like every other error.

click (under typer) would print a usage block and a boxed panel; :class:`OneLineErrors`, the
app's group class, catches those errors where they arise (parsing the command line, resolving
and invoking a command) and prints one line saying what was wrong and where help is.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import typer
from typer.core import TyperGroup

try:  # newer typer vendors click as typer._click; its errors are not click's
    from typer._click import exceptions as click_errors
except ImportError:  # typer on click itself
    from click import exceptions as click_errors  # type: ignore[no-redef]


def one_line(error: click_errors.ClickException) -> str:
    """The error's message on one line, with where to find help for its command."""
    text = " ".join(error.format_message().split()).rstrip(".")
    text = text[:1].lower() + text[1:]
    ctx = getattr(error, "ctx", None)
    path = getattr(ctx, "command_path", None)
    if isinstance(path, str) and path:
        text += f" (see {path} --help)"
    return text


@contextmanager
def _reported() -> Iterator[None]:
    try:
        yield
    except click_errors.NoArgsIsHelpError:
        raise  # a bare command shows its help, as asked for by no_args_is_help
    except click_errors.ClickException as error:
        typer.echo(f"error: {one_line(error)}", err=True)
        raise typer.Exit(error.exit_code) from None


class OneLineErrors(TyperGroup):
    """The ``ragbatch`` group: usage errors of any command are one line (exit 2)."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: Any = None,
        **extra: Any,
    ) -> Any:
        with _reported():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: Any) -> Any:
        with _reported():
            return super().invoke(ctx)


__all__: Sequence[str] = ["OneLineErrors", "one_line"]
