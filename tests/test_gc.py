"""A run collects cyclic garbage less often, and gives the process its thresholds back."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragbatch import _gc
from ragbatch._gc import YOUNG_THRESHOLD, collect_less
from ragbatch.run import _job
from ragbatch.run._job import run_job
from ragbatch.run._options import RunOptions

FIXTURE = Path(__file__).resolve().parents[1] / "datasets/rag-fixture.jsonl"


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def test_raised_inside_and_restored_after() -> None:
    with collect_less():
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_restored_when_the_run_fails() -> None:
    with pytest.raises(RuntimeError), collect_less():
        raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10)


def test_overlapping_runs_restore_once_the_last_ends() -> None:
    first, second = collect_less(), collect_less()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD  # the second run still streams
    second.__exit__(None, None, None)
    assert gc.get_threshold() == (700, 10, 10)


def test_runs_in_threads_leave_the_thresholds_as_they_were() -> None:
    start = threading.Barrier(8)

    def run() -> None:
        start.wait()
        for _ in range(200):
            with collect_less():
                assert gc.get_threshold()[0] == YOUNG_THRESHOLD

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert gc.get_threshold() == (700, 10, 10) and _gc._runs == 0


def test_a_process_that_asked_for_less_or_none_keeps_it() -> None:
    gc.set_threshold(500_000, 10, 10)
    with collect_less():
        assert gc.get_threshold()[0] == 500_000
    gc.set_threshold(0, 10, 10)  # automatic collection off
    with collect_less():
        assert gc.get_threshold()[0] == 0
    assert gc.get_threshold()[0] == 0


def test_a_run_streams_with_the_raised_threshold(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[tuple[int, int, int]] = []
    real = _job.execute  # type: ignore[attr-defined]

    async def execute(*args: Any) -> Any:
        seen.append(gc.get_threshold())
        return await real(*args)

    monkeypatch.setattr(_job, "execute", execute)
    run_job(
        RunOptions.of(
            quiet=True,
            dataset=FIXTURE,
            provider="mock",
            out=tmp_path / "report.json",
            no_cache=True,
        )
    )
    assert seen == [(YOUNG_THRESHOLD, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)
    assert (tmp_path / "report.json").is_file()
