"""Fixtures of the report tests: the committed report and the HTML pages of the rag and the
golden-set fixtures, made once for the session (test_html.py and test_html_browser.py read
them; nothing changes them)."""

from __future__ import annotations

import pytest

from ragbatch.report._html import report_html
from ragbatch.report._models import Report
from ragbatch.run._job import run_job
from ragbatch.run._options import RunOptions
from tests.report.html_page import ROOT, dataset_texts


@pytest.fixture(scope="session")
def report() -> Report:
    return Report.model_validate_json((ROOT / "reports/expected-report.json").read_bytes())


@pytest.fixture(scope="session")
def page_html(report: Report) -> str:
    return report_html(report, *dataset_texts(ROOT / "datasets/rag-fixture.jsonl"))


@pytest.fixture(scope="session")
def golden_page() -> str:
    """The golden-set fixture's page: diagnostic matrix, golden sections, flagged slices."""
    data = ROOT / "datasets/golden-fixture.jsonl"
    config = RunOptions.of(
        quiet=True,
        dataset=data,
        out=None,
        pricing=ROOT / "pricing/typesafe-2026-12.json",
        slice_by=("docType",),
    )
    return report_html(run_job(config).report, *dataset_texts(data))
