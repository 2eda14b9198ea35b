"""The composition root's two bugs, each with a test that failed on the code before it:
the run record's rateControl with --max-cost, and the HTML view of rows given as a generator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

import ragbatch
from ragbatch.run._job import run_job
from ragbatch.testing import JevServer
from tests.conftest import job_config

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "datasets" / "rag-fixture.jsonl"


def test_the_run_record_keeps_rate_control_with_max_cost(
    jev_server: JevServer, tmp_path: Path
) -> None:
    """Bug 1: behind the cost limit's wrapper the live client's counters went missing."""
    record_path = tmp_path / "record.json"
    run_job(job_config(jev_server, tmp_path, max_cost=100.0, run_record=record_path))
    record = orjson.loads(record_path.read_bytes())
    assert set(record["rateControl"]) == {
        "throttled",
        "peakInFlight",
        "lowestConcurrency",
        "finalConcurrency",
    }
    assert 1 <= record["rateControl"]["peakInFlight"] <= 8


def rows() -> Iterator[dict[str, Any]]:
    for line in FIXTURE.read_bytes().splitlines():
        yield orjson.loads(line)


def test_html_of_rows_given_as_a_generator(tmp_path: Path) -> None:
    """Bug 2: the HTML view read the (exhausted) source again and failed "no rows given"."""
    page = tmp_path / "report.html"
    summary = tmp_path / "summary.md"
    result = ragbatch.evaluate(rows(), html=page, markdown=summary)
    assert result.report.dataset.rows == 48
    first = next(rows())
    html = page.read_text()
    for text in (first["question"], first["answer"]):  # shown from what the run kept
        assert orjson.dumps(text).decode()[1:20] in html or text[:20] in html
    assert summary.read_text().startswith("#")
