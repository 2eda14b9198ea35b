"""``ragbatch probe REPORT --dataset DATA``: the judge audit's probes on an existing report's
rows (I/O: reads the report and the dataset, sends the probe requests, writes the report).

The rows' original P(true), diagnoses and routes are the report's; the probe requests are
built from the dataset's rows (the report keeps no texts) and go through the provider chain a
run builds from the same options (cache, cost limit, client). The thresholds are the report's
policy. A claim-mode report's diagnoses are recomputed without its claims (docs/semantics.md §9).
:func:`audit_merged` runs a --workers or --dask run's --probe so, on its merged report.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import orjson

from ragbatch.core import CHUNK_PREFIX, ConfigError, Row, Thresholds, routing_of
from ragbatch.metrics import MIN_PROBE_ROWS, JudgeAudit, ProbedRow
from ragbatch.report import Report, report_bytes
from ragbatch.run._factory import Parts, build_parts
from ragbatch.run._options import RunOptions
from ragbatch.run._preflight import Checked, ignore, preflight
from ragbatch.run._probes import AuditSettings, ProbeCandidates, run_audit

NAMES = {
    "sufficiency": "contextSufficiency",
    "conflict": "contextConflict",
    "relevance": "answerRelevance",
    "groundedness": "groundedness",
    "contradiction": "contradiction",
    "correctness": "correctness",
}


def report_thresholds(report: Mapping[str, Any]) -> Thresholds:
    """The thresholds and routing the report's rows were diagnosed with."""
    policy = report["policy"]
    per = tuple((n, f, p) for n, (f, p) in (policy.get("perJudgment") or {}).items())
    routing = routing_of(policy.get("routing"))
    return Thresholds(policy["failThreshold"], policy["passThreshold"], per, routing)


def report_answers(row: Row, entry: Mapping[str, Any]) -> dict[str, float]:
    """A report row's P(true) by question id (its ``retrieval`` and ``generation``)."""
    chunks = entry["retrieval"].get("chunkRelevance", {})
    answers = {
        f"{CHUNK_PREFIX}{i}": chunks[c.id] for i, c in enumerate(row.contexts) if c.id in chunks
    }
    for part in ("retrieval", "generation"):
        for name, value in entry[part].items():
            if name in NAMES and value is not None:
                answers[NAMES[name]] = value
    return answers


def report_candidates(
    report: Mapping[str, Any], rows: Mapping[str, tuple[int, Row]]
) -> ProbeCandidates:
    """The report's successful single-turn rows as the audit's candidates, in report order."""
    candidates = ProbeCandidates()
    for entry in report["rows"]:
        if "steps" in entry:
            candidates.skipped["traces"] += 1
            continue
        if entry.get("status") != "ok" or "diagnosis" not in entry:
            candidates.skipped["failed"] += 1
            continue
        found = rows.get(entry["id"])
        if found is None:
            raise ConfigError(
                f"row {entry['id']} of the report is not in the dataset; pass the dataset the "
                "report was run on"
            )
        index, row = found
        probed = ProbedRow(row, report_answers(row, entry), entry["diagnosis"], entry["route"])
        candidates.rows.append(probed)
        candidates.indices.append(index)
    return candidates


def read_report(path: Path) -> tuple[bytes, dict[str, Any]]:
    try:
        data = path.read_bytes()
        parsed: dict[str, Any] = orjson.loads(data)
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the report: {exc}") from None
    if "rows" not in parsed or "rowsOmitted" in parsed:
        raise ConfigError(
            f"{path}: the report keeps no rows[] table (over --max-report-rows); run the "
            "probes with ragbatch run --probe instead"
        )
    return data, parsed


async def audit_of(
    parts: Parts, report: Mapping[str, Any], dataset_sha256: str | None = None
) -> JudgeAudit:
    """The ``judgeAudit`` section of ``parts``' probes on ``report``'s rows (a parsed report),
    read again from ``parts``' dataset; with ``dataset_sha256``, that dataset must have it."""
    o = parts.options
    rows = {item.id: (i, item) for i, item in enumerate(parts.reader) if isinstance(item, Row)}
    if dataset_sha256 is not None and parts.reader.sha256 != dataset_sha256:
        raise ConfigError(
            f"{o.input.dataset} is not the dataset the report was run on (its sha256 "
            "differs); pass that dataset"
        )
    candidates = report_candidates(report, rows)
    a = o.audit
    settings = AuditSettings(
        a.probes, a.probe_rate, MIN_PROBE_ROWS, a.max_flip_rate, o.rate.concurrency
    )
    full = dict(rows.values())
    return await run_audit(parts.provider, candidates, full, settings, report_thresholds(report))


async def probe_report_async(
    options: RunOptions, path: Path, warn: Callable[[str], None] = ignore
) -> Report:
    """The report at ``path`` with the ``judgeAudit`` section of ``options``' probes."""
    data, report = read_report(path)
    parts = build_parts(preflight(options.replace(out=None), warn), warn)
    try:
        audit = await audit_of(parts, report, report["dataset"]["sha256"])
    finally:
        await parts.aclose()
    return Report.model_validate_json(data).model_copy(update={"judge_audit": audit})


def check_probed_rows(options: RunOptions, rows: int | None) -> None:
    """Refuse ``--probe`` with ``--workers``/``--dask`` when the merged report keeps no rows[]
    table (``rows`` over ``--max-report-rows``, or None: none kept), before anything is sent:
    the parent probes the merged report's rows."""
    limit = options.output.max_report_rows
    if options.audit.probes and (rows is None or (limit is not None and rows > limit)):
        raise ConfigError(
            f"--probe with --workers or --dask probes the merged report's rows, and "
            f"--max-report-rows {limit} leaves them out: raise it, or run in one process"
        )


async def _audit_merged(checked: Checked, report: Mapping[str, Any]) -> JudgeAudit:
    parts = build_parts(checked, ignore)  # the run's warnings were said already
    try:
        return await audit_of(parts, report)
    finally:
        await parts.aclose()


def audit_merged(checked: Checked, report: Report, spent_usd: float) -> Report:
    """A ``--workers``/``--dask`` run's merged report with the ``judgeAudit`` section of its
    ``--probe``, run here as :func:`probe_report_async` does (the same provider chain and
    cache as the parts); ``--max-cost`` minus what the parts spent (``spent_usd``) bounds
    the probe calls, as the rows' spend would in one process (docs/semantics.md §9)."""
    parsed: dict[str, Any] = orjson.loads(report_bytes(report))
    kept = "rows" in parsed and "rowsOmitted" not in parsed
    check_probed_rows(checked.options, len(parsed["rows"]) if kept else None)
    max_cost = checked.options.limits.max_cost
    if max_cost is not None:
        checked = checked.replace(max_cost=max(0.0, max_cost - spent_usd))
    audit = anyio.run(_audit_merged, checked, parsed)
    return report.model_copy(update={"judge_audit": audit})


def probe_report(options: RunOptions, path: Path, out: Path) -> Report:
    """:func:`probe_report_async` in a fresh event loop; the report written to ``out``."""
    from ragbatch._files import write_bytes

    report = anyio.run(probe_report_async, options, path)
    write_bytes(out, report_bytes(report))
    return report
