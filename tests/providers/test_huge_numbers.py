"""A reply with a number out of any sane range is a failed row, never cached, and a cache entry
holding one is what ``cache verify`` calls corrupt (a real loopback server, a real cache)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ragbatch.core._provider import Reply
from ragbatch.core._schema import TokenUsage
from ragbatch.providers.cache._replies import encode_entry
from ragbatch.providers.cache._store import ReplyCache
from ragbatch.testing import Fault
from tests.run.test_operations import cli, live, report
from tests.run.test_resume import StartServer, comparable


@pytest.mark.parametrize("tokens", [2**70, 2**64, 2**63, 100_000_001], ids=str)
def test_a_huge_usage_fails_the_row_and_is_not_cached(
    start_jev_server: StartServer, tmp_path: Path, tokens: int
) -> None:
    server = start_jev_server()
    server.push(Fault(kind="bad_usage", usage_value=tokens))
    cache = tmp_path / "cache"
    code, _, err = live(server.base_url, cache, tmp_path / "r.json", "--concurrency", "1")
    assert code == 3, err
    failed = [r for r in report(tmp_path / "r.json")["rows"] if "error" in r]
    assert [r["error"]["kind"] for r in failed] == ["malformed-response"]
    assert "input_tokens" in failed[0]["error"]["message"]
    assert cli("cache", "verify", str(cache))[0] == 0
    # the replay answers the other 47 rows from the cache and misses the failed one
    code, _, err = live(server.base_url, cache, tmp_path / "replay.json", "--offline")
    assert code == 3, err
    replayed = [r for r in report(tmp_path / "replay.json")["rows"] if "error" in r]
    assert [(r["id"], r["error"]["kind"]) for r in replayed] == [(failed[0]["id"], "cache-miss")]


def test_cache_verify_calls_an_entry_with_a_huge_usage_corrupt(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    server = start_jev_server()
    cache = tmp_path / "cache"
    assert live(server.base_url, cache, tmp_path / "r.json")[0] == 0
    store = ReplyCache(cache)
    key = store.keys()[0]
    stored = orjson.loads((store.get(key) or b"").partition(b"\n")[2])
    reply = Reply.model_validate(stored)
    poisoned = reply.model_copy(update={"usage": TokenUsage(input_tokens=2**63)})
    store.put(key, encode_entry(poisoned, key))  # a checksum that matches: only the number is off
    store.close()
    code, out, err = cli("cache", "verify", str(cache))
    assert code == 2, out + err
    assert "1 corrupt" in out + err, out + err
    # a run drops the entry and fetches the row again, as for any corrupt entry
    code, _, err = live(server.base_url, cache, tmp_path / "again.json")
    assert code == 0, err
    assert server.successful == 49
    again, first = report(tmp_path / "again.json"), report(tmp_path / "r.json")
    assert comparable(again["rows"]) == comparable(first["rows"])
