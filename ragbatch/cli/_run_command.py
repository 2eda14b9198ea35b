"""Typer parameters generated from the one option list (no logic): ``ragbatch run``'s, and
every other command's share of them.

Each field of :mod:`ragbatch.run._options` becomes one parameter, in ``--help`` order, with its
default, help, flag, environment variable and bounds; the command body turns them back into a
:class:`~ragbatch.run._options.RunOptions` by name. An option added there appears here at once,
in ``run`` and in every command that takes its group (``estimate`` takes the dataset source
options, the Jev, cache, pricing and claim settings it prices a run by; the commands that read
a dataset take the source options of :data:`SOURCE`).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import fields
from typing import Annotated, Any, TypeVar, get_type_hints

import typer

from ragbatch.data import RowSource
from ragbatch.run import (
    GROUPS,
    InputOptions,
    RunOptions,
    cli_fields,
    open_source_rows,
    spec_of,
)

F = TypeVar("F", bound=Callable[..., None])
SOURCE = tuple(f.name for f in cli_fields() if f in fields(GROUPS["input"]))
"""The dataset and how to read it (``--format``, ``--mapping``, ``--outputs``, ...)."""


def _hints() -> dict[str, Any]:
    hints: dict[str, Any] = {}
    for cls in GROUPS.values():
        hints.update(get_type_hints(cls))
    return hints


def _parameter(
    f: dataclasses.Field[Any], kind: Any, default: Any, argument: bool
) -> inspect.Parameter:
    spec = spec_of(f)
    how: dict[str, Any] = {"help": spec.help, **spec.typer}
    if spec.env:
        how["envvar"] = spec.env
    if argument:
        info: Any = typer.Argument(**how)
    else:
        info = typer.Option(*([spec.flag] if spec.flag else []), **how)
    annotation = Annotated[kind, info]
    return inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=annotation)  # fmt: skip


def option_parameters(
    names: Iterable[str] | None = None,
    defaults: Mapping[str, Any] | None = None,
    as_options: Collection[str] = (),
) -> list[inspect.Parameter]:
    """One typer parameter per named CLI option (all of them: ``run``'s), in ``ragbatch run
    --help`` order. ``defaults`` replaces a default for this command; a name in ``as_options``
    is an option (``--dataset``) where ``run`` has an argument."""
    hints, chosen, defaults = _hints(), None if names is None else set(names), defaults or {}
    parameters = []
    for f in cli_fields():
        if chosen is not None and f.name not in chosen:
            continue
        spec = spec_of(f)
        kind = spec.cli_type if spec.cli_type is not None else hints[f.name]
        default = defaults.get(f.name, f.default)
        parameters.append(_parameter(f, kind, default, spec.argument and f.name not in as_options))
    if chosen is not None and len(parameters) != len(chosen):
        unknown = chosen - {p.name for p in parameters}
        raise ValueError(f"not CLI options of a run: {', '.join(sorted(unknown))}")
    return parameters


def with_options(
    *names: str,
    defaults: Mapping[str, Any] | None = None,
    as_options: Collection[str] = (),
) -> Callable[[F], F]:
    """A command ``body(own..., **options)`` whose ``**options`` are the named run options
    (every one when none is named), generated from the option list.

    The signature typer reads is the body's required parameters, then the generated ones, then
    the body's parameters with a default; its docstring is kept.
    """

    def wrap(body: F) -> F:
        own = [
            p
            for p in inspect.signature(body, eval_str=True).parameters.values()
            if p.kind is not inspect.Parameter.VAR_KEYWORD
        ]
        required = [p for p in own if p.default is inspect.Parameter.empty]
        rest = [p for p in own if p.default is not inspect.Parameter.empty]
        generated = option_parameters(names or None, defaults, as_options)
        parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
                      for p in (*required, *generated, *rest)]  # fmt: skip
        body.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
        body.__annotations__ = {}
        return body

    return wrap


def source_options(options: Mapping[str, Any]) -> InputOptions:
    """The :data:`SOURCE` options of a command, as the run's input options."""
    return RunOptions.of(**{name: options[name] for name in SOURCE}).input


def open_source(options: Mapping[str, Any]) -> RowSource:
    """The rows of the dataset the :data:`SOURCE` options of a command name, in its format
    (a multi-step trace is an error unless ``--flatten`` reads it as a row)."""
    return open_source_rows(source_options(options))


with_run_options = with_options()  # ``ragbatch run``: every option

__all__ = [
    "SOURCE",
    "open_source",
    "option_parameters",
    "source_options",
    "with_options",
    "with_run_options",
]
