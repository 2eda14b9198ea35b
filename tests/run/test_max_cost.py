"""``--max-cost`` is enforced or refused: never silently ignored for a model without a price."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.run.test_operations import DATASET, PRICING, cli, live
from tests.run.test_resume import StartServer


@pytest.mark.parametrize("workers", ["1", "2"])
def test_max_cost_with_an_unpriced_model_is_refused_before_any_call(
    start_jev_server: StartServer, tmp_path: Path, workers: str
) -> None:
    server = start_jev_server()
    out = tmp_path / "r.json"
    code, _, err = live(
        server.base_url, tmp_path / "cache", out, "--model", "acme-judge-2", "--max-cost", "1",
        "--workers", workers,
    )  # fmt: skip
    assert code == 2, err
    assert err == (
        f"error: --max-cost needs a price for model 'acme-judge-2', but the pricing snapshot "
        f"{PRICING} (version 2026-12-01) does not price it: add the model to the snapshot "
        "(or pass --pricing FILE), or run without --max-cost\n"
    )
    assert server.requests_total == 0
    assert not out.exists()


def test_max_cost_with_an_unpriced_mock_model_is_refused(tmp_path: Path) -> None:
    code, _, err = cli(
        "run", DATASET, "--model", "my-mock", "--max-cost", "1", "--pricing", PRICING,
        "--out", str(tmp_path / "r.json"), "--quiet",
    )  # fmt: skip
    assert code == 2 and err.startswith("error: --max-cost needs a price for model 'my-mock'"), err


def test_a_reply_from_an_unpriced_release_is_charged_at_the_requested_price(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    # jev-latest is priced (jev-*); the release behind it is not: the limit must still hold
    server = start_jev_server(release="acme-9")
    code, _, err = live(
        server.base_url, tmp_path / "cache", tmp_path / "r.json", "--model", "jev-latest",
        "--max-cost", "0.0008",
    )  # fmt: skip
    assert code == 5, err
    assert 0 < server.successful < 48


def test_max_cost_holds_for_the_sum_of_the_workers(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    # each worker spends against its share: all of them together stay under the limit
    server = start_jev_server()
    out = tmp_path / "r.json"
    code, _, err = live(
        server.base_url, tmp_path / "cache", out, "--model", "jev-1.13.0",
        "--max-cost", "0.0008", "--workers", "2",
    )  # fmt: skip
    assert code == 5, err
    spent = orjson.loads(out.read_bytes())["modes"]["jevOnly"]["cost"]["usd"]
    assert 0 < spent <= 0.0008
    assert 0 < server.successful < 48
