"""ReplyCache and CachedProvider against a real Jev test server on 127.0.0.1.

Record then replay offline with zero requests and identical report bytes; cache modes;
corrupt entries are detected and refetched; what enters the key; no secret on disk; JSON
values; two processes sharing one cache directory.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from ragbatch.core._errors import ProviderError
from ragbatch.core._provider import Call, Reply
from ragbatch.core._questions import build_request
from ragbatch.core._schema import Row
from ragbatch.core._wire import JevRequest, request_key
from ragbatch.data._jsonl import JsonlReader
from ragbatch.providers._jev import ENDPOINT, JevProvider, JevSettings, OfflineJev
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.providers.cache._replies import CachedProvider, ReplyCache, decode_entry, encode_entry
from ragbatch.run._job import run_job
from ragbatch.testing import Fault, JevServer
from tests.conftest import job_config

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "rag-fixture.jsonl"
PRICING = ROOT / "pricing" / "typesafe-2026-12.json"
MODEL = "jev-1.13.0"
KEY = "test-key"
ROWS: list[Row] = list(JsonlReader(DATASET))

StartServer = Callable[..., JevServer]


def make_call(index: int = 0, model: str = MODEL) -> Call:
    """The request for one fixture row."""
    row = ROWS[index]
    return Call(request=build_request(row, model), row=row)


@asynccontextmanager
async def cached_jev(
    server: JevServer, cache: ReplyCache | None, mode: Any = "use", api_key: str = KEY
) -> AsyncIterator[CachedProvider]:
    """A JevProvider for ``server`` wrapped in ``cache``; connections closed afterwards."""
    settings = JevSettings(api_key=api_key, base_url=server.base_url, model=MODEL)
    provider = JevProvider(settings, RateLimiter(4))
    try:
        yield CachedProvider(provider, cache, mode)
    finally:
        await provider.aclose()


def row_key(index: int) -> str:
    """The cache key of a fixture row's request."""
    return request_key(ENDPOINT, make_call(index).request)


