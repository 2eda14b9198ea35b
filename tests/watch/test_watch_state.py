"""The watcher's state file, alone (no Phoenix): what each transaction leaves behind, and that a
reopened file holds exactly what was committed."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from ragbatch.core import ConfigError
from ragbatch.watch._state import WatchState, state_path

URL, PROJECT = "http://127.0.0.1:6006", "p"


def span(number: int, trace: str, start: float, end: float) -> tuple[int, str, float, float, bytes]:
    return number, trace, start, end, orjson.dumps({"n": number, "trace": trace})


@pytest.fixture
def state(tmp_path: Path) -> WatchState:
    return WatchState(state_path(tmp_path, URL, PROJECT), URL, PROJECT)


def reopen(state: WatchState) -> WatchState:
    state.close()
    return WatchState(state.path, URL, PROJECT)


def test_spans_and_the_cursor_move_together_and_survive_a_reopen(state: WatchState) -> None:
    taken = state.take([span(1, "a", 10, 11), span(2, "b", 10, 12), span(3, "a", 11, 13)],
                       "c3", lambda start: 0.0)  # fmt: skip
    assert (taken.spans, taken.traces, taken.late) == (3, 2, 0)
    state = reopen(state)
    assert state.get("cursor") == "c3"
    assert state.records(["a", "b"]) == {
        "a": [{"n": 1, "trace": "a"}, {"n": 3, "trace": "a"}],
        "b": [{"n": 2, "trace": "b"}],
    }
    # idle: every span ended by then; trace a's last span ends at 13
    assert state.idle(12.0, now=100.0, limit=10) == ["b"]
    assert state.idle(13.0, now=100.0, limit=10) == ["a", "b"]
    # a page taken again (a kill before the cursor moved on) adds nothing
    again = state.take([span(3, "a", 11, 13)], "c3", lambda start: 0.0)
    assert again.spans == 0


def test_a_judged_trace_s_annotations_leave_the_outbox_only_when_stored(
    state: WatchState,
) -> None:
    state.take([span(1, "a", 10, 11), span(2, "b", 10, 11), span(3, "c", 10, 11)], "c3",
               lambda start: 0.0)  # fmt: skip
    state.judged({"a": [{"span_id": "1", "name": "r"}, {"span_id": "1", "name": "r.step"}]},
                 {"b": "sampled"}, {"c": 50.0}, spent=0.25, now=20.0)  # fmt: skip
    state = reopen(state)
    assert state.in_flight() == 1  # c waits for its retry
    assert state.idle(100.0, now=20.0, limit=10) == []  # not before 50
    assert state.idle(100.0, now=50.0, limit=10) == ["c"]
    assert state.attempts("c") == 1
    assert state.records(["b"]) == {"b": []}  # sampled out: its spans dropped
    entries = state.outbox(10)
    assert [record for _, record in entries] == [
        {"span_id": "1", "name": "r"}, {"span_id": "1", "name": "r.step"},
    ]  # fmt: skip
    assert state.window_busy(0.0)  # a's annotations are not stored yet
    state.stored([entries[0][0]], now=30.0)
    assert state.pending() == 1
    state = reopen(state)
    state.stored([entries[1][0]], now=31.0)
    stored = state.db.execute("SELECT stored_at FROM traces WHERE trace_id = 'a'").fetchone()
    assert stored == (31.0,)  # when its last annotation was stored
    assert state.spend_since(0.0) == [(20.0, 0.25)]
    assert state.counts() == {"sampled": 1, "annotationsStored": 2}


def test_a_reported_window_drops_its_spans_and_its_late_spans_are_counted(
    state: WatchState,
) -> None:
    state.take([span(1, "a", 10, 11), span(2, "b", 70, 71)], "c2",
               lambda start: start - start % 60)  # fmt: skip
    state.judged({"a": []}, {}, {}, 0.0, now=20.0)
    assert state.open_windows() == [0.0, 60.0]
    assert not state.window_busy(0.0) and state.window_busy(60.0)
    assert state.window_traces(0.0) == (["a"], {"judged": 1})
    state.reported(0.0, now=30.0)
    assert state.records(["a"]) == {"a": []} and state.get("reportedUntil") == "0.0"
    late = state.take([span(3, "a", 12, 14)], "c3", lambda start: 0.0)
    assert (late.spans, late.late) == (0, 1)
    assert state.counts()["lateSpans"] == 1
    assert state.open_windows() == [60.0]


def test_a_state_file_of_another_server_is_refused(tmp_path: Path) -> None:
    path = state_path(tmp_path, URL, PROJECT)
    WatchState(path, URL, PROJECT).close()
    with pytest.raises(ConfigError, match=re.escape("belongs to http://127.0.0.1:6006 p")):
        WatchState(path, URL, "other")
    assert state_path(tmp_path, URL, "other") != path


def test_the_horizon_is_the_newest_span_until_none_came_for_idle_s(state: WatchState) -> None:
    state.take([span(1, "a", 10, 11), span(2, "b", 12, 20)], "c2", lambda start: 0.0,
               newest=20.0, now=100.0)  # fmt: skip
    assert state.horizon(None, 5.0) == 20.0  # a backlog being read: the newest span's end
    assert state.horizon(104.0, 5.0) == 20.0  # caught up, but a span came 4 s ago
    assert state.horizon(105.0, 5.0) == 105.0  # nothing new for 5 s: the poll's time
    state = reopen(state)
    assert state.horizon(105.0, 5.0) == 105.0  # kept across a restart
    state.take([span(3, "c", 30, 31)], "c3", lambda start: 0.0, newest=31.0, now=106.0)
    assert state.horizon(107.0, 5.0) == 31.0
    # a page of old spans (a late exporter) does not move the watermark back
    state.take([span(4, "d", 1, 2)], "c4", lambda start: 0.0, newest=2.0, now=107.0)
    assert state.horizon(None, 5.0) == 31.0
