"""Human audit of the judge: a stratified sample to label, and judge-human agreement (pure).

Calibrating the judge against people (docs/semantics.md §6): sample about 10% of the judged rows, have
humans label them, track agreement, and treat agreement below 80% as drift (re-prompt or
re-train the judge, then recalibrate). ``audit_sample`` draws the sample stratified by
(diagnosis, route) so rare verdicts are seen, each line carrying what a person needs to judge
the row (question, contexts, answer, from the dataset) after one line of labelling
instructions; ``agreement`` joins the filled-in lines back to the report. Lines are plain
dicts; reading and writing JSONL is the CLI's job.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ragbatch.calibrate._row_view import row_view, signals_from
from ragbatch.calibrate._rules import JUDGMENTS
from ragbatch.calibrate._trace_audit import (
    TRACE_INSTRUCTIONS,
    human_first_failing_step,
    is_trace_row,
    judged_first_failing_step,
    trace_sample_line,
)
from ragbatch.core import DIAGNOSES, ConfigError
from ragbatch.metrics import Out, safe

MIN_AGREEMENT = 0.8
# What the sample leaves out: the probabilities are restated flat under "judgments", and the
# expected label would tell the human the answer (labels must be blind).
_LEFT_OUT = {"retrieval", "generation", "expected"}
TEXT_FIELDS = ("question", "contexts", "answer")
INSTRUCTIONS = (
    "Label every line below this one. Read the question, the retrieved contexts (in rank "
    "order) and the answer, then fill in human.diagnosis with the verdict you would give, one "
    "of: {diagnoses}; and each human.judgments entry with true or false: chunkRelevance (the "
    "best context is relevant to the question), contextSufficiency (the contexts hold what the "
    "answer needs), contextConflict (the contexts contradict each other), answerRelevance (the "
    "answer addresses the question), groundedness (every claim of the answer is supported by "
    "the contexts), contradiction (the answer contradicts the contexts), correctness (the "
    "answer matches the reference). Leave null what you cannot decide, change nothing else, "
    "and keep this line: ragbatch agreement REPORT THIS_FILE skips it."
)


def instructions_line(
    sample: Mapping[str, Any] | None = None, traces: bool = False
) -> dict[str, Any]:
    """The sample file's first line: how to fill in the ``human`` fields of the others (of
    multi-step traces too when ``traces``), and (``sample``, see :func:`sample_header`) how
    the sample was drawn."""
    text = INSTRUCTIONS.format(diagnoses=", ".join(DIAGNOSES))
    line: dict[str, Any] = {"instructions": text + (TRACE_INSTRUCTIONS if traces else "")}
    if sample is not None:
        line["sample"] = dict(sample)
    return line


def sample_header(
    dataset_sha256: str, rate: float, seed: int, lines: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """How the sample was drawn, for ``ragbatch infer``: the dataset it belongs to, the rate
    and seed, and per stratum the rows and the rows sampled (inclusion = sampled / rows)."""
    strata: dict[str, dict[str, int]] = {}
    for line in lines:
        p = float(line["inclusionProbability"])
        count = strata.setdefault(str(line["stratum"]), {"rows": 0, "sampled": 0})
        count["sampled"] += 1
        count["rows"] = round(count["sampled"] / p)
    return {
        "datasetSha256": dataset_sha256,
        "rate": rate,
        "seed": seed,
        "design": "stratified by diagnosis/route, simple random sampling within each stratum",
        "strata": dict(sorted(strata.items())),
    }


def is_instructions(line: Mapping[str, Any]) -> bool:
    return "instructions" in line and "id" not in line


def row_texts(question: str, contexts: Sequence[Mapping[str, Any]], answer: str) -> dict[str, Any]:
    """What a person labels a row from: question, contexts (rank order) and answer."""
    return {"question": question, "contexts": [dict(c) for c in contexts], "answer": answer}


def audit_sample(
    rows: Sequence[Mapping[str, Any]],
    rate: float,
    seed: int,
    texts: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """About ``rate`` of the successful rows, stratified by (diagnosis, route), in input order.

    Proportional allocation with at least one row per non-empty stratum (largest remainders
    settle the rounding); the same rows and seed give the same sample. Each line records its
    ``stratum`` (``DIAGNOSIS/route``) and ``inclusionProbability`` (sampled / rows there). Failed rows have no
    judge verdict to audit and are left out. ``texts`` (row id → :func:`row_texts`) puts the
    question, contexts and answer on each line; a sampled id it lacks is a ConfigError.
    """
    if not 0.0 < rate <= 1.0:
        raise ConfigError(f"--rate must lie in (0, 1], got {rate}")
    strata: dict[tuple[str, str], list[int]] = defaultdict(list)
    views = [row_view(row) for row in rows]
    for i, view in enumerate(views):
        if view.status == "ok":
            strata[(str(view.diagnosis), str(view.route))].append(i)
    keys = sorted(strata)
    quotas = {key: rate * len(strata[key]) for key in keys}
    take = {key: min(len(strata[key]), max(1, math.floor(quotas[key]))) for key in keys}
    total = max(len(keys), round(rate * sum(len(v) for v in strata.values())))
    by_remainder = sorted(keys, key=lambda key: (-(quotas[key] - math.floor(quotas[key])), key))
    for key in by_remainder:
        if sum(take.values()) >= total:
            break
        if take[key] < len(strata[key]) and take[key] < math.ceil(quotas[key]):
            take[key] += 1
    rng = random.Random(seed)
    chosen = sorted(i for key in keys for i in rng.sample(strata[key], take[key]))
    # Recorded so that ``ragbatch infer`` weights each label by 1 / its inclusion probability.
    inclusion = {i: (key, take[key] / len(strata[key])) for key in keys for i in strata[key]}
    lines = []
    for i in chosen:
        row_id = str(views[i].id)
        if texts is not None and row_id not in texts:
            raise ConfigError(
                f"row {row_id} of the report is not in the dataset; pass the dataset the report "
                "was run on"
            )
        text = texts[row_id] if texts is not None else None
        line = (
            trace_sample_line(rows[i], text)
            if is_trace_row(rows[i])
            else sample_line(rows[i], text)
        )
        key, p = inclusion[i]
        human = line.pop("human")  # stays last: the part a person fills in
        line.update(stratum=f"{key[0]}/{key[1]}", inclusionProbability=p, human=human)
        lines.append(line)
    return lines


def sample_line(row: Mapping[str, Any], text: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One line to label: the row's question, contexts and answer (``text``), the row minus
    probabilities and labels, flat judgments, and empty ``human`` fields (``diagnosis``: one
    of the diagnoses; ``judgments``: true/false each)."""
    view = row_view(row)
    signals = signals_from(view.id, view.retrieval, view.generation)
    judgments = {name: p for name, p in zip(JUDGMENTS, signals, strict=True) if p is not None}
    line: dict[str, Any] = {"id": view.id}
    if view.trace_id is not None:
        line["traceId"] = view.trace_id
    if text is not None:
        line.update((k, text[k]) for k in TEXT_FIELDS)
    line.update((k, v) for k, v in row.items() if k not in _LEFT_OUT and k not in line)
    line["judgments"] = judgments
    chunks = view.retrieval.chunk_relevance if view.retrieval is not None else {}
    line["chunks"] = dict(chunks)  # per chunk; the best one is in judgments
    line["human"] = {"diagnosis": None, "judgments": dict.fromkeys(judgments)}
    return line


