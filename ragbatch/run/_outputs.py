"""Writes what a run produced: outcomes -> files (report, partial, --rows-out, run record, views).

A failed run never destroys an earlier result. Every output is written beside its target
(``.NAME.tmp``, ``--rows-out`` as ``.NAME.part`` while rows stream in) and flushed;
:class:`StagedFiles` renames them into place together only when the run ends with a report (a
complete one, or an incomplete one after ``--max-cost``, which says so in the file). On any
other end (a rejected key, the error budget, a damaged or full cache, a full disk, a signal)
every temporary file is removed and the files under their names stay exactly as they were.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from ragbatch._files import AtomicFile
from ragbatch.core import Trace
from ragbatch.report import Report, RowsWriter, report_bytes
from ragbatch.run._budget import spent_of
from ragbatch.run._calls import offline_models
from ragbatch.run._config import JobResult
from ragbatch.run._execute import Outcomes
from ragbatch.run._factory import Parts
from ragbatch.run._options import RunOptions


class StagedFiles:
    """Output files written beside their targets, renamed into place together by
    :meth:`commit`, or all removed by :meth:`discard`."""

    def __init__(self) -> None:
        self._files: list[tuple[Callable[[], None], Callable[[], None]]] = []

    def add(self, path: Path, data: bytes) -> None:
        """Write ``data`` for ``path`` now (a full disk fails here, with a ConfigError)."""
        file = AtomicFile(path)
        self._files.append((file.commit, file.discard))
        file.write(data, flush=True)

    def rows(self, path: Path | None, flush: bool = True) -> RowsWriter | None:
        """The --rows-out writer, its file staged like the others."""
        if path is None:
            return None
        writer = RowsWriter(path, flush=flush)
        self._files.append((writer.close, writer.discard))
        return writer

    def commit(self) -> None:
        for commit, _ in self._files:
            commit()
        self._files.clear()

    def discard(self) -> None:
        for _, discard in self._files:
            with contextlib.suppress(OSError):  # the disk may be the reason we are here
                discard()
        self._files.clear()


def write_views(
    staged: StagedFiles,
    report: Report,
    texts: Mapping[str, tuple[str, str]],
    o: RunOptions,
    traces: Mapping[str, Trace] | None = None,
) -> None:
    """The human views: Markdown for a PR comment, one HTML page with each row's question and
    answer (``texts``: what the run kept of them; the source is not read again) and each
    trace's timeline (``traces``: the traces the run read, for their steps' texts)."""
    # each view's module is imported when it is asked for (start-up)
    if o.output.markdown is not None:
        from ragbatch.report import report_markdown

        staged.add(o.output.markdown, report_markdown(report).encode())
    if o.output.html is not None:
        from ragbatch.report import report_html

        questions = {key: question for key, (question, _) in texts.items()}
        answers = {key: answer for key, (_, answer) in texts.items()}
        staged.add(o.output.html, report_html(report, answers, questions, traces).encode())


def record_bytes(record: dict[str, object]) -> bytes:
    return orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n"


def offline_warning(parts: Parts, record: dict[str, object]) -> str | None:
    """When an --offline run missed every lookup and the cache holds another model's replies."""
    cached = parts.cached
    other = offline_models(cached) if cached is not None else []
    if cached is None or not other:
        return None
    cache = record["cache"]
    assert isinstance(cache, dict)
    cache["recordedModels"] = other
    return (
        f"--offline: every lookup missed the cache ({cached.stats.misses} misses); it "
        f"holds replies recorded for {', '.join(other)}, not for {cached.model}: pass "
        f"--model {other[0]} to replay them"
    )


def run_record(parts: Parts, kept: Outcomes, warn: Callable[[str], None]) -> dict[str, Any]:
    """The run record (rows, wall, calls, cache), after saying the cache's warnings."""
    rate = kept.builder.rows / kept.wall_s if kept.wall_s > 0 else 0.0
    record = kept.calls.record(kept.wall_s, rate, parts.cached, parts.pricing)
    for warning in parts.cached.warnings if parts.cached is not None else ():
        warn(warning)
    if (offline := offline_warning(parts, record)) is not None:
        warn(offline)
    return record


def write_outputs(
    parts: Parts, kept: Outcomes, staged: StagedFiles, warn: Callable[[str], None]
) -> JobResult:
    """Build the report and the run record, stage every file asked for, then commit them."""
    o = parts.options
    report = kept.builder.report(dataset_sha256=kept.dataset_sha256 or parts.reader.sha256)
    data = report_bytes(report)
    record = run_record(parts, kept, warn)
    if parts.shard is not None:  # --shard K/N: its partial instead of a report
        parts.shard.write(parts.info, kept.kept, kept.builder, kept.calls, kept.texts)
    elif o.output.out is not None:
        staged.add(o.output.out, data)
    write_views(staged, report, kept.texts, o, kept.traces)
    if o.output.run_record is not None:
        staged.add(o.output.run_record, record_bytes(record))
    staged.commit()
    return JobResult(report, data, kept.wall_s, record["rowsPerSecond"], record)


def write_part(
    parts: Parts, kept: Outcomes, staged: StagedFiles, warn: Callable[[str], None]
) -> dict[str, Any]:
    """A worker's or a Dask task's outputs: its partial (or a planned part's summary),
    its --rows-out and the run record; no report is built (only the merged one is read).
    Returns the run record."""
    if parts.shard is None:
        raise ValueError("a part needs --shard and --partial-out")
    record = run_record(parts, kept, warn)
    if (spent := spent_of(parts.provider)) is not None:  # the parent's probes get the rest
        record["spentUsd"] = spent
    parts.shard.write(parts.info, kept.kept, kept.builder, kept.calls, kept.texts)
    if parts.options.output.run_record is not None:
        staged.add(parts.options.output.run_record, record_bytes(record))
    staged.commit()
    return record
