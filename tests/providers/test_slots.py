"""The limiter's concurrency slots: arrival order, a limit that changes while slots are held,
and cancelled waiters (who neither keep a slot nor lose one for the others)."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from ragbatch.providers._ratelimit import RateLimiter, Slots

pytestmark = pytest.mark.anyio


async def test_a_free_slot_is_taken_without_waiting_and_the_rest_wait_in_order() -> None:
    slots = Slots(2)
    order: list[int] = []

    async def take(i: int, hold: anyio.Event) -> None:
        await slots.acquire()
        order.append(i)
        await hold.wait()
        slots.release()

    holds = [anyio.Event() for _ in range(5)]
    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(take, i, holds[i])
            await anyio.sleep(0.01)
        assert (order, slots.taken) == ([0, 1], 2)
        for i in range(5):
            holds[i].set()
            await anyio.sleep(0.01)
    assert order == [0, 1, 2, 3, 4] and slots.taken == 0


async def test_a_lower_limit_keeps_held_slots_and_a_higher_one_lets_waiters_in() -> None:
    slots = Slots(4)
    for _ in range(4):
        await slots.acquire()
    slots.resize(2)
    got: list[int] = []

    async def take(i: int) -> None:
        await slots.acquire()
        got.append(i)

    async with anyio.create_task_group() as tg:
        tg.start_soon(take, 1)
        await anyio.sleep(0.01)
        slots.release()
        slots.release()
        await anyio.sleep(0.01)
        assert got == []  # 2 held of 2: still full
        slots.resize(3)
        await anyio.sleep(0.01)
        assert got == [1]
    assert slots.taken == 3


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    slots = Slots(1)
    await slots.acquire()
    with anyio.move_on_after(0.05):
        await slots.acquire()
    assert slots.taken == 1
    slots.release()
    await slots.acquire()  # nobody stale before us
    assert slots.taken == 1


async def test_a_waiter_cancelled_as_it_is_given_a_slot_passes_it_on() -> None:
    # asyncio's own cancel (anyio waits for such a task to run again before it cancels it)
    slots = Slots(1)
    await slots.acquire()
    first = asyncio.create_task(slots.acquire())
    await asyncio.sleep(0)
    second = asyncio.create_task(slots.acquire())
    await asyncio.sleep(0)
    slots.release()  # the first waiter is given the slot ...
    first.cancel()  # ... and cancelled before it runs again
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(second, 1)  # the slot went on to the second
    assert slots.taken == 1


async def test_the_limiter_slot_returns_its_slot_when_the_budget_wait_is_cancelled() -> None:
    limiter = RateLimiter(2)
    limiter.on_throttled(5.0)  # every call is held for 5 s; the limit halves to 1
    with anyio.move_on_after(0.05):
        async with limiter.slot(10):
            pytest.fail("sent during the hold")
    assert limiter._slots.taken == 0 and limiter.stats.in_flight == 0
