"""Other owners of a cache directory, as another process would be: one that holds a lease (so
a cache opened meanwhile leases in rows, not alone) and one that waits for its keys."""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

from ragbatch.providers.cache import ReplyCache
from ragbatch.providers.cache._lease import Leases


@contextmanager
def another_owner(directory: Path) -> Iterator[Leases]:
    """Within: another live owner holds a lease in ``directory`` (of a key nobody asks for),
    so a cache opened meanwhile writes a lease row for each key, as it does beside another
    process."""
    directory.mkdir(parents=True, exist_ok=True)
    ReplyCache(directory).close()  # the cache.db
    owner = Leases(directory / "cache.db")
    assert owner.acquire("another process's key")
    try:
        yield owner
    finally:
        owner.close()


def acquire_within(cache: ReplyCache, keys: Collection[str], seconds: float = 10) -> set[str]:
    """The leases of ``keys`` ``cache`` holds once it holds them all, or after ``seconds``:
    a newcomer beside an owner alone asks it to lease in rows and takes nothing until it has."""
    deadline = time.monotonic() + seconds
    held: set[str] = set()
    while True:
        held |= cache.acquire_leases([key for key in keys if key not in held])
        if held == set(keys) or time.monotonic() > deadline:
            return held
        time.sleep(0.01)
