"""The diagnostic matrix: from a weak or regressed metric to where to look first (pure: no I/O).

The first six entries are a published playbook's table, word for word (docs/semantics.md §3b). Trace backward from the bad metric
to the pipeline layer that owns it and fix the upstream layer first: findings are ordered
retrieval before generation (then in matrix order), so a report never sends anyone to patch
the prompt while retrieval is broken. The last three entries are ragbatch's, written from the
same playbook's text on citation quality and abstention.

Report metric names and paths map onto matrix entries by :func:`matrix_key` (for instance
``retrievalRanking.at.10.recall`` and ``hit`` → ``recall``; ``ndcg`` and ``mrr`` →
``contextPrecision``, ranking quality; ``groundedness`` → ``faithfulness``). Names match by
path segment, so pass retrieval metrics, not a classifier's per-label precision or recall.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from ragbatch.metrics._scores import Out

Layer = Literal["retrieval", "generation"]
LAYER_ORDER: dict[str, int] = {"retrieval": 0, "generation": 1}


class Entry(Out):
    """One row of the matrix."""

    key: str
    bad_metric: str
    layer: Layer
    root_cause: str
    look_first: str
    higher_is_better: bool = True
    source: Literal["playbook", "ragbatch"] = "playbook"


MATRIX: tuple[Entry, ...] = (
    Entry(
        key="recall",
        bad_metric="Low Recall@K",
        layer="retrieval",
        root_cause="Bad chunking (chunks too large/small), weak embedding model, indexing gap, "
        "metadata filter too strict",
        look_first="Check chunking strategy, embedding model selection, pre-filter logic",
    ),
    Entry(
        key="precision",
        bad_metric="Low Precision@K",
        layer="retrieval",
        root_cause="Too many irrelevant chunks retrieved, reranker missing or weak, k too high",
        look_first="Reduce k, add/tune reranker, tighten hybrid retrieval",
    ),
    Entry(
        key="contextPrecision",
        bad_metric="Low Context Precision",
        layer="retrieval",
        root_cause="Reranker missing or underperforming — relevant chunks exist but are buried",
        look_first="Reranker not deployed, or ef_search/nprobe index params too loose; tune or "
        "add cross-encoder",
    ),
    Entry(
        key="contextRelevance",
        bad_metric="Low Context Relevance",
        layer="retrieval",
        root_cause="Semantic drift between query and document vocabulary, poor chunking, wrong "
        "retrieval strategy",
        look_first="Check query expansion, embedding model mismatch, chunking granularity",
    ),
    Entry(
        key="answerRelevance",
        bad_metric="Low Answer Relevance",
        layer="generation",
        root_cause="Prompt issue, generation model too weak, instructions unclear or conflicting",
        look_first="Audit system prompt, check for prompt injection, try stronger model",
    ),
    Entry(
        key="faithfulness",
        bad_metric="Low Faithfulness",
        layer="generation",
        root_cause="Hallucination, citation enforcement absent in prompt, grounding prompt too "
        "weak",
        look_first="Add atomic-claim citation check, tighten grounding instructions, check "
        "context packing for noise",
    ),
    Entry(
        key="citationQuality",
        bad_metric="Low Citation Quality",
        layer="generation",
        root_cause="Citations are present but the cited chunk does not contain the specific "
        "assertion (citation presence is not citation quality)",
        look_first="Per-claim citation check: does each cited chunk support its claim; tighten "
        "citation instructions",
        source="ragbatch",
    ),
    Entry(
        key="falseAnswerRate",
        bad_metric="High False Answer Rate",
        layer="generation",
        root_cause="The system answers when it should abstain: abstention instructions weak, or "
        "the model answers from plausible but insufficient context",
        look_first="Counterfactual eval (remove the answer document, verify refusal); "
        "abstention instructions in the prompt",
        higher_is_better=False,
        source="ragbatch",
    ),
    Entry(
        key="falseAbstentionRate",
        bad_metric="High False Abstention Rate",
        layer="generation",
        root_cause="The system refuses although the retrieved context supports an answer: "
        "over-cautious refusal instructions, or context packing hides the evidence",
        look_first="Audit refusal instructions; check that the supporting chunk reaches the "
        "prompt intact",
        higher_is_better=False,
        source="ragbatch",
    ),
)
BY_KEY: dict[str, Entry] = {entry.key: entry for entry in MATRIX}
ALIASES: dict[str, str] = {
    **{entry.key: entry.key for entry in MATRIX},
    "hit": "recall",
    "contextSufficiency": "recall",
    "ndcg": "contextPrecision",
    "mrr": "contextPrecision",
    "chunkRelevance": "contextRelevance",
    "groundedness": "faithfulness",
    "answerLevelAccuracy": "citationQuality",
}


class Finding(Out):
    """A weak or regressed metric with the matrix's triage; value/threshold when known."""

    metric: str
    key: str
    bad_metric: str
    layer: Layer
    root_cause: str
    look_first: str
    value: float | None = None
    threshold: float | None = None


def matrix_key(name: str) -> str | None:
    """The matrix entry of a metric name or dotted report path (last known segment wins)."""
    for segment in reversed(name.split(".")):
        key = ALIASES.get(segment.split("@")[0])
        if key is not None:
            return key
    return None


def _finding(
    name: str, key: str, value: float | None = None, threshold: float | None = None
) -> Finding:
    entry = BY_KEY[key]
    return Finding(
        metric=name,
        key=key,
        bad_metric=entry.bad_metric,
        layer=entry.layer,
        root_cause=entry.root_cause,
        look_first=entry.look_first,
        value=value,
        threshold=threshold,
    )


def _upstream_first(findings: Iterable[Finding]) -> list[Finding]:
    order = {entry.key: i for i, entry in enumerate(MATRIX)}
    return sorted(findings, key=lambda f: (LAYER_ORDER[f.layer], order[f.key], f.metric))


def diagnose_metrics(values: Mapping[str, float], thresholds: Mapping[str, float]) -> list[Finding]:
    """Findings for the metrics worse than their threshold, upstream layer first.

    ``values`` and ``thresholds`` share names (``recall@10``, ``faithfulness``, a report
    path...). A threshold is a minimum for higher-is-better entries and a maximum for the
    others. Names without a threshold or without a matrix entry are not diagnosed.
    """
    findings: list[Finding] = []
    for name, value in values.items():
        key = matrix_key(name)
        threshold = thresholds.get(name)
        if key is None or threshold is None:
            continue
        weak = value < threshold if BY_KEY[key].higher_is_better else value > threshold
        if weak:
            findings.append(_finding(name, key, value, threshold))
    return _upstream_first(findings)


def diagnose_names(names: Iterable[str]) -> list[Finding]:
    """Findings for metrics already known to be bad (e.g. regressed in a gate), upstream first."""
    findings = [_finding(name, key) for name in names if (key := matrix_key(name)) is not None]
    return _upstream_first(findings)
