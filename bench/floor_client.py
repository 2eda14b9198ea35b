"""The floor: the least a useful client does for the bench's rows (no ragbatch import).

    python bench/floor_client.py live DATASET TEMPLATE BASE_URL KEY CONCURRENCY OUT RECORD
    python bench/floor_client.py replay CACHE_DIR OUT RECORD

``live`` reads the JSONL dataset, builds for each row the request body ragbatch sends (the
model and questions come from TEMPLATE, captured from ragbatch's own ``build_request`` by
``bench_ceiling.py``, which also checks that the bodies built here are byte-identical to
ragbatch's), POSTs it to ``/v1/systemone`` with one ``aiohttp.ClientSession`` at CONCURRENCY
calls in flight, parses each reply with orjson and writes one JSON line per row to OUT.
No retries, cache, report or validation beyond a status check: what every client must pay.

``replay`` is the floor of a warm ``--offline`` replay: it reads every entry of a ragbatch
cache directory (diskcache's SQLite table, values stored in the row), decodes it (header
line and reply JSON) and writes one JSON line per entry.

RECORD receives ``{"rows": n, "rowsPerSecond": r}``, the rate of the work itself (after the
imports), as ragbatch's run record gives it.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson


def body_for(row: dict[str, Any], template: dict[str, Any]) -> bytes:
    """The request ragbatch sends for ``row`` (bench rows: contexts, no reference answer)."""
    state = {
        "question": row["question"],
        "contexts": [{"id": c["id"], "text": c["text"]} for c in row["contexts"]],
        "answer": row["answer"],
    }
    return orjson.dumps(
        {"model": template["model"], "state": state, "questions": template["questions"]}
    )


async def live(
    dataset: Path, template: dict[str, Any], base_url: str, key: str, concurrency: int, out: Path
) -> int:
    url = base_url.rstrip("/") + "/v1/systemone"
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    lines = iter(dataset.open("rb"))
    done = 0
    with out.open("wb") as sink:
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def worker() -> None:
                nonlocal done
                for line in lines:  # one shared iterator: each line goes to one worker
                    row = orjson.loads(line)
                    body = body_for(row, template)
                    async with session.post(url, data=body, headers=headers) as response:
                        data = await response.read()
                    if response.status != 200:
                        raise SystemExit(f"HTTP {response.status} for row {row['id']}")
                    reply = orjson.loads(data)
                    sink.write(
                        orjson.dumps(
                            {"id": row["id"], "answers": reply["answers"], "usage": reply["usage"]}
                        )
                        + b"\n"
                    )
                    done += 1

            await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done


def replay(cache_dir: Path, out: Path) -> int:
    con = sqlite3.connect(f"{(cache_dir / 'cache.db').resolve().as_uri()}?mode=ro", uri=True)
    done = 0
    with out.open("wb") as sink:
        for (value,) in con.execute("SELECT value FROM Cache WHERE raw = 1 AND mode = 1"):
            _, _, body = value.partition(b"\n")  # header line, then the reply JSON
            reply = orjson.loads(body)
            sink.write(orjson.dumps({"answers": reply["answers"], "usage": reply["usage"]}) + b"\n")
            done += 1
    con.close()
    return done


def main() -> None:
    mode, *args = sys.argv[1:]
    started = time.perf_counter()
    if mode == "live":
        dataset, template, base_url, key, concurrency, out, record = args
        rows = asyncio.run(
            live(
                Path(dataset), orjson.loads(Path(template).read_bytes()), base_url, key,
                int(concurrency), Path(out),
            )
        )  # fmt: skip
    else:
        cache_dir, out, record = args
        rows = replay(Path(cache_dir), Path(out))
    rate = rows / (time.perf_counter() - started)
    Path(record).write_bytes(orjson.dumps({"rows": rows, "rowsPerSecond": rate}))


if __name__ == "__main__":
    main()
