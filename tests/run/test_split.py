"""Planned parts: each worker reads only its rows, and merged summaries equal one run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ragbatch.core import DatasetError
from ragbatch.report import ReportBuilder, merge_builders, report_bytes
from ragbatch.run._job import run_job
from ragbatch.run._options import RunOptions
from ragbatch.run._shards import _info, read_partial
from ragbatch.run._split import check_duplicate_ids, part_bounds, part_source, plan_rows
from ragbatch.run._workers import run_workers

ROOT = Path(__file__).resolve().parents[2]
CASES = [
    ("rag-fixture.jsonl", {}),
    ("claims-fixture.jsonl", {"groundedness": "claims"}),
    ("golden-fixture.jsonl", {"slice_by": ["department"]}),
    ("calibration-fixture.jsonl", {}),
]
# the calibration fixture's first rows: past the report's 1,000 risk-coverage points, so the
# curves are thinned (curveStep) as in a large run, at a third of the fixture's 4,000 rows
CURVE_THINNED = 1_200


@pytest.mark.parametrize(("name", "extra"), CASES)
def test_merged_builders_of_consecutive_parts_equal_one_builder(
    tmp_path: Path, name: str, extra: dict[str, object]
) -> None:
    dataset = ROOT / "datasets" / name
    if name == "calibration-fixture.jsonl":
        lines = dataset.read_bytes().splitlines(keepends=True)[:CURVE_THINNED]
        dataset = tmp_path / name
        dataset.write_bytes(b"".join(lines))
    config = RunOptions.of(
        dataset=dataset, out=None, shard="1/1",
        partial_out=tmp_path / "p.jsonl", quiet=True, **extra,
    )  # fmt: skip
    run_job(config)
    header, outcomes = read_partial(tmp_path / "p.jsonl")
    if name == "calibration-fixture.jsonl":
        whole = ReportBuilder(_info().validate_json(header.info))
        for outcome in outcomes:
            whole.add(outcome)
        assert whole.report().modes.jev_only.selective.curve_step == 2

    for limit in (10_000, 5):
        info = replace(_info().validate_json(header.info), max_report_rows=limit)
        single = ReportBuilder(info)
        for outcome in outcomes:
            single.add(outcome)
        for parts in (2, 3, 7):
            builders = []
            for k in range(1, parts + 1):
                start, end = part_bounds(len(outcomes), parts, k)
                builder = ReportBuilder(info)
                for outcome in outcomes[start:end]:
                    builder.add(outcome)
                builders.append(builder)
            merged = merge_builders(builders).report()
            assert report_bytes(merged) == report_bytes(single.report()), (limit, parts)


def test_a_part_reads_only_its_rows_with_the_files_line_numbers(tmp_path: Path) -> None:
    rows = (ROOT / "datasets" / "rag-fixture.jsonl").read_bytes().splitlines(keepends=True)
    path = tmp_path / "d.jsonl"
    # a BOM, a blank line, and a bad line in the second half only
    path.write_bytes(b"\xef\xbb\xbf" + rows[0] + b"\n" + b"".join(rows[1:6]) + b"{bad\n")
    plan = plan_rows(path)
    assert plan is not None and plan.rows == 7
    first = part_source(plan, 1, 2, ignore_unknown=False)
    assert [i for i, _ in first.pairs()] == [0, 1, 2]  # the bad line is not read
    second = part_source(plan, 2, 2, ignore_unknown=False)
    with pytest.raises(DatasetError) as caught:
        list(second.pairs())
    assert str(caught.value).startswith(f"{path}:8: invalid JSON")


def test_a_duplicate_id_across_parts_fails_at_the_later_line(tmp_path: Path) -> None:
    rows = (ROOT / "datasets" / "rag-fixture.jsonl").read_bytes().splitlines(keepends=True)
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"".join(rows[:4]) + rows[1])
    plan = plan_rows(path)
    assert plan is not None
    with pytest.raises(DatasetError, match=r":5: duplicate row id"):
        check_duplicate_ids([["a", "b"], ["c", "d", "b"]], plan)
    out = tmp_path / "r.json"
    pricing = ROOT / "pricing" / "typesafe-2026-12.json"
    config = RunOptions.of(dataset=path, out=out, pricing=pricing, quiet=True)
    with pytest.raises(Exception, match=r":5: duplicate row id"):
        run_workers(config, 2)
    assert not out.exists()