def jsonl_bytes(lines: Sequence[Mapping[str, Any]]) -> bytes:
    """Lines as JSONL bytes (one compact object per line, trailing newline)."""
    return b"".join(orjson.dumps(dict(line)) + b"\n" for line in lines)


class JudgmentAgreement(Out):
    count: int
    agreed: int
    agreement: float


class Agreement(Out):
    """Judge-human agreement on the diagnosis (rows the judge decided) and per judgment."""

    labelled: int  # label lines joined to a successful report row
    decided: int  # of those, route auto with a human diagnosis: the diagnosis pairs
    agreed: int
    agreement: float
    kappa: float | None  # Cohen's kappa; None when chance agreement is 1
    fallback: int  # labelled rows the judge sent to fallback (no verdict to agree with)
    per_judgment: dict[str, JudgmentAgreement]
    # traces the judge decided, whose first failing step a person labelled (§8a)
    first_failing_step: JudgmentAgreement | None = None
    unmatched: list[str]  # label ids missing from the report or failed there
    warning: str | None = None


EXPECTED_LABEL = (
    'lines like {{"id": ..., "human": {{"diagnosis": one of {diagnoses} or null, "judgments": '
    '{{"groundedness": true, ...}}}}}} with at least one value filled in, as written by '
    "ragbatch audit-sample and completed by a person"
)


