"""``ragbatch run``'s typer parameters, generated from the one option list (no logic).

Each field of :mod:`ragbatch.run._options` becomes one parameter, in ``--help`` order, with its
default, help, flag, environment variable and bounds; the command body turns them back into a
:class:`~ragbatch.run._options.RunOptions` by name. An option added there appears here at once.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, get_type_hints

import typer

from ragbatch.run import GROUPS, cli_fields, spec_of


def _hints() -> dict[str, Any]:
    hints: dict[str, Any] = {}
    for cls in GROUPS.values():
        hints.update(get_type_hints(cls))
    return hints


def run_parameters() -> list[inspect.Parameter]:
    """One typer parameter per CLI option, in ``ragbatch run --help`` order."""
    hints = _hints()
    parameters = []
    for f in cli_fields():
        spec = spec_of(f)
        kind = spec.cli_type if spec.cli_type is not None else hints[f.name]
        how: dict[str, Any] = {"help": spec.help, **spec.typer}
        if spec.env:
            how["envvar"] = spec.env
        if spec.argument:
            info: Any = typer.Argument(**how)
        else:
            info = typer.Option(*([spec.flag] if spec.flag else []), **how)
        parameters.append(
            inspect.Parameter(
                f.name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=f.default,
                annotation=Annotated[kind, info],
            )
        )
    return parameters


def with_run_options(body: Callable[..., None]) -> Callable[..., None]:
    """``body(**options)`` with the generated signature typer reads (its docstring kept)."""
    body.__signature__ = inspect.Signature(run_parameters(), return_annotation=None)  # type: ignore[attr-defined]
    body.__annotations__ = {}
    return body


__all__ = ["run_parameters", "with_run_options"]
