"""The loop of ``ragbatch watch``: take spans in, judge idle traces, store verdicts, report
windows (async I/O; the state file: :mod:`ragbatch.watch._state`).

Each turn of the loop:

1. **Take in** the spans past the cursor, a page at a time in Phoenix's id order, each page
   kept and the cursor moved in one transaction. A fresh state starts at the newest span
   present (its traces are left alone: they began before the watcher), or with ``--since`` at
   the first span that started then. A trace is judged when its root span started in
   [``--since``, ``--until``) (one that began before ``--since`` lacks its root here and is
   left out whole, never judged in part).
2. **Judge** the traces idle for ``--idle-s``: whose spans all ended that long before the
   *horizon*. The horizon is the end of the newest span read (the spans' own clock): Phoenix
   lists what it received in about the order it received it, but seconds late under load, so
   a span that ended ``--idle-s`` after a trace's last one being listed means the trace's own
   spans are in. Once no new span has come for ``--idle-s`` (this machine's clock, kept in the
   state file across restarts), the horizon is the last poll's time: the last traces of a
   burst, or of a backfill, are complete then. A trace is sampled (``--sample-rate``, by a
   hash of its id: the same traces whoever runs it), read with ``--format openinference``'s
   reader, judged through the run's judge (:class:`~ragbatch.run.Judge`), and its annotations
   go to the outbox in the transaction that marks it judged. A call that failed for a reason
   that passes (a timeout, a 5xx, ...) leaves the trace in flight for a later turn, up to
   :data:`ATTEMPTS` times; after that it is a failed row (no annotation, counted in the
   window's report). A trace refused by ``--max-cost-per-hour`` waits in flight; one refused
   by ``--max-cost`` stops the watcher (exit 5).
3. **Store** the outbox's annotations in Phoenix (``sync=true``); each stored batch leaves the
   outbox in its own transaction.
4. **Report** every window whose traces are all judged and stored, once its end is
   ``--idle-s`` and one interval behind the horizon (:mod:`ragbatch.watch._window`).

Turns start every ``--interval-s`` (at once while a backlog is being read); a turn that takes
longer starts the next one when it ends.

Phoenix down, slow or answering 5xx: the turn's Phoenix step is skipped, said once, and tried
again with backoff (up to :data:`MAX_BACKOFF_S`); the horizon does not move meanwhile, so no
trace is judged on spans that could not be read. With ``--once`` it gives up after
``retry_for_s`` (exit 3). SIGTERM (and SIGINT) let the batch in hand finish (judged,
committed, stored) and end the loop: exit 0 for SIGTERM, 130 for SIGINT; a second signal
ends it at once (the state is consistent after any transaction).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import orjson

from ragbatch.core import BUDGET_KIND, Row, RowOutcome, Trace
from ragbatch.data import TraceUnreadable, trace_item
from ragbatch.report import export_rows, row_json
from ragbatch.run import HOURLY_KIND, Judge
from ragbatch.watch._phoenix import PhoenixClient, PhoenixRefused, PhoenixUnavailable, span_number
from ragbatch.watch._state import WatchState
from ragbatch.watch._window import WindowSettings, dataset_sha256, iso, write_window

ATTEMPTS = 3  # turns a trace is judged while its calls fail for a reason that passes
RETRY_KINDS = frozenset(
    {"timeout", "connection", "server-error", "http-429", "http-408", "deadline-exceeded",
     "non-json-response"}
)  # fmt: skip
MAX_BACKOFF_S = 60.0
OUTBOX_BATCH = 200  # annotations a request
PAGES_A_TURN = 20  # then judge before reading on: a backlog does not pile up in flight


@dataclass(frozen=True)
class WatchSettings:
    """What ``ragbatch watch`` was asked to do (the judge's settings are the run's)."""

    interval_s: float = 10.0
    idle_s: float = 60.0
    since: datetime | None = None
    until: datetime | None = None
    once: bool = False
    sample_rate: float = 1.0
    batch: int = 256
    name: str = "ragbatch"  # the annotations' name, as export --name
    retrieval_tools: tuple[str, ...] = ()
    flatten: bool = False
    steps: bool = False
    retry_for_s: float = 300.0  # --once: how long Phoenix may stay unreachable


def sampled(trace_id: str, rate: float) -> bool:
    """Whether ``--sample-rate`` keeps the trace: a hash of its id below the rate."""
    if rate >= 1.0:
        return True
    h = int.from_bytes(hashlib.sha256(trace_id.encode()).digest()[:8], "big")
    return h / 2**64 < rate


def span_fields(record: dict[str, Any]) -> tuple[str, float, float] | None:
    """A span record's trace id, start and end (epoch seconds); None if it lacks them."""
    context = record.get("context")
    trace_id = context.get("trace_id") if isinstance(context, dict) else None
    try:
        start = datetime.fromisoformat(str(record.get("start_time"))).timestamp()
        end = datetime.fromisoformat(str(record.get("end_time") or record.get("start_time")))
    except ValueError:
        return None
    if not isinstance(trace_id, str) or not trace_id:
        return None
    return trace_id, start, end.timestamp()


