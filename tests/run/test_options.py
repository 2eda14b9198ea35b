"""Each option of a run is defined once (run/options.py): the CLI and the Python API are
checked against that one list."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from ragbatch._api import API_OPTIONS
from ragbatch.cli._app import app
from ragbatch.core._errors import ConfigError
from ragbatch.run._options import (
    DEFAULTS,
    ENVIRONMENT,
    GROUP_OF,
    HELP_ORDER,
    OPTION_NAMES,
    RunOptions,
    cli_fields,
    option_fields,
)


def test_the_cli_and_the_api_name_the_same_options() -> None:
    params = typer.main.get_command(app).commands["run"].params  # type: ignore[attr-defined]
    assert [p.name for p in params] == list(OPTION_NAMES)
    assert {p.name: p.default for p in params} == DEFAULTS
    assert {p.name: p.envvar for p in params if p.envvar} == ENVIRONMENT
    assert set(API_OPTIONS) == set(OPTION_NAMES) - {"dataset"}


def test_every_option_is_defined_once_in_one_group() -> None:
    names = [f.name for f in option_fields()]
    assert len(names) == len(set(names)) == len(GROUP_OF)
    assert set(HELP_ORDER) <= set(names)  # the help order names no option that is gone
    assert [f.name for f in cli_fields()][: len(HELP_ORDER)] == HELP_ORDER


def test_options_are_set_by_name_and_an_unknown_name_is_refused() -> None:
    options = RunOptions.of(timeout=5.0, concurrency=3, no_cache=True, html=Path("r.html"))
    assert options.retry.timeout == 5.0
    assert options.rate.concurrency == 3
    assert options.cache.mode == "off"
    assert options.output.html == Path("r.html")
    assert RunOptions().retry.timeout == DEFAULTS["timeout"] == 30.0
    with pytest.raises(ConfigError, match="unknown option"):
        RunOptions.of(timeout_s=5.0)
    with pytest.raises(ConfigError, match="--offline and --no-cache cannot be used together"):
        _ = RunOptions.of(offline=True, no_cache=True).cache.mode


def test_keys_are_in_no_repr() -> None:
    options = RunOptions.of(api_key="jev-secret-1", judge_api_key="judge-secret-2")
    shown = repr(options) + repr(options.jev) + repr(options.judge)
    assert "secret" not in shown
    assert options.jev.api_key == "jev-secret-1"
