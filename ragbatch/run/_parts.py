"""The parts of a split run, for ``--workers`` and ``--dask`` alike: each part's options, one
part run where it is sent, and the merge of their results into one report (I/O: the merged
report, the run record and the concatenated ``--rows-out``).

A part gets 1/N of the concurrency and of every budget (:func:`part_changes`), so the parts
together keep the single-process limits. A planned part of a JSONL file sends its summary,
merged in input order (:func:`finish_parts`); a shard by hash of id of another format sends
its partial, merged with the code of ``ragbatch merge`` (:func:`finish`). Either way the
report equals a single-process report.
"""

from __future__ import annotations

import math
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from ragbatch._files import atomic_file, write_bytes
from ragbatch.core import RagbatchError
from ragbatch.report import Report, RowsWriter, merge_rows, report_bytes, summarize
from ragbatch.run._calls import failures_of
from ragbatch.run._config import JobResult
from ragbatch.run._job import run_part_job
from ragbatch.run._options import RunOptions
from ragbatch.run._preflight import Checked
from ragbatch.run._probe_report import audit_merged
from ragbatch.run._shards import merge_partials, shard_of
from ragbatch.run._split import RowPlan, check_duplicate_ids
from ragbatch.run._stop import RunCanceller
from ragbatch.run._summary import merge_summaries, read_summary


def part_changes(
    config: RunOptions, k: int, parts: int, partial: Path, rows: Path | None = None
) -> dict[str, Any]:
    """What part k of ``parts`` changes in the run's options: its shard, its own files and
    its share of every budget (concurrency, --max-rps, --max-tokens-per-s, --max-cost), so
    their sum stays the run's."""
    rate, max_cost = config.rate, config.limits.max_cost
    return {
        "shard": f"{k}/{parts}",
        "workers": 1,
        "dask": None,
        "partial_out": partial,
        "rows_out": rows,
        "flush_rows": False,  # read back whole by the parent; a crash discards it
        "out": None,
        "run_record": None,
        "markdown": None,  # the parent writes the views of the merged report
        "html": None,
        "max_report_rows": 0,  # the shard's own report is not written: skip its rows
        "probe": None,  # the parent probes the merged rows (--probe samples the whole run)
        "concurrency": max(1, math.ceil(rate.concurrency / parts)),
        "max_rps": rate.max_rps / parts if rate.max_rps else None,
        "max_tokens_per_s": rate.max_tokens_per_s / parts if rate.max_tokens_per_s else None,
        # each part reserves against its share: the parts together never pass the limit
        "max_cost": max_cost / parts if max_cost is not None else None,
    }


def shard_config(
    config: RunOptions, k: int, parts: int, partial: Path, rows: Path | None = None
) -> RunOptions:
    """The options of part k of ``parts`` (:func:`part_changes`)."""
    return config.replace(**part_changes(config, k, parts, partial, rows))


def part_of(
    checked: Checked, k: int, parts: int, partial: Path, rows: Path | None = None
) -> Checked:
    """Part k of ``parts`` of a checked run (:func:`part_changes`): checked no more."""
    return checked.replace(**part_changes(checked.options, k, parts, partial, rows))


def run_shard_task(part: Checked, stop: RunCanceller | None = None) -> dict[str, Any]:
    """One part in a worker process or a Dask task: its partial goes to the options'
    ``partial_out``.

    A RagbatchError comes back as data (raised again by :func:`raise_shard_error`): some
    subclasses (``DatasetError(path, line, …)``) cannot be rebuilt by pickle from their message
    alone.
    """
    try:
        record = run_part_job(part, canceller=stop)
    except RagbatchError as exc:
        return {"error": str(exc), "kind": type(exc).__name__, "exitCode": exc.exit_code}
    return {
        "rows": record["rows"],
        "wallSeconds": record["wallSeconds"],
        "rowsPerSecond": record["rowsPerSecond"],
        "cache": record.get("cache"),
        "spentUsd": record.get("spentUsd"),  # against its share of --max-cost (None: no limit)
    }


def raise_shard_error(results: list[dict[str, Any]]) -> None:
    """Raise the first shard's error, if any shard failed."""
    for k, done in enumerate(results, start=1):
        if "error" in done:
            error = RagbatchError(f"shard {k}/{len(results)}: {done['error']}")
            error.exit_code = done["exitCode"]
            raise error


