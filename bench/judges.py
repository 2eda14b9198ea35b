"""Synthetic judges for the guarantee bench, vectorised with numpy (seeded).

Four judge shapes, each a generator of (Jev answers, expected diagnosis) rows:

- ``calibrated``: the realistic shape of :mod:`bench.calibrated` (per-judgment Beta answers,
  every label drawn from its own answer, so the judge is calibrated by construction);
- ``overconfident``: the same true probabilities, but Jev answers them sharpened with
  temperature 1.5 (``sigmoid(1.5 · logit(q))``): its confident answers are wrong more often
  than they say;
- ``concentrated``: calibrated except groundedness, sharpened with temperature 3, so the
  errors gather in GENERATOR_UNGROUNDED and PASS;
- ``ushape``: every answer Beta(0.25, 0.25), calibrated (most answers near 0 or 1).

The expected diagnosis follows from the labels by the precedence table (``docs/semantics.md``
§2). :func:`diagnose` applies a policy to the arrays in both routings, agreeing with
``ragbatch.calibrate._rules`` row for row (the bench checks it on a sample).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.calibrated import SHAPES as BETAS
from ragbatch.calibrate._rules import (
    CHUNK,
    CONFLICT,
    CONTRADICTION,
    CORRECTNESS,
    GROUNDED,
    RELEVANCE,
    SUFFICIENCY,
)

SHAPES = ("calibrated", "overconfident", "concentrated", "ushape")
DIAGNOSES = (
    "PASS",
    "CONFLICTING_EVIDENCE",
    "RETRIEVAL_MISS",
    "RETRIEVAL_INSUFFICIENT",
    "ANSWER_IRRELEVANT",
    "GENERATOR_UNGROUNDED",
    "ANSWER_INCORRECT",
)
PASS, CONFLICTING, MISS, INSUFFICIENT, IRRELEVANT, UNGROUNDED, INCORRECT = range(7)
UNCERTAIN = -1
_KEYS = ("sufficiency", "conflict", "relevance", "groundedness", "contradiction", "correctness")
_INDEX = (SUFFICIENCY, CONFLICT, RELEVANCE, GROUNDED, CONTRADICTION, CORRECTNESS)

Array = NDArray[np.float64]


def _sharpen(q: Array, temperature: float) -> Array:
    q = np.clip(q, 1e-12, 1 - 1e-12)
    return 1.0 / (1.0 + np.exp(-temperature * np.log(q / (1.0 - q))))


def draw(n: int, shape: str, seed: int) -> tuple[Array, Array, NDArray[np.int64]]:
    """(answers nx7 in ``JUDGMENTS`` order with NaN where not asked, the two chunk answers
    nx2, expected diagnosis codes) for ``n`` rows of one judge shape."""
    rng = np.random.default_rng([seed, SHAPES.index(shape)])
    beta = BETAS["ushape" if shape == "ushape" else "realistic"]
    temperature = {"overconfident": 1.5}.get(shape, 1.0)
    chunk_q = rng.beta(*beta["chunk"], size=(n, 2))
    chunk_label = rng.random((n, 2)) < chunk_q
    answers = np.full((n, 7), np.nan)
    labels = np.zeros((n, 7), dtype=bool)
    chunks = _sharpen(chunk_q, temperature)
    answers[:, CHUNK] = chunks.max(axis=1)
    labels[:, CHUNK] = chunk_label.any(axis=1)
    for key, j in zip(_KEYS, _INDEX, strict=True):
        q = rng.beta(*beta[key], size=n)
        labels[:, j] = rng.random(n) < q
        t = 3.0 if shape == "concentrated" and key == "groundedness" else temperature
        answers[:, j] = _sharpen(q, t)
    with_reference = np.arange(n) % 2 == 0
    answers[~with_reference, CORRECTNESS] = np.nan
    labels[~with_reference, CORRECTNESS] = True
    expected = np.select(
        [
            labels[:, CONFLICT],
            ~labels[:, CHUNK],
            ~labels[:, SUFFICIENCY],
            ~labels[:, RELEVANCE],
            ~labels[:, GROUNDED] | labels[:, CONTRADICTION],
            ~labels[:, CORRECTNESS],
        ],
        [CONFLICTING, MISS, INSUFFICIENT, IRRELEVANT, UNGROUNDED, INCORRECT],
        PASS,
    )
    return answers, chunks, expected.astype(np.int64)


def diagnose(answers: Array, fail: Array, pass_: Array, routing: str) -> NDArray[np.int64]:
    """Diagnosis codes (``UNCERTAIN`` for the fallback) under per-judgment (fail, pass)."""
    asked = ~np.isnan(answers)
    low = asked & (answers <= fail)
    high = asked & (answers >= pass_)
    band = asked & ~low & ~high
    grounded_bad = low[:, GROUNDED] | high[:, CONTRADICTION]
    if routing == "showcase":
        conditions = [
            high[:, CONFLICT],
            low[:, CHUNK],
            low[:, SUFFICIENCY],
            low[:, RELEVANCE],
            grounded_bad,
            low[:, CORRECTNESS],
            band.any(axis=1),
        ]
        choices = [CONFLICTING, MISS, INSUFFICIENT, IRRELEVANT, UNGROUNDED, INCORRECT, UNCERTAIN]
    else:
        grounded_ok = high[:, GROUNDED] & low[:, CONTRADICTION]
        conditions = [
            high[:, CONFLICT],
            ~low[:, CONFLICT],
            low[:, CHUNK],
            ~high[:, CHUNK],
            low[:, SUFFICIENCY],
            ~high[:, SUFFICIENCY],
            low[:, RELEVANCE],
            ~high[:, RELEVANCE],
            grounded_bad,
            ~grounded_ok,
            low[:, CORRECTNESS],
            band[:, CORRECTNESS],
        ]
        choices = [
            CONFLICTING,
            UNCERTAIN,
            MISS,
            UNCERTAIN,
            INSUFFICIENT,
            UNCERTAIN,
            IRRELEVANT,
            UNCERTAIN,
            UNGROUNDED,
            UNCERTAIN,
            INCORRECT,
            UNCERTAIN,
        ]
    return np.select(conditions, choices, PASS).astype(np.int64)


def report_rows(answers: Array, chunks: Array, expected: NDArray[np.int64]) -> list[dict[str, Any]]:
    """The rows as a report holds them (what ``ragbatch calibrate`` reads).

    The recorded verdict is the default-threshold (0.2 / 0.8) showcase diagnosis, and its
    confidence the distance of the least certain answer from 0.5, doubled: enough for the
    calibration's AUROC check, which only needs confident verdicts to be right more often.
    """
    verdict = diagnose(answers, np.full(7, 0.2), np.full(7, 0.8), "showcase")
    margin = np.nanmin(np.abs(answers - 0.5), axis=1) * 2.0
    out = []
    for i in range(len(expected)):
        a = answers[i].tolist()
        generation = {"relevance": a[RELEVANCE], "groundedness": a[GROUNDED]}
        generation["contradiction"] = a[CONTRADICTION]
        if not np.isnan(a[CORRECTNESS]):
            generation["correctness"] = a[CORRECTNESS]
        code = int(verdict[i])
        out.append(
            {
                "id": f"row-{i:06d}",
                "status": "ok",
                "retrieval": {
                    "chunkRelevance": {"c1": float(chunks[i, 0]), "c2": float(chunks[i, 1])},
                    "sufficiency": a[SUFFICIENCY],
                    "conflict": a[CONFLICT],
                },
                "generation": generation,
                "diagnosis": "JUDGE_UNCERTAIN" if code == UNCERTAIN else DIAGNOSES[code],
                "confidence": float(margin[i]),
                "expected": DIAGNOSES[int(expected[i])],
            }
        )
    return out
