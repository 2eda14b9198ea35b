"""``--probe`` with ``--workers`` and ``--dask`` (docs/semantics.md §9): the parent probes the
merged report's rows through the run's provider chain, so the report is byte-identical to a
single-process run's, and an offline replay sends nothing and gives the same bytes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

from ragbatch.core import ConfigError
from ragbatch.run._dispatch import run
from ragbatch.run._job import run_job
from ragbatch.run._options import RunOptions
from ragbatch.run._workers import available_cores
from ragbatch.testing import JevServer
from tests.conftest import job_config

if TYPE_CHECKING:
    from distributed import Client

PROBES = "order,length,repeat,complement"
OFFLINE = {"offline": True, "base_url": "http://127.0.0.1:9"}  # nothing listens there


def audit(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(path.read_bytes())["judgeAudit"]
    return data


def probed(config: RunOptions, tmp_path: Path, name: str) -> RunOptions:
    """``config`` with every probe on every row, its own cache and report."""
    return config.replace(
        probe=PROBES, probe_rate=1.0, cache_dir=tmp_path / f"cache-{name}", out=tmp_path / name
    )


@pytest.fixture(autouse=True)
def two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """--workers 2 really starts two processes, whatever this machine's cores."""
    if available_cores() < 2:
        monkeypatch.setattr("ragbatch.run._workers.available_cores", lambda: 2)


def sent(server: JevServer, start: int, stop: int | None) -> list[bytes]:
    """The request bodies ``server`` got from ``start`` to ``stop``, in a fixed order."""
    bodies = server.bodies[start:stop]
    return sorted(orjson.dumps(b, option=orjson.OPT_SORT_KEYS) for b in bodies)


def replayed(config: RunOptions, name: str) -> RunOptions:
    """``config`` replayed offline from its cache into report ``name`` (latencies come from
    the cache: two live runs measure their own)."""
    return config.replace(out=config.output.out.with_name(name), **OFFLINE)  # type: ignore[union-attr]


@pytest.mark.timeout(120)
def test_workers_probe_the_merged_rows_byte_identical(
    jev_server: JevServer, tmp_path: Path
) -> None:
    base = job_config(jev_server, tmp_path)
    single = probed(base, tmp_path, "single.json")
    run_job(single)
    sent_single = len(jev_server.bodies)
    workers = probed(base, tmp_path, "workers.json").replace(workers=2)
    live = run(workers)
    assert live.record["workers"] == 2
    # the same requests, each sent once: the rows' in the workers, the probes' in the parent
    assert sent(jev_server, sent_single, None) == sent(jev_server, 0, sent_single)
    assert audit(tmp_path / "workers.json")["sampledRows"] == live.report.dataset.rows
    # the workers' cache replayed in one process gives their bytes, and the other way round
    assert run_job(replayed(workers.replace(workers=1), "w1.json")).report_bytes == (
        live.report_bytes
    )
    replay = run(replayed(single.replace(workers=2), "replay.json"))
    assert replay.record["workers"] == 2
    assert replay.report_bytes == (tmp_path / "single.json").read_bytes()
    assert len(jev_server.bodies) == 2 * sent_single  # the replays sent nothing


@pytest.mark.timeout(120)
def test_context_order_both_at_two_workers_equals_one_process(
    jev_server: JevServer, tmp_path: Path
) -> None:
    base = job_config(jev_server, tmp_path, context_order="both")
    single = probed(base, tmp_path, "single.json")
    run_job(single)
    sent = len(jev_server.bodies)
    workers = run(replayed(single.replace(workers=2), "workers.json"))
    assert workers.record["workers"] == 2
    assert workers.report_bytes == (tmp_path / "single.json").read_bytes()
    # without probes too: each row's two orders, their usage counted in the merged report
    plain = base.replace(out=tmp_path / "plain.json", cache_dir=single.cache.cache_dir)
    one = run_job(replayed(plain, "p1.json")).report_bytes
    assert run(replayed(plain.replace(workers=2), "p2.json")).report_bytes == one
    assert len(jev_server.bodies) == sent


def test_workers_refuse_probes_over_max_report_rows_before_sending(
    jev_server: JevServer, tmp_path: Path
) -> None:
    config = probed(job_config(jev_server, tmp_path), tmp_path, "r.json")
    with pytest.raises(ConfigError, match="--max-report-rows 10 leaves them out"):
        run(config.replace(workers=2, max_report_rows=10))
    assert jev_server.bodies == []
    assert not (tmp_path / "r.json").exists()


def test_a_shard_still_refuses_probes(jev_server: JevServer, tmp_path: Path) -> None:
    config = probed(job_config(jev_server, tmp_path), tmp_path, "r.json")
    with pytest.raises(ConfigError, match="a --shard has not"):
        run(config.replace(shard="1/2", out=None, partial_out=tmp_path / "p.pkl"))


def test_workers_refuse_probes_in_claim_mode(jev_server: JevServer, tmp_path: Path) -> None:
    config = probed(job_config(jev_server, tmp_path), tmp_path, "r.json")
    with pytest.raises(ConfigError, match="keeps no claims"):
        run(config.replace(workers=2, groundedness="claims"))
    assert jev_server.bodies == []


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    pytest.importorskip("distributed")
    from ragbatch.run._dask import local_cluster

    with local_cluster(2) as client:
        yield client


@pytest.mark.timeout(180)
def test_dask_probes_byte_identical_and_replay_offline(
    client: Client, jev_server: JevServer, tmp_path: Path
) -> None:
    from ragbatch.run._dask import run_on_dask

    base = job_config(jev_server, tmp_path)
    single = probed(base, tmp_path, "single.json")
    run_job(single)
    sent_single = len(jev_server.bodies)
    config = probed(base, tmp_path, "dask.json")
    live = run_on_dask(config, 2, client)
    assert sent(jev_server, sent_single, None) == sent(jev_server, 0, sent_single)
    assert run_job(replayed(config, "d1.json")).report_bytes == live.report_bytes
    replay = run_on_dask(replayed(single, "replay.json"), 2, client)
    assert replay.report_bytes == (tmp_path / "single.json").read_bytes()
    assert len(jev_server.bodies) == 2 * sent_single  # the replay sent nothing
