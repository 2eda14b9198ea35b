"""Pricing: the committed snapshot, model matching, unavailable cost, malformed snapshots."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest

from ragbatch.core._errors import PricingError, RagbatchError
from ragbatch.core._pricing import ModelPrice, PricingSnapshot, parse_pricing, total_cost

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "pricing" / "typesafe-2026-12.json"


def committed() -> PricingSnapshot:
    return parse_pricing(COMMITTED.read_bytes(), COMMITTED.name)


def snapshot_bytes(**overrides: object) -> bytes:
    """A valid snapshot document, with top-level keys replaced (None deletes a key)."""
    doc: dict[str, object] = {
        "version": "test-1",
        "effectiveDate": "2026-01-01",
        "currency": "USD",
        "models": {
            "jev-*": {"inputPerMillion": 0.042, "outputPerMillion": 0.0},
            "jev-1.*": {"inputPerMillion": 0.5, "outputPerMillion": 0.0},
            "jev-special": {"inputPerMillion": 1.0, "outputPerMillion": 2.0},
        },
    }
    for key, value in overrides.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    return orjson.dumps(doc)


# -- the committed snapshot -----------------------------------------------------------------------


def test_committed_snapshot_parses() -> None:
    snap = committed()
    assert snap.version == "2026-12-01"
    assert snap.effective_date == "2026-12-01"
    assert snap.currency == "USD"
    assert {"jev-*", "mock-jev", "recorded-baseline", "lexical-baseline"} <= set(snap.models)


def test_committed_snapshot_prices_jev_by_glob() -> None:
    price = committed().price_for("jev-1.13.0")
    assert price == ModelPrice(input_per_million=0.042, output_per_million=0.0)


def test_committed_snapshot_cost_of_jev() -> None:
    cost = total_cost(committed(), [("jev-1.13.0", 1_000_000, 5_000)])
    assert cost.available
    assert cost.currency == "USD"
    assert cost.usd == pytest.approx(0.042, rel=1e-15)
    assert cost.by_model == {"jev-1.13.0": cost.usd}
    assert cost.reason is None


def test_committed_snapshot_cost_per_model() -> None:
    cost = total_cost(
        committed(),
        [("recorded-baseline", 1000, 200), ("mock-jev", 2000, 10), ("recorded-baseline", 0, 0)],
    )
    assert cost.available
    assert cost.by_model == {
        "mock-jev": (2000 * 0.042) / 1_000_000,
        "recorded-baseline": (1000 * 0.15 + 200 * 0.6) / 1_000_000,
    }
    assert cost.usd == pytest.approx(2.7e-4 + 8.4e-5, rel=1e-14)


def test_sha256_is_of_the_file_bytes() -> None:
    data = COMMITTED.read_bytes()
    snap = parse_pricing(data, COMMITTED.name)
    assert snap.sha256 == hashlib.sha256(data).hexdigest()
    assert len(snap.sha256) == 64
    assert parse_pricing(data + b"\n", "x").sha256 != snap.sha256


# -- matching -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "input_per_million"),
    [
        ("jev-special", 1.0),  # the exact name beats both globs
        ("jev-1.13.0", 0.5),  # the longer (more specific) glob beats jev-*
        ("jev-2.0.0", 0.042),
        ("jev-", 0.042),
    ],
)
def test_price_for_matching(model: str, input_per_million: float) -> None:
    price = parse_pricing(snapshot_bytes(), "t.json").price_for(model)
    assert price is not None
    assert price.input_per_million == input_per_million


@pytest.mark.parametrize("model", ["xjev-1", "JEV-1", "jev", "gpt-4o", ""])
def test_price_for_unknown(model: str) -> None:
    assert parse_pricing(snapshot_bytes(), "t.json").price_for(model) is None


def test_exact_name_is_not_treated_as_a_glob() -> None:
    # "mock-jev" has no glob characters: it prices only itself
    snap = committed()
    assert snap.price_for("mock-jev") is not None
    assert snap.price_for("mock-jev-2") is None


# -- unavailable cost -----------------------------------------------------------------------------


def test_unknown_model_makes_cost_unavailable_never_zero() -> None:
    cost = total_cost(committed(), [("gpt-judge-9", 1000, 100)])
    assert not cost.available
    assert cost.usd is None
    assert cost.by_model == {}
    assert cost.reason is not None
    assert "'gpt-judge-9'" in cost.reason
    assert "2026-12-01" in cost.reason


def test_one_unknown_model_makes_the_whole_cost_unavailable() -> None:
    cost = total_cost(committed(), [("jev-1.13.0", 1000, 0), ("other", 1, 1), ("zz", 0, 0)])
    assert not cost.available
    assert cost.usd is None
    assert cost.reason is not None
    assert "'other'" in cost.reason and "'zz'" in cost.reason
    assert "jev-1.13.0" not in cost.reason


def test_no_calls_cost_nothing() -> None:
    cost = total_cost(committed(), [])
    assert cost.available
    assert cost.usd == 0.0


# -- malformed snapshots --------------------------------------------------------------------------

MALFORMED: list[tuple[str, bytes]] = [
    ("bad-json", b'{"version": "1", '),
    ("not-an-object", b"[]"),
    ("empty", b""),
    ("missing-version", snapshot_bytes(version=None)),
    ("empty-version", snapshot_bytes(version="")),
    ("missing-currency", snapshot_bytes(currency=None)),
    ("missing-models", snapshot_bytes(models=None)),
    ("no-models", snapshot_bytes(models={})),
    (
        "negative-price",
        snapshot_bytes(models={"jev-*": {"inputPerMillion": -0.01, "outputPerMillion": 0.0}}),
    ),
    (
        "negative-output-price",
        snapshot_bytes(models={"jev-*": {"inputPerMillion": 0.01, "outputPerMillion": -1.0}}),
    ),
    (
        "string-price",
        snapshot_bytes(models={"jev-*": {"inputPerMillion": "0.042", "outputPerMillion": 0.0}}),
    ),
    ("impossible-date", snapshot_bytes(effectiveDate="2026-13-45")),
    ("february-30", snapshot_bytes(effectiveDate="2026-02-30")),
    ("not-iso-date", snapshot_bytes(effectiveDate="12/01/2026")),
    ("missing-price", snapshot_bytes(models={"jev-*": {"inputPerMillion": 0.042}})),
    (
        "nan-price",
        b'{"version":"1","effectiveDate":"d","currency":"USD",'
        b'"models":{"jev-*":{"inputPerMillion":NaN,"outputPerMillion":0.0}}}',
    ),
    (
        "unknown-field",
        snapshot_bytes(
            models={"jev-*": {"inputPerMillion": 0.1, "outputPerMillion": 0.0, "per": "token"}}
        ),
    ),
]


@pytest.mark.parametrize("data", [d for _, d in MALFORMED], ids=[n for n, _ in MALFORMED])
def test_malformed_snapshot_raises_pricing_error_naming_the_source(data: bytes) -> None:
    with pytest.raises(PricingError, match=r"^pricing/broken-2026\.json: ") as info:
        parse_pricing(data, "pricing/broken-2026.json")
    assert isinstance(info.value, RagbatchError)


def test_malformed_snapshot_message_says_where() -> None:
    data = snapshot_bytes(models={"jev-*": {"inputPerMillion": -1.0, "outputPerMillion": 0.0}})
    with pytest.raises(PricingError, match=r"jev-\*\.inputPerMillion"):
        parse_pricing(data, "p.json")
    with pytest.raises(PricingError, match="version"):
        parse_pricing(snapshot_bytes(version=None), "p.json")
    with pytest.raises(PricingError) as info:
        parse_pricing(snapshot_bytes(effectiveDate="2026-13-45"), "p.json")
    assert str(info.value) == (
        "p.json: malformed pricing snapshot: effectiveDate: '2026-13-45' is not a real date "
        "(month must be in 1..12)"
    )
