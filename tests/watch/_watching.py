"""What the watch tests share: the command line, and what Phoenix holds afterwards."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ragbatch.testing.otlp_app import SentTrace
from ragbatch.testing.phoenix import PhoenixServer


def watch_argv(url: str, project: str, tmp: Path, *extra: str) -> list[str]:
    """``ragbatch watch`` for ``project``, its cache and reports under ``tmp``."""
    return [
        "watch", "--phoenix", url, "--project", project, "--cache-dir", str(tmp / "cache"),
        "--report-dir", str(tmp / "reports"), *extra,
    ]  # fmt: skip


def command(*argv: str) -> list[str]:
    """The argv of a separate ``ragbatch`` process."""
    return [sys.executable, "-m", "ragbatch", *argv]


def annotations_on(
    phoenix: PhoenixServer, project: str, traces: Iterable[SentTrace]
) -> list[dict[str, Any]]:
    """Every annotation on the traces' spans."""
    return phoenix.span_annotations(project, [s for t in traces for s in t.span_ids])


def per_span(found: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    """How many annotations each (span, name) has."""
    return Counter((a["span_id"], a["name"]) for a in found)


def check_exactly_once(
    phoenix: PhoenixServer, project: str, traces: list[SentTrace]
) -> list[dict[str, Any]]:
    """Every trace's root span has exactly one ``ragbatch`` annotation and no span has two of
    one name; returns them."""
    found = annotations_on(phoenix, project, traces)
    counts = per_span(found)
    doubled = {key: n for key, n in counts.items() if n != 1}
    assert not doubled, f"annotated more than once: {doubled}"
    missing = [t.trace_id for t in traces if counts[(t.root_span_id, "ragbatch")] != 1]
    assert not missing, f"{len(missing)} traces without their verdict: {missing[:5]}"
    return found
