"""Calibration: the rules agree with the policy, counting is exact, promises hold, refusals."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragbatch.calibrate._bounds import auroc, is_within, max_errors, upper_bound
from ragbatch.calibrate._fit import (
    MIN_LABELLED,
    PolicyFile,
    calibrate,
    calibrate_report,
    load_policy,
    policy_bytes,
    rediagnose,
    thresholds_of,
    uniform,
)
from ragbatch.calibrate._refine import Sample, counts_over_move
from ragbatch.calibrate._rules import JUDGMENTS, implied_labels, signals_of, statuses
from ragbatch.calibrate._search import count, counts_over_pass
from ragbatch.core._errors import ConfigError
from ragbatch.core._policy import Thresholds, diagnose
from ragbatch.core._schema import GenerationJudgments, Judgments, RetrievalJudgments

ROOT = Path(__file__).resolve().parents[2]
REPORT = json.loads((ROOT / "reports" / "expected-report.json").read_text(encoding="utf-8"))


def judgments_of(row: dict[str, Any]) -> Judgments:
    return Judgments.model_validate(
        {"retrieval": row["retrieval"], "generation": row["generation"]}
    )


def make_judgments(
    chunks: dict[str, float], values: list[float], correctness: float | None
) -> Judgments:
    s, c, r, g, d = values
    return Judgments(
        retrieval=RetrievalJudgments(chunk_relevance=chunks, sufficiency=s, conflict=c),
        generation=GenerationJudgments(
            relevance=r, groundedness=g, contradiction=d, correctness=correctness
        ),
    )


def report_row(i: int, j: Judgments, expected: str | None, status: str = "ok") -> dict[str, Any]:
    """A report row as ``ragbatch run`` writes it, diagnosed at the default thresholds."""
    verdict = diagnose(j, Thresholds())
    dumped = j.model_dump(by_alias=True, exclude_none=True)
    return {
        "id": f"r{i:04d}",
        "status": status,
        "retrieval": dumped["retrieval"],
        "generation": dumped["generation"],
        "diagnosis": verdict.diagnosis,
        "confidence": verdict.confidence,
        "route": verdict.route,
        "expected": expected,
    }


def synthetic(n: int, seed: int) -> list[dict[str, Any]]:
    """Rows of known calibration: every truth ~ Bernoulli(p), the label is the policy's
    diagnosis of the 0/1 truths. Answers are arcsine-like (Beta(0.3, 0.3)) on a 0.001 grid,
    kept off exactly 0 and 1; rows without contexts have no conflict."""
    rng = random.Random(seed)

    def p() -> float:
        return min(0.999, max(0.001, round(rng.betavariate(0.3, 0.3), 3)))

    def draw(q: float) -> float:
        return float(rng.random() < q)

    rows = []
    for i in range(n):
        chunks = {} if rng.random() < 0.03 else {f"c{k}": p() for k in range(rng.randint(1, 3))}
        values = [p() for _ in range(5)]
        if not chunks:
            values[1] = 0.001
        correctness = p() if rng.random() < 0.5 else None
        truth = make_judgments(
            {k: draw(q) for k, q in chunks.items()},
            [draw(q) for q in values],
            None if correctness is None else draw(correctness),
        )
        expected = diagnose(truth, Thresholds()).diagnosis  # 0/1 truths: never uncertain
        rows.append(report_row(i, make_judgments(chunks, values, correctness), expected))
    return rows


# -- the rules restate the policy ----------------------------------------------------------


@pytest.mark.parametrize("pair", [(0.2, 0.8), (0.1, 0.9), (0.3, 0.6), (0.0, 1.0), (0.5, 0.51)])
def test_rediagnose_agrees_with_policy_on_every_fixture_row(pair: tuple[float, float]) -> None:
    fail, pass_ = pair
    for row in REPORT["rows"]:
        verdict = diagnose(judgments_of(row), Thresholds(fail, pass_))
        assert rediagnose(row, uniform(fail, pass_)) == (verdict.diagnosis, verdict.route), row[
            "id"
        ]


def test_rediagnose_reproduces_the_golden_verdicts() -> None:
    for row in REPORT["rows"]:
        assert rediagnose(row, uniform(0.2, 0.8)) == (row["diagnosis"], row["route"])


grid = st.sampled_from([0.0, 0.05, 0.2, 0.5, 0.8, 0.95, 1.0])


@settings(max_examples=300, deadline=None)
@given(
    chunks=st.lists(grid, max_size=3),
    values=st.lists(grid, min_size=5, max_size=5),
    correctness=st.none() | grid,
    pair=st.tuples(grid, grid).filter(lambda t: t[0] < t[1]),
)
def test_rediagnose_agrees_with_policy_on_any_row(
    chunks: list[float], values: list[float], correctness: float | None, pair: tuple[float, float]
) -> None:
    j = make_judgments({f"c{i}": p for i, p in enumerate(chunks)}, values, correctness)
    verdict = diagnose(j, Thresholds(*pair))
    row = j.model_dump(by_alias=True, exclude_none=True)
    assert rediagnose(row, uniform(*pair)) == (verdict.diagnosis, verdict.route)


def test_per_judgment_thresholds_apply_to_their_judgment_only() -> None:
    row = REPORT["rows"][0]  # JUDGE_UNCERTAIN at 0.2/0.8: sufficiency 0.62, conflict 0.27 ...
    pairs = uniform(0.2, 0.8)
    pairs["contextSufficiency"] = (0.7, 0.9)  # now sufficiency 0.62 is a confident "no"
    assert rediagnose(row, pairs) == ("RETRIEVAL_INSUFFICIENT", "auto")
    with pytest.raises(ConfigError, match="fail < pass"):
        rediagnose(row, {**pairs, "groundedness": (0.5, 0.5)})


def test_implied_labels_follow_the_precedence() -> None:
    assert implied_labels("CONFLICTING_EVIDENCE") == {"contextConflict": True}
    assert implied_labels("RETRIEVAL_INSUFFICIENT") == {
        "contextConflict": False,
        "chunkRelevance": True,
        "contextSufficiency": False,
    }
    assert "groundedness" not in implied_labels("GENERATOR_UNGROUNDED")
    assert implied_labels("PASS")["correctness"] is True
    assert implied_labels("JUDGE_UNCERTAIN") == {}


# -- counting is exact ------------------------------------------------------------------------


def random_samples(rng: random.Random, n: int) -> list[Sample]:
    values = [0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 1.0]
    diagnoses = ["PASS", "CONFLICTING_EVIDENCE", "RETRIEVAL_MISS", "GENERATOR_UNGROUNDED"]
    out = []
    for _ in range(n):
        sig: list[float | None] = [rng.choice(values) for _ in JUDGMENTS]
        if rng.random() < 0.2:
            sig[0] = None
        if rng.random() < 0.5:
            sig[-1] = None
        out.append(Sample(tuple(sig), rng.choice(diagnoses)))
    return out


def test_pass_sweep_counts_equal_rediagnosing_every_pair() -> None:
    rng = random.Random(1)
    samples = random_samples(rng, 300)
    passes = [0.05, 0.1, 0.2, 0.25, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0]
    for fail in (0.0, 0.1, 0.2, 0.5, 0.8):
        above = [p for p in passes if p > fail]
        swept = counts_over_pass(samples, fail, above)
        assert swept == [count(samples, uniform(fail, p)) for p in above]


def test_move_counts_equal_rediagnosing_every_value() -> None:
    rng = random.Random(2)
    samples = random_samples(rng, 300)
    pairs = {name: rng.choice([(0.1, 0.9), (0.2, 0.8), (0.0, 1.0)]) for name in JUDGMENTS}
    table = [statuses(s.signals, pairs) for s in samples]
    for name in JUDGMENTS:
        fail, pass_ = pairs[name]
        for side, values in ((0, [0.0, 0.05, 0.1, 0.3, 0.5]), (1, [0.6, 0.8, 0.85, 0.9, 1.0])):
            values = [v for v in values if (v < pass_ if side == 0 else v > fail)]
            got = counts_over_move(samples, table, pairs, name, side, values)
            want = [
                count(samples, {**pairs, name: (v, pass_) if side == 0 else (fail, v)})
                for v in values
            ]
            assert got == want, (name, side)


# -- bounds -------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 10, 100, 3000])
def test_upper_bound_with_no_errors_has_its_closed_form(n: int) -> None:
    assert math.isclose(upper_bound(0, n, 0.95), 1 - 0.05 ** (1 / n), rel_tol=1e-12)


def test_upper_bound_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for k, n in [(0, 5), (1, 30), (7, 100), (39, 511), (250, 2000), (999, 1000)]:
        for c in (0.9, 0.95, 0.99):
            assert math.isclose(upper_bound(k, n, c), stats.beta.ppf(c, k + 1, n - k), rel_tol=1e-9)
    assert upper_bound(5, 5, 0.95) == 1.0 and upper_bound(0, 0, 0.95) == 1.0


def test_max_errors_is_the_largest_k_within_the_target() -> None:
    table = max_errors(300, 0.1, 0.95)
    assert table[0] == -1 and table[28] == -1 and table[29] == 0  # 0/29: bound 0.098
    for n in (29, 50, 120, 300):
        k = table[n]
        assert upper_bound(k, n, 0.95) <= 0.1 < upper_bound(k + 1, n, 0.95)
        assert is_within(k, n, 0.1, 0.95) and not is_within(k + 1, n, 0.1, 0.95)


def test_auroc_counts_ties_as_half() -> None:
    assert auroc([0.9, 0.8, 0.3, 0.1], [True, True, False, False]) == 1.0
    assert auroc([0.5, 0.5], [True, False]) == 0.5
    assert auroc([0.2, 0.9, 0.4], [True, False, False]) == 0.0
    assert auroc([0.1, 0.2], [True, True]) is None


# -- the promise holds on fresh rows of known calibration ----------------------------------------


@pytest.fixture(scope="module")
def fitted() -> tuple[PolicyFile, list[dict[str, Any]]]:
    rows = synthetic(3000, seed=0)
    return calibrate(rows[:2000], 0.10, 0.95, folds=5, seed=0), rows[2000:]


def test_held_out_promise_holds_on_fresh_rows(
    fitted: tuple[PolicyFile, list[dict[str, Any]]],
) -> None:
    policy, fresh = fitted
    pairs = thresholds_of(policy)
    verdicts = [rediagnose(row, pairs, policy.routing) for row in fresh]
    auto = [(row, d) for row, (d, route) in zip(fresh, verdicts, strict=True) if route == "auto"]
    wrong = sum(d != row["expected"] for row, d in auto)
    g = policy.guarantee
    assert g is not None and g.method == "fixed-sequence" and g.routing == policy.routing
    assert g.certified_on == 2000 and g.estimated_risk <= g.target_risk == 0.10  # every row
    assert g.coverage_lower_bound < g.estimated_coverage == g.auto_rows / 2000
    assert len(auto) / len(fresh) >= 0.3  # arcsine-like answers: guarded automates a lot
    # 1,000 fresh rows estimate the risk with noise: they must not refute the target (their
    # 99 % lower bound is within it) rather than sit below it.
    assert 1.0 - upper_bound(len(auto) - wrong, len(auto), 0.99) <= g.target_risk
    assert wrong / len(auto) <= policy.held_out.risk_upper_bound + 0.02
    assert policy.in_sample.coverage > 0 and policy.held_out.coverage > 0
    assert policy.held_out.folds == 5 and policy.held_out.seed == 0
    assert policy.fitted_on.labelled_rows == 2000 and policy.format_version == 2


def test_judgments_report_their_own_risk(fitted: tuple[PolicyFile, list[dict[str, Any]]]) -> None:
    policy, _ = fitted
    assert set(policy.judgments) == set(JUDGMENTS)
    conflict = policy.judgments["contextConflict"]
    assert conflict.labelled_rows == 2000 and conflict.coverage > 0
    assert conflict.auroc is not None and conflict.auroc > 0.8


def test_calibration_is_deterministic_for_a_seed() -> None:
    rows = synthetic(400, seed=3)
    first = policy_bytes(calibrate(rows, 0.2, 0.9, folds=3, seed=5))
    assert policy_bytes(calibrate(rows, 0.2, 0.9, folds=3, seed=5)) == first


# -- refusals ---------------------------------------------------------------------------------


def tie_block(n: int = 200, wrong: float = 0.3) -> list[dict[str, Any]]:
    """Rows answering exactly p = 1.0 on every judgment; 30% labelled otherwise."""
    j = make_judgments({"c1": 1.0}, [1.0] * 5, 1.0)
    bad = int(n * wrong)
    return [report_row(i, j, "PASS" if i < bad else "CONFLICTING_EVIDENCE") for i in range(n)]


def test_refuses_a_tie_block() -> None:
    with pytest.raises(ConfigError) as caught:
        calibrate(tie_block(), 0.05, 0.95)
    message = str(caught.value)
    assert "200 labelled rows answer contextConflict = 1 exactly" in message
    assert "no threshold can separate them" in message
    assert "60 of them (30%)" in message


def test_refuses_when_a_tie_block_makes_the_target_unreachable() -> None:
    # Uncertain rows that are wrong at any threshold keep the AUROC up (0.81) and add no
    # help: the search itself finds no feasible thresholds.
    middling = make_judgments({"c1": 0.5}, [0.5] * 5, None)
    rows = tie_block() + [report_row(200 + i, middling, "PASS") for i in range(100)]
    with pytest.raises(ConfigError) as caught:
        calibrate(rows, 0.05, 0.95)
    message = str(caught.value)
    assert message.startswith("no thresholds meet target risk 0.05 at confidence 0.95")
    assert "with 300 labels: " in message  # what these labels can certify instead
    assert "200 labelled rows answer contextConflict = 1 exactly" in message
    assert "no threshold can separate them" in message


def test_refuses_too_few_labelled_rows() -> None:
    rows = synthetic(MIN_LABELLED + 10, seed=4)
    for row in rows[:6]:
        row["expected"] = None
    for row in rows[6:12]:
        row["status"] = "failed"
    with pytest.raises(ConfigError, match=rf"only {MIN_LABELLED - 2} labelled successful rows"):
        calibrate(rows, 0.1, 0.95)


def test_a_confidence_that_does_not_rank_explains_a_refusal_not_overrules_a_test() -> None:
    rows = synthetic(300, seed=5)
    for row in rows:  # confident exactly when wrong
        row["confidence"] = 0.1 if row["diagnosis"] == row["expected"] else 0.9
    # The ladders read the judgments, not the row confidence: their certificate stands.
    assert calibrate(rows, 0.1, 0.95).guarantee is not None
    with pytest.raises(ConfigError, match=r"AUROC 0\.000 < 0\.6"):  # nothing certifies
        calibrate(rows, 0.001, 0.95)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"target_risk": 0.0}, "--target-risk"),
        ({"confidence": 1.0}, "--confidence"),
        ({"folds": 1}, "--folds"),
        ({"grid": [0.2, 1.5]}, "grid"),
    ],
)
def test_rejects_bad_options(options: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"target_risk": 0.1, "confidence": 0.95, **options}
    with pytest.raises(ConfigError, match=message):
        calibrate(synthetic(40, seed=6), **args)


# -- the policy file --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small() -> PolicyFile:
    """A policy fitted on a small synthetic report (shared: fitting takes a moment)."""
    report = {
        "reportVersion": "1",
        "dataset": {"name": "synthetic.jsonl", "sha256": "ab" * 32},
        "rows": synthetic(600, seed=7),
    }
    return calibrate_report(report, 0.15, 0.9, folds=3, seed=1)


def test_policy_file_round_trips_and_names_its_data(small: PolicyFile) -> None:
    policy = small
    data = policy_bytes(policy)
    assert data.endswith(b"}\n") and policy.version.startswith("sha256:")
    assert load_policy(data, "policy.json") == policy
    raw = orjson.loads(data)
    assert raw["kind"] == "ragbatch-policy" and "perJudgment" in raw and "heldOut" in raw
    assert raw["fittedOn"]["datasetName"] == "synthetic.jsonl"
    assert raw["fittedOn"]["datasetSha256"] == "ab" * 32
    assert raw["fittedOn"]["reportVersion"] == "1" and raw["fittedOn"]["rows"] == 600


def test_tampered_policy_file_is_rejected(small: PolicyFile) -> None:
    raw = orjson.loads(policy_bytes(small))
    raw["passThreshold"] = 0.5
    with pytest.raises(ConfigError, match=r"policy\.json: policy content does not match"):
        load_policy(orjson.dumps(raw), "policy.json")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{not json", "invalid JSON"),
        (b"[]", "not a policy file"),
        (b'{"kind": "ragbatch-policy", "version": "sha256:00"}', "malformed policy file"),
    ],
)
def test_malformed_policy_file_is_rejected(data: bytes, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_policy(data, "p.json")


def test_policy_rejects_unknown_judgments_and_disordered_thresholds(small: PolicyFile) -> None:
    raw = orjson.loads(policy_bytes(small))
    for change in (
        {"perJudgment": {"faithfulness": {"failThreshold": 0.1, "passThreshold": 0.9}}},
        {"failThreshold": 0.9, "passThreshold": 0.1},
    ):
        with pytest.raises(ConfigError, match="malformed policy file"):
            load_policy(orjson.dumps({**raw, **change}), "p.json")


def test_signals_of_uses_the_best_chunk_and_needs_every_judgment() -> None:
    row = REPORT["rows"][0]
    assert signals_of(row)[0] == max(row["retrieval"]["chunkRelevance"].values())
    broken = {**row, "generation": {"relevance": 0.9}}
    with pytest.raises(ConfigError, match="groundedness is missing"):
        signals_of(broken)
