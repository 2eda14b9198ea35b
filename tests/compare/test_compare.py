"""The gate (rules, paired test, Markdown, JUnit) and the diff, on crafted report dicts."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from fractions import Fraction
from math import comb
from typing import Any

import pytest

from ragbatch.compare import _gate as compare
from ragbatch.compare._gate import (
    DEFAULT_RULES,
    Rule,
    binomial_two_sided,
    default_row_path,
    diff_markdown,
    diff_reports,
    gate,
    gate_junit,
    gate_markdown,
    parse_rules,
    row_outcomes,
)
from ragbatch.core._errors import EXIT_USAGE, ConfigError
from ragbatch.metrics._diagnostic_matrix import MATRIX, diagnose_metrics, diagnose_names, matrix_key

GROUNDED = "modes.jevOnly.components.generation.groundedness.accuracy"


def report(
    outcomes: list[bool],
    recalls: list[float] | None = None,
    *,
    model: str = "jev-2026-11",
    pricing: str = "2026-12-01",
    ids: list[str] | None = None,
    per_row: bool = True,
) -> dict[str, Any]:
    """A minimal report: diagnosis PASS when the outcome is True, expected always PASS."""
    ids = ids or [f"r{i}" for i in range(len(outcomes))]
    recalls = recalls or [1.0] * len(outcomes)
    accuracy = sum(outcomes) / len(outcomes)
    rows = [
        {
            "id": row_id,
            "diagnosis": "PASS" if ok else "GENERATOR_UNGROUNDED",
            "expected": "PASS",
            "retrievalRanking": {"at": {"10": {"recall": recall}}},
        }
        for row_id, ok, recall in zip(ids, outcomes, recalls, strict=True)
    ]
    return {
        "provider": {"requestedModel": "jev", "answeredBy": [model]},
        "pricing": {"version": pricing, "sha256": f"sha-{pricing}"},
        "modes": {
            "jevOnly": {
                "classification": {"accuracy": accuracy},
                "components": {"generation": {"groundedness": {"accuracy": accuracy}}},
            }
        },
        "retrievalRanking": {"rows": len(rows), "at": {"10": {"recall": sum(recalls) / len(rows)}}},
        "rows": rows if per_row else [],
    }


def statuses(result: compare.GateResult) -> dict[str, str]:
    return {r.name: r.status for r in result.rules}


# -- the paired test --------------------------------------------------------------------------------


def brute_force_p(worse: int, better: int) -> float:
    """Two-sided exact binomial p: outcomes no more likely than the observed one."""
    n = worse + better
    probs = [Fraction(comb(n, k), 2**n) for k in range(n + 1)]
    return float(min(Fraction(1), sum(p for p in probs if p <= probs[worse])))


@pytest.mark.parametrize(("worse", "better"), [(0, 0), (2, 0), (0, 2), (5, 1), (10, 0), (7, 7)])
def test_binomial_matches_brute_force(worse: int, better: int) -> None:
    assert binomial_two_sided(worse, better) == pytest.approx(brute_force_p(worse, better))


def test_binomial_known_values() -> None:
    assert binomial_two_sided(2, 0) == 0.5
    assert binomial_two_sided(10, 0) == 2 / 1024
    assert binomial_two_sided(0, 0) == 1.0


# -- gate -------------------------------------------------------------------------------------------


def test_identical_reports_pass_and_absent_rules_are_skipped() -> None:
    base = report([True] * 10)
    result = gate(base, base)
    assert result.passed
    assert result.exit_code == 0
    assert statuses(result) == {
        "Jev-only accuracy": "pass",
        "Cascade accuracy": "skipped",
        "Fallback rate": "skipped",
        "Failure rate": "skipped",
        "Recall@10": "pass",
        "Groundedness": "pass",
        "Citation quality": "skipped",
    }
    skipped = result.rules[-1]
    assert "absent in current and baseline" in skipped.reason


def test_skipped_when_absent_in_one_report_only() -> None:
    base = report([True] * 10)
    current = report([True] * 10)
    del current["retrievalRanking"]
    rule = next(r for r in gate(current, base).rules if r.name == "Recall@10")
    assert rule.status == "skipped"
    assert rule.reason == "retrievalRanking.at.10.recall absent in current"


def test_big_regression_on_many_rows_fails_with_mcnemar() -> None:
    base = report([True] * 40)
    current = report([True] * 25 + [False] * 15)
    result = gate(current, base)
    assert not result.passed
    assert result.exit_code == 1
    grounded = next(r for r in result.rules if r.path == GROUNDED)
    assert grounded.status == "fail"
    assert grounded.test == "mcnemar-exact"
    assert (grounded.paired_rows, grounded.worse, grounded.better) == (40, 15, 0)
    assert grounded.p_value == pytest.approx(2 / 2**15)
    assert grounded.drop == pytest.approx(15 / 40)


def test_small_sample_flips_are_noise_not_a_regression() -> None:
    base = report([True] * 6)
    current = report([True] * 4 + [False] * 2)  # accuracy 1.0 -> 0.667, only 2 discordant rows
    result = gate(current, base)
    assert result.passed
    grounded = next(r for r in result.rules if r.path == GROUNDED)
    assert grounded.status == "not-significant"
    assert grounded.p_value == 0.5
    assert "not significant" in grounded.reason
    text = gate_markdown(result)
    assert "not-significant" in text
    assert "McNemar" in text  # the test is stated in the output


def test_without_paired_rows_the_drop_alone_decides() -> None:
    base = report([True] * 6, per_row=False)
    current = report([True] * 4 + [False] * 2, per_row=False)
    grounded = next(r for r in gate(current, base).rules if r.path == GROUNDED)
    assert grounded.status == "fail"
    assert grounded.test == "none"
    assert "no paired per-row outcomes" in grounded.reason


def test_graded_per_row_recall_uses_the_sign_test() -> None:
    base = report([True] * 30, [1.0] * 30)
    current = report([True] * 30, [0.5] * 12 + [1.0] * 18)
    recall = next(r for r in gate(current, base).rules if r.name == "Recall@10")
    assert recall.status == "fail"
    assert recall.test == "sign-test-exact"
    assert (recall.worse, recall.better) == (12, 0)


def test_a_drop_of_exactly_the_limit_passes() -> None:
    base, current = report([True] * 4), report([True] * 4)
    base["retrievalRanking"]["at"]["10"]["recall"] = 0.75
    current["retrievalRanking"]["at"]["10"]["recall"] = 0.73  # 0.75 - 0.73 > 0.02 in floats
    recall = next(r for r in gate(current, base).rules if r.name == "Recall@10")
    assert recall.status == "pass"


def test_user_rules_add_and_override() -> None:
    base, current = report([True] * 10), report([True] * 10)
    base["modes"]["jevOnly"]["abstention"] = {"falseAnswerRate": 0.10}
    current["modes"]["jevOnly"]["abstention"] = {"falseAnswerRate": 0.30}
    current["modes"]["jevOnly"]["components"]["generation"]["groundedness"]["accuracy"] = 0.95
    rules = parse_rules(
        [
            {"path": "modes.jevOnly.abstention.falseAnswerRate", "maxDrop": 0.05}
            | {"direction": "lower-is-better", "name": "False answers"},
            {"path": GROUNDED, "maxDrop": 0.1},  # replaces the default 0.02
        ]
    )
    result = gate(current, base, rules)
    assert statuses(result) == {
        "Jev-only accuracy": "pass",
        "Cascade accuracy": "skipped",
        "Fallback rate": "skipped",
        "Failure rate": "skipped",
        "Recall@10": "pass",
        GROUNDED: "pass",
        "Citation quality": "skipped",
        "False answers": "fail",
    }
    only_given = gate(current, base, rules, defaults=False)
    assert [r.name for r in only_given.rules] == ["False answers", GROUNDED]


def test_parse_rules_defaults() -> None:
    (rule,) = parse_rules({"rules": [{"path": "retrievalRanking.mrr", "maxDrop": 0}]})
    assert rule == Rule(
        name="retrievalRanking.mrr",
        path="retrievalRanking.mrr",
        max_drop=0.0,
        row_path="retrievalRanking.reciprocalRank",
    )
    assert default_row_path("modes.jevOnly.classification.accuracy") == "diagnosis"
    assert default_row_path("modes.jevOnly.cost.usd") is None
    (explicit,) = parse_rules([{"path": "a.accuracy", "maxDrop": 1, "rowPath": None}])
    assert explicit.row_path is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"path": "x"}, "top level: Input should be a valid list"),
        ([{"maxDrop": 0.1}], "0.path"),
        ([{"path": "x"}], "0.maxDrop"),
        ([{"path": "x", "maxDrop": -0.1}], "0.maxDrop"),
        ([{"path": "x", "maxDrop": True}], "0.maxDrop"),
        ([{"path": "x", "maxDrop": "0.1"}], "0.maxDrop"),
        ([{"path": "x", "maxDrop": 0.1, "direction": "up"}], "0.direction"),
        ([{"path": "x", "maxDrop": 0.1, "typo": 1}], "0.typo"),
    ],
)
def test_bad_rules_are_usage_errors(data: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_rules(data)
    assert caught.value.exit_code == EXIT_USAGE


def test_row_outcomes() -> None:
    data = report([True, False])
    data["rows"].append({"id": "failed", "status": "failed", "expected": "PASS"})
    data["rows"].append({"id": "unlabelled", "diagnosis": "PASS"})
    data["rows"][0]["cascade"] = {"diagnosis": "GENERATOR_UNGROUNDED"}
    data["rows"][1]["cascade"] = {"diagnosis": "PASS"}
    data["rows"][1]["route"] = "fallback"
    assert row_outcomes(data, "diagnosis") == {"r0": 1.0, "r1": 0.0, "failed": 0.0}
    assert row_outcomes(data, "cascade.diagnosis") == {"r0": 0.0, "r1": 1.0, "failed": 0.0}
    assert row_outcomes(data, "route=fallback") == dict(r0=0.0, r1=1.0, failed=0.0, unlabelled=0.0)
    assert row_outcomes(data, "status=failed") == dict(r0=0.0, r1=0.0, failed=1.0, unlabelled=0.0)
    assert row_outcomes(data, "retrievalRanking.at.10.recall") == {"r0": 1.0, "r1": 1.0}


def test_default_rules_cover_both_modes_fallback_and_failures() -> None:
    assert [(r.name, r.path, r.max_drop, r.direction, r.row_path) for r in DEFAULT_RULES] == [
        ("Jev-only accuracy", "modes.jevOnly.classification.accuracy", 0.02,
         "higher-is-better", "diagnosis"),
        ("Cascade accuracy", "modes.cascade.classification.accuracy", 0.02,
         "higher-is-better", "cascade.diagnosis"),
        ("Fallback rate", "modes.cascade.fallbackRate", 0.05, "lower-is-better", "route=fallback"),
        ("Failure rate", "modes.jevOnly.failures.rate", 0.02, "lower-is-better", "status=failed"),
        ("Recall@10", "retrievalRanking.at.10.recall", 0.02, "higher-is-better",
         "retrievalRanking.at.10.recall"),
        ("Groundedness", GROUNDED, 0.02, "higher-is-better", "diagnosis"),
        ("Citation quality", "modes.jevOnly.claims.answerLevelAccuracy", 0.05,
         "higher-is-better", "diagnosis"),
    ]  # fmt: skip


def test_a_rise_in_failures_is_a_regression_paired_on_failed_rows() -> None:
    base, current = report([True] * 30), report([True] * 30)
    base["modes"]["jevOnly"]["failures"] = {"rate": 0.0}
    current["modes"]["jevOnly"]["failures"] = {"rate": 10 / 30}
    for row in current["rows"][:10]:
        row["status"] = "failed"
    rule = next(r for r in gate(current, base).rules if r.name == "Failure rate")
    assert (rule.status, rule.test, rule.worse, rule.better) == ("fail", "mcnemar-exact", 10, 0)


def test_a_rule_path_in_neither_report_is_a_usage_error_naming_the_nearest() -> None:
    base = report([True] * 4)
    (typo,) = parse_rules([{"path": "modes.jevOnly.classification.acuracy", "maxDrop": 0.02}])
    with pytest.raises(ConfigError) as caught:
        gate(base, base, [typo])
    assert caught.value.exit_code == EXIT_USAGE
    assert str(caught.value) == (
        "rule path modes.jevOnly.classification.acuracy is in neither report; nearest existing "
        "paths: modes.jevOnly.classification.accuracy, "
        "modes.jevOnly.components.generation.groundedness.accuracy"
    )
    (renamed,) = parse_rules([{"path": "zzz", "maxDrop": 0.1, "name": "Z"}])
    with pytest.raises(ConfigError, match=r"^rule path zzz \(rule 'Z'\) is in neither report; "
                       "no similar path exists"):  # fmt: skip
        gate(base, base, [renamed])
    only_one = report([True] * 4)
    only_one["modes"]["jevOnly"]["abstention"] = {"accuracy": 1.0}
    (present,) = parse_rules([{"path": "modes.jevOnly.abstention.accuracy", "maxDrop": 0.1}])
    result = gate(base, only_one, [present])  # absent in one report only: a documented skip
    assert result.rules[-1].reason == "modes.jevOnly.abstention.accuracy absent in current"


def test_markdown_and_junit_of_a_failing_gate() -> None:
    result = gate(report([True] * 25 + [False] * 15), report([True] * 40))
    text = gate_markdown(result)
    assert text.startswith("## ragbatch gate: FAIL")
    assert "| Groundedness |" in text
    assert "Low Faithfulness" in text  # where to look first, from the diagnostic matrix
    root = ET.fromstring(gate_junit(result))
    suite = root.find("testsuite")
    assert suite is not None
    assert suite.get("tests") == str(len(DEFAULT_RULES))
    assert suite.get("failures") == "2"  # groundedness and Jev-only accuracy
    assert suite.get("skipped") == "4"
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert cases["Groundedness"].find("failure") is not None
    assert cases["Citation quality"].find("skipped") is not None
    assert cases["Recall@10"].find("failure") is None


def test_junit_of_a_passing_gate_has_no_failures() -> None:
    root = ET.fromstring(gate_junit(gate(report([True] * 5), report([True] * 5))))
    assert root.get("failures") == "0"
    assert not list(root.iter("failure"))


# -- diff -------------------------------------------------------------------------------------------


def test_diff_lists_flips_rows_deltas_and_model_pricing_changes() -> None:
    a = report([True, False, True, True], ids=["r1", "r2", "r3", "r4"])
    b = report(
        [False, True, True, True],
        ids=["r1", "r2", "r3", "r5"],
        model="jev-2026-12",
        pricing="2027-01-01",
    )
    diff = diff_reports(a, b)
    assert [(f.id, f.before, f.after, f.change) for f in diff.flipped] == [
        ("r1", "PASS", "GENERATOR_UNGROUNDED", "broken"),
        ("r2", "GENERATOR_UNGROUNDED", "PASS", "fixed"),
    ]
    assert diff.added == ["r5"]
    assert diff.removed == ["r4"]
    changed = {c.path: (c.before, c.after) for c in diff.changes}
    assert changed == {
        "provider.answeredBy": (["jev-2026-11"], ["jev-2026-12"]),
        "pricing.version": ("2026-12-01", "2027-01-01"),
        "pricing.sha256": ("sha-2026-12-01", "sha-2027-01-01"),
    }
    deltas = {d.path: d for d in diff.deltas}
    accuracy = deltas["modes.jevOnly.classification.accuracy"]
    assert (accuracy.before, accuracy.after, accuracy.delta) == (0.75, 0.75, 0.0)
    assert "modes.jevOnly.cost.usd" not in deltas  # absent in both
    text = diff_markdown(diff, "main", "pr")
    for needle in ("r1", "r2", "broken", "fixed", "`r5`", "`r4`", "jev-2026-12", "2027-01-01"):
        assert needle in text
    assert "classification.accuracy" not in text  # unchanged metrics are not listed


def test_diff_lists_policy_thresholds_routing_and_model_changes_first() -> None:
    a = report([True, False, True, True], ids=["r1", "r2", "r3", "r4"])
    b = report([False, True, True, True], ids=["r1", "r2", "r3", "r4"], model="jev-2026-12")
    a["policy"] = {"name": "thresholds", "failThreshold": 0.2, "passThreshold": 0.8}
    b["policy"] = {"name": "calibrated", "version": "abc", "failThreshold": 0.1,
                   "passThreshold": 0.9, "perJudgment": {"groundedness": [0.3, 0.7]}}  # fmt: skip
    a["modes"]["jevOnly"]["routes"] = {"auto": 4, "fallback": 0, "failed": 0}
    b["modes"]["jevOnly"]["routes"] = {"auto": 1, "fallback": 3, "failed": 0}
    diff = diff_reports(a, b)
    assert [(c.kind, c.path) for c in diff.changes] == [
        ("policy", "policy.name"),
        ("policy", "policy.version"),
        ("thresholds", "policy.failThreshold"),
        ("thresholds", "policy.passThreshold"),
        ("thresholds", "policy.perJudgment"),
        ("routing", "modes.jevOnly.routes.auto"),
        ("routing", "modes.jevOnly.routes.fallback"),
        ("model", "provider.answeredBy"),
    ]
    text = diff_markdown(diff, "main", "pr")
    assert text.startswith(
        "## ragbatch diff: main → pr\n\n### Policy, thresholds, routing, model and pricing\n\n"
        "| Kind | Field | main | pr |\n|---|---|---|---|\n"
        "| policy | `policy.name` | thresholds | calibrated |\n"
        "| policy | `policy.version` | — | abc |\n"
        "| thresholds | `policy.failThreshold` | 0.2 | 0.1 |\n"
        "| thresholds | `policy.passThreshold` | 0.8 | 0.9 |\n"
        "| thresholds | `policy.perJudgment` | — | groundedness: 0.3, 0.7 |\n"
        "| routing | `modes.jevOnly.routes.auto` | 4 | 1 |\n"
        "| routing | `modes.jevOnly.routes.fallback` | 0 | 3 |\n"
        "| model | `provider.answeredBy` | jev-2026-11 | jev-2026-12 |\n\n"
        "The reports were not produced with the same setup (policy, thresholds, model changed): "
        "the flips and deltas below may come from these changes rather than from the RAG "
        "system.\n\n### Diagnosis flips (2)"
    )


def test_diff_of_a_report_with_itself_is_empty() -> None:
    a = report([True, False])
    diff = diff_reports(a, a)
    assert (diff.flipped, diff.added, diff.removed, diff.changes) == ([], [], [], [])
    assert "No change." in diff_markdown(diff)


# -- the diagnostic matrix the gate points to ---------------------------------------------------------


def test_matrix_keys_for_report_paths() -> None:
    assert matrix_key("retrievalRanking.at.10.recall") == "recall"
    assert matrix_key("hit@3") == "recall"
    assert matrix_key("ndcg@10") == "contextPrecision"
    assert matrix_key(GROUNDED) == "faithfulness"
    assert matrix_key("modes.jevOnly.claims.answerLevelAccuracy") == "citationQuality"
    assert matrix_key("modes.jevOnly.cost.usd") is None
    assert [e.key for e in MATRIX if e.source == "playbook"] == [
        "recall",
        "precision",
        "contextPrecision",
        "contextRelevance",
        "answerRelevance",
        "faithfulness",
    ]


def test_findings_come_upstream_first() -> None:
    values = {"faithfulness": 0.6, "precision@5": 0.2, "recall@10": 0.9, "falseAnswerRate": 0.3}
    thresholds = {"faithfulness": 0.8, "precision@5": 0.5, "recall@10": 0.8}
    thresholds |= {"falseAnswerRate": 0.1, "unknownMetric": 1.0}
    findings = diagnose_metrics(values, thresholds)
    assert [(f.metric, f.layer) for f in findings] == [
        ("precision@5", "retrieval"),
        ("faithfulness", "generation"),
        ("falseAnswerRate", "generation"),  # lower is better: 0.3 > 0.1 is weak
    ]
    assert findings[0].look_first == "Reduce k, add/tune reranker, tighten hybrid retrieval"
    assert (findings[0].value, findings[0].threshold) == (0.2, 0.5)
    names = [f.key for f in diagnose_names([GROUNDED, "retrievalRanking.at.10.recall", "x"])]
    assert names == ["recall", "faithfulness"]


# -- rows are read through the report's models ------------------------------------------------------


def test_diff_reads_a_misspelled_diagnosis_as_an_error_naming_the_row() -> None:
    a, b = report([True, True]), report([True, True])
    b["rows"][1]["diagnosis"] = "GENERATOR_UNGROUND"  # not a diagnosis of the report's models
    with pytest.raises(ConfigError, match=r"^row r1: diagnosis: Input should be 'PASS'"):
        diff_reports(a, b)


def test_a_flip_takes_the_later_reports_expectation_even_when_it_is_null() -> None:
    a, b = report([True, True]), report([True, False])
    b["rows"][1]["expected"] = None  # the later dataset dropped the label
    (flip,) = diff_reports(a, b).flipped
    assert (flip.id, flip.expected, flip.change) == ("r1", None, "changed")
    del b["rows"][1]["expected"]  # absent: the earlier report's expectation stands
    (flip,) = diff_reports(a, b).flipped
    assert (flip.expected, flip.change) == ("PASS", "broken")


def test_the_gate_names_the_report_whose_row_has_a_field_of_the_wrong_type() -> None:
    base, current = report([True] * 40), report([False] * 40)
    current["rows"][3]["expected"] = 1  # a paired outcome would compare a diagnosis with 1
    with pytest.raises(ConfigError, match=r"^current report: row r3: expected: ") as caught:
        gate(current, base)
    assert not isinstance(caught.value, compare.RulePathError)
