"""The runner: input order whatever the completion order, bounded concurrency, failures as data,
and no label field ever reaching the provider. A scripted fake provider, no real sleeps."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import anyio
import orjson
import pytest

from ragbatch.core._errors import DatasetError, ProviderError, RunAborted
from ragbatch.core._outcome import RowOutcome
from ragbatch.core._policy import Thresholds
from ragbatch.core._pricing import parse_pricing
from ragbatch.core._provider import Call, Reply
from ragbatch.core._schema import Row
from ragbatch.data._jsonl import JsonlReader
from ragbatch.providers._baseline import RecordedBaseline
from ragbatch.providers._mock import MockProvider
from ragbatch.report._builder import RunInfo, summarize
from ragbatch.report._models import report_bytes
from ragbatch.run import _runner as runner
from ragbatch.run._runner import RunConfig, run_batch

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "datasets/rag-fixture.jsonl"


class ScriptedProvider:
    """Answers like the mock after a random number of scheduler yields; records every call."""

    name = "scripted"
    endpoint = "scripted"
    model = "mock-jev"

    def __init__(self, seed: int, fail_ids: frozenset[str] = frozenset()) -> None:
        self.inner = MockProvider()
        self.random = random.Random(seed)
        self.fail_ids = fail_ids
        self.calls: list[Call] = []
        self.in_flight = 0
        self.peak = 0

    async def fetch_answers(self, call: Call) -> Reply:
        self.calls.append(call)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            for _ in range(self.random.randint(0, 50)):
                await anyio.lowlevel.checkpoint()
            if call.row.id in self.fail_ids:
                raise ProviderError("scripted failure", kind="server-error", status=503)
            return await self.inner.fetch_answers(call)
        finally:
            self.in_flight -= 1

    async def aclose(self) -> None:
        return None


def evaluate(provider: ScriptedProvider, concurrency: int, **kw: object) -> list[RowOutcome]:
    config = RunConfig(concurrency=concurrency, **kw)  # type: ignore[arg-type]
    return anyio.run(run_batch, JsonlReader(FIXTURE), provider, RecordedBaseline(), config)


def report_of(outcomes: list[RowOutcome]) -> bytes:
    pricing = parse_pricing((ROOT / "pricing/typesafe-2026-12.json").read_bytes(), "pricing")
    info = RunInfo(
        "rag-fixture.jsonl", "0" * 64, "mock", "mock-jev", "recorded", Thresholds(), pricing
    )
    return report_bytes(summarize(outcomes, info))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_output_in_input_order_whatever_finishes_first(seed: int) -> None:
    sequential = evaluate(ScriptedProvider(seed), 1)
    concurrent_provider = ScriptedProvider(seed + 100)
    concurrent = evaluate(concurrent_provider, 16)
    assert [o.row.id for o in concurrent] == [o.row.id for o in sequential]
    assert [o.index for o in concurrent] == list(range(48))
    assert report_of(concurrent) == report_of(sequential)
    # the calls really were issued out of order of completion
    assert concurrent_provider.peak > 1


def test_concurrency_is_a_ceiling() -> None:
    provider = ScriptedProvider(7)
    evaluate(provider, 5)
    assert 1 < provider.peak <= 5
    assert len(provider.calls) == 48  # one request per row


def test_failed_calls_are_failed_rows_never_verdicts() -> None:
    fail = frozenset({"rag-003", "rag-010"})
    outcomes = evaluate(ScriptedProvider(3, fail), 8)
    failed = [o for o in outcomes if o.jev.failure is not None]
    assert {o.row.id for o in failed} == fail
    assert all(o.jev.verdict is None and o.jev.judgments is None for o in failed)
    report = orjson.loads(report_of(outcomes))
    rows = {r["id"]: r for r in report["rows"]}
    for row_id in fail:
        assert rows[row_id]["route"] == "failed" and rows[row_id]["cascade"]["status"] == "failed"
    assert report["modes"]["jevOnly"]["failures"] == {
        "count": 2,
        "rate": 2 / 48,
        "byKind": {"server-error": 2},
    }
    assert report["modes"]["cascade"]["primaryFailureRate"] == 2 / 48


def test_error_budget_aborts_the_run() -> None:
    every = frozenset(f"rag-{i:03d}" for i in range(1, 49))
    provider = ScriptedProvider(5, every)
    with pytest.raises(BaseExceptionGroup) as caught:
        evaluate(provider, 2, max_error_rate=0.5, error_budget_rows=10)
    assert caught.group_contains(RunAborted)
    assert len(provider.calls) < 48


def test_dataset_error_mid_stream_stops_the_run(tmp_path: Path) -> None:
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*lines[:5], "{broken", *lines[5:]]) + "\n", encoding="utf-8")
    provider = ScriptedProvider(1)
    with pytest.raises(BaseExceptionGroup) as caught:
        anyio.run(run_batch, JsonlReader(bad), provider, RecordedBaseline(), RunConfig(4))
    assert caught.group_contains(DatasetError)


def test_no_label_field_ever_reaches_the_provider(tmp_path: Path) -> None:
    marker = "LEAK-MARKER"
    rows = []
    for line in FIXTURE.read_text(encoding="utf-8").splitlines():
        data = orjson.loads(line)
        data["metadata"] = {"note": marker}
        data["baseline"]["model"] = marker
        rows.append(orjson.dumps(data).decode())
    path = tmp_path / "marked.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    provider = ScriptedProvider(2)
    anyio.run(run_batch, JsonlReader(path), provider, RecordedBaseline(), RunConfig(8))
    forbidden = ("expected", "mock", "baseline", "metadata", marker)
    for call in provider.calls:
        body = call.request.body().decode()
        state = orjson.dumps(call.request.state).decode()
        assert set(call.request.state) <= {"question", "contexts", "answer", "referenceAnswer"}
        for word in forbidden:
            assert word not in state
        assert marker not in body
        # label values must not ride along either: the expected diagnosis names are absent
        row = call.row
        assert isinstance(row, Row)
        if row.expected and row.expected.diagnosis:
            assert row.expected.diagnosis not in body


class SlowFirstRow:
    """The first row answers only after many scheduler yields; the others answer at once."""

    name = "slow-first"
    endpoint = "slow-first"
    model = "mock-jev"

    def __init__(self) -> None:
        self.inner = MockProvider()
        self.first_done = False
        self.started_while_first_pending: list[str] = []
        self.first_id: str | None = None

    async def fetch_answers(self, call: Call) -> Reply:
        if self.first_id is None:
            self.first_id = call.row.id
            for _ in range(2000):
                await anyio.lowlevel.checkpoint()
            self.first_done = True
        elif not self.first_done:
            self.started_while_first_pending.append(call.row.id)
        return await self.inner.fetch_answers(call)

    async def aclose(self) -> None:
        return None


def test_a_slow_row_holds_back_at_most_the_reorder_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runner, "reorder_window", lambda concurrency: 5)
    provider = SlowFirstRow()
    seen: list[int] = []

    async def go() -> int:
        rows = enumerate(JsonlReader(FIXTURE))
        sink = lambda o: seen.append(o.index)  # noqa: E731
        return await runner.run_stream(rows, provider, RecordedBaseline(), RunConfig(8), sink)

    total = anyio.run(go)
    assert total == 48 and seen == list(range(48))  # handed on in input order
    # positions 1-4 may run while row 0 is pending; position 5 waits for it (window 5)
    assert len(provider.started_while_first_pending) == 4


class AnswersFirstRows:
    """Answers the first ``answered`` rows at once; every later call waits until cancelled."""

    name = "first-rows"
    endpoint = "first-rows"
    model = "mock-jev"

    def __init__(self, answered: int) -> None:
        self.inner = MockProvider()
        self.answered = answered
        self.calls = 0
        self.stuck = anyio.Event()

    async def fetch_answers(self, call: Call) -> Reply:
        self.calls += 1
        if self.calls > self.answered:
            self.stuck.set()
            await anyio.sleep_forever()
        return await self.inner.fetch_answers(call)

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize("batch", [4, runner.SINK_BATCH])
def test_a_stopped_run_hands_on_every_row_finished_in_order(
    monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    """Rows go to the in-order sink in batches; a run cut short still hands on the ones
    whose turn had come (the interrupted run's "after N rows" counts them)."""
    monkeypatch.setattr(runner, "SINK_BATCH", batch)
    provider = AnswersFirstRows(10)
    seen: list[int] = []

    async def go() -> None:
        rows = enumerate(JsonlReader(FIXTURE))
        sink = lambda o: seen.append(o.index)  # noqa: E731
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    runner.run_stream, rows, provider, RecordedBaseline(), RunConfig(1), sink
                )
                await provider.stuck.wait()
                scope.cancel()

    anyio.run(go)
    assert seen == list(range(10))


def test_rows_reach_the_sink_in_order_across_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "SINK_BATCH", 5)
    seen: list[int] = []

    async def go() -> int:
        rows = enumerate(JsonlReader(FIXTURE))
        sink = lambda o: seen.append(o.index)  # noqa: E731
        return await runner.run_stream(
            rows, ScriptedProvider(4), RecordedBaseline(), RunConfig(8), sink
        )

    assert anyio.run(go) == 48 and seen == list(range(48))


def test_read_ahead_hands_on_every_row_pulled_before_an_error() -> None:
    def rows() -> Iterator[int]:
        yield from range(7)
        raise DatasetError("data.jsonl", 8, "bad row")

    got: list[int] = []
    with pytest.raises(DatasetError, match=r"data\.jsonl:8"):
        for row in runner.read_ahead(rows(), 3):
            got.append(row)
    assert got == list(range(7))
    assert list(runner.read_ahead(range(7), 3)) == list(range(7))
    assert list(runner.read_ahead([], 3)) == []
