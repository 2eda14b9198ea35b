"""The report of a run with traces (docs/semantics.md §8a): its ``traces`` section equals
over merged consecutive parts, the trade-off and routing curves re-judge a trace from its
steps as the run did, and a run of rows alone has no such section."""

from __future__ import annotations

from pathlib import Path

from ragbatch.core import Thresholds, diagnose_trace, parse_pricing
from ragbatch.metrics import rejudge
from ragbatch.report import ReportBuilder, merge_builders, report_bytes
from ragbatch.report._builder import RunInfo
from ragbatch.report._models import report_json
from tests.metrics.trace_outcomes import (
    answer,
    committed,
    failed_outcome,
    hop,
    outcome,
    trace_of,
    user,
)

ROOT = Path(__file__).resolve().parents[2]


def info(**kw: object) -> RunInfo:
    pricing = parse_pricing((ROOT / "pricing/typesafe-2026-12.json").read_bytes(), "pricing")
    return RunInfo("traces.jsonl", "0" * 64, "mock", "mock-jev", "recorded", Thresholds(),
                   pricing, **kw)  # type: ignore[arg-type]  # fmt: skip


OUTCOMES = [
    *committed(),
    outcome(trace_of("x", [user(), hop(0.05, 0.08), hop(0.93), answer(), user(), answer()]), 8),
    failed_outcome(trace_of("y", [user(), hop(0.9), answer()]), 9),
]


def test_merged_parts_give_the_report_of_one_builder() -> None:
    single = ReportBuilder(info())
    for o in OUTCOMES:
        single.add(o)
    whole = report_bytes(single.report())
    assert b'"traces": {' in whole
    for cut in (1, 4, 7):
        parts = [ReportBuilder(info()), ReportBuilder(info())]
        for o in OUTCOMES[:cut]:
            parts[0].add(o)
        for o in OUTCOMES[cut:]:
            parts[1].add(o)
        assert report_bytes(merge_builders(parts).report()) == whole, cut


def test_the_trace_section_follows_the_routing_curves_and_counts_every_trace() -> None:
    builder = ReportBuilder(info(policy_version="v"))
    for o in OUTCOMES:
        builder.add(o)
    data = report_json(builder.report())
    keys = list(data)
    assert keys.index("routingCurves") + 1 == keys.index("traces")
    assert data["traces"]["traces"] == data["decisions"]["traces"]["count"] == len(OUTCOMES)


def test_the_run_point_of_the_tradeoff_re_judges_a_trace_as_the_run_did() -> None:
    builder = ReportBuilder(info())
    for o in OUTCOMES:
        builder.add(o)
    report = builder.report()
    assert report.tradeoff is not None
    run = next(p for p in report.tradeoff.points if p.policy == "run")
    jev = report.modes.jev_only
    assert run.jev_only.accuracy == jev.classification.accuracy
    assert run.jev_only.coverage == jev.routes["auto"] / jev.rows


def test_a_routing_curve_point_is_the_trace_policy_at_its_thresholds() -> None:
    for o in OUTCOMES:
        judged = o.jev.trace
        assert judged is not None
        for routing in ("showcase", "guarded"):
            for t in (0.05, 0.3):
                thresholds = Thresholds(t, 1 - t, routing=routing)
                got = rejudge(o.jev, thresholds)
                if judged.verdict is None:
                    assert got is None
                    continue
                want = diagnose_trace(judged.trace, judged.judgments, thresholds).verdict
                assert got == want
