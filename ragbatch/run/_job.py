"""How a run is put together: options -> parts -> execute -> outputs (the composition root).

1. **Options** (:mod:`ragbatch.run._options`): every setting, written once, in small groups. The
   CLI (``ragbatch run``) and the Python API (``ragbatch.evaluate``) only translate their
   inputs into a :class:`~ragbatch.run._options.RunOptions` and print what comes back.
2. **Parts** (:func:`ragbatch.run._factory.build_parts`): the options are checked against each
   other, the data and the output paths, then pricing, thresholds, claim mode, the baseline
   judge, the row reader and the provider chain (cache -> cost limit -> live client) are made.
3. **Execute** (:func:`ragbatch.run._execute.execute`): rows stream through the provider and
   the baseline judge; the outcomes feed the report builder, the call log and ``--rows-out``
   in input order. A :class:`~ragbatch.run._stop.RunCanceller` may cut the run short.
4. **Outputs** (:func:`ragbatch.run._outputs.write_outputs`): the report, the run record and the
   views are built from what the run kept and committed together, only when the run ends
   with a report; any other end leaves every earlier file as it was.

With ``--workers W`` (:func:`run`), :mod:`ragbatch.run._workers` runs :func:`run_part_job` on part
``k/W`` in each of W processes and merges their summaries into the report one process writes;
with ``--dask ADDRESS``, :mod:`ragbatch.run._cluster` runs the parts as tasks of a Dask cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from ragbatch._gc import collect_less
from ragbatch.core import ConfigError
from ragbatch.run._config import JobResult
from ragbatch.run._execute import Outcomes, execute
from ragbatch.run._factory import Parts, build_parts
from ragbatch.run._options import RunOptions, check_options
from ragbatch.run._outputs import StagedFiles, write_outputs, write_part, write_views
from ragbatch.run._stop import RunCanceller

T = TypeVar("T")


def _ignore(message: str) -> None:
    return None


def cache_written(parts: Parts) -> str | None:
    """The cache directory finished replies went to (None: this run has no reply cache)."""
    cached = parts.cached
    if cached is None or cached.cache is None:
        return None
    return str(parts.options.cache.cache_dir)


async def run_options_async(
    options: RunOptions,
    warn: Callable[[str], None] = _ignore,
    canceller: RunCanceller | None = None,
) -> JobResult:
    """One process's run inside an existing event loop; ``warn`` hears warnings as they arise.

    With ``canceller`` (the CLI's and the workers'), a signal or a lost parent ends the run
    early: nothing more is sent, the cache is closed, nothing is written and
    :class:`~ragbatch.core._errors.Interrupted` is raised (exit 130 for SIGINT, 143 for SIGTERM).
    """
    return await _run_parts(options, warn, canceller, write_outputs)


async def _run_parts(
    options: RunOptions,
    warn: Callable[[str], None],
    canceller: RunCanceller | None,
    outputs: Callable[[Parts, Outcomes, StagedFiles, Callable[[str], None]], T],
) -> T:
    """Build the parts, execute them, then ``outputs`` writes what the run produced (with
    fewer cyclic garbage collections: :mod:`ragbatch._gc`)."""
    with collect_less():
        parts = build_parts(options, warn)
        staged = StagedFiles()
        try:
            try:
                rows_out = staged.rows(options.output.rows_out, options.output.flush_rows)
                kept = await execute(parts, rows_out, canceller)
            finally:
                await parts.aclose()
            if canceller is not None and kept.stopped:
                raise canceller.interrupted(kept.builder.rows, cache_written(parts))
            return outputs(parts, kept, staged, warn)
        except BaseException:
            staged.discard()  # a failed run never replaces an earlier result
            raise


def run_job(
    options: RunOptions,
    warn: Callable[[str], None] = _ignore,
    canceller: RunCanceller | None = None,
) -> JobResult:
    """One process's run in a fresh event loop."""
    return anyio.run(run_options_async, options, warn, canceller)


def run_part_job(options: RunOptions, canceller: RunCanceller | None = None) -> dict[str, Any]:
    """One part of a run (``--shard`` with ``--partial-out``: a worker process, a Dask task)
    in a fresh event loop: its partial or summary and its --rows-out, no report of its own
    (:func:`ragbatch.run._outputs.write_part`). Returns the part's run record."""
    return anyio.run(_run_parts, options, _ignore, canceller, write_part)


def run(
    options: RunOptions,
    warn: Callable[[str], None] = _ignore,
    canceller: RunCanceller | None = None,
) -> JobResult:
    """The run the options describe, in one process, ``--workers`` processes (which stop
    cleanly on SIGINT/SIGTERM, as one process does with ``canceller``) or the tasks of a
    ``--dask`` cluster; the entry of ``ragbatch run`` and ``ragbatch.evaluate``."""
    check_options(options)
    if options.scale.dask is not None:
        from ragbatch.run._cluster import run_on_cluster  # imports Dask only when asked

        result = run_on_cluster(options, options.scale.dask)
    elif options.scale.workers == 1:
        return run_job(options, warn, canceller)
    elif options.input.source is not None:
        raise ConfigError("workers > 1 needs the data as a file path")
    else:
        from ragbatch.run._workers import run_workers  # it runs run_part_job in each process

        result = run_workers(options, options.scale.workers, warn)
    if result.texts is None:  # capped to one process: the run wrote its views itself
        return result
    staged = StagedFiles()
    try:
        write_views(staged, result.report, result.texts, options)
        staged.commit()
    except BaseException:
        staged.discard()
        raise
    return result
