"""``ragbatch watch``: production traces judged as they arrive in a Phoenix server, verdicts
written back as span annotations exactly once, rolling reports with drift alerts (I/O).

Layer: above ``run`` (it judges with a run's judge), below ``cli``. The front door:
:func:`watch` runs the loop (:mod:`ragbatch.watch._loop`) against one Phoenix project
(:mod:`ragbatch.watch._phoenix`) with its state in the cache directory
(:mod:`ragbatch.watch._state`) and writes a report a window (:mod:`ragbatch.watch._window`).
Guide: docs/guides/continuous-evaluation.md.
"""

from __future__ import annotations

from ragbatch.watch._entry import parse_duration, parse_instant, watch
from ragbatch.watch._loop import WatchSettings
from ragbatch.watch._phoenix import API_KEY_ENV
from ragbatch.watch._window import WindowSettings

__all__ = [
    "API_KEY_ENV",
    "WatchSettings",
    "WindowSettings",
    "parse_duration",
    "parse_instant",
    "watch",
]
