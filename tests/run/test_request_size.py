"""Requests over the documented size limits are never sent: the row fails as request-too-large.

64k estimated input tokens per request and 32k for the state plus the longest question
(jev-api.md), both configurable; ``ragbatch estimate`` lists the rows that would fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ragbatch.core._questions import RequestLimits, build_request, oversize_reason
from ragbatch.data._jsonl import JsonlReader
from tests.conftest import JEV_KEY
from tests.run.test_operations import DATASET, PRICING, cli
from tests.run.test_resume import StartServer

ROWS = [orjson.loads(line) for line in Path(DATASET).read_bytes().splitlines()[:4]]
HUGE = "huge-row"  # ~75k tokens of context: over the 64k per request
LONG = "long-state"  # ~35k tokens: over 32k for state + longest question, under 64k in all
PER_REQUEST = (
    "request too large: ~75,945 input tokens estimated, over the limit of 64,000 tokens per "
    "request (--max-request-tokens); not sent"
)
STATE_QUESTION = (
    "request too large: the state and the longest question are ~35,183 tokens estimated, over "
    "the limit of 32,000 (--max-state-question-tokens); not sent"
)


def with_context(row: dict[str, Any], row_id: str, chars: int) -> dict[str, Any]:
    big: dict[str, Any] = orjson.loads(orjson.dumps(row))
    big["id"] = row_id
    big["contexts"][0]["text"] = ("lorem ipsum " * (chars // 12 + 1))[:chars]
    return big


def dataset(tmp_path: Path) -> Path:
    rows = [ROWS[0], with_context(ROWS[1], HUGE, 300_000), ROWS[2]]
    rows += [with_context(ROWS[3], LONG, 140_000)]
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def test_oversize_reason_names_the_limit(tmp_path: Path) -> None:
    requests = {r.id: build_request(r, "jev-1.13.0") for r in JsonlReader(dataset(tmp_path))}
    limits = RequestLimits()
    assert oversize_reason(requests[ROWS[0]["id"]], limits) is None
    assert oversize_reason(requests[HUGE], limits) == PER_REQUEST
    assert oversize_reason(requests[LONG], limits) == STATE_QUESTION
    assert oversize_reason(requests[HUGE], RequestLimits(100_000, 100_000)) is None
    assert oversize_reason(requests[ROWS[0]["id"]], RequestLimits(10, 10_000)) is not None


def run(server_url: str, tmp_path: Path, data: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "r.json"
    code, _, err = cli(
        "run", str(data), "--provider", "jev", "--base-url", server_url, "--model", "jev-1.13.0",
        "--cache-dir", str(tmp_path / "cache"), "--out", str(out), "--pricing", PRICING,
        "--quiet", *extra, env={"TYPESAFE_API_KEY": JEV_KEY},
    )  # fmt: skip
    assert out.exists(), err
    report: dict[str, Any] = orjson.loads(out.read_bytes())
    return code, report


def test_a_request_over_a_limit_is_not_sent_and_fails_its_row(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    server = start_jev_server()
    data = dataset(tmp_path)
    code, report = run(server.base_url, tmp_path, data)
    assert code == 3  # rows failed
    errors = {r["id"]: r.get("error") for r in report["rows"]}
    assert errors[ROWS[0]["id"]] is None and errors[ROWS[2]["id"]] is None
    assert errors[HUGE]["kind"] == errors[LONG]["kind"] == "request-too-large"
    assert (errors[HUGE]["message"], errors[LONG]["message"]) == (PER_REQUEST, STATE_QUESTION)
    assert server.requests_total == 2  # only the two rows that fit
    assert report["modes"]["jevOnly"]["failures"]["byKind"] == {"request-too-large": 2}

    # Raised limits: the same rows are sent.
    code, report = run(
        server.base_url, tmp_path, data,
        "--max-request-tokens", "200000", "--max-state-question-tokens", "200000",
    )  # fmt: skip
    assert code == 0 and server.requests_total == 4  # the two fitting rows were cached


def test_a_request_over_a_limit_does_not_use_up_the_budget(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    # the huge row's reservation alone (~76k tokens x 1.5) would pass --max-cost 0.002
    server = start_jev_server()
    code, report = run(server.base_url, tmp_path, dataset(tmp_path), "--max-cost", "0.002")
    assert code == 3 and "incomplete" not in report
    kinds = report["modes"]["jevOnly"]["failures"]["byKind"]
    assert kinds == {"request-too-large": 2} and server.requests_total == 2


@pytest.mark.parametrize("json_out", [True, False])
def test_estimate_lists_the_rows_over_a_limit(tmp_path: Path, json_out: bool) -> None:
    data = dataset(tmp_path)
    args = ["estimate", str(data), "--model", "jev-1.13.0", "--cache-dir", str(tmp_path / "c")]
    code, out, err = cli(*args, "--pricing", PRICING, *(["--json"] if json_out else []))
    assert code == 0, err
    if json_out:
        result = orjson.loads(out)
        assert result["tooLarge"] == [
            {"row": HUGE, "message": PER_REQUEST},
            {"row": LONG, "message": STATE_QUESTION},
        ]
        assert result["calls"] == 4 and result["inputTokens"] < 3_000  # only what is sent
    else:
        lines = out.splitlines()
        assert lines[1] == (
            "2 call(s) over a request size limit, not sent (their rows fail as request-too-large):"
        )
        assert lines[2:] == [f"  row {HUGE}: {PER_REQUEST}", f"  row {LONG}: {STATE_QUESTION}"]
    raised = cli(*args, "--pricing", PRICING, "--json", "--max-request-tokens", "100000",
                 "--max-state-question-tokens", "100000")  # fmt: skip
    assert orjson.loads(raised[1])["tooLarge"] == []
