"""Multi-step traces on a Dask LocalCluster (loopback only): the report, --rows-out and the
views equal a single-process run's (docs/semantics.md §8)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ragbatch.run._dask import run_on_dask
from ragbatch.run._dispatch import with_views
from ragbatch.run._job import run_job
from ragbatch.run._options import RunOptions
from tests.run.test_distributed import client  # noqa: F401  (the module's cluster fixture)
from tests.run.test_traces_scale import TRACES, write_traces

if TYPE_CHECKING:
    from distributed import Client

pytest.importorskip("distributed")  # the optional 'dask' extra (part of the 'test' extra)

ROOT = Path(__file__).resolve().parents[2]
PRICING = ROOT / "pricing/typesafe-2026-12.json"


def options(dataset: Path, out: Path) -> RunOptions:
    return RunOptions.of(
        quiet=True, dataset=dataset, pricing=PRICING, out=out.with_suffix(".json"),
        rows_out=out.with_suffix(".jsonl"), html=out.with_suffix(".html"),
        markdown=out.with_suffix(".md"),
    )  # fmt: skip


@pytest.mark.timeout(120)
def test_dask_outputs_equal_the_single_run(client: Client, tmp_path: Path) -> None:  # noqa: F811
    dataset = tmp_path / "traces.jsonl"
    write_traces(dataset, 12)
    dataset.write_bytes(dataset.read_bytes() + TRACES.read_bytes())
    single = run_job(options(dataset, tmp_path / "single"))
    result = with_views(
        run_on_dask(options(dataset, tmp_path / "dask"), 3, client),
        options(dataset, tmp_path / "dask"),
    )
    assert result.report_bytes == single.report_bytes
    for suffix in (".json", ".jsonl", ".html", ".md"):
        dask, alone = tmp_path / f"dask{suffix}", tmp_path / f"single{suffix}"
        assert dask.read_bytes() == alone.read_bytes(), suffix
    assert sum(run["rows"] for run in result.record["shardRuns"]) == 20
