"""``ragbatch cache``: merge reply caches, verify and repair one (no logic here)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ragbatch.cli._common import fail
from ragbatch.cli._usage import OneLineErrors
from ragbatch.core import EXIT_USAGE, ConfigError, RagbatchError
from ragbatch.providers.cache import (
    finish_interrupted_swap,
    merge_caches,
    repair_cache,
    verify_cache,
)
from ragbatch.run import DEFAULT_CACHE

cache_app = typer.Typer(
    cls=OneLineErrors, help="Work on reply caches.", no_args_is_help=True, rich_markup_mode=None
)


@cache_app.command("merge")
def cache_merge_command(
    sources: Annotated[list[Path], typer.Argument(help="Cache directories to copy from.")],
    into: Annotated[Path, typer.Option(help="The cache directory to merge into.")] = DEFAULT_CACHE,
) -> None:
    """Copy every entry of SOURCES into --into; a damaged source (as `cache verify` finds it)
    stops the merge before anything is written."""
    try:
        for directory in (*sources, into):  # a repair a killed process left half done
            finish_interrupted_swap(directory)
        for source in sources:
            if not source.is_dir():
                raise ConfigError(f"cache directory {source} does not exist")
        if into.exists() and not into.is_dir():
            raise ConfigError(f"--into {into}: is not a directory; give a cache directory")
        stats = merge_caches(sources, into)
    except RagbatchError as error:
        raise fail(error) from None
    typer.echo(
        f"merged {stats.sources} caches into {into}: {stats.copied} entries copied, "
        f"{stats.already_present} already there"
    )


@cache_app.command("verify")
def cache_verify_command(
    directory: Annotated[Path, typer.Argument(help="The cache directory.")] = DEFAULT_CACHE,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair", help="Rebuild from the intact entries; drop the rest (refetched later)."
        ),
    ] = False,
) -> None:
    """Check every entry of a cache (read-only); exit 2 when it is damaged, unless --repair.
    A repair that a killed process left half done is finished first."""
    try:
        finish_interrupted_swap(directory)
        if not directory.is_dir():
            raise ConfigError(f"cache directory {directory} does not exist")
        result = verify_cache(directory)
        typer.echo(f"{directory}: {result.describe()}")
        if not result.is_damaged:
            return
        if not repair:
            typer.echo(
                f"error: cache directory is damaged: {directory} (run `ragbatch cache verify "
                f"--repair {directory}` to keep the {result.ok} intact entries)",
                err=True,
            )
            raise typer.Exit(EXIT_USAGE)
        repaired = repair_cache(directory)
    except RagbatchError as error:
        raise fail(error) from None
    typer.echo(
        f"repaired {directory}: {repaired.kept} entries kept, {repaired.dropped} dropped "
        "(a rerun fetches them again)"
    )
