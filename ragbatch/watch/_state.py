"""What ``ragbatch watch`` has seen, judged and stored, in one SQLite file (file I/O).

The file lives in the cache directory (``watch/<key>.sqlite``, one per Phoenix server and
project) and is changed only in transactions, so a watcher killed at any moment (``kill -9``
included) starts again from a consistent state:

- ``meta``: the cursor (the id of the last span taken in) and the last window reported;
- ``spans``: the spans of the traces in flight (taken in, not yet reported), by Phoenix's row
  number. They are taken in, and the cursor moved past them, in one transaction;
- ``traces``: every trace seen, its state (``open``: collecting spans; ``judged``: its verdicts
  are in the outbox or stored; ``skipped``: sampled out or unreadable; ``reported``: its
  window's report is written) and its window;
- ``outbox``: annotations to store in Phoenix, written in the transaction that marks their
  trace judged and deleted in the one after Phoenix said it stored them (a kill in between
  sends them again: the identifier makes Phoenix replace them, not add copies);
- ``spend``: what the judge spent and when, for the rolling hourly cap across restarts.

Nothing here is lost by a restart, nothing is done twice but an upload Phoenix dedupes and a
judge call the reply cache answers.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ragbatch.core import CacheError, ConfigError

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS spans (
    seq INTEGER PRIMARY KEY, trace_id TEXT NOT NULL, record BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS spans_by_trace ON spans (trace_id, seq);
CREATE TABLE IF NOT EXISTS traces (
    trace_id TEXT PRIMARY KEY, first_seq INTEGER NOT NULL, start REAL NOT NULL,
    activity REAL NOT NULL, state TEXT NOT NULL, window REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, retry_at REAL NOT NULL DEFAULT 0,
    judged_at REAL, stored_at REAL, reason TEXT);
CREATE INDEX IF NOT EXISTS traces_by_state ON traces (state, activity);
CREATE INDEX IF NOT EXISTS traces_by_window ON traces (window, state);
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, trace_id TEXT NOT NULL, record BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS spend (at REAL NOT NULL, usd REAL NOT NULL);
CREATE TABLE IF NOT EXISTS counts (name TEXT PRIMARY KEY, n INTEGER NOT NULL);
"""
FULL_BELOW = 1 << 20  # free bytes under which a failed write is said to be a full disk
KEEP_SEEN_S = 7 * 24 * 3600.0  # how long a reported trace is remembered (its late spans dropped)


def state_path(cache_dir: Path, url: str, project: str) -> Path:
    """The state file of one Phoenix server's project under the cache directory."""
    key = hashlib.sha256(f"{url}\0{project}".encode()).hexdigest()[:16]
    return cache_dir / "watch" / f"phoenix-{key}.sqlite"


def state_error(path: Path, exc: BaseException, what: str = "the watch state") -> CacheError:
    """The error line for a state file that failed: SQLite's words, and a full disk said
    (SQLite often says only "disk I/O error")."""
    message = getattr(exc, "strerror", None) or str(exc)
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        free = None
    if free is not None and free < FULL_BELOW and "full" not in message:
        message += f"; the disk holding it is full ({free} bytes free)"
    return CacheError(f"{what} {path}: {message}")


@dataclass(frozen=True)
class Taken:
    """What one page added: spans kept, new traces, spans of finished traces dropped."""

    spans: int
    traces: int
    late: int


