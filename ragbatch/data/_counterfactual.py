"""Counterfactual rows: the answer documents removed, so the right behaviour is to refuse.

Counterfactual eval: remove the answer documents, verify refusal (docs/semantics.md §6). For every row whose golden
block names ``expectedDocuments`` and whose contexts include at least one of them, this module
builds a variant without those contexts. The user regenerates the answer with their own
generator (answer generation stays outside ragbatch), then ``ragbatch run`` scores the refusal
rate and the False Answer Rate on the variants.

:func:`counterfactual_row` and :func:`counterfactual_rows` are pure. :func:`write_counterfactuals`
is the one I/O edge here (it writes the JSONL file); it is marked as such below.

Rules for a variant of row ``R``:

- id ``"<R.id>#cf"``; contexts = R's contexts minus every context that *matches* an expected
  document: its ``source`` or its ``id`` is listed in ``golden.expectedDocuments``.
- ``answer`` is kept verbatim but flagged stale: ``metadata`` = R's metadata plus
  ``{"counterfactual": true, "needsNewAnswer": true}``.
- ``golden`` is copied with ``expectedAbstention = true``, ``counterfactualOf = R.id`` and
  ``category = "unanswerable"`` and no ``expectedAnswerContains`` (a refusal is now right);
  ``expectedDocuments`` (and grades) are unchanged, so ranking metrics show them as missing.
- ``expected``: if R had labels, they are replaced by ``{"diagnosis": "RETRIEVAL_INSUFFICIENT"}``
  (the old labels described the full context set); a row without labels stays without.
- ``mock``, ``baseline`` and ``claims`` described the old answer and are dropped, unless
  ``keep_mock=True``: then they are kept, with the mock's chunk relevance and the claims'
  citations restricted to the contexts that remain (otherwise the row would not validate).
- Everything else (question, referenceAnswer, traceId) is copied.

Rows are skipped when they have no expected documents (``no_expected``) or when none of their
contexts matches one (``no_match``): removing nothing would not make a counterfactual.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from ragbatch._files import atomic_file
from ragbatch.core import Context, Out, Row

SUFFIX = "#cf"
COUNTERFACTUAL_DIAGNOSIS = "RETRIEVAL_INSUFFICIENT"
SkipReason = Literal["no_expected", "no_match"]


class CounterfactualStats(Out):
    """What :func:`write_counterfactuals` did: rows read, written, and skipped by reason."""

    rows_in: int
    written: int
    skipped_no_expected: int
    skipped_no_match: int


def is_answer_context(context: Context, expected_documents: Iterable[str]) -> bool:
    """True when the context's ``source`` or ``id`` is one of the expected documents."""
    expected = set(expected_documents)
    return context.id in expected or (context.source is not None and context.source in expected)


def skip_reason(row: Row) -> SkipReason | None:
    """Why ``row`` gets no counterfactual, or None when it gets one."""
    expected = row.golden.expected_documents if row.golden else []
    if not expected:
        return "no_expected"
    if not any(is_answer_context(c, expected) for c in row.contexts):
        return "no_match"
    return None


def counterfactual_row(row: Row, keep_mock: bool = False) -> Row | None:
    """The counterfactual variant of ``row`` (module docstring), or None if it is skipped."""
    if skip_reason(row) is not None or row.golden is None:
        return None
    expected_documents = row.golden.expected_documents
    kept = [c for c in row.contexts if not is_answer_context(c, expected_documents)]
    kept_ids = {c.id for c in kept}
    data: dict[str, Any] = row.model_dump()
    data["id"] = row.id + SUFFIX
    data["contexts"] = [c.model_dump() for c in kept]
    data["metadata"] = {**(row.metadata or {}), "counterfactual": True, "needsNewAnswer": True}
    data["golden"] = {
        **row.golden.model_dump(),
        "expected_abstention": True,
        "counterfactual_of": row.id,
        "category": "unanswerable",
        # the right answer is now a refusal: phrases of the old answer are not expected
        "expected_answer_contains": [],
    }
    if row.expected is not None:
        data["expected"] = {"diagnosis": COUNTERFACTUAL_DIAGNOSIS}
    if not keep_mock:
        data["mock"] = data["baseline"] = data["claims"] = None
    else:
        mock = data["mock"]
        if mock is not None:
            relevance = mock["retrieval"]["chunk_relevance"]
            mock["retrieval"]["chunk_relevance"] = {
                k: v for k, v in relevance.items() if k in kept_ids
            }
        for claim in data["claims"] or []:
            claim["citations"] = [c for c in claim["citations"] if c in kept_ids]
    return Row.model_validate(data)


def counterfactual_rows(rows: Iterable[Row], keep_mock: bool = False) -> Iterator[Row]:
    """The counterfactual variant of every row that has one, in input order (lazy)."""
    for row in rows:
        variant = counterfactual_row(row, keep_mock=keep_mock)
        if variant is not None:
            yield variant


# -- I/O edge: the only function of this module that touches the file system ----------------


def write_counterfactuals(
    rows: Iterable[Row], out_path: str | Path, keep_mock: bool = False
) -> CounterfactualStats:
    """Write the variants of ``rows`` to ``out_path`` as JSONL (one camelCase row per line).

    The file is replaced when every row was read (atomically: a bad row leaves it as it was).
    Lines are ``row.model_dump_json(by_alias=True, exclude_none=True)``,
    so they load back with ``Row.model_validate_json`` and ``ragbatch.data._jsonl``. Rows are read
    once, lazily, so a large dataset is streamed.
    """
    rows_in = written = no_expected = no_match = 0
    with atomic_file(Path(out_path)) as out:
        for row in rows:
            rows_in += 1
            reason = skip_reason(row)
            if reason == "no_expected":
                no_expected += 1
                continue
            if reason == "no_match":
                no_match += 1
                continue
            variant = counterfactual_row(row, keep_mock=keep_mock)
            assert variant is not None  # skip_reason said it has one
            out.write(variant.model_dump_json(by_alias=True, exclude_none=True).encode() + b"\n")
            written += 1
    return CounterfactualStats(
        rows_in=rows_in,
        written=written,
        skipped_no_expected=no_expected,
        skipped_no_match=no_match,
    )
