"""Synthetic datasets for benchmarks: realistic sizes, random mock answers, fixed seed."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson

WORDS = [
    "policy",
    "contractor",
    "approval",
    "certificate",
    "refund",
    "window",
    "invoice",
    "battery",
    "charger",
    "warranty",
    "orbit",
    "planet",
    "telescope",
    "recipe",
    "oven",
    "flour",
    "yeast",
    "visa",
    "passport",
    "border",
    "tariff",
    "ledger",
    "audit",
    "vaccine",
    "dosage",
    "clinic",
    "league",
    "season",
    "goal",
    "court",
    "statute",
    "appeal",
    "kernel",
    "module",
    "cache",
    "thread",
]


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def judged(rng: random.Random, row: dict[str, Any], reference_words: int) -> dict[str, Any]:
    """Add a reference answer to half the rows, random mock judgments, a label and a recorded
    baseline verdict (the same draws, in the same order, for every row shape)."""

    def p() -> float:
        return round(rng.random(), 3)

    generation = {"relevance": p(), "groundedness": p(), "contradiction": p()}
    if rng.random() < 0.5:
        row["referenceAnswer"] = sentence(rng, reference_words)
        generation["correctness"] = p()
    row["mock"] = {
        "retrieval": {
            "chunkRelevance": {c["id"]: p() for c in row["contexts"]},
            "sufficiency": p(),
            "conflict": p(),
        },
        "generation": generation,
    }
    labels = ["PASS", "RETRIEVAL_MISS", "GENERATOR_UNGROUNDED", "ANSWER_INCORRECT"]
    row["expected"] = {"diagnosis": rng.choice(labels)}
    row["baseline"] = {"diagnosis": rng.choice(labels), "confidence": p()}
    return row


def synth_row(rng: random.Random, i: int) -> dict[str, Any]:
    contexts = [
        {"id": f"c{k + 1}", "text": " ".join(sentence(rng, 14) for _ in range(3))}
        for k in range(rng.randint(0, 6))
    ]

    row: dict[str, Any] = {
        "id": f"syn-{i:07d}",
        "question": sentence(rng, 10).rstrip(".") + "?",
        "contexts": contexts,
        "answer": " ".join(sentence(rng, 12) for _ in range(2)),
    }
    return judged(rng, row, 12)


def write_dataset(path: Path, rows: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    with path.open("wb") as handle:
        for i in range(rows):
            handle.write(orjson.dumps(synth_row(rng, i)) + b"\n")
    return path


def small_row(rng: random.Random, i: int) -> dict[str, Any]:
    """A short row for scale runs: 1-2 contexts of ~20 words, one-sentence answer."""
    contexts = [{"id": f"c{k + 1}", "text": sentence(rng, 20)} for k in range(rng.randint(1, 2))]

    row: dict[str, Any] = {
        "id": f"sml-{i:07d}",
        "question": sentence(rng, 8).rstrip(".") + "?",
        "contexts": contexts,
        "answer": sentence(rng, 15),
    }
    return judged(rng, row, 10)


def write_small_dataset(path: Path, rows: int, seed: int = 0) -> Path:
    """``rows`` small rows; the first N rows are the same for any ``rows`` >= N (same seed)."""
    rng = random.Random(seed)
    with path.open("wb") as handle:
        for i in range(rows):
            handle.write(orjson.dumps(small_row(rng, i)) + b"\n")
    return path
