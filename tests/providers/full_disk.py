"""A cache directory whose entries cannot be written, as on a full disk, while its leases can."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

# SQLite's own message for SQLITE_FULL, raised by SQLite itself for any row written to the
# entries' table, by any connection and any write path (diskcache's set or a batch INSERT).
FULL = "database or disk is full"


@contextmanager
def entries_refused(directory: Path) -> Iterator[None]:
    """Within: every write of an entry in ``directory``'s cache.db fails with SQLite's
    "database or disk is full"; the lease table is untouched."""
    with closing(sqlite3.connect(directory / "cache.db")) as con:
        for event in ("INSERT", "UPDATE"):
            con.execute(
                f"CREATE TRIGGER full_{event.lower()} BEFORE {event} ON Cache"
                f" BEGIN SELECT RAISE(FAIL, '{FULL}'); END"
            )
        con.commit()
    try:
        yield
    finally:
        with closing(sqlite3.connect(directory / "cache.db")) as con:
            con.execute("DROP TRIGGER full_insert")
            con.execute("DROP TRIGGER full_update")
            con.commit()
