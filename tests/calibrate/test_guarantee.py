"""The certification procedure: ladders, graphical alpha, per-diagnosis, tie blocks, advice."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import orjson
import pytest

from ragbatch.calibrate._fit import calibrate
from ragbatch.calibrate._guarantee import Candidate, graphical, ladder_shares, slack
from ragbatch.calibrate._ladder import Count, count_one, pairs, tally, thresholds
from ragbatch.calibrate._policy_file import load_policy, policy_bytes
from ragbatch.calibrate._search import Fitted, Sample
from ragbatch.calibrate._summary import calibrate_targets, per_diagnosis_targets, summary
from ragbatch.core._errors import ConfigError
from tests.calibrate.test_calibrate import synthetic


def samples(rows: list[dict[str, Any]]) -> list[Sample]:
    from ragbatch.calibrate._labelled import labelled

    return [Sample(r.signals, r.expected) for r in labelled(rows)]


def test_the_ladder_tally_counts_every_step_like_a_direct_count() -> None:
    rows = samples(synthetic(300, seed=8))
    steps = pairs()
    for routing in ("guarded", "showcase"):
        counted = tally(rows, steps, routing)
        for i in (0, 7, len(steps) // 2, len(steps) - 1):
            assert counted[i] == count_one(rows, thresholds(steps[i]), routing)


def test_the_ladder_is_a_monotone_staircase_fixed_in_advance() -> None:
    steps = pairs()
    assert all(f < p for f, p in steps)
    assert [f for f, _ in steps] == sorted(f for f, _ in steps)
    assert [p for _, p in steps] == sorted((p for _, p in steps), reverse=True)
    assert any(f + p != 1.0 for f, p in steps)  # asymmetric steps between symmetric ones


def chain(*counts: tuple[int, int]) -> list[Candidate]:
    fitted = Fitted(0.1, 0.9, thresholds((0.1, 0.9)), ())
    return [Candidate("guarded", "fixed-sequence", fitted, 1000, Count(n, k)) for n, k in counts]


def test_a_step_that_cannot_pass_is_skipped_not_a_stop() -> None:
    # 20 rows cannot pass at 5 % even with no error: skipped; the next step is tested.
    tested = graphical({"guarded": chain((20, 0), (200, 2))}, {"guarded": 0.05}, 0.05, None)
    assert [(c.count.auto, c.certified) for c in tested] == [(200, True)]
    # On 1,000 labelled rows a tested step must absorb 2 errors: 70 clean rows pass alone
    # (0.95^70 < 0.05) but are skipped; on 400 rows they are tested.
    assert slack(1000) == 2 and slack(999) == 0
    steps = chain((70, 0), (300, 6))
    assert [c.count.auto for c in graphical({"g": steps}, {"g": 0.05}, 0.05, None)] == [300]
    few = [replace(c, rows=400) for c in steps]
    assert next(c.count.auto for c in graphical({"g": few}, {"g": 0.05}, 0.05, None)) == 70


def test_an_exhausted_ladder_passes_its_alpha_on() -> None:
    # showcase's only step passes at 0.01, so its alpha goes to guarded, whose step (p = 0.046)
    # fails at 0.04 alone and passes at 0.05.
    chains = {"guarded": chain((210, 5)), "showcase": chain((400, 0))}
    tested = graphical(chains, {"guarded": 0.04, "showcase": 0.01}, 0.05, None)
    assert [(c.count.auto, c.level, c.certified) for c in tested] == [
        (210, 0.04, False),
        (400, 0.01, True),
        (210, 0.05, True),
    ]
    assert ladder_shares(("showcase", "guarded"), 0.05, False) == pytest.approx(
        {"showcase": 0.0, "guarded": 0.05}
    )
    assert ladder_shares(("showcase",), 0.05, False) == {"showcase": 0.05}


def test_showcase_is_tested_only_with_alpha_handed_over() -> None:
    # The guarded ladder holds all of alpha: showcase waits while guarded stops, and is tested
    # at the guarded level once every guarded step passed.
    stops = {"guarded": chain((210, 20)), "showcase": chain((400, 0))}
    tested = graphical(stops, ladder_shares(("guarded", "showcase"), 0.05, False), 0.05, None)
    assert [(c.routing, c.certified) for c in tested] == [("guarded", False)]
    show = [replace(c, routing="showcase") for c in chain((400, 0))]
    passes = {"guarded": chain((210, 5)), "showcase": show}
    tested = graphical(passes, ladder_shares(("guarded", "showcase"), 0.05, False), 0.05, None)
    assert [(c.routing, c.level, c.certified) for c in tested] == [
        ("guarded", 0.05, True),
        ("showcase", 0.05, True),
    ]


def test_per_diagnosis_targets_are_certified_jointly() -> None:
    rows = synthetic(1500, seed=2)
    pooled = calibrate(rows, 0.1, 0.95, folds=2)
    assert pooled.guarantee is not None and pooled.guarantee.per_diagnosis
    assert all(d.target is None for d in pooled.guarantee.per_diagnosis)
    # pooled within 10 %, yet a third of the automatic GENERATOR_UNGROUNDED rows are wrong
    flagged = [d.diagnosis for d in pooled.guarantee.per_diagnosis if d.above_target]
    assert "GENERATOR_UNGROUNDED" in flagged
    strict = calibrate(rows, 0.1, 0.95, folds=2, per_diagnosis={"RETRIEVAL_MISS": 0.04})
    g = strict.guarantee
    assert g is not None and "per automatic diagnosis" in g.assumption
    miss = [d for d in g.per_diagnosis if d.diagnosis == "RETRIEVAL_MISS"]
    assert miss and miss[0].target == 0.04 and miss[0].estimated_risk < 0.04
    assert g.estimated_coverage < pooled.guarantee.estimated_coverage
    with pytest.raises(ConfigError):  # too few automatic RETRIEVAL_MISS rows for 3 %
        calibrate(rows, 0.1, 0.95, folds=2, per_diagnosis={"RETRIEVAL_MISS": 0.03})
    assert per_diagnosis_targets("all", 0.05) is not None
    assert per_diagnosis_targets("PASS=0.05,RETRIEVAL_MISS", 0.03) == {
        "PASS": 0.05,
        "RETRIEVAL_MISS": 0.03,
    }
    with pytest.raises(ConfigError, match="not an automatic diagnosis"):
        calibrate(rows, 0.1, 0.95, per_diagnosis={"JUDGE_UNCERTAIN": 0.1})


def test_a_refusal_says_what_the_labels_can_certify_and_what_the_target_needs() -> None:
    rows = synthetic(150, seed=5)
    with pytest.raises(ConfigError) as caught:
        calibrate(rows, 0.01, 0.95)
    message = str(caught.value)
    assert "with 150 labels: " in message and "% at 95%" in message
    assert "1.0% needs about " in message and "advice, not a guarantee" in message


def test_several_targets_make_a_table_and_the_first_is_written() -> None:
    report = {"rows": synthetic(800, seed=6)}
    policy, table = calibrate_targets(report, [0.1, 0.2, 0.001], 0.95, 2, 0, "auto", None)
    assert policy.target_risk == 0.1 and len(table) == 4
    assert "20.0%  coverage" in table[2] and "refused" in table[3]
    text = summary(policy, "p.json", table)
    assert "is at most 10.0%" in text and "upper bound" not in text
    assert "estimates on the 800 labelled rows tested" in text


def tie_rows(n_block: int, seed: int) -> list[dict[str, Any]]:
    """Calibrated rows plus a block answering groundedness = 1.0 exactly, 30 % of it labelled
    ungrounded (its contradiction answer low, so groundedness is the judgment to blame)."""
    rows = synthetic(1500, seed=seed)
    rng = random.Random(seed)
    for i, row in enumerate(rows[:n_block]):
        row["generation"] = {**row["generation"], "groundedness": 1.0, "contradiction": 0.01}
        if i % 10 < 3:
            row["expected"] = "GENERATOR_UNGROUNDED"
        elif row["expected"] == "GENERATOR_UNGROUNDED":
            row["expected"] = rng.choice(["PASS", "ANSWER_INCORRECT"])
    return rows


def test_a_tie_block_is_named_when_calibration_succeeds() -> None:
    # The previous release named such a block; the Learn-then-Test release only did in a
    # refusal, and only for rows decided at every threshold.
    policy = calibrate(tie_rows(600, seed=9), 0.2, 0.95, folds=2)
    blocks = policy.tie_blocks or []
    assert [(b.judgment, b.value) for b in blocks][:1] == [("groundedness", 1.0)]
    assert blocks[0].rows >= 100 and blocks[0].error_rate >= 0.25
    text = summary(policy, "p.json", [])
    assert "tie block: " in text and "groundedness = 1 exactly" in text


def test_a_format_1_policy_with_a_guarantee_is_refused_on_load() -> None:
    policy = calibrate(synthetic(600, seed=3), 0.15, 0.95, folds=2)
    assert load_policy(policy_bytes(policy), "p.json") == policy
    old = orjson.loads(policy_bytes(policy))
    del old["formatVersion"]
    with pytest.raises(ConfigError, match="format 1"):
        load_policy(orjson.dumps(old), "p.json")
