"""The judge audit's sample and numbers (docs/semantics.md §9): deterministic, stratified, exact."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from ragbatch.core import Row, Thresholds
from ragbatch.metrics import MIN_PROBE_ROWS, ProbedRow, probe_entries, probe_sample, wilson

STRATA = (
    [("PASS", "auto")] * 6 + [("RETRIEVAL_MISS", "auto")] * 3 + [("JUDGE_UNCERTAIN", "fallback")]
)


def row(i: int, contexts: int = 1) -> Row:
    return Row.model_validate(
        {
            "id": f"row-{i}",
            "question": "q?",
            "contexts": [{"id": f"c{k}", "text": "t"} for k in range(contexts)],
            "answer": "a",
        }
    )


BASE = {
    "chunkRelevance:0": 0.9,
    "contextSufficiency": 0.9,
    "contextConflict": 0.1,
    "answerRelevance": 0.9,
    "groundedness": 0.9,
    "contradiction": 0.1,
}


def candidates(n: int) -> list[ProbedRow]:
    return [ProbedRow(row(i), BASE, *STRATA[i % len(STRATA)]) for i in range(n)]


def test_the_sample_is_deterministic_stratified_and_sized() -> None:
    rows = candidates(10_000)
    chosen = probe_sample(rows, 0.05)
    assert len(chosen) == 500  # 5 % of 10,000
    assert chosen == sorted(chosen)
    by_stratum = Counter((rows[i].diagnosis, rows[i].route) for i in chosen)
    assert by_stratum == {
        ("PASS", "auto"): 300,
        ("RETRIEVAL_MISS", "auto"): 150,
        ("JUDGE_UNCERTAIN", "fallback"): 50,
    }
    shuffled = rows[:]
    random.Random(7).shuffle(shuffled)
    again = probe_sample(shuffled, 0.05)
    assert {shuffled[i].row.id for i in again} == {rows[i].row.id for i in chosen}


def test_the_sample_takes_at_least_200_rows_or_every_row() -> None:
    assert len(probe_sample(candidates(1000), 0.05)) == MIN_PROBE_ROWS
    assert len(probe_sample(candidates(150), 0.05)) == 150
    small = probe_sample(candidates(2_000), 0.01)
    assert len(small) == MIN_PROBE_ROWS
    rare = [ProbedRow(row(i), BASE, "PASS", "auto") for i in range(5000)]
    rare.append(ProbedRow(row(5000), BASE, "ANSWER_IRRELEVANT", "auto"))
    picked = probe_sample(rare, 0.05)
    assert 5000 in picked  # every stratum gets a row


def test_wilson_interval_matches_the_published_values() -> None:
    # Wilson (1927) / Newcombe (1998) table: 0/10 -> (0, 0.2775), 5/10 -> (0.2366, 0.7634)
    low, high = wilson(0, 10)
    assert low == 0.0 and round(high, 4) == 0.2775
    low, high = wilson(5, 10)
    assert (round(low, 4), round(high, 4)) == (0.2366, 0.7634)
    assert wilson(10, 10)[1] == 1.0


def test_numbers_of_a_designed_probe_are_exact() -> None:
    """Ten rows: the probe moves groundedness of the first four from 0.9 to 0.5 (a flip from
    confident yes to uncertain, and a diagnosis change), leaves the rest alone."""
    rows = [ProbedRow(row(i), BASE, "PASS", "auto") for i in range(10)]
    readings = [{**BASE, "groundedness": 0.5 if i < 4 else 0.9} for i in range(10)]
    entries = probe_entries("length", rows, readings, Thresholds(), 0.05)
    by_judgment = {e.judgment: e for e in entries}
    g = by_judgment["groundedness"]
    mean = math.fsum([0.5 - 0.9] * 4) / 10
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in [0.5 - 0.9] * 4 + [0.0] * 6) / 9)
    assert (g.rows, g.questions, g.flip_rate) == (10, 10, 0.4)
    assert (g.flip_low, g.flip_high) == wilson(4, 10)
    assert g.mean_delta == mean
    assert g.delta_low == mean - 1.959963984540054 * sd / math.sqrt(10)
    assert g.delta_sign == "negative"
    assert g.diagnosis_change_rate == 0.4
    assert g.flagged  # wilson(4, 10) starts at 0.168 > 0.05
    assert by_judgment["answerRelevance"].flip_rate == 0.0
    assert not by_judgment["answerRelevance"].flagged


def test_complement_reports_the_lean_towards_yes_and_order_what_both_would_change() -> None:
    rows = [
        ProbedRow(row(i, contexts=2), {**BASE, "chunkRelevance:1": 0.1}, "PASS", "auto")
        for i in range(4)
    ]
    # complement readings are 1 - p': a judge that says "yes" to both wordings with p' = 0.9
    readings = [{"groundedness": 1.0 - 0.9} for _ in rows]
    (g,) = probe_entries("complement", rows, readings, Thresholds(), 0.05)
    assert g.mean_delta == pytest.approx(0.9 + 0.9 - 1)  # p + p' - 1
    assert g.delta_sign == "positive" and g.flip_rate == 1.0
    order = [{**BASE, "chunkRelevance:0": 0.75, "chunkRelevance:1": 0.1} for _ in rows]
    (chunks,) = [
        e
        for e in probe_entries("order", rows, order, Thresholds(), 0.05)
        if e.judgment == "chunkRelevance"
    ]
    assert (chunks.rows, chunks.questions) == (4, 8)
    assert chunks.flip_rate == 0.5  # chunk 0 of every row: 0.9 (yes) -> 0.75 (uncertain)
    assert chunks.both_flip_rate == 0.0  # averaged, (0.9 + 0.75) / 2 is still a yes