class WatchState:
    """The watcher's state file (see the module docstring)."""

    def __init__(self, path: Path, url: str, project: str) -> None:
        db: sqlite3.Connection | None = None
        error: CacheError | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(path, isolation_level=None, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # WAL: a killed process loses nothing
            db.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            error = state_error(path, exc, "cannot open the watch state")
        if error is not None:  # raised here: no traceback keeps the closed file open
            if db is not None:
                db.close()
            raise error
        assert db is not None
        self.db = db
        self.path = path
        owner = self.get("source")
        if owner is None:
            self.set_many({"source": f"{url} {project}"})
        elif owner != f"{url} {project}":
            raise ConfigError(f"{path} belongs to {owner}, not to {url} {project}")

    def close(self) -> None:
        self.db.close()

    # -- meta and counts ------------------------------------------------------------------

    def get(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_many(self, values: dict[str, str]) -> None:
        with self._transaction():
            self._set(values)

    def _set(self, values: dict[str, str]) -> None:
        self.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", values.items())

    def _count(self, name: str, n: int) -> None:
        if n:
            self.db.execute(
                "INSERT INTO counts VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET n = n + ?",
                (name, n, n),
            )

    def counts(self) -> dict[str, int]:
        return dict(self.db.execute("SELECT name, n FROM counts").fetchall())

    def _transaction(self) -> Any:
        return _Transaction(self.db)

    # -- taking spans in ------------------------------------------------------------------

    def take(
        self,
        spans: Sequence[tuple[int, str, float, float, bytes]],
        cursor: str,
        window_of: Any,
        unusable: int = 0,
        *,
        newest: float | None = None,
        now: float | None = None,
    ) -> Taken:
        """Keep a page's spans ((number, trace, start, end, record), in id order) and move the
        cursor past them, together (``unusable``: the page's spans without a trace id or
        times, counted). ``window_of(start)`` gives a new trace's window."""
        kept = new = late = 0
        with self._transaction():
            for number, trace_id, start, end, record in spans:
                row = self.db.execute(
                    "SELECT state FROM traces WHERE trace_id = ?", (trace_id,)
                ).fetchone()
                if row is not None and row[0] != "open":
                    late += 1  # its trace was judged already: counted, not judged again
                    continue
                if row is None:
                    new += 1
                    self.db.execute(
                        "INSERT INTO traces (trace_id, first_seq, start, activity, state, window)"
                        " VALUES (?, ?, ?, ?, 'open', ?)",
                        (trace_id, number, start, end, window_of(start)),
                    )
                else:
                    self.db.execute(
                        "UPDATE traces SET start = min(start, ?), activity = max(activity, ?)"
                        " WHERE trace_id = ?",
                        (start, end, trace_id),
                    )
                cur = self.db.execute(
                    "INSERT OR IGNORE INTO spans VALUES (?, ?, ?)", (number, trace_id, record)
                )
                kept += cur.rowcount
            self._count("lateSpans", late)
            self._count("unusableSpans", unusable)
            marks = {"cursor": cursor}
            if newest is not None and now is not None:
                marks["lastNew"] = repr(now)
                if newest > float(self.get("watermark") or "-inf"):
                    marks["watermark"] = repr(newest)
            self._set(marks)
        return Taken(kept, new, late)

    def horizon(self, polled: float | None, idle_s: float) -> float:
        """The time traces are idle against (see :mod:`ragbatch.watch._loop`): the end of the
        newest span taken in; ``polled`` (a poll that reached the newest span) once no new span
        has come for ``idle_s``."""
        watermark = float(self.get("watermark") or "-inf")
        last_new = float(self.get("lastNew") or "-inf")
        if polled is not None and polled - last_new >= idle_s:
            return max(watermark, polled)
        return watermark

    # -- judging --------------------------------------------------------------------------

    def idle(self, before: float, now: float, limit: int) -> list[str]:
        """Open traces idle since ``before`` (and not waiting for a retry), oldest first."""
        rows = self.db.execute(
            "SELECT trace_id FROM traces WHERE state = 'open' AND activity <= ? AND retry_at <= ?"
            " ORDER BY first_seq LIMIT ?",
            (before, now, limit),
        ).fetchall()
        return [str(r[0]) for r in rows]

    def records(self, trace_ids: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
        """Each trace's span records, in the order Phoenix stored them."""
        out: dict[str, list[dict[str, Any]]] = {}
        for trace_id in trace_ids:
            rows = self.db.execute(
                "SELECT record FROM spans WHERE trace_id = ? ORDER BY seq", (trace_id,)
            ).fetchall()
            out[trace_id] = [orjson.loads(r[0]) for r in rows]
        return out

    def judged(
        self,
        verdicts: dict[str, list[dict[str, Any]]],
        skipped: dict[str, str],
        retry: dict[str, float],
        spent: float,
        now: float,
    ) -> None:
        """Commit a batch: each judged trace's annotations into the outbox, the traces left
        out (sampled out, unreadable: their spans dropped), the traces to judge again later
        (``retry``: when) and what the batch spent."""
        with self._transaction():
            for trace_id, records in verdicts.items():
                self.db.execute(
                    "UPDATE traces SET state = 'judged', judged_at = ? WHERE trace_id = ?",
                    (now, trace_id),
                )
                self.db.executemany(
                    "INSERT INTO outbox (trace_id, record) VALUES (?, ?)",
                    ((trace_id, orjson.dumps(r)) for r in records),
                )
            for trace_id, reason in skipped.items():
                self.db.execute(
                    "UPDATE traces SET state = 'skipped', judged_at = ?, reason = ?"
                    " WHERE trace_id = ?",
                    (now, reason, trace_id),
                )
                self.db.execute("DELETE FROM spans WHERE trace_id = ?", (trace_id,))
                self._count(reason, 1)
            for trace_id, when in retry.items():
                self.db.execute(
                    "UPDATE traces SET attempts = attempts + 1, retry_at = ? WHERE trace_id = ?",
                    (when, trace_id),
                )
            if spent > 0:
                self.db.execute("INSERT INTO spend VALUES (?, ?)", (now, spent))

    def ignore(self, trace_ids: Iterable[str], cursor: str, now: float) -> None:
        """Start at ``cursor``, the traces already there left alone: their later spans are
        dropped as late ones (they began before the watcher)."""
        with self._transaction():
            self.db.executemany(
                "INSERT OR IGNORE INTO traces (trace_id, first_seq, start, activity, state,"
                " window, judged_at, reason) VALUES (?, 0, 0, 0, 'reported', 0, ?, 'beforeStart')",
                ((t, now) for t in trace_ids),
            )
            self._set({"cursor": cursor})

    def attempts(self, trace_id: str) -> int:
        row = self.db.execute("SELECT attempts FROM traces WHERE trace_id = ?", (trace_id,))
        found = row.fetchone()
        return int(found[0]) if found else 0

    def spend_since(self, since: float) -> list[tuple[float, float]]:
        rows = self.db.execute("SELECT at, usd FROM spend WHERE at > ? ORDER BY at", (since,))
        return [(float(a), float(u)) for a, u in rows.fetchall()]

    # -- the outbox -----------------------------------------------------------------------

    def outbox(self, limit: int) -> list[tuple[int, dict[str, Any]]]:
        rows = self.db.execute(
            "SELECT seq, record FROM outbox ORDER BY seq LIMIT ?", (limit,)
        ).fetchall()
        return [(int(seq), orjson.loads(record)) for seq, record in rows]

    def stored(self, seqs: Sequence[int], now: float, dropped: int = 0) -> None:
        """Phoenix stored (or refused for good: ``dropped`` of them) these outbox entries; a
        trace whose last entry this was is stored at ``now``."""
        with self._transaction():
            traces = {
                str(r[0])
                for s in seqs
                for r in self.db.execute("SELECT trace_id FROM outbox WHERE seq = ?", (s,))
            }
            self.db.executemany("DELETE FROM outbox WHERE seq = ?", ((s,) for s in seqs))
            self.db.executemany(
                "UPDATE traces SET stored_at = ? WHERE trace_id = ? AND NOT EXISTS"
                " (SELECT 1 FROM outbox WHERE outbox.trace_id = traces.trace_id)",
                ((now, t) for t in traces),
            )
            self._count("annotationsStored", len(seqs) - dropped)
            self._count("annotationsRefused", dropped)

    def in_flight(self) -> int:
        """Traces taken in and not yet judged."""
        return int(
            self.db.execute("SELECT count(*) FROM traces WHERE state = 'open'").fetchone()[0]
        )

    def pending(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM outbox").fetchone()[0])

    # -- windows --------------------------------------------------------------------------

    def open_windows(self) -> list[float]:
        rows = self.db.execute(
            "SELECT DISTINCT window FROM traces WHERE state != 'reported' ORDER BY window"
        ).fetchall()
        return [float(r[0]) for r in rows]

    def window_busy(self, window: float) -> bool:
        """Whether a trace of the window is still open or has annotations not yet stored."""
        row = self.db.execute(
            "SELECT 1 FROM traces t WHERE t.window = ? AND (t.state = 'open' OR EXISTS"
            " (SELECT 1 FROM outbox o WHERE o.trace_id = t.trace_id)) LIMIT 1",
            (window,),
        ).fetchone()
        return row is not None

    def window_traces(self, window: float) -> tuple[list[str], dict[str, int]]:
        """The judged traces of a window (in the order first seen) and its traces by state."""
        judged = self.db.execute(
            "SELECT trace_id FROM traces WHERE window = ? AND state = 'judged' ORDER BY first_seq",
            (window,),
        ).fetchall()
        states = self.db.execute(
            "SELECT coalesce(reason, state), count(*) FROM traces WHERE window = ?"
            " GROUP BY coalesce(reason, state)",
            (window,),
        ).fetchall()
        return [str(r[0]) for r in judged], {str(s): int(n) for s, n in states}

    def reported(self, window: float, now: float) -> None:
        """The window's report is written: its spans go, its traces are remembered a while."""
        with self._transaction():
            self.db.execute(
                "DELETE FROM spans WHERE trace_id IN"
                " (SELECT trace_id FROM traces WHERE window = ?)",
                (window,),
            )
            self.db.execute(
                "UPDATE traces SET state = 'reported' WHERE window = ? AND state != 'open'",
                (window,),
            )
            self.db.execute(
                "DELETE FROM traces WHERE state = 'reported' AND judged_at < ?",
                (now - KEEP_SEEN_S,),
            )
            self.db.execute("DELETE FROM spend WHERE at < ?", (now - KEEP_SEEN_S,))
            self._set({"reportedUntil": repr(window)})


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on an error)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, value: object, tb: object) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")
