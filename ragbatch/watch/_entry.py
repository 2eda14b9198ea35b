"""One watcher from start to stop: state, judge, Phoenix client, signals (I/O).

:func:`watch` opens the state file, the judge (the run's preflight and provider chain) and
the Phoenix client, runs the loop until it ends or a signal stops it, and closes them on every
path. SIGTERM and SIGINT let the batch in hand finish (exit 0 and 130); a second one ends the
watcher at once (143 or 130; every commit is whole, so a restart goes on from there).
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import anyio

from ragbatch.core import ConfigError
from ragbatch.run import RunOptions, first_error, open_judge
from ragbatch.watch._loop import Watcher, WatchSettings
from ragbatch.watch._phoenix import PhoenixClient, check_phoenix_url
from ragbatch.watch._state import WatchState, state_error, state_path
from ragbatch.watch._window import WindowSettings

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*")


def parse_duration(text: str, option: str) -> float:
    """``90``, ``90s``, ``15m``, ``1h``, ``1d`` -> seconds (ConfigError if not one)."""
    match = _DURATION.fullmatch(text)
    if match is None or float(match[1]) <= 0:
        raise ConfigError(f"{option} {text!r}: a duration such as 3600, 90s, 15m, 1h or 1d")
    return float(match[1]) * _UNITS[match[2] or "s"]


def parse_instant(text: str, option: str) -> datetime:
    """ISO 8601; without an offset it is UTC (ConfigError if not a time)."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"{option} {text!r}: an ISO 8601 time such as 2026-12-07T06:00") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def check_cache(options: RunOptions) -> None:
    """The rolling report replays the judged traces from the reply cache: a live watcher
    without it would pay twice."""
    if options.jev.provider == "jev" and options.cache.mode in ("off", "refresh"):
        raise ConfigError(
            "ragbatch watch judges each window's traces again from the reply cache for its "
            "report: run it without --no-cache and --refresh"
        )


def check_report_dir(path: Path) -> None:
    """--report-dir made (if missing) and writable before anything is read or judged."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--report-dir {path}: is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--report-dir {path}: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"--report-dir {path}: no permission to write in it")


def watch(
    url: str,
    project: str,
    api_key: str | None,
    settings: WatchSettings,
    windows: WindowSettings,
    options: RunOptions,
    say: Callable[[str], None],
) -> int:
    """Watch one Phoenix project until stopped (or, with --once, until nothing idle is
    left); the exit code."""
    base = check_phoenix_url(url, allow_insecure_http=options.jev.allow_insecure_http)
    check_cache(options)
    if not 0.0 < settings.sample_rate <= 1.0:
        raise ConfigError(f"--sample-rate must lie in (0, 1], got {settings.sample_rate}")
    if settings.since and settings.until and settings.since >= settings.until:
        raise ConfigError("--since must come before --until")
    check_report_dir(windows.report_dir)
    client = PhoenixClient(base, project, api_key, timeout_s=options.retry.timeout)
    return anyio.run(_watch, base, project, client, settings, windows, options, say)


async def _watch(
    url: str,
    project: str,
    client: PhoenixClient,
    settings: WatchSettings,
    windows: WindowSettings,
    options: RunOptions,
    say: Callable[[str], None],
) -> int:
    state = WatchState(state_path(options.cache.cache_dir, url, project), url, project)
    error: BaseException
    try:
        return await _guarded(state, client, project, settings, windows, options, say)
    except BaseExceptionGroup as group:  # the loop's task groups: one error line, the cause
        error = _cause(group, state.path)
    except sqlite3.Error as exc:
        error = state_error(state.path, exc)
    finally:
        await client.aclose()
        state.close()
    # raised outside the except clauses: no chain holds the failed statements (and with them
    # the state file) open after the state is closed
    raise error


def _cause(group: BaseExceptionGroup[BaseException], path: Path) -> BaseException:
    """The error a task group's failure says: a RagbatchError (a refused key: exit 4), else
    the state file's (a full disk: exit 2); anything else is a bug and raised as it is."""
    error = first_error(group)
    if error is not None:  # said in one line: its frames are not kept
        return error.with_traceback(None)
    matched, _ = group.split(sqlite3.Error)
    failed: BaseException | None = matched
    while isinstance(failed, BaseExceptionGroup):
        failed = failed.exceptions[0]
    return group if failed is None else state_error(path, failed)


async def _guarded(
    state: WatchState,
    client: PhoenixClient,
    project: str,
    settings: WatchSettings,
    windows: WindowSettings,
    options: RunOptions,
    say: Callable[[str], None],
) -> int:
    judge = open_judge(options, f"phoenix:{project}", lambda m: say(f"warning: {m}"))
    heard: list[signal.Signals] = []
    try:
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:

            async def listen() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for signum in signals:
                        heard.append(signum)
                        if stop.is_set():
                            tg.cancel_scope.cancel()  # a second signal: at once
                        stop.set()
                        say(f"{signum.name}: finishing the batch in hand, then stopping")

            tg.start_soon(listen)
            watcher = Watcher(settings, windows, client, state, judge, say)
            code = await watcher.run(stop)
            tg.cancel_scope.cancel()
    finally:
        await judge.aclose()
    if heard:
        first = heard[0]
        return 130 if first == signal.SIGINT else (0 if len(heard) == 1 else 143)
    return code
