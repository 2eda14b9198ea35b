"""Output files: checked before any work is done, written atomically (file I/O).

Every file ragbatch writes (report, ``--rows-out``, views, partials, run records, the tools'
outputs) goes through here, from every layer, which is why this module sits just above
``core`` and below ``data``, ``providers`` and ``report`` (``tests/test_layers.py``).

:func:`check_output` refuses a path that cannot become a file (an existing directory, a
parent that is a file, a directory without write permission) before a run spends anything.
:class:`AtomicFile` writes under a new temporary name beside the target and renames it over
the target at the end, so a reader never sees half a file; on any failure it removes the
temporary file and leaves the target as it was. Failures are one :class:`ConfigError`
(exit 2), never a traceback.

The temporary file is created exclusively (``O_CREAT | O_EXCL | O_NOFOLLOW``) under a fresh
random name: whatever already sits beside the target, a planted symlink included, is never
opened, followed or truncated, and a file left by a killed run never blocks the next one.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from ragbatch.core import ConfigError

# os.open flags of a temporary file: a new file or nothing (O_NOFOLLOW is 0 where unknown).
_EXCLUSIVE = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_ATTEMPTS = 100


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


def temporaries_of(path: Path, suffix: str = "tmp") -> list[Path]:
    """The temporary files :class:`AtomicFile` (with ``suffix``) may have left beside ``path``
    (a killed process leaves one), for a caller that owns ``path`` to remove."""
    pattern = f"{glob.escape(str(path.parent))}/.{glob.escape(path.name)}.*.{suffix}"
    return [Path(found) for found in glob.glob(pattern, include_hidden=True)]


def create_exclusive(path: Path, suffix: str = "tmp") -> tuple[Path, BinaryIO]:
    """A new, empty file ``.<name>.<random>.<suffix>`` beside ``path``, open for writing.

    Created with ``O_EXCL | O_NOFOLLOW``, so an existing entry of that name (a symlink
    planted there included) is never opened; the mode follows the umask as ``open`` does
    (``tempfile.mkstemp`` would force 0600 on a report meant to be shared).
    """
    for _ in range(_ATTEMPTS):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.{suffix}")
        try:
            fd = os.open(tmp, _EXCLUSIVE, 0o666)
        except FileExistsError:
            continue
        return tmp, os.fdopen(fd, "wb")
    raise FileExistsError(f"no free temporary name beside {path}")


def _sync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable; a file system that cannot is left as it is."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class AtomicFile:
    """A binary file written beside ``path`` under a new temporary name (same file system, so
    the final rename is atomic) that becomes ``path`` on :meth:`commit`; :meth:`discard` (or
    any failure) removes it and leaves ``path`` as it was."""

    def __init__(self, path: Path, suffix: str = "tmp") -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.tmp, self._handle = create_exclusive(path, suffix)
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
        """Flush, fsync and rename over ``path``: after a crash the file is whole or absent."""
        try:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            self.tmp.replace(self.path)
        except OSError as exc:
            self.discard()
            raise _failed(self.path, exc) from None
        _sync_directory(self.path.parent)

    def discard(self) -> None:
        """Remove the temporary file (also when closing it fails: a full disk)."""
        with contextlib.suppress(OSError):
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
