"""A rolling report of ``ragbatch watch``: one window of traffic -> report, diff, alert,
audit sample (file I/O; runs ``--alert-command``).

A window holds the traces that started in [start, start + ``--report-every``) (UTC, by the
traces' own span times). Once every trace of it is judged and its annotations stored, its
judged traces are read again from the state file and judged again through the same judge: the
reply cache answers every call (nothing is paid twice), and the report is the one ``ragbatch
run`` writes for the same traces, in the order first seen, plus its ``window``. Files, under
``--report-dir``, named by the window's start (``20261207T060000Z``):

- ``<start>.json``: the report;
- ``<start>.diff.md``: with ``--baseline``, the diff and the distribution drift against it;
- ``<start>.audit.jsonl``: with ``--audit-rate``, the ``ragbatch audit-sample`` lines of the
  window's rows, for people to label (``ragbatch infer`` corrects the window's rates).

With ``--baseline``, the gate's rules (``ragbatch gate``'s defaults) and the drift flags decide
whether the window drifted: one ``alert:`` line, and ``--alert-command`` run with the alert as
JSON on stdin.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ragbatch._files import AtomicFile
from ragbatch.calibrate import (
    audit_sample,
    instructions_line,
    jsonl_bytes,
    row_texts,
    sample_header,
    trace_texts,
)
from ragbatch.compare import diff_markdown, diff_reports, distribution_drift, drift_markdown, gate
from ragbatch.core import Row, Trace
from ragbatch.report import WatchWindow, report_bytes, report_json
from ragbatch.run import Judge

ALERT_TIMEOUT_S = 60.0


def stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y%m%dT%H%M%SZ")


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class WindowSettings:
    """Where window reports go and what they are compared with."""

    report_dir: Path
    every_s: float
    source: str
    baseline: Mapping[str, Any] | None = None
    baseline_path: Path | None = None
    alert_command: str | None = None
    audit_rate: float | None = None


def dataset_sha256(records: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """The window's "dataset": its judged traces' span records, in order, hashed."""
    digest = hashlib.sha256()
    for trace_id, spans in records.items():
        digest.update(trace_id.encode() + b"\n")
        for span in spans:
            digest.update(orjson.dumps(span, option=orjson.OPT_SORT_KEYS) + b"\n")
    return digest.hexdigest()


def _texts(items: Sequence[Row | Trace]) -> dict[str, dict[str, Any]]:
    return {
        item.id: trace_texts(item)
        if isinstance(item, Trace)
        else row_texts(
            item.question, [c.model_dump(exclude_none=True) for c in item.contexts], item.answer
        )
        for item in items
    }


async def write_window(
    judge: Judge,
    settings: WindowSettings,
    start: float,
    items: Sequence[Row | Trace],
    sha256: str,
    states: Mapping[str, int],
    say: Callable[[str], None],
) -> Path:
    """Judge the window's items again (from the cache), write its files; the report's path."""
    builder = judge.builder()
    for outcome in await judge.outcomes(items):
        builder.add(outcome)
    window = WatchWindow(
        source=settings.source,
        start=iso(start),
        end=iso(start + settings.every_s),
        traces=sum(states.values()),
        judged=len(items),
        sampled_out=states.get("sampled", 0),
        unreadable=states.get("unreadable", 0),
    )
    report = builder.report(dataset_sha256=sha256).model_copy(update={"window": window})
    path = settings.report_dir / f"{stamp(start)}.json"
    _write(path, report_bytes(report))
    data = report_json(report)
    if settings.audit_rate is not None and any(r.get("status") == "ok" for r in data["rows"]):
        seed = int(start)
        lines = audit_sample(data["rows"], settings.audit_rate, seed, _texts(items))
        header = sample_header(sha256, settings.audit_rate, seed, lines)
        traces = any("steps" in line for line in lines)
        _write(
            path.with_suffix(".audit.jsonl"),
            jsonl_bytes([instructions_line(header, traces), *lines]),
        )
    if settings.baseline is not None:
        _compare(data, settings, path, window, say)
    return path


def _write(path: Path, data: bytes) -> None:
    file = AtomicFile(path)
    try:
        file.write(data, flush=True)
        file.commit()
    except BaseException:
        file.discard()
        raise


def _compare(
    data: Mapping[str, Any],
    settings: WindowSettings,
    path: Path,
    window: WatchWindow,
    say: Callable[[str], None],
) -> None:
    """Diff the window against the baseline; say and send an alert when it drifted."""
    baseline = settings.baseline
    assert baseline is not None
    drift = distribution_drift(baseline, data)
    diff = diff_reports(baseline, data)
    text = diff_markdown(diff, "baseline", "window") + drift_markdown(
        drift, "baseline", "window", include_changes=False
    )
    _write(path.with_suffix(".diff.md"), text.encode())
    failed = [r for r in gate(data, baseline).rules if r.status == "fail"]
    drifted = [q for q in drift.quantities if q.flag == "drift"]
    abstention = drift.abstention_rate
    reasons = [f"{r.name}: {r.reason}" for r in failed]
    reasons += [f"{q.name} drifted (PSI {q.psi:.2f}, KS {q.ks:.2f})" for q in drifted]
    if abstention is not None and abstention.flag == "drift":
        reasons.append(
            f"abstention rate {abstention.a:.2f} -> {abstention.b:.2f} (p {abstention.p_value:.2g})"
        )
    if not reasons:
        return
    say(f"alert: {settings.source}, window {window.start}..{window.end}: " + "; ".join(reasons))
    if settings.alert_command is None:
        return
    alert = {
        "source": settings.source,
        "window": {"start": window.start, "end": window.end},
        "report": str(path),
        "baseline": str(settings.baseline_path),
        "diff": str(path.with_suffix(".diff.md")),
        "failedRules": [r.model_dump(mode="json", by_alias=True) for r in failed],
        "drift": [q.model_dump(mode="json", by_alias=True) for q in drifted],
        "reasons": reasons,
    }
    try:
        done = subprocess.run(
            settings.alert_command, shell=True, input=orjson.dumps(alert),
            capture_output=True, timeout=ALERT_TIMEOUT_S, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        say(f"warning: --alert-command failed: {exc}")
        return
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        say(f"warning: --alert-command exited {done.returncode}: {tail[0]}")