class Watcher:
    """One watcher: a Phoenix project, its state file and a judge."""

    def __init__(
        self,
        settings: WatchSettings,
        windows: WindowSettings,
        client: PhoenixClient,
        state: WatchState,
        judge: Judge,
        say: Callable[[str], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.s, self.windows, self.client, self.state, self.judge = (
            settings, windows, client, state, judge
        )  # fmt: skip
        self.say, self.clock = say, clock
        self.horizon = 0.0
        self.failures = 0  # Phoenix calls failed in a row
        self.down_since: float | None = None
        self.budget_spent = False  # --max-cost reached
        self.judged = self.stored = 0
        self.more = False  # pages left to read: the next turn starts at once
        self.held = 0  # traces refused by --max-cost-per-hour this turn
        self.judge_s = self.store_s = 0.0  # time judging and storing since last said
        self.ready = anyio.Event()  # set when the outbox has something to store
        self.storing = anyio.Lock()
        limit = judge.limit
        if limit is not None and limit.per_hour is not None:
            for when, usd in state.spend_since(clock() - 3600.0):
                limit.record(when, usd)

    # -- Phoenix, with its outages said once ------------------------------------------------

    def _phoenix_ok(self) -> None:
        if self.down_since is not None:
            self.say(f"Phoenix answers again after {self.clock() - self.down_since:.0f} s")
        self.failures, self.down_since = 0, None

    def _phoenix_down(self, error: Exception, *, turn: bool = True) -> None:
        if turn:  # the backoff counts failed turns (the flusher's tries go at its pace)
            self.failures += 1
        if self.down_since is None:
            self.down_since = self.clock()
            self.say(f"warning: {error}; trying again with backoff")

    @property
    def delay(self) -> float:
        if not self.failures:
            return self.s.interval_s
        return float(min(MAX_BACKOFF_S, max(self.s.interval_s, 1.0) * 2.0 ** (self.failures - 1)))

    # -- 1. take in -----------------------------------------------------------------------

    def window_of(self, start: float) -> float:
        every = self.windows.every_s
        window = start - start % every
        reported = self.state.get("reportedUntil")
        return window if reported is None else max(window, float(reported) + every)

    async def start(self) -> None:
        """A fresh state's cursor: the newest span present (its traces left alone), or the
        beginning with --since."""
        if self.state.get("cursor") is not None:
            return
        cursor = ""
        if self.s.since is None:
            newest, _ = await self.client.page(None, newest_first=True)
            if newest:
                cursor = str(newest[0]["id"])
                before = {f[0] for r in newest if (f := span_fields(r)) is not None}
                self.state.ignore(before, cursor, self.clock())
        self.state.set_many({"cursor": cursor, "started": iso(self.clock())})

    async def take_in(self) -> bool:
        """Read pages past the cursor; True when the newest span was reached."""
        for _ in range(PAGES_A_TURN):
            polled = self.clock()
            cursor = self.state.get("cursor") or None
            spans, following = await self.client.page(cursor, since=self.s.since)
            seen = span_number(cursor) if cursor else -1
            beyond = [r for r in spans if span_number(str(r.get("id"))) > seen]
            fresh, unusable = [], 0
            for record in beyond:
                fields = span_fields(record)
                if fields is None:
                    unusable += 1  # no trace id or times: nothing to judge it with
                    continue
                trace_id, start, end = fields
                number = span_number(str(record["id"]))
                fresh.append((number, trace_id, start, end, orjson.dumps(record)))
            if beyond:
                newest = max((f[3] for f in fresh), default=None)
                self.state.take(fresh, str(beyond[-1]["id"]), self.window_of, unusable,
                                newest=newest, now=polled)  # fmt: skip
            if following is None or not beyond:
                self.horizon = self.state.horizon(polled, self.s.idle_s)
                return True
            self.horizon = self.state.horizon(None, self.s.idle_s)
        return False

    # -- 2. judge -------------------------------------------------------------------------

    async def judge_idle(self, stop: anyio.Event) -> int:
        """Judge idle traces, a batch at a time, until none is idle (or a stop)."""
        judged = 0
        while not stop.is_set() and not self.budget_spent:
            now = self.clock()
            ids = self.state.idle(self.horizon - self.s.idle_s, now, self.s.batch)
            if not ids:
                break
            done = await self.judge_batch(ids, now)
            judged += done
            if done == 0:
                break  # every trace of the batch waits (an hourly cap, a retry)
        return judged

    def items_of(self, ids: list[str]) -> tuple[dict[str, Row | Trace], dict[str, str]]:
        """The sampled traces' rows and traces, and the traces left out (and why)."""
        records = self.state.records(ids)
        items: dict[str, Row | Trace] = {}
        skipped: dict[str, str] = {}
        for trace_id in ids:
            if not sampled(trace_id, self.s.sample_rate):
                skipped[trace_id] = "sampled"
                continue
            outside = self.outside(records[trace_id])
            if outside is not None:
                skipped[trace_id] = outside
                continue
            try:
                items[trace_id] = trace_item(
                    trace_id, records[trace_id], retrieval_tools=self.s.retrieval_tools,
                    flatten=self.s.flatten, steps=self.s.steps,
                )  # fmt: skip
            except TraceUnreadable as exc:
                self.say(f"warning: {exc} (not judged)")
                skipped[trace_id] = "unreadable"
        return items, skipped

    def outside(self, records: list[dict[str, Any]]) -> str | None:
        """Why a trace lies outside --since/--until, or None. Spans are read from --since on
        (Phoenix filters them by start), so a trace that began earlier has no root span here
        and is left out whole; --until is read off the root's start, so a trace that began
        before it keeps its later spans."""
        roots = [r for r in records if not r.get("parent_id")]
        fields = [f for r in roots if (f := span_fields(r)) is not None]
        start = min((f[1] for f in fields), default=None)
        if self.s.since is not None and (start is None or start < self.s.since.timestamp()):
            return "beforeSince"
        if self.s.until is not None and start is not None and start >= self.s.until.timestamp():
            return "afterUntil"
        return None

    async def judge_batch(self, ids: list[str], now: float) -> int:
        began = time.monotonic()
        items, skipped = self.items_of(ids)
        limit = self.judge.limit
        spent_before = limit.spent if limit is not None else 0.0
        outcomes = await self.judge.outcomes(list(items.values())) if items else []
        verdicts: dict[str, list[dict[str, Any]]] = {}
        retry: dict[str, float] = {}
        builder = self.judge.builder()
        for trace_id, outcome in zip(items, outcomes, strict=True):
            kind = outcome.jev.failure.kind if outcome.jev.failure is not None else None
            if kind == HOURLY_KIND:
                self.held += 1  # waits in flight for the hour's spending to age out
                continue
            if kind == BUDGET_KIND:
                self.budget_spent = True
                continue
            attempts = self.state.attempts(trace_id)
            if kind in RETRY_KINDS and attempts + 1 < ATTEMPTS:
                retry[trace_id] = now + self.s.interval_s * 2**attempts
                continue
            verdicts[trace_id] = self.records_of(builder, outcome)
        spent = (limit.spent - spent_before) if limit is not None else 0.0
        self.state.judged(verdicts, skipped, retry, spent, now)
        self.judged += len(verdicts)
        self.judge_s += time.monotonic() - began
        return len(verdicts) + len(skipped)

    def records_of(self, builder: Any, outcome: RowOutcome) -> list[dict[str, Any]]:
        """The trace's annotations (none for a failed row: it is said, never a verdict)."""
        result = builder.add(outcome, want_row=True)
        row = row_json(result.model_dump(mode="json", by_alias=True, exclude_none=True))
        made = export_rows([row], "phoenix", self.s.name)
        for row_id, reason in made.skipped:
            error = (row.get("error") or {}).get("kind", "")
            self.say(f"warning: trace {row_id}: {reason} {error}".rstrip())
        return made.records

    # -- 3. store -------------------------------------------------------------------------

    async def flush(self) -> None:
        """Store the outbox's annotations in Phoenix."""
        while entries := self.state.outbox(OUTBOX_BATCH):
            began = time.monotonic()
            seqs = [seq for seq, _ in entries]
            try:
                await self.client.annotate([record for _, record in entries])
                self.state.stored(seqs, self.clock())
            except PhoenixRefused:
                dropped = await self._one_by_one(entries)
                self.state.stored(seqs, self.clock(), dropped)
            self.stored += len(entries)
            self.store_s += time.monotonic() - began

    async def _one_by_one(self, entries: list[tuple[int, dict[str, Any]]]) -> int:
        """A refused batch sent again a record at a time: the refused ones are said and
        dropped (Phoenix would refuse them again); returns how many."""
        dropped = 0
        for _, record in entries:
            try:
                await self.client.annotate([record])
            except PhoenixRefused as exc:
                dropped += 1
                self.say(
                    f"warning: Phoenix refused the annotation {record.get('name')} on span "
                    f"{record.get('span_id')}: {exc} (dropped)"
                )
        return dropped

    # -- 4. report ------------------------------------------------------------------------

    async def report_windows(self) -> list[Path]:
        written = []
        every, wait = self.windows.every_s, self.s.idle_s + self.s.interval_s
        for window in self.state.open_windows():
            if window + every + wait > self.horizon or self.state.window_busy(window):
                continue
            ids, states = self.state.window_traces(window)
            if ids:
                records = self.state.records(ids)
                items, _ = self.items_of(ids)
                path = await write_window(
                    self.judge, self.windows, window, list(items.values()),
                    dataset_sha256(records), states, self.say,
                )  # fmt: skip
                self.say(f"window {iso(window)}..{iso(window + every)}: {len(ids)} traces, {path}")
                written.append(path)
            self.state.reported(window, self.clock())
        return written

    # -- the loop -------------------------------------------------------------------------

    async def turn(self, stop: anyio.Event) -> bool:
        """One turn; True when the newest span was reached and nothing idle is left."""
        caught_up = False
        try:
            await self.start()
            caught_up = await self.take_in()
            self.more = not caught_up
            self._phoenix_ok()
        except PhoenixUnavailable as exc:
            self._phoenix_down(exc)
        await self.judge_idle(stop)
        if self.s.once or stop.is_set():
            await self.store()
        else:
            self.ready.set()  # the flusher stores them while the next turn reads and judges
        try:
            if not self.failures:
                await self.report_windows()
        except PhoenixUnavailable as exc:
            self._phoenix_down(exc)
        return caught_up and not self.failures

    async def store(self) -> None:
        """Store the outbox now (one flush at a time), an outage said and left for later."""
        async with self.storing:
            try:
                await self.flush()
            except PhoenixUnavailable as exc:
                self._phoenix_down(exc, turn=False)

    async def flusher(self) -> None:
        """Store the outbox whenever a turn has judged something, and every interval (what
        an outage left behind)."""
        while True:
            with anyio.move_on_after(self.delay):
                await self.ready.wait()
            self.ready = anyio.Event()
            await self.store()

    async def run(self, stop: anyio.Event) -> int:
        """Turns until a stop (or, with --once, until nothing idle is left): exit 0, 3 when
        Phoenix stayed unreachable under --once, 5 when --max-cost was reached. Without
        --once the annotations are stored beside the turns (:meth:`flusher`); what is left
        when the turns end is stored before this returns."""
        async with anyio.create_task_group() as tg:
            if not self.s.once:
                tg.start_soon(self.flusher)
            code = await self.turns(stop)
            await self.store()  # waits for a flush in progress, then stores the rest
            tg.cancel_scope.cancel()
        return code

    async def turns(self, stop: anyio.Event) -> int:
        judged = stored = 0  # as of the last progress line
        while True:
            began = time.monotonic()
            self.held = 0
            done = await self.turn(stop)
            if (self.judged, self.stored) != (judged, stored):  # the flusher's stores too
                self.say(
                    f"judged {self.judged - judged} traces in {self.judge_s:.1f} s, stored "
                    f"{self.stored - stored} annotations in {self.store_s:.1f} s; "
                    f"{self.state.in_flight()} in flight"
                )
                judged, stored, self.judge_s, self.store_s = self.judged, self.stored, 0.0, 0.0
            if self.held:
                self.say(f"{self.held} traces wait: --max-cost-per-hour reached for this hour")
            if self.budget_spent:
                self.say("error: --max-cost reached: stopped judging; rerun with more to go on")
                return 5
            if stop.is_set() or (self.s.once and done and not self.state.pending()):
                return 0
            down = self.down_since
            if self.s.once and down is not None and self.clock() - down > self.s.retry_for_s:
                self.say(f"error: Phoenix unreachable for {self.s.retry_for_s:.0f} s")
                return 3
            if not self.more:  # turns start every interval; a long one starts the next
                wait = self.delay - (time.monotonic() - began) if not self.failures else self.delay
                with anyio.move_on_after(max(0.0, wait)):
                    await stop.wait()
            if stop.is_set():
                return 0
