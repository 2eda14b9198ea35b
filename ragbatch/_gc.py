"""Fewer cyclic garbage collections while a run streams rows (process-wide state; imports
nothing heavy, so the ``ragbatch`` program enters it before its own imports).

CPython's cyclic collector runs its youngest generation every 700 net new container objects
(``gc.get_threshold()``'s first number) and every object that survives one is scanned again by
the older generations' collections. A live run keeps thousands of objects alive for a while:
every row in flight holds its row, request, client and task objects for a whole call (a
quarter of a second at 256 in flight), and the report keeps each row's result. So they survive
collections, age into the older generations, and every collection of those scans them all
again. Timed with ``gc.callbacks`` in one 8,000-row run at 256 in flight: 1,160 young, 105
middle and 10 full collections, 2.0 s of CPU of the run's 8.2 s (a full collection 116 ms).

Refcounting frees nearly everything a row allocates; what only the cyclic collector can free
is rare here (about one object a row: 10,449 left unreachable by the same run with the
collector off). :func:`collect_less` raises the youngest generation's threshold to
:data:`YOUNG_THRESHOLD` for the run: the same run then made 2 young collections and no older
ones (0.13 s), and cycles are still collected, every 100,000 net new objects. The thresholds
are the process's: they are restored when the last run of the process that raised them ends
(runs may overlap in threads of one process, through the Python API).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 100_000

_lock = threading.Lock()
_runs = 0
_saved: tuple[int, int, int] | None = None


@contextmanager
def collect_less() -> Iterator[None]:
    """The youngest generation collected every :data:`YOUNG_THRESHOLD` net new objects (or
    as the process asked, if that is less often or never) while this is entered."""
    global _runs, _saved
    with _lock:
        if _runs == 0:
            _saved = gc.get_threshold()
            young, *older = _saved
            if young:  # 0: automatic collection is off, and stays off
                gc.set_threshold(max(young, YOUNG_THRESHOLD), *older)
        _runs += 1
    try:
        yield
    finally:
        with _lock:
            _runs -= 1
            if _runs == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None
