"""How a run is put together: options -> checks -> parts -> execute -> outputs (the composition root).

1. **Options** (:mod:`ragbatch.run._options`): every setting, written once, in small groups. The
   CLI (``ragbatch run``) and the Python API (``ragbatch.evaluate``) only translate their
   inputs into a :class:`~ragbatch.run._options.RunOptions` and print what comes back.
2. **Checks** (:func:`ragbatch.run._preflight.preflight`): once per run, the options are checked
   against each other, the data, the output paths, the pricing snapshot and the key.
3. **Parts** (:func:`ragbatch.run._factory.build_parts`): claim mode, the baseline judge, the
   row reader, the shard and the provider chain (cache -> cost limit -> live client).
4. **Execute** (:func:`ragbatch.run._execute.execute`): rows stream through the provider and
   the baseline judge; the outcomes feed the report builder, the call log and ``--rows-out``
   in input order. A :class:`~ragbatch.run._stop.RunCanceller` may cut the run short.
5. **Outputs** (:func:`ragbatch.run._outputs.write_outputs`): the report, the run record and the
   views are built from what the run kept and committed together, only when the run ends
   with a report; any other end leaves every earlier file as it was.

This module runs one process's job (:func:`run_job`) or one part of a run
(:func:`run_part_job`: a ``--workers`` process, a Dask task); :mod:`ragbatch.run._dispatch`
chooses between one process, :mod:`ragbatch.run._workers` and :mod:`ragbatch.run._cluster`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from ragbatch._gc import collect_less
from ragbatch.run._config import JobResult
from ragbatch.run._execute import Outcomes, execute
from ragbatch.run._factory import Parts, build_parts
from ragbatch.run._options import RunOptions
from ragbatch.run._outputs import StagedFiles, write_outputs, write_part
from ragbatch.run._preflight import Checked, ignore, preflight
from ragbatch.run._stop import RunCanceller

T = TypeVar("T")


def cache_written(o: RunOptions) -> str | None:
    """The cache directory finished replies went to (None: the run has no reply cache)."""
    if o.jev.provider != "jev" or o.cache.mode == "off":
        return None
    return str(o.cache.cache_dir)


async def run_options_async(
    options: RunOptions,
    warn: Callable[[str], None] = ignore,
    canceller: RunCanceller | None = None,
) -> JobResult:
    """One process's run inside an existing event loop; ``warn`` hears warnings as they arise.

    With ``canceller`` (the CLI's and the workers'), a signal or a lost parent ends the run
    early: nothing more is sent, the cache is closed, nothing is written and
    :class:`~ragbatch.core._errors.Interrupted` is raised (exit 130 for SIGINT, 143 for SIGTERM).
    """
    return await run_checked_async(preflight(options, warn), warn, canceller)


async def run_checked_async(
    checked: Checked, warn: Callable[[str], None], canceller: RunCanceller | None
) -> JobResult:
    """:func:`run_options_async` of a run :func:`~ragbatch.run._preflight.preflight` checked."""
    return await _run_parts(checked, warn, canceller, write_outputs)


async def _run_parts(
    checked: Checked,
    warn: Callable[[str], None],
    canceller: RunCanceller | None,
    outputs: Callable[[Parts, Outcomes, StagedFiles, Callable[[str], None]], T],
) -> T:
    """Build the parts, execute them, then ``outputs`` writes what the run produced (with
    fewer cyclic garbage collections: :mod:`ragbatch._gc`)."""
    options = checked.options
    with collect_less():
        parts = build_parts(checked, warn)
        staged = StagedFiles()
        try:
            try:
                rows_out = staged.rows(options.output.rows_out, options.output.flush_rows)
                kept = await execute(parts, rows_out, canceller)
            finally:
                await parts.aclose()
            if canceller is not None and canceller.stopped:
                raise canceller.interrupted(kept.builder.rows, cache_written(options))
            return outputs(parts, kept, staged, warn)
        except BaseException:
            staged.discard()  # a failed run never replaces an earlier result
            raise


def run_job(
    options: RunOptions,
    warn: Callable[[str], None] = ignore,
    canceller: RunCanceller | None = None,
) -> JobResult:
    """One process's run in a fresh event loop."""
    return run_checked(preflight(options, warn), warn, canceller)


def run_checked(
    checked: Checked, warn: Callable[[str], None], canceller: RunCanceller | None
) -> JobResult:
    """:func:`run_job` of a run :func:`~ragbatch.run._preflight.preflight` checked."""
    return anyio.run(run_checked_async, checked, warn, canceller)


def run_part_job(part: Checked, canceller: RunCanceller | None = None) -> dict[str, Any]:
    """One part of a checked run (``--shard`` with ``--partial-out``: a worker process, a Dask
    task) in a fresh event loop: its partial or summary and its --rows-out, no report of its
    own (:func:`ragbatch.run._outputs.write_part`). Returns the part's run record."""
    return anyio.run(_run_parts, part, ignore, canceller, write_part)
