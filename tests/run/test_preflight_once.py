"""One preflight for every way a run goes (one process, ``--workers``, Dask): its refusals come
before any worker or task starts, its warnings are heard once, and what a refused or failed
build opened (the LLM judge's SQLite cache) is closed again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragbatch.core import CacheError, ConfigError
from ragbatch.providers.cache import ReplyCache
from ragbatch.run import RunOptions, run, run_job
from ragbatch.run import _factory as factory

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "rag-fixture.jsonl"
PRICING = ROOT / "pricing" / "typesafe-2026-12.json"
ALIAS = (
    "model 'jev-latest' is an alias: the release behind it can change between runs, so a cache "
    "keyed on it can mix releases; pin a release (e.g. --model jev-1.13.0) for reproducible "
    "backfills"
)


def options(tmp_path: Path, **names: object) -> RunOptions:
    return RunOptions.of(
        dataset=DATASET, pricing=PRICING, out=None, quiet=True, cache_dir=tmp_path / "cache",
        **names,
    )  # fmt: skip


@pytest.mark.parametrize("workers", [1, 2])
def test_the_options_warnings_are_heard_once_however_the_run_goes(
    tmp_path: Path, workers: int
) -> None:
    # an --offline replay of an empty cache: every row fails as a cache miss, nothing is sent
    heard: list[str] = []
    config = options(tmp_path, provider="jev", model="jev-latest", offline=True, workers=workers)
    result = run(config, heard.append)
    assert result.report.dataset.rows == 48
    assert heard == [ALIAS]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_report_without_rows_is_announced_however_the_run_goes(
    tmp_path: Path, workers: int
) -> None:
    heard: list[str] = []
    result = run(options(tmp_path, max_report_rows=10, workers=workers), heard.append)
    assert result.report.rows_omitted is not None
    assert heard == [
        "48 rows > --max-report-rows 10: the report will keep aggregates only; add --rows-out "
        "PATH to keep per-row results"
    ]


def test_a_bad_claim_setting_is_refused_before_any_worker_starts(tmp_path: Path) -> None:
    config = options(tmp_path, groundedness="claims", claim_extractor="nosuch", workers=2)
    with pytest.raises(ConfigError) as caught:
        run(config)
    # refused by the run itself, not by each worker ("shard 1/2: ...")
    assert str(caught.value).startswith("unknown claim extractor 'nosuch'; choose ")


def test_dask_checks_the_run_before_it_sends_a_task(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    from ragbatch.distributed import run_on_dask

    config = options(tmp_path, slice_by=["nosuch"])
    with pytest.raises(ConfigError, match=r"^--slice-by nosuch: no row of "):
        run_on_dask(config, 2, None)  # type: ignore[arg-type]  # no cluster is reached


def open_under(directory: Path) -> list[str]:
    """The files under ``directory`` this process holds open."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own descriptor, closed by now
            continue
        if target.startswith(str(directory)):
            found.append(target)
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="lists open files from /proc")
def test_a_refused_llm_judge_leaves_no_cache_open(tmp_path: Path) -> None:
    config = options(
        tmp_path, baseline="llm", judge_api_key="judge-key",
        judge_base_url="http://judge.example/v1",
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"--judge-base-url http://judge\.example/v1 is plain"):
        run_job(config)
    assert open_under(tmp_path / "cache") == []


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="lists open files from /proc")
def test_the_judges_cache_is_closed_when_a_later_part_cannot_be_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[Path] = []

    def watched(directory: Path, **kwargs: object) -> object:
        opened.append(directory)
        return ReplyCache(directory, **kwargs)  # type: ignore[arg-type]

    def broken(*args: object) -> None:
        raise CacheError("the provider's cache cannot be opened")

    monkeypatch.setattr(factory, "ReplyCache", watched)
    monkeypatch.setattr(factory, "make_provider", broken)
    config = options(tmp_path, baseline="llm", judge_api_key="judge-key")
    with pytest.raises(CacheError) as caught:
        run_job(config)
    assert opened == [tmp_path / "cache"]  # the judge's cache was opened ...
    assert open_under(tmp_path / "cache") == []  # ... and closed, the error still alive
    assert caught.value is not None
