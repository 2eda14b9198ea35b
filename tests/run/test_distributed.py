"""The Dask adapter on a real LocalCluster (loopback only), and merging reply caches."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import diskcache
import pytest

from ragbatch.core._errors import CacheError, ConfigError, RagbatchError
from ragbatch.core._provider import Reply
from ragbatch.core._schema import TokenUsage
from ragbatch.core._wire import NoulAnswer
from ragbatch.providers.cache._merge import MergeStats, merge_caches
from ragbatch.providers.cache._replies import ReplyCache, encode_entry
from ragbatch.providers.cache._verify import verify_cache
from ragbatch.run._dask import QUIET_LOCAL, local_cluster, run_on_dask
from ragbatch.run._job import run_job
from ragbatch.run._options import RunOptions
from ragbatch.testing import JevServer
from tests.conftest import JEV_KEY

if TYPE_CHECKING:
    from distributed import Client

pytest.importorskip("distributed")  # the optional 'dask' extra (part of the 'test' extra)

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets/rag-fixture.jsonl"
PRICING = ROOT / "pricing/typesafe-2026-12.json"


def test_missing_extra_is_a_config_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # First in the file: it runs before the module's cluster exists, whose client threads
    # would break while the package is hidden.
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    with pytest.raises(ConfigError, match=r"pip install 'ragbatch\[dask\]'"), local_cluster(1):
        pass
    with pytest.raises(ConfigError, match="the 'dask' extra"):
        run_on_dask(RunOptions.of(quiet=True), 2, None)  # type: ignore[arg-type]


STARTED: list[str] = []  # the warnings while the module's cluster started


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    """Two single-threaded worker processes on 127.0.0.1, shared by the tests of this module;
    Dask's default port for the scheduler's HTTP routes (8787) is held while they start."""
    with contextlib.ExitStack() as stack:
        with contextlib.suppress(OSError):  # taken already: as good
            stack.enter_context(socket.create_server(("127.0.0.1", 8787)))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            client = stack.enter_context(local_cluster(2))
        STARTED.extend(str(w.message) for w in seen)
        yield client


def test_the_local_cluster_listens_on_free_loopback_ports(client: Client) -> None:
    scheduler = client.cluster.scheduler  # type: ignore[union-attr]
    assert scheduler.http_server.address == "127.0.0.1"
    assert scheduler.http_server.port != 8787
    assert [m for m in STARTED if "already in use" in m] == []  # 8787 was not even tried


@pytest.mark.timeout(120)
def test_dask_report_equals_single_run(client: Client, tmp_path: Path) -> None:
    assert str(client.scheduler_info()["address"]).startswith("tcp://127.0.0.1:")
    assert len(client.scheduler_info()["workers"]) == 2
    single = run_job(
        RunOptions.of(quiet=True, dataset=DATASET, pricing=PRICING, out=tmp_path / "single.json")
    )
    config = RunOptions.of(quiet=True, dataset=DATASET, pricing=PRICING, out=tmp_path / "dask.json")
    result = run_on_dask(config, 2, client)
    assert result.report_bytes == single.report_bytes
    assert (tmp_path / "dask.json").read_bytes() == (tmp_path / "single.json").read_bytes()
    assert sum(run["rows"] for run in result.record["shardRuns"]) == 48


@pytest.mark.timeout(120)
def test_the_local_cluster_runs_none_of_the_dashboard_monitoring(client: Client) -> None:
    # the workers' stack sampler and monitors cost CPU in every process and feed only a
    # dashboard, which a local cluster does not have
    def settings() -> tuple[object, ...]:
        import dask

        get = dask.config.get
        return tuple(get(k) for k in QUIET_LOCAL)

    assert set(client.run(settings).values()) == {tuple(QUIET_LOCAL.values())}


@pytest.fixture(scope="module")
def apart(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Client, Path]]:
    """Two workers that share no directory with the client: their working directory, temp
    directory and local directory are their own (as on another machine)."""
    dd = pytest.importorskip("distributed")
    own = tmp_path_factory.mktemp("workers-own")
    with (
        dd.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=None, local_directory=str(own),
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        ) as cluster,
        dd.Client(cluster) as client,
    ):  # fmt: skip
        client.run(_elsewhere, str(own))
        yield client, own


def _elsewhere(own: str) -> None:
    import os
    import tempfile

    os.chdir(own)
    os.environ["TMPDIR"] = own
    tempfile.tempdir = own


@pytest.mark.timeout(120)
def test_no_shared_disk_results_and_cache_entries_come_back_through_dask(
    apart: tuple[Client, Path], tmp_path: Path
) -> None:
    client, own = apart
    cache, rows = tmp_path / "client-cache", tmp_path / "rows.jsonl"
    with JevServer(api_key=JEV_KEY) as server:
        live = RunOptions.of(
            quiet=True, dataset=DATASET, pricing=PRICING, out=tmp_path / "dask.json", provider="jev",
            model="jev-1.13.0", base_url=server.base_url, api_key=JEV_KEY, concurrency=8,
            cache_dir=cache, rows_out=rows,
        )  # fmt: skip
        result = run_on_dask(live, 3, client)
        assert server.successful == 48
        assert len(_keys(cache)) == 48  # every new entry came back and is in the client's cache
        assert sum(run["rows"] for run in result.record["shardRuns"]) == 48
        # nothing of the run is left on the workers' side
        assert not [p for p in own.rglob("ragbatch-*")]

        # a rerun on the cluster resumes from the client's cache: no new request
        requests = server.requests_total
        again = run_on_dask(live.replace(out=tmp_path / "again.json"), 3, client)
        assert server.requests_total == requests
        assert again.report_bytes == result.report_bytes

        offline = dict(offline=True, cache_dir=cache, base_url=server.base_url)
        replay = run_job(
            live.replace(out=tmp_path / "replay.json", rows_out=tmp_path / "r1.jsonl", **offline)
        )
        assert server.requests_total == requests  # zero new requests
    assert replay.record["cache"]["hits"] == 48
    assert replay.report_bytes == result.report_bytes
    assert (tmp_path / "r1.jsonl").read_bytes() == rows.read_bytes()


@pytest.mark.timeout(120)
def test_a_shard_error_comes_back_as_one_error_line(client: Client, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(DATASET.read_bytes().splitlines(keepends=True)[0] + b'{"id": 3}\n')
    config = RunOptions.of(quiet=True, dataset=bad, pricing=PRICING, out=tmp_path / "dask.json")
    with pytest.raises(RagbatchError, match=r"^shard 2/2: .*bad\.jsonl:2: ") as caught:
        run_on_dask(config, 2, client)
    assert caught.value.exit_code == 2  # a DatasetError, reported like the CLI would
    assert not (tmp_path / "dask.json").exists()


# merge_caches ------------------------------------------------------------------------------


def _keys(directory: Path) -> list[str]:
    cache = ReplyCache(directory)
    try:
        return cache.keys()
    finally:
        cache.close()


def _reply(p: float, latency_ms: float = 12.0) -> Reply:
    return Reply(
        model="jev-1.13.0",
        answers={"groundedness": NoulAnswer(type="noul", noul=p)},
        usage=TokenUsage(input_tokens=300, output_tokens=2),
        latency_ms=latency_ms,
    )


def _fill(directory: Path, entries: dict[str, bytes]) -> Path:
    cache = ReplyCache(directory)
    for key, value in entries.items():
        cache.put(key, value)
    cache.close()
    return directory


def _read(directory: Path) -> dict[str, bytes]:
    cache = ReplyCache(directory)
    try:
        keys = cache.keys()
        return {key: value for key in keys if (value := cache.get(key)) is not None}
    finally:
        cache.close()


def _key(n: int) -> str:
    return f"{n:064x}"


def test_merge_copies_every_entry_of_verified_sources(tmp_path: Path) -> None:
    good = {_key(i): encode_entry(_reply(i / 10), _key(i)) for i in range(4)}
    a = _fill(tmp_path / "a", {k: good[k] for k in list(good)[:2]})
    b = _fill(tmp_path / "b", {k: good[k] for k in list(good)[2:]})
    stats = merge_caches([a, b], tmp_path / "merged")
    assert stats == MergeStats(sources=2, entries_read=4, copied=4, already_present=0)
    assert _read(tmp_path / "merged") == good
    again = merge_caches([a, b], tmp_path / "merged")  # idempotent
    assert again == MergeStats(2, 4, 0, 4)
    assert _read(tmp_path / "merged") == good


@pytest.mark.parametrize(
    "corrupt",
    [
        "checksum",  # one body byte flipped: the checksum no longer matches
        "other-key",  # stored under another request's key
        "no-key",  # no key in the header
        "not-an-entry",
        "old-format",
    ],
)
@pytest.mark.parametrize("target_exists", [False, True])
def test_a_source_cache_verify_calls_damaged_leaves_the_target_untouched(
    tmp_path: Path, corrupt: str, target_exists: bool
) -> None:
    tampered = bytearray(encode_entry(_reply(0.9), _key(10)))
    tampered[-3] ^= 1
    value = {
        "checksum": bytes(tampered),
        "other-key": encode_entry(_reply(0.5), _key(99)),
        "no-key": encode_entry(_reply(0.5)),
        "not-an-entry": b"not an entry",
        "old-format": b'{"format": 99}\n{}',
    }[corrupt]
    good = _fill(
        tmp_path / "good", {_key(i): encode_entry(_reply(i / 10), _key(i)) for i in range(3)}
    )
    bad = _fill(tmp_path / "bad", {_key(5): encode_entry(_reply(0.2), _key(5)), _key(10): value})
    assert verify_cache(bad).corrupt == 1
    target = tmp_path / "target"
    existing = {_key(7): encode_entry(_reply(0.7), _key(7))}
    if target_exists:
        _fill(target, existing)
    with pytest.raises(
        CacheError, match=f"cache directory is damaged: {bad}: 2 entries: 1 ok, 1 corrupt"
    ):
        merge_caches([good, bad], target)
    assert _read(target) == existing if target_exists else not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bad",
        "good",
        *(["target"] if target_exists else []),
    ]


def test_merge_keeps_an_existing_key_and_the_first_source_wins(tmp_path: Path) -> None:
    key = _key(1)
    mine = encode_entry(_reply(0.3, latency_ms=5.0), key)
    theirs = encode_entry(_reply(0.3, latency_ms=7.0), key)
    later = encode_entry(_reply(0.3, latency_ms=9.0), key)
    target = _fill(tmp_path / "target", {key: mine})
    source = _fill(tmp_path / "src", {key: theirs, _key(2): encode_entry(_reply(0.1), _key(2))})
    stats = merge_caches([source], target)
    assert (stats.copied, stats.already_present) == (1, 1)
    assert _read(target)[key] == mine  # not rewritten

    fresh = tmp_path / "fresh"
    stats = merge_caches([source, _fill(tmp_path / "later", {key: later})], fresh)
    assert (stats.copied, stats.already_present) == (2, 1)
    assert _read(fresh)[key] == theirs


def test_merge_replaces_a_corrupt_target_entry(tmp_path: Path) -> None:
    key = _key(1)
    good = encode_entry(_reply(0.3), key)
    target = _fill(tmp_path / "target", {key: good[:-1]})
    stats = merge_caches([_fill(tmp_path / "src", {key: good})], target)
    assert (stats.copied, stats.already_present) == (1, 0)
    assert _read(target)[key] == good


def test_merge_refuses_bad_directories(tmp_path: Path) -> None:
    source = _fill(tmp_path / "src", {_key(1): encode_entry(_reply(0.3), _key(1))})
    with pytest.raises(CacheError, match="not a cache directory"):
        merge_caches([tmp_path / "nowhere"], tmp_path / "out")
    assert not (tmp_path / "nowhere").exists()
    with pytest.raises(ConfigError, match="also a source"):
        merge_caches([source], source)


@pytest.mark.parametrize("bad", ["no-cache-db", "not-a-database"])
def test_merge_checks_every_source_before_copying_anything(tmp_path: Path, bad: str) -> None:
    first = _fill(tmp_path / "first", {_key(1): encode_entry(_reply(0.3), _key(1))})
    second = tmp_path / "second"
    second.mkdir()
    if bad == "not-a-database":
        (second / "cache.db").write_bytes(b"this is not SQLite" * 100)
    target = tmp_path / "out"
    with pytest.raises(CacheError, match=str(second)):
        merge_caches([first, second], target)
    assert not target.exists()  # nothing copied from the first source
    existing = _fill(tmp_path / "existing", {})
    with pytest.raises(CacheError):
        merge_caches([first, second], existing)
    assert _read(existing) == {}


def test_merge_refuses_diskcache_values_that_are_not_ours(tmp_path: Path) -> None:
    raw = diskcache.Cache(str(tmp_path / "src"))
    raw.set(_key(1), {"pickled": True})
    raw.set(7, encode_entry(_reply(0.3), "7"))
    raw.close()
    with pytest.raises(CacheError, match="2 entries: 0 ok, 2 corrupt"):
        merge_caches([tmp_path / "src"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.timeout(180)
def test_the_cli_runs_on_a_local_cluster_with_the_same_bytes(tmp_path: Path) -> None:
    common = [
        sys.executable, "-m", "ragbatch", "run", str(DATASET), "--pricing", str(PRICING),
        "--quiet", "--max-report-rows", "10",
    ]  # fmt: skip
    single = subprocess.run(
        [*common, "--out", str(tmp_path / "s.json"), "--rows-out", str(tmp_path / "s.jsonl")],
        capture_output=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert single.returncode == 0, single.stderr.decode()
    dask = subprocess.run(
        [*common, "--out", str(tmp_path / "d.json"), "--rows-out", str(tmp_path / "d.jsonl"),
         "--dask", "local:2"],
        capture_output=True, cwd=tmp_path, timeout=150,
    )  # fmt: skip
    assert dask.returncode == 0, dask.stderr.decode()
    assert (tmp_path / "d.json").read_bytes() == (tmp_path / "s.json").read_bytes()
    assert (tmp_path / "d.jsonl").read_bytes() == (tmp_path / "s.jsonl").read_bytes()


def test_the_cli_names_a_bad_dask_address_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ragbatch", "run", str(DATASET), "--pricing", str(PRICING),
         "--out", str(tmp_path / "r.json"), "--dask", "local:zero"],
        capture_output=True, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.decode() == (
        "error: --dask local:N needs N >= 1 worker processes, got 'local:zero'\n"
    )
