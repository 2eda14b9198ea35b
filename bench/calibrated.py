"""Synthetic labelled rows from a perfectly calibrated judge of realistic shape (seeded).

Every Jev probability is drawn from a U-shaped Beta distribution (real judges answer mostly
near 0 or 1), every label is drawn from its own probability (so the judge is calibrated by
construction), and the expected diagnosis is derived from the labels by the precedence table
(docs/semantics.md §2). The rows hold no real data: questions, passages and answers are
placeholders. ``datasets/calibration-fixture.jsonl`` is written by::

    python -m bench.calibrated --rows 4000 --seed 2026 --out datasets/calibration-fixture.jsonl

Shapes: ``realistic`` (the fixture: per-judgment Beta shapes, most rows pass, every diagnosis
occurs) and ``ushape`` (every probability Beta(0.25, 0.25), the hardest case the calibration
issue measured).
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from typing import Any

import orjson

# (alpha, beta) per judgment; alpha, beta < 1 give the U shape.
SHAPES: dict[str, dict[str, tuple[float, float]]] = {
    "ushape": dict.fromkeys(
        (
            "chunk",
            "sufficiency",
            "conflict",
            "relevance",
            "groundedness",
            "contradiction",
            "correctness",
        ),
        (0.25, 0.25),
    ),
    "realistic": {
        "chunk": (0.3, 0.12),
        "sufficiency": (0.3, 0.1),
        "conflict": (0.06, 0.6),
        "relevance": (0.3, 0.06),
        "groundedness": (0.3, 0.1),
        "contradiction": (0.06, 0.6),
        "correctness": (0.3, 0.1),
    },
}
DIAGNOSES = (
    "PASS",
    "RETRIEVAL_MISS",
    "RETRIEVAL_INSUFFICIENT",
    "CONFLICTING_EVIDENCE",
    "GENERATOR_UNGROUNDED",
    "ANSWER_IRRELEVANT",
    "ANSWER_INCORRECT",
)
BASELINE_ACCURACY = 0.88


def expected_diagnosis(labels: dict[str, Any]) -> str:
    """The precedence table over true labels (docs/semantics.md §2, rules 1-6 and PASS)."""
    if labels["conflict"]:
        return "CONFLICTING_EVIDENCE"
    if not any(labels["chunks"].values()):
        return "RETRIEVAL_MISS"
    if not labels["sufficiency"]:
        return "RETRIEVAL_INSUFFICIENT"
    if not labels["relevance"]:
        return "ANSWER_IRRELEVANT"
    if not labels["groundedness"] or labels["contradiction"]:
        return "GENERATOR_UNGROUNDED"
    if labels.get("correctness") is False:
        return "ANSWER_INCORRECT"
    return "PASS"


def row(index: int, rng: random.Random, shape: str, prefix: str = "cal") -> dict[str, Any]:
    """One labelled row with mock answers and a recorded baseline verdict."""
    beta = SHAPES[shape]

    def p(name: str) -> float:
        return rng.betavariate(*beta[name])

    def draw(q: float) -> bool:
        return rng.random() < q

    with_reference = index % 2 == 0
    probs: dict[str, Any] = {
        "chunks": {"c1": p("chunk"), "c2": p("chunk")},
        "sufficiency": p("sufficiency"),
        "conflict": p("conflict"),
        "relevance": p("relevance"),
        "groundedness": p("groundedness"),
        "contradiction": p("contradiction"),
    }
    if with_reference:
        probs["correctness"] = p("correctness")
    labels: dict[str, Any] = {
        k: ({c: draw(q) for c, q in v.items()} if isinstance(v, dict) else draw(v))
        for k, v in probs.items()
    }
    diagnosis = expected_diagnosis(labels)
    right = rng.random() < BASELINE_ACCURACY
    verdict = diagnosis if right else rng.choice([d for d in DIAGNOSES if d != diagnosis])
    generation: dict[str, Any] = {
        "answerRelevance": labels["relevance"],
        "groundedness": labels["groundedness"],
        "contradiction": labels["contradiction"],
    }
    mock_generation: dict[str, Any] = {
        "relevance": probs["relevance"],
        "groundedness": probs["groundedness"],
        "contradiction": probs["contradiction"],
    }
    if with_reference:
        generation["correctness"] = labels["correctness"]
        mock_generation["correctness"] = probs["correctness"]
    out: dict[str, Any] = {
        "id": f"{prefix}-{index:05d}",
        "question": f"Synthetic question {index}: what does placeholder policy {index % 97} say?",
        "contexts": [
            {"id": "c1", "text": f"Synthetic passage one for row {index}."},
            {"id": "c2", "text": f"Synthetic passage two for row {index}."},
        ],
        "answer": f"Synthetic answer {index}.",
    }
    if with_reference:
        out["referenceAnswer"] = f"Synthetic reference answer {index}."
    out["expected"] = {
        "diagnosis": diagnosis,
        "retrieval": {
            "chunkRelevance": labels["chunks"],
            "contextSufficiency": labels["sufficiency"],
            "contextConflict": labels["conflict"],
        },
        "generation": generation,
    }
    out["mock"] = {
        "retrieval": {
            "chunkRelevance": probs["chunks"],
            "sufficiency": probs["sufficiency"],
            "conflict": probs["conflict"],
        },
        "generation": mock_generation,
    }
    out["baseline"] = {
        "diagnosis": verdict,
        "confidence": round(0.6 + 0.35 * rng.random(), 3),
        "latencyMs": round(650 + 400 * rng.random(), 1),
        "usage": {"inputTokens": 900 + index % 200, "outputTokens": 30},
    }
    return out


def rows(n: int, seed: int, shape: str = "realistic", prefix: str = "cal") -> list[dict[str, Any]]:
    """``n`` rows from one seeded generator (the same arguments give the same rows)."""
    rng = random.Random(f"{shape}:{seed}")
    return [row(i, rng, shape, prefix) for i in range(n)]


def write(path: Path, data: list[dict[str, Any]]) -> None:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in data))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="realistic")
    parser.add_argument("--out", type=Path, default=Path("datasets/calibration-fixture.jsonl"))
    args = parser.parse_args()
    write(args.out, rows(args.rows, args.seed, args.shape))
    print(f"wrote {args.rows} rows to {args.out}")


if __name__ == "__main__":
    main()


def report_rows(
    n: int, seed: int, shape: str = "realistic", prefix: str = "cal"
) -> list[dict[str, Any]]:
    """The rows as a mock-provider report would hold them: Jev's answers, the verdict at the
    default thresholds and the expected diagnosis (what ``ragbatch calibrate`` reads)."""
    from ragbatch.core._policy import Thresholds, diagnose
    from ragbatch.core._schema import Judgments

    out = []
    for r in rows(n, seed, shape, prefix):
        verdict = diagnose(Judgments.model_validate(r["mock"]), Thresholds())
        out.append(
            {
                "id": r["id"],
                "status": "ok",
                "retrieval": r["mock"]["retrieval"],
                "generation": r["mock"]["generation"],
                "diagnosis": verdict.diagnosis,
                "confidence": verdict.confidence,
                "expected": r["expected"]["diagnosis"],
            }
        )
    return out
