"""Option and argument errors as one ``error:`` line with exit 2, like every other error.

click (under typer) would print a usage block and a boxed panel; :class:`OneLineErrors`, the
app's group class, catches those errors where they arise (parsing the command line, resolving
and invoking a command) and prints one line saying what was wrong and where help is.

A flag given a value (``--quiet true``) is refused by name: click would take the value for the
next argument (``true`` as the dataset) and fail on that instead.
"""

from __future__ import annotations

import itertools
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


BOOLEAN_WORDS = {"true": True, "yes": True, "on": True, "1": True,
                 "false": False, "no": False, "off": False, "0": False}  # fmt: skip


def flag_value_error(param: Any, flag: str, value: str) -> str | None:
    """Why ``flag value`` is wrong when ``flag`` is one of ``param``'s and takes no value,
    and what to write instead; None when ``value`` is no yes/no word."""
    wanted = BOOLEAN_WORDS.get(value.lower())
    if wanted is None:
        return None
    opposite = [*param.secondary_opts, *param.opts]  # --adaptive's is --no-adaptive and back
    opposite.remove(flag)
    if wanted:  # --quiet true, --no-adaptive yes
        instead = f"write {flag} alone"
    elif opposite:  # --adaptive false
        instead = f"write {opposite[0]} for {value}"
    else:  # --quiet false
        instead = f"leave {flag} out for {value}"
    return f"{flag} is a flag and takes no value: {instead}, not {flag} {value}"


def check_flag_values(command: Any, args: list[str]) -> None:
    """A UsageError when a flag of ``command`` in ``args`` is followed by a yes/no word."""
    flags = {name: param for param in getattr(command, "params", ())
             if getattr(param, "is_flag", False) and not getattr(param, "count", False)
             for name in (*param.opts, *param.secondary_opts)}  # fmt: skip
    for flag, value in itertools.pairwise(args):
        if flag == "--":
            return
        problem = flag_value_error(flags[flag], flag, value) if flag in flags else None
        if problem is not None:
            raise click_errors.UsageError(problem)


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

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        try:
            check_flag_values(command, rest)
        except click_errors.UsageError as error:
            where = f"(see {ctx.command_path} {name} --help)"
            raise click_errors.UsageError(f"{error.message} {where}") from None
        return name, command, rest


__all__: Sequence[str] = ["OneLineErrors", "one_line"]