def part_table_limit(config: RunOptions, plan: RowPlan) -> int | None:
    """A part's --max-report-rows: the run's when the whole keeps its rows[] table, else 0
    (no part builds or sends a table the merge would drop)."""
    limit = config.output.max_report_rows
    return limit if limit is None or plan.rows <= limit else 0


def finish(
    config: RunOptions,
    partials: list[Path],
    results: list[dict[str, Any]],
    started: float,
    facts: dict[str, Any],
    row_files: list[Path] | None = None,
    checked: Checked | None = None,
) -> JobResult:
    """Raise a shard's error, else merge the partials and write the report (and run record);
    with ``row_files`` (each shard's --rows-out), merge those into ``config.rows_out`` too;
    with ``checked`` (the whole run), its --probe runs here on the merged rows."""
    raise_shard_error(results)
    info, outcomes = merge_partials(partials)
    rows_out = config.output.rows_out
    if rows_out is not None and row_files is not None:
        shards = len(row_files)
        merge_rows(rows_out, row_files, (shard_of(o.row.id, shards) - 1 for o in outcomes))
    # the shards skipped their own rows[]; the merged report follows the caller's limit
    report = summarize(outcomes, replace(info, max_report_rows=config.output.max_report_rows))
    record = {"failuresByKind": failures_of(outcomes)}
    html = config.output.html is not None  # the HTML view shows questions and answers
    texts = {o.row.id: (o.row.question, o.row.answer) for o in outcomes if html}
    facts = {**facts, **record, "shardRuns": results}
    return write_merged(config, report, started, facts, texts, checked)


def finish_parts(
    config: RunOptions,
    plan: RowPlan,
    summaries: list[bytes],
    results: list[dict[str, Any]],
    started: float,
    facts: dict[str, Any],
    row_files: list[Path] | None = None,
    checked: Checked | None = None,
) -> JobResult:
    """Raise a part's error, else merge the parts' summaries in input order, concatenate
    their rows files into ``config.rows_out`` and write the report (and run record); with
    ``checked`` (the whole run), its --probe runs here on the merged rows."""
    raise_shard_error(results)
    limit = config.output.max_report_rows
    whole = merge_summaries([read_summary(data) for data in summaries], limit)
    check_duplicate_ids([whole.ids], plan)
    if config.output.rows_out is not None and row_files is not None:
        concatenate(row_files, config.output.rows_out)
    report = whole.builder.report(dataset_sha256=plan.sha256)
    record = {"failuresByKind": whole.calls.failures.record()}
    facts = {**facts, **record, "shardRuns": results}
    return write_merged(config, report, started, facts, whole.texts, checked)


def concatenate(parts: list[Path], target: Path) -> None:
    """``parts`` one after the other into ``target`` (atomically)."""
    with atomic_file(target, RowsWriter.SUFFIX) as out:
        for part in parts:
            with part.open("rb") as handle:
                shutil.copyfileobj(handle, out)


def write_merged(
    config: RunOptions,
    report: Report,
    started: float,
    facts: dict[str, Any],
    texts: dict[str, tuple[str, str]],
    checked: Checked | None = None,
) -> JobResult:
    """Write the merged report and the run record (rows, wall, ``facts``); the views are
    written by the caller from the result's ``texts`` (each row's question and answer).
    With ``checked``'s --probe, the report gets its ``judgeAudit`` section first."""
    if checked is not None and checked.options.audit.probes:
        spent = math.fsum(run.get("spentUsd") or 0.0 for run in facts["shardRuns"])
        report = audit_merged(checked, report, spent)
    data = report_bytes(report)
    if config.output.out is not None:
        write_bytes(config.output.out, data)
    wall = time.perf_counter() - started
    if "mergeStarted" in facts:
        facts = {**facts, "mergeSeconds": time.perf_counter() - facts.pop("mergeStarted")}
    rows = report.dataset.rows
    rate = rows / wall if wall > 0 else 0.0
    record = {"rows": rows, "wallSeconds": wall, "rowsPerSecond": rate, **facts}
    if config.output.run_record is not None:
        data_record = orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n"
        write_bytes(config.output.run_record, data_record)
    return JobResult(report, data, wall, rate, record, texts)
