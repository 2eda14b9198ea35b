"""``ragbatch parse``: what ragbatch will judge, one native JSON line per row or trace, read as
a run reads its dataset (the source options of :mod:`ragbatch.cli._run_command`); no judge is
called and no cache opened (file I/O).

stdout carries the lines alone, so ``ragbatch parse … | jq`` works; the summary goes to stderr.
A reader that stops reading (``| head``) ends the command quietly.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any

import typer

from ragbatch._files import atomic_file
from ragbatch.cli._common import check_output_paths, fail
from ragbatch.cli._run_command import SOURCE, source_options, with_options
from ragbatch.core import RagbatchError, Row, Trace
from ragbatch.data import native_line
from ragbatch.run import ItemCounts, open_source_items

__all__ = ["parse_command"]


def write_items(items: Iterable[Row | Trace], write: Callable[[bytes], object]) -> ItemCounts:
    """Each item's native line, in order, through ``write``; what was written."""
    counts = ItemCounts()
    for item in items:
        write(native_line(item))
        counts.add(item)
    return counts


@with_options(*SOURCE)
def parse_command(
    out: Annotated[
        Path | None,
        typer.Option(help="Write the lines to this file (whole or not at all) instead of stdout."),
    ] = None,
    **source: Any,
) -> None:
    """Print what ragbatch will judge: one JSON line per row or trace, in input order.

    DATASET is read as run reads it, with the same options; each line is the row, or the trace
    with its steps, in ragbatch's own JSONL shape (docs/reference/dataset-format.md), so the
    output reads back as the same items. No judge is called and no cache is opened. A summary
    line (items, rows, traces and their steps) goes to stderr. Exit 0 read, 2 bad input or
    options.
    """
    try:
        check_output_paths(("--out", out))
        items = open_source_items(source_options(source)).items()
        if out is not None:
            with atomic_file(out) as file:
                counts = write_items(items, file.write)
        else:
            stdout = sys.stdout.buffer
            try:
                counts = write_items(items, stdout.write)
                stdout.flush()
            except BrokenPipeError:  # the reader has all it wanted
                devnull = os.open(os.devnull, os.O_WRONLY)  # so the exit's flush has a sink
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)
                return
    except RagbatchError as error:
        raise fail(error) from None
    where = "" if out is None else f", written to {out}"
    typer.echo(f"parse: {counts.text(str(source['dataset']))}{where}", err=True)