def agreement(
    rows: Sequence[Mapping[str, Any]],
    labels: Sequence[Mapping[str, Any]],
    source: str = "labels",
) -> Agreement:
    """Compare filled-in audit lines with the judge's verdicts in the report rows.

    The diagnosis counts on rows the judge decided (route auto): a fallback row has no
    verdict to agree with. A judgment's verdict is ``p >= 0.5`` (as in the component
    metrics) against the human's true/false. Raises :class:`ConfigError` on a label that is
    not a known diagnosis or not a boolean, and when ``source`` (the labels file, named in
    the message) holds no human label on a row of the report: nothing to measure.
    """
    views = [row_view(r) for r in rows]
    by_id = {str(v.id): v for v in views if v.status == "ok"}
    pairs: list[tuple[str, str]] = []
    per: dict[str, list[bool]] = {name: [] for name in JUDGMENTS}
    unmatched: list[str] = []
    first_steps: list[bool] = []
    labelled = fallback = labelled_values = 0
    for line in labels:
        if is_instructions(line):
            continue
        key = str(line.get("id"))
        row = by_id.get(key)
        if row is None:
            unmatched.append(key)
            continue
        labelled += 1
        human: Mapping[str, Any] = line.get("human") or {}
        said = human.get("diagnosis")
        if said is not None and said not in DIAGNOSES:
            raise ConfigError(f"label {key}: human.diagnosis {said!r} is not one of {DIAGNOSES}")
        labelled_values += said is not None
        steps = len(row.steps) if row.steps is not None else None
        first = human_first_failing_step(key, human, steps)
        labelled_values += first is not None
        if row.route != "auto":
            fallback += 1
        else:
            if said is not None:
                pairs.append((str(row.diagnosis), str(said)))
            if first is not None:
                first_steps.append(judged_first_failing_step(row.first_failing_step) == first)
        # a trace has no row-level judgments (its steps have theirs): nothing to compare
        probabilities = (
            signals_from(row.id, row.retrieval, row.generation)
            if row.steps is None
            else (None,) * len(JUDGMENTS)
        )
        signals = dict(zip(JUDGMENTS, probabilities, strict=True))
        for name, truth in (human.get("judgments") or {}).items():
            if truth is None:
                continue
            labelled_values += 1
            if name not in per or not isinstance(truth, bool):
                raise ConfigError(
                    f"label {key}: human.judgments.{name} must be one of {list(JUDGMENTS)} "
                    "with value true, false or null"
                )
            p = signals[name]
            if p is not None:
                per[name].append((p >= 0.5) == truth)
    if labelled_values == 0:
        lines = sum(not is_instructions(line) for line in labels)
        raise ConfigError(
            f"{source}: no human labels to compare: {lines} lines, {labelled} of them rows of "
            f"the report, none with human.diagnosis or a human.judgments value set; expected "
            + EXPECTED_LABEL.format(diagnoses=", ".join(DIAGNOSES))
        )
    agreed = sum(judge == said for judge, said in pairs)
    per_judgment = {
        name: JudgmentAgreement(count=len(v), agreed=sum(v), agreement=safe(sum(v), len(v)))
        for name, v in per.items()
        if v
    }
    result = Agreement(
        labelled=labelled,
        decided=len(pairs),
        agreed=agreed,
        agreement=safe(agreed, len(pairs)),
        kappa=cohen_kappa(pairs),
        fallback=fallback,
        per_judgment=per_judgment,
        first_failing_step=(
            JudgmentAgreement(
                count=len(first_steps),
                agreed=sum(first_steps),
                agreement=safe(sum(first_steps), len(first_steps)),
            )
            if first_steps
            else None
        ),
        unmatched=unmatched,
    )
    return result.model_copy(update={"warning": _warning(result)})


def cohen_kappa(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Cohen's kappa of (rater A, rater B) labels; None when undefined (chance agreement 1
    or no pairs)."""
    n = len(pairs)
    if n == 0:
        return None
    observed = sum(a == b for a, b in pairs) / n
    first = Counter(a for a, _ in pairs)
    second = Counter(b for _, b in pairs)
    chance = math.fsum(first[label] * second[label] for label in first) / (n * n)
    return None if chance == 1.0 else (observed - chance) / (1.0 - chance)


def _warning(a: Agreement) -> str | None:
    """Agreement below 80% means the judge is drifting (docs/semantics.md §6)."""
    if a.decided == 0:
        return (
            "no human diagnosis on a row the judge decided: fill in human.diagnosis in the "
            "sample before measuring agreement"
        )
    low = (
        [f"diagnosis {a.agreement:.0%} ({a.agreed}/{a.decided})"]
        if a.agreement < MIN_AGREEMENT
        else []
    )
    low += [
        f"{name} {j.agreement:.0%} ({j.agreed}/{j.count})"
        for name, j in a.per_judgment.items()
        if j.agreement < MIN_AGREEMENT
    ]
    f = a.first_failing_step
    if f is not None and f.agreement < MIN_AGREEMENT:
        low.append(f"firstFailingStep {f.agreement:.0%} ({f.agreed}/{f.count})")
    if not low:
        return None
    return (
        f"judge-human agreement below {MIN_AGREEMENT:.0%}: {', '.join(low)}; the judge is "
        "drifting from human judgment: re-prompt or re-train it, then recalibrate thresholds"
    )
