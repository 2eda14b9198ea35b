"""Synthetic datasets for benchmarks: realistic sizes, random mock answers, fixed seed."""

from __future__ import annotations

import random
from pathlib import Path

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


def synth_row(rng: random.Random, i: int) -> dict[str, object]:
    contexts = [
        {"id": f"c{k + 1}", "text": " ".join(sentence(rng, 14) for _ in range(3))}
        for k in range(rng.randint(0, 6))
    ]

    def p() -> float:
        return round(rng.random(), 3)

    row: dict[str, object] = {
        "id": f"syn-{i:07d}",
        "question": sentence(rng, 10).rstrip(".") + "?",
        "contexts": contexts,
        "answer": " ".join(sentence(rng, 12) for _ in range(2)),
    }
    generation = {"relevance": p(), "groundedness": p(), "contradiction": p()}
    if rng.random() < 0.5:
        row["referenceAnswer"] = sentence(rng, 12)
        generation["correctness"] = p()
    row["mock"] = {
        "retrieval": {
            "chunkRelevance": {c["id"]: p() for c in contexts},
            "sufficiency": p(),
            "conflict": p(),
        },
        "generation": generation,
    }
    labels = ["PASS", "RETRIEVAL_MISS", "GENERATOR_UNGROUNDED", "ANSWER_INCORRECT"]
    row["expected"] = {"diagnosis": rng.choice(labels)}
    row["baseline"] = {"diagnosis": rng.choice(labels), "confidence": p()}
    return row


def write_dataset(path: Path, rows: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    with path.open("wb") as handle:
        for i in range(rows):
            handle.write(orjson.dumps(synth_row(rng, i)) + b"\n")
    return path


def small_row(rng: random.Random, i: int) -> dict[str, object]:
    """A short row for scale runs: 1-2 contexts of ~20 words, one-sentence answer."""
    contexts = [{"id": f"c{k + 1}", "text": sentence(rng, 20)} for k in range(rng.randint(1, 2))]

    def p() -> float:
        return round(rng.random(), 3)

    row: dict[str, object] = {
        "id": f"sml-{i:07d}",
        "question": sentence(rng, 8).rstrip(".") + "?",
        "contexts": contexts,
        "answer": sentence(rng, 15),
    }
    generation = {"relevance": p(), "groundedness": p(), "contradiction": p()}
    if rng.random() < 0.5:
        row["referenceAnswer"] = sentence(rng, 10)
        generation["correctness"] = p()
    row["mock"] = {
        "retrieval": {
            "chunkRelevance": {c["id"]: p() for c in contexts},
            "sufficiency": p(),
            "conflict": p(),
        },
        "generation": generation,
    }
    labels = ["PASS", "RETRIEVAL_MISS", "GENERATOR_UNGROUNDED", "ANSWER_INCORRECT"]
    row["expected"] = {"diagnosis": rng.choice(labels)}
    row["baseline"] = {"diagnosis": rng.choice(labels), "confidence": p()}
    return row


def write_small_dataset(path: Path, rows: int, seed: int = 0) -> Path:
    """``rows`` small rows; the first N rows are the same for any ``rows`` >= N (same seed)."""
    rng = random.Random(seed)
    with path.open("wb") as handle:
        for i in range(rows):
            handle.write(orjson.dumps(small_row(rng, i)) + b"\n")
    return path
