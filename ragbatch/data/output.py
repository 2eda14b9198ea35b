"""Output files: checked before any work is done, written atomically (file I/O).

Every file ragbatch writes (report, ``--rows-out``, views, partials, the tools' outputs) goes
through here. :func:`check_output` refuses a path that cannot become a file (an existing
directory, a parent that is a file, a directory without write permission) before a run spends
anything; :func:`atomic_file` writes under a temporary name beside the target and renames it
at the end, so a reader never sees half a file, and on any failure removes the temporary file
and leaves the target as it was. Failures are one :class:`ConfigError` (exit 2), never a
traceback.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from ragbatch.core.errors import ConfigError


def _existing_ancestor(path: Path) -> Path:
    """The nearest ancestor of ``path`` that exists (``path`` is absolute)."""
    for parent in path.parents:
        if parent.exists():
            return parent
    return Path(path.anchor)


def check_output(path: Path, option: str) -> None:
    """Raise a ConfigError naming ``option`` when ``path`` cannot be written as a file."""
    if path.is_dir():
        raise ConfigError(f"{option} {path}: is a directory; give a file path")
    where = _existing_ancestor(path.absolute())
    if not where.is_dir():
        raise ConfigError(f"{option} {path}: {where} is not a directory")
    if not os.access(where, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {path}: no permission to write in {where}")


def _failed(path: Path, exc: OSError) -> ConfigError:
    return ConfigError(f"cannot write {path}: {exc.strerror or exc}")


def temporary_of(path: Path, suffix: str = "tmp") -> Path:
    """Where :class:`AtomicFile` writes ``path`` until it is committed."""
    return path.with_name(f".{path.name}.{suffix}")


class AtomicFile:
    """A binary file written beside ``path`` as ``.<name>.<suffix>`` (same file system, so the
    final rename is atomic) that becomes ``path`` on :meth:`commit`; :meth:`discard` (or any
    failure) removes it and leaves ``path`` as it was."""

    def __init__(self, path: Path, suffix: str = "tmp") -> None:
        self.path = path
        self.tmp = temporary_of(path, suffix)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._handle: BinaryIO = self.tmp.open("wb")
        except OSError as exc:
            raise _failed(path, exc) from None

    def write(self, data: bytes, *, flush: bool = False) -> None:
        try:
            self._handle.write(data)
            if flush:
                self._handle.flush()
        except OSError as exc:
            self.discard()
            raise _failed(self.path, exc) from None

    def commit(self) -> None:
        try:
            self._handle.close()
            self.tmp.replace(self.path)
        except OSError as exc:
            self.discard()
            raise _failed(self.path, exc) from None

    def discard(self) -> None:
        with contextlib.suppress(OSError):  # a full disk fails the flush of what is dropped
            self._handle.close()
        self.tmp.unlink(missing_ok=True)


@contextmanager
def atomic_file(path: Path, suffix: str = "tmp") -> Iterator[AtomicFile]:
    """An :class:`AtomicFile` committed when the block ends without an error, else discarded."""
    file = AtomicFile(path, suffix)
    try:
        yield file
    except BaseException:
        file.discard()
        raise
    file.commit()


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a reader never sees half a file."""
    with atomic_file(path) as file:
        file.write(data)
