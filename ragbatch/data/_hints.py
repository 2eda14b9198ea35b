"""What to tell a user whose dataset cannot be read as given.

:func:`foreign_shape` looks at the first record that failed and names the ``--format`` that
reads it (``looks like a ragas export: add --format ragas``); :func:`missing_default` explains
a run started without DATASET in a directory that has no ``datasets/rag-fixture.jsonl``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

# What `ragbatch run` reads when no DATASET is given (relative: the current directory's).
DEFAULT_DATASET = Path("datasets/rag-fixture.jsonl")

# (format, what it looks like) in the order checked; each test sees one JSON object.
_SHAPES: tuple[tuple[str, str, Any], ...] = (
    ("openinference", "an OTLP trace export", lambda r: "resourceSpans" in r),
    ("openinference", "a Phoenix spans export",
     lambda r: "context.trace_id" in r or (isinstance(r.get("context"), dict)
     and "trace_id" in r["context"])),
    ("langfuse", "a Langfuse export",
     lambda r: "observations" in r or ("traceId" in r and "type" in r)
     or isinstance(r.get("data"), list)),
    ("ragas", "a ragas export", lambda r: "user_input" in r or "retrieved_contexts" in r
     or _strings(r.get("contexts"))),
    ("deepeval", "a deepeval export",
     lambda r: "input" in r and ("actual_output" in r or "actualOutput" in r)),
)  # fmt: skip


def _strings(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def shape_hint(record: Any) -> str | None:
    """``looks like a ragas export: add --format ragas`` for a known foreign record."""
    if isinstance(record, list) and record:
        found = shape_hint(record[0])
        return found and found.replace(" export", " export (a JSON array)", 1)
    if not isinstance(record, dict):
        return None
    for fmt, what, test in _SHAPES:
        if test(record):
            return f"looks like {what}: add --format {fmt}"
    return None


def foreign_shape(raw: bytes | str) -> str | None:
    """The hint for one JSONL line, or None (not JSON, or no known shape)."""
    try:
        return shape_hint(orjson.loads(raw))
    except orjson.JSONDecodeError:
        return None


def missing_default(path: Path) -> str:
    """The hint for a dataset that does not exist: when it is the default, say so and where."""
    if path != DEFAULT_DATASET:
        return ""
    return (
        f" (the default dataset, looked for in {Path.cwd()}; pass your dataset's path: "
        "ragbatch run DATASET)"
    )
