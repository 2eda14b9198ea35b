"""The LLM judge's verdicts go through the same cache path as Jev's replies: one request for
identical verdicts in flight (also across processes sharing the directory, by the lease),
group-committed writes, and an --offline replay that sends nothing."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from ragbatch.core._errors import ProviderError
from ragbatch.providers._llm_judge import LlmJudge
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.providers.cache._replies import ReplyCache
from ragbatch.testing.chat_server import ChatFault, ChatServer
from tests.providers.test_baselines import KEY, MODEL, make_row


def judge(server: ChatServer, cache: ReplyCache) -> LlmJudge:
    return LlmJudge(server.base_url, KEY, MODEL, cache, RateLimiter(4), timeout_s=5)


@pytest.mark.anyio
async def test_two_processes_judging_the_same_row_pay_once(tmp_path: Path) -> None:
    # two ReplyCache objects on one directory stand for two processes: only the lease
    # keeps the second from sending while the first's request is in flight
    with ChatServer(api_key=KEY) as server:
        server.push(ChatFault("latency", delay_s=0.5))
        first = judge(server, ReplyCache(tmp_path / "cache"))
        second = judge(server, ReplyCache(tmp_path / "cache"))
        row = make_row()
        verdicts = []

        async def ask(one: LlmJudge) -> None:
            verdicts.append(await one.judge(row))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, first)
            await anyio.sleep(0.1)
            tg.start_soon(ask, second)
        assert server.requests_total == 1
        assert verdicts[0] == verdicts[1]
        assert first.stats.misses + second.stats.misses == 1
        assert second.stats.deduplicated == 1 and second.stats.hits == 1
        for one in (first, second):
            await one.aclose()
            assert one.cache is not None
            one.cache.close()


@pytest.mark.anyio
async def test_offline_replay_of_a_judge_sends_nothing(tmp_path: Path) -> None:
    with ChatServer(api_key=KEY) as server:
        writable = ReplyCache(tmp_path / "cache")
        live = judge(server, writable)
        stored = await live.judge(make_row("r1"))
        await live.aclose()
        writable.close()

        offline = judge(server, ReplyCache(tmp_path / "cache", read_only=True))
        assert await offline.judge(make_row("r1")) == stored
        with pytest.raises(ProviderError) as caught:
            await offline.judge(make_row("r2", answer="another answer"))
        await offline.aclose()
        assert caught.value.kind == "cache-miss"
        assert server.requests_total == 1  # only the live run's