def report_rows(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = orjson.loads(path.read_bytes())["rows"]
    return rows


def without_latency(value: Any) -> Any:
    """``value`` with every ``latency*`` field dropped (recorded wall times)."""
    if isinstance(value, dict):
        return {
            k: without_latency(v) for k, v in value.items() if not k.lower().startswith("latency")
        }
    if isinstance(value, list):
        return [without_latency(v) for v in value]
    return value


def constant_answer(state: Any, qid: str, question: dict[str, Any]) -> dict[str, Any]:
    """A server that answers 0.5 to everything (to tell its replies from the default ones)."""
    return {"type": "noul", "noul": 0.5}


# -- record and replay ---------------------------------------------------------------------
def test_offline_replay_is_request_free_and_byte_identical(
    jev_server: JevServer, tmp_path: Path
) -> None:
    recorded = run_job(job_config(jev_server, tmp_path, out=tmp_path / "recorded.json"))
    assert jev_server.requests_total == 48
    assert recorded.record["cache"]["writes"] == 48

    replay = run_job(job_config(jev_server, tmp_path, offline=True, out=tmp_path / "replay.json"))
    assert jev_server.requests_total == 48  # not one request
    assert replay.record["cache"]["hits"] == 48
    assert (tmp_path / "replay.json").read_bytes() == (tmp_path / "recorded.json").read_bytes()
    assert replay.report_bytes == recorded.report_bytes

    online = run_job(job_config(jev_server, tmp_path, out=tmp_path / "online.json"))
    assert jev_server.requests_total == 48  # ``use`` with a warm cache: no request either
    assert online.report_bytes == recorded.report_bytes


def test_offline_miss_fails_the_row_without_a_request(
    jev_server: JevServer, tmp_path: Path
) -> None:
    run_job(job_config(jev_server, tmp_path))
    cache = ReplyCache(tmp_path / "cache")
    cache.delete(row_key(5))
    cache.close()

    result = run_job(job_config(jev_server, tmp_path, offline=True))
    assert jev_server.requests_total == 48
    rows = report_rows(tmp_path / "r.json")
    assert rows[5]["status"] == "failed" and rows[5]["route"] == "failed"
    assert rows[5]["error"]["kind"] == "cache-miss"
    assert "--offline" in rows[5]["error"]["message"]
    assert all(r["status"] == "ok" for i, r in enumerate(rows) if i != 5)
    assert result.report.modes.jev_only.failures.by_kind == {"cache-miss": 1}

    empty = run_job(job_config(jev_server, tmp_path, offline=True, cache_dir=tmp_path / "e"))
    assert empty.report.modes.jev_only.failures.by_kind == {"cache-miss": 48}
    assert jev_server.requests_total == 48


def test_refresh_refetches_and_overwrites(
    jev_server: JevServer, start_jev_server: StartServer, tmp_path: Path
) -> None:
    run_job(job_config(jev_server, tmp_path, out=tmp_path / "old.json"))
    newer = start_jev_server(answer_fn=constant_answer)

    refreshed = run_job(job_config(newer, tmp_path, refresh=True, out=tmp_path / "refreshed.json"))
    assert newer.successful == 48 and jev_server.requests_total == 48
    assert refreshed.record["cache"]["writes"] == 48
    assert refreshed.record["cache"]["hits"] == 0

    replay = run_job(job_config(newer, tmp_path, offline=True))
    assert newer.requests_total == 48
    assert replay.report_bytes == refreshed.report_bytes
    assert report_rows(tmp_path / "r.json")[0]["generation"]["relevance"] == 0.5
    assert report_rows(tmp_path / "old.json")[0]["generation"]["relevance"] != 0.5


@pytest.mark.anyio
async def test_refresh_sends_identical_requests_in_flight_once(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    server = start_jev_server(latency_s=0.2)
    cache = ReplyCache(tmp_path / "cache")
    async with cached_jev(server, cache) as cached:
        await cached.fetch_answers(make_call())
    async with cached_jev(server, cache, "refresh") as cached, anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(cached.fetch_answers, make_call())
    cache.close()
    assert server.successful == 2  # the first fill, then one refresh for three callers
    assert cached.stats.writes == 1 and cached.stats.hits == 2


def test_off_never_reads_or_writes(jev_server: JevServer, tmp_path: Path) -> None:
    run_job(job_config(jev_server, tmp_path, no_cache=True))
    run_job(job_config(jev_server, tmp_path, no_cache=True))
    assert jev_server.requests_total == 96
    assert not (tmp_path / "cache").exists()


@pytest.mark.anyio
async def test_off_with_a_cache_object_never_writes(jev_server: JevServer, tmp_path: Path) -> None:
    cache = ReplyCache(tmp_path / "cache")
    async with cached_jev(jev_server, cache, "off") as cached:
        await cached.fetch_answers(make_call())
        await cached.fetch_answers(make_call())
    assert len(cache) == 0 and jev_server.requests_total == 2
    cache.close()


# -- corrupt entries -----------------------------------------------------------------------
def flip_body_byte(data: bytes) -> bytes:
    """Change one digit of the first probability: the header stays valid, the body does not."""
    at = data.index(b'"noul":', data.index(b"\n")) + len(b'"noul":0.')
    digit = data[at : at + 1]
    assert digit.isdigit()
    return data[:at] + (b"1" if digit != b"1" else b"2") + data[at + 1 :]


def resealed_out_of_range(data: bytes) -> bytes:
    """A body with a probability of 1.5 and a checksum that matches it."""
    body = orjson.loads(data.partition(b"\n")[2])
    first = next(iter(body["answers"]))
    body["answers"][first]["noul"] = 1.5
    raw = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    head = {"format": 1, "sha256": hashlib.sha256(raw).hexdigest()}
    return orjson.dumps(head) + b"\n" + raw


def future_format(data: bytes) -> bytes:
    head, _, body = data.partition(b"\n")
    meta = orjson.loads(head)
    return orjson.dumps({**meta, "format": 2}) + b"\n" + body


CORRUPTIONS: dict[str, Callable[[bytes], bytes]] = {
    "garbage": lambda data: b"garbage",
    "flipped-body-byte": flip_body_byte,
    "resealed-out-of-range": resealed_out_of_range,
    "future-format": future_format,
    "truncated": lambda data: data[: len(data) // 2],
}


@pytest.mark.anyio
@pytest.mark.parametrize("corrupt", list(CORRUPTIONS.values()), ids=list(CORRUPTIONS))
async def test_corrupt_entry_is_detected_refetched_and_never_trusted(
    jev_server: JevServer, tmp_path: Path, corrupt: Callable[[bytes], bytes]
) -> None:
    cache = ReplyCache(tmp_path / "cache")
    call = make_call()
    async with cached_jev(jev_server, cache) as cached:
        fresh = await cached.fetch_answers(call)
        key = cached.key_for(call)
        good = cache.get(key)
        assert good is not None
        cache.put(key, corrupt(good))
        assert cache.get(key) != good

        again = await cached.fetch_answers(call)
    assert jev_server.requests_total == 2  # refetched
    assert cached.stats.corrupt == 1 and len(cached.warnings) == 1
    assert "corrupt cache entry" in cached.warnings[0]
    assert not again.cached and again.answers == fresh.answers
    repaired = cache.get(key)
    assert repaired is not None and decode_entry(repaired, call).answers == fresh.answers
    cache.close()


@pytest.mark.anyio
async def test_entry_moved_under_another_key_is_not_trusted(
    jev_server: JevServer, tmp_path: Path
) -> None:
    cache = ReplyCache(tmp_path / "cache")
    first, second = make_call(0), make_call(1)
    async with cached_jev(jev_server, cache) as cached:
        await cached.fetch_answers(first)
        entry = cache.get(cached.key_for(first))
        assert entry is not None
        cache.put(cached.key_for(second), entry)  # a valid entry, but for another request
        await cached.fetch_answers(second)
    assert jev_server.requests_total == 2 and cached.stats.corrupt == 1
    assert "another request" in cached.warnings[0]
    cache.close()


@pytest.mark.anyio
async def test_corrupt_entry_offline_is_a_cache_miss(jev_server: JevServer, tmp_path: Path) -> None:
    cache = ReplyCache(tmp_path / "cache")
    call = make_call()
    async with cached_jev(jev_server, cache) as cached:
        await cached.fetch_answers(call)
    cache.put(cached.key_for(call), b"garbage")
    offline = CachedProvider(OfflineJev(MODEL), cache, "offline")
    with pytest.raises(ProviderError) as info:
        await offline.fetch_answers(call)
    assert info.value.kind == "cache-miss" and offline.stats.corrupt == 1
    assert jev_server.requests_total == 1
    cache.close()


def test_corrupt_entry_in_a_job_is_counted_and_refetched(
    jev_server: JevServer, tmp_path: Path
) -> None:
    first = run_job(job_config(jev_server, tmp_path, out=tmp_path / "first.json"))
    cache = ReplyCache(tmp_path / "cache")
    cache.put(row_key(7), b"garbage")
    cache.close()
    warnings: list[str] = []
    second = run_job(job_config(jev_server, tmp_path), warn=warnings.append)
    assert jev_server.requests_total == 49
    assert second.record["cache"]["corrupt"] == 1 and second.record["cache"]["hits"] == 47
    assert any("corrupt cache entry" in w for w in warnings)
    assert without_latency(orjson.loads(second.report_bytes)) == without_latency(
        orjson.loads(first.report_bytes)
    )


# -- what the key is made of ---------------------------------------------------------------
def with_changes(request: JevRequest, **changes: Any) -> JevRequest:
    return request.model_copy(update=changes)


def test_cache_key_depends_on_content_only(
    jev_server: JevServer, start_jev_server: StartServer
) -> None:
    other = start_jev_server(api_key="another-key")
    call = make_call()
    keys = set()
    for server, key in ((jev_server, KEY), (other, "another-key")):
        settings = JevSettings(api_key=key, base_url=server.base_url, model=MODEL)
        provider = CachedProvider(JevProvider(settings, RateLimiter(1)), None)
        keys.add(provider.key_for(call))
    assert keys == {row_key(0)}
    assert len(row_key(0)) == 64 and int(row_key(0), 16) >= 0

    request = call.request
    changed_state = build_request(ROWS[0].model_copy(update={"answer": "Something else."}), MODEL)
    fewer = dict(request.questions)
    fewer.pop("contradiction")
    reworded = dict(request.questions)
    reworded["groundedness"] = reworded["groundedness"].model_copy(update={"instructions": "?"})
    variants = [
        build_request(ROWS[0], "jev-1.12.0"),
        build_request(ROWS[0], "jev-latest"),
        changed_state,
        with_changes(request, questions=fewer),
        with_changes(request, questions=reworded),
        build_request(ROWS[1], MODEL),
    ]
    variant_keys = {request_key(ENDPOINT, v) for v in variants}
    assert len(variant_keys) == len(variants) and row_key(0) not in variant_keys
    assert request_key("/v2/systemone", request) != row_key(0)


def test_cache_is_shared_across_keys_and_base_urls(
    jev_server: JevServer, start_jev_server: StartServer, tmp_path: Path
) -> None:
    first = run_job(job_config(jev_server, tmp_path, out=tmp_path / "a.json"))
    other = start_jev_server(api_key="another-key")
    second = run_job(job_config(other, tmp_path, api_key="another-key", out=tmp_path / "b.json"))
    assert other.requests_total == 0
    assert second.report_bytes == first.report_bytes


# -- what is on disk -----------------------------------------------------------------------
SECRET = "sk-ragbatch-secret-9d41e7"


def test_api_key_is_written_nowhere(start_jev_server: StartServer, tmp_path: Path) -> None:
    failing = ROWS[2].question

    def echo_key(index: int, body: dict[str, Any]) -> Fault | None:
        state = body.get("state")
        if isinstance(state, dict) and state.get("question") == failing:
            return Fault(kind="status", status=422, message=f"key {SECRET} may not ask this")
        return None

    server = start_jev_server(api_key=SECRET, fault_fn=echo_key)
    config = job_config(
        server,
        tmp_path,
        api_key=SECRET,
        out=tmp_path / "out" / "r.json",
        run_record=tmp_path / "out" / "run.json",
    )
    result = run_job(config)
    assert server.headers_seen[0]["authorization"] == f"Bearer {SECRET}"
    assert result.report.modes.jev_only.failures.by_kind == {"http-422": 1}
    assert "key *** may not ask this" in (tmp_path / "out" / "r.json").read_text()

    files = [Path(d) / name for d, _, names in os.walk(tmp_path) for name in names]
    names = {f.name for f in files}
    assert {"r.json", "run.json", "cache.db"} <= names
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in repr(config) and SECRET not in repr(result)


def test_values_are_json_not_pickle(jev_server: JevServer, tmp_path: Path) -> None:
    run_job(job_config(jev_server, tmp_path))
    cache = ReplyCache(tmp_path / "cache")
    keys = cache.keys()
    assert sorted(keys) == sorted(row_key(i) for i in range(48))
    for index, key in enumerate(row_key(i) for i in range(48)):
        data = cache.get(key)
        assert data is not None and data.startswith(b'{"format":1,"sha256":"')
        head, _, body = data.partition(b"\n")
        assert orjson.loads(head)["sha256"] == hashlib.sha256(body).hexdigest()
        stored = orjson.loads(body)
        assert stored["model"] == MODEL and "latencyMs" in stored and "usage" in stored
        assert not {"attempts", "retries", "wallMs", "cached"} & set(stored)
        answers = decode_entry(data, make_call(index)).answers
        assert Reply.model_validate_json(body).answers == answers
    cache.close()
    # diskcache's own column: 1 = raw bytes (4 would be a pickle)
    with sqlite3.connect(tmp_path / "cache" / "cache.db") as db:
        modes = {mode for (mode,) in db.execute("SELECT mode FROM Cache")}
    assert modes == {1}


def test_encode_entry_round_trips(jev_server: JevServer, tmp_path: Path) -> None:
    reply = Reply.model_validate(
        {
            "model": MODEL,
            "answers": {
                qid: {"type": "noul", "noul": 0.25} for qid in make_call().request.questions
            },
            "usage": {"inputTokens": 10, "outputTokens": 2},
            "latencyMs": 12.5,
            "requestId": "req-9",
            "attempts": 3,
        }
    )
    decoded = decode_entry(encode_entry(reply), make_call())
    assert decoded == reply.model_copy(update={"attempts": 1})


# -- two processes, one cache --------------------------------------------------------------
def test_two_processes_share_one_cache_directory_and_never_pay_twice(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    server = start_jev_server(latency_s=0.2)
    cache_dir = tmp_path / "cache"
    env = {**os.environ, "TYPESAFE_API_KEY": KEY}

    def command(out: Path) -> list[str]:
        return [
            sys.executable, "-m", "ragbatch", "run", str(DATASET),
            "--provider", "jev", "--base-url", server.base_url, "--model", MODEL,
            "--cache-dir", str(cache_dir), "--out", str(out), "--pricing", str(PRICING),
            "--concurrency", "4", "--quiet",
        ]  # fmt: skip

    procs = [
        subprocess.Popen(
            command(tmp_path / f"r{i}.json"),
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(2)
    ]
    results = [proc.communicate(timeout=60) for proc in procs]
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err.decode()
        assert (out, err) == (b"", b"")
    cache = ReplyCache(cache_dir)
    assert len(cache) == 48
    cache.close()
    # Two identical runs at once: every distinct request is paid for once (leases).
    assert server.requests_total == server.successful == 48
    # Each row was fetched by one run and read from the cache by the other: same bytes.
    assert (tmp_path / "r0.json").read_bytes() == (tmp_path / "r1.json").read_bytes()
