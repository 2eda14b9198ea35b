"""``--max-cost`` counts every attempt that was sent: timeouts, resets and cut replies included.

A sent request may have been billed whatever became of its reply, so the worst case (every
request the server received, billed at its real token count) stays within the limit, and a
run stopped by it exits 5. Only a reply that proves no billing (a 4xx, here 429) is free.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragbatch.core._pricing import PER_MILLION, parse_pricing
from ragbatch.testing import JevServer
from ragbatch.testing.jev_server import Fault, count_input_tokens
from tests.run.test_operations import PRICING, live, report
from tests.run.test_resume import StartServer

CAP = 0.0005  # about a quarter of the fixture's cost


def worst_case_usd(server: JevServer) -> float:
    """What the server could have billed: every request it received, in full."""
    price = parse_pricing(Path(PRICING).read_bytes(), PRICING).price_for("jev-1.13.0")
    assert price is not None
    tokens = sum(count_input_tokens(b["state"], b["questions"]) for b in server.bodies)
    return tokens * price.input_per_million / PER_MILLION


def always(kind: str) -> Any:
    return lambda index, body: Fault(kind=kind)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "extra"),
    [
        ({"latency_s": 0.6}, ["--timeout", "0.2"]),  # every attempt times out
        ({"fault_fn": always("drop")}, []),  # the connection is reset
        ({"fault_fn": always("truncated")}, []),  # a 200 cut halfway (not JSON)
    ],
    ids=["timeout", "reset", "cut"],
)
def test_failed_attempts_count_against_the_limit(
    start_jev_server: StartServer, tmp_path: Path, options: dict[str, Any], extra: list[str]
) -> None:
    server = start_jev_server(**options)
    out = tmp_path / "r.json"
    code, _, err = live(
        server.base_url, tmp_path / "cache", out, "--max-cost", str(CAP), "--max-retries", "2",
        "--concurrency", "8", *extra,
    )  # fmt: skip
    assert code == 5, err
    assert 0 < worst_case_usd(server) <= CAP, (len(server.bodies), worst_case_usd(server))
    assert report(out)["incomplete"]["rowsNotEvaluated"] > 0


def test_a_throttled_attempt_is_not_counted(start_jev_server: StartServer, tmp_path: Path) -> None:
    # 30 refusals (429) before the 48 answers: counted at their estimate, they would pass a
    # limit that the 48 answers alone stay within
    refuse = Fault(kind="status", status=429, retry_after_ms=1)
    server = start_jev_server(fault_fn=lambda i, body: refuse if i < 60 and i % 2 == 0 else None)
    code, _, err = live(
        server.base_url, tmp_path / "cache", tmp_path / "r.json", "--max-cost", "0.0032",
        "--concurrency", "1",
    )  # fmt: skip
    assert code == 0, err
    assert server.successful == 48 and server.responses_by_status[429] == 30
