"""Where a run goes: one process, ``--workers`` processes or the tasks of a ``--dask`` cluster
(composition; the entry of ``ragbatch run`` and ``ragbatch.evaluate``).

Every way starts with the one :func:`~ragbatch.run._preflight.preflight`. With ``--workers W``,
:mod:`ragbatch.run._workers` runs :func:`~ragbatch.run._job.run_part_job` on part ``k/W`` in
each of W processes and merges their summaries into the report this process writes; with
``--dask ADDRESS``, :mod:`ragbatch.run._cluster` runs the parts as tasks of a Dask cluster.
Either way the views (Markdown, HTML) of the merged report are written here.
"""

from __future__ import annotations

from collections.abc import Callable

from ragbatch.core import ConfigError, Trace
from ragbatch.report import Report
from ragbatch.run._config import JobResult
from ragbatch.run._items import open_source_items
from ragbatch.run._job import run_checked
from ragbatch.run._options import RunOptions
from ragbatch.run._outputs import StagedFiles, write_views
from ragbatch.run._preflight import Checked, ignore, preflight
from ragbatch.run._stop import RunCanceller


def run(
    options: RunOptions,
    warn: Callable[[str], None] = ignore,
    canceller: RunCanceller | None = None,
) -> JobResult:
    """The run the options describe, in one process, ``--workers`` processes or the tasks of a
    ``--dask`` cluster. With ``canceller`` (the CLI's), SIGINT/SIGTERM stop it cleanly from
    here on, whatever it is doing then (checking, starting workers, sending): exit 130/143,
    nothing written but the replies already cached. The workers' run stops so with or without
    it (nothing the run started may outlive it)."""
    if options.scale.dask is not None:
        # the Dask client waits where a recorded signal could not end it: SIGINT raises
        # KeyboardInterrupt there and SIGTERM ends the process, as with no canceller
        from ragbatch.run._cluster import run_on_cluster  # imports Dask only when asked

        checked = preflight(options, warn)
        return with_views(run_on_cluster(checked, options.scale.dask, warn), options)
    if canceller is None:
        return _run_here(preflight(options, warn), warn, None)
    with canceller.catching():  # a signal from now on is heard, even one during a fork
        return _run_here(preflight(options, warn), warn, canceller)


def _run_here(
    checked: Checked, warn: Callable[[str], None], canceller: RunCanceller | None
) -> JobResult:
    """A checked run on this machine: in this process, or in ``--workers`` processes."""
    o = checked.options
    if o.scale.workers == 1:
        return run_checked(checked, warn, canceller)
    if o.input.source is not None:
        raise ConfigError("workers > 1 needs the data as a file path")
    from ragbatch.run._workers import run_checked_workers  # run_part_job in each process

    return with_views(run_checked_workers(checked, o.scale.workers, warn, canceller), o)


def traces_for_views(report: Report, options: RunOptions) -> dict[str, Trace] | None:
    """The traces of a merged run's report, read again from its dataset for the HTML
    timelines' texts (the parts kept each row's question and answer, not a trace's steps);
    None without ``--html`` or without a trace row the report keeps."""
    wanted = {row.id for row in report.rows if row.steps is not None}
    if options.output.html is None or not wanted:
        return None
    items = open_source_items(options.input).items()
    return {item.id: item for item in items if isinstance(item, Trace) and item.id in wanted}


def with_views(result: JobResult, options: RunOptions) -> JobResult:
    """A merged run's result, after its views were written (a run capped to one process
    wrote them itself)."""
    if result.texts is None:
        return result
    staged = StagedFiles()
    try:
        traces = traces_for_views(result.report, options)
        write_views(staged, result.report, result.texts, options, traces)
        staged.commit()
    except BaseException:
        staged.discard()
        raise
    return result
