"""Swap a rebuilt cache directory in so that a crash at any moment loses nothing (file I/O).

``cache verify --repair`` builds the repaired store in a staging folder beside the cache and
swaps it in with two renames: cache -> old, staging -> cache. Between the two the cache
directory does not exist, so a process killed there (``kill -9``, a power cut) would leave
the next run an empty cache while the good entries sit in a hidden folder. The swap is
therefore journaled:

1. The staging store is complete, closed and fsynced.
2. A journal ``.<name>.swap.json`` beside the directory names the staging and old folders
   (written atomically and fsynced, so it is whole or absent).
3. cache -> old, staging -> cache, the old folder removed, the journal removed.

Whoever opens the directory next (a run, ``--offline``, ``cache verify``, ``cache merge``:
:mod:`ragbatch.providers.cache._store` calls :func:`finish_interrupted_swap` first) finds the
journal and rolls the swap forward from whatever step it stopped at: the staging store is
complete by step 1, so finishing is always possible and is what the repair was for. An
exclusive ``flock`` on the parent directory keeps a swap and its recovery to one process at a
time (a lock file would be left behind beside the cache; the kernel drops the lock of a
killed process).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

from ragbatch._files import write_bytes
from ragbatch.core import CacheError, RagbatchError


def journal_of(directory: Path) -> Path:
    """Where the journal of a swap of ``directory`` lies while the swap is under way."""
    return directory.with_name(f".{directory.name}.swap.json")


@contextmanager
def _swap_lock(directory: Path) -> Iterator[None]:
    """Hold the swap lock of ``directory`` (its parent's ``flock``): held only for a few
    renames and a removal, so a waiter waits briefly."""
    try:
        fd = os.open(directory.parent, os.O_RDONLY)
    except OSError as exc:
        raise CacheError(f"cannot lock {directory} to swap it: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def sync_tree(directory: Path) -> None:
    """fsync every file of ``directory`` and the directory itself (a staging store, before
    the journal says it is complete)."""
    for path in (*sorted(p for p in directory.rglob("*") if p.is_file()), directory):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _sync_parent(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _roll_forward(directory: Path, staging: Path, old: Path) -> None:
    """Finish a journaled swap from any step (the journal is removed last)."""
    if staging.exists():
        if directory.exists():  # stopped before the first rename
            if old.exists():
                raise CacheError(
                    f"an interrupted repair of {directory} cannot be finished: {directory}, "
                    f"{staging} and {old} all exist; keep the one you trust as {directory} "
                    f"and remove {journal_of(directory)}"
                )
            os.replace(directory, old)
        os.replace(staging, directory)
    elif not directory.exists() and old.exists():  # no staging to finish with: roll back
        os.replace(old, directory)
    _sync_parent(directory)
    shutil.rmtree(old, ignore_errors=True)
    journal_of(directory).unlink(missing_ok=True)
    _sync_parent(directory)


def swap_in(directory: Path, staging: Path, old: Path) -> None:
    """Replace ``directory`` by the complete store in ``staging`` (journaled: see above)."""
    journal = journal_of(directory)
    with _swap_lock(directory):
        try:
            write_bytes(journal, orjson.dumps({"staging": staging.name, "old": old.name}))
            _roll_forward(directory, staging, old)
        except (OSError, RagbatchError) as exc:
            message = exc.strerror if isinstance(exc, OSError) else exc
            raise CacheError(
                f"cannot replace {directory} by its repaired copy ({message or exc}); the "
                f"repaired copy is {staging}"
            ) from None


def finish_interrupted_swap(directory: Path) -> None:
    """Finish a swap of ``directory`` that a killed process left half done (nothing to do,
    and one ``stat``, when there is no journal)."""
    journal = journal_of(directory)
    if not journal.exists():
        return
    with _swap_lock(directory):
        try:
            plan = orjson.loads(journal.read_bytes())
            staging, old = (directory.with_name(str(plan[k])) for k in ("staging", "old"))
        except FileNotFoundError:
            return  # another process finished it while this one waited for the lock
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise CacheError(f"cannot read the repair journal {journal}: {exc}") from None
        try:
            _roll_forward(directory, staging, old)
        except OSError as exc:
            raise CacheError(
                f"an interrupted repair of {directory} cannot be finished ({exc.strerror or exc});"
                f" the repaired entries are in {staging}"
            ) from None
