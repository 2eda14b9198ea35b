"""Per-row verdicts in the shapes tracing tools upload (pure: row results in, records out).

A row's verdict is the cascade's: Jev's diagnosis where Jev decided (route ``auto``), the
fallback judge's where it did not. Rows are the report's ``rows[]`` or a ``--rows-out`` file's
lines (camelCase JSON as written); a row names its trace by ``traceId`` and its spans by
``spans.{root, retriever, llm}`` (set by the trace-export readers).

- ``phoenix``: one span annotation per row on the trace's root span (else its LLM span):
  ``span_id``, ``name``, ``annotator_kind``, ``label``, ``score``, ``explanation``, ``metadata``
  -- the columns of the client's ``log_span_annotations_dataframe`` -- and the same label,
  score and explanation under ``result``, where the REST endpoint ``POST
  /v1/span_annotations`` (``{"data": [...]}``) reads them (it ignores the flat ones), and an
  ``identifier`` (``ragbatch-decision-<decision version>``): Phoenix keeps one annotation per
  (name, span, identifier), so uploading the same records again replaces them instead of
  adding copies, and a new decision version's verdicts stand beside the old ones.
- ``langfuse``: two scores per row on the trace (and its root observation when known):
  ``<name>.diagnosis`` (``CATEGORICAL``, the label) and ``<name>.pass`` (``BOOLEAN``, 1 for
  PASS) with ``id``, ``traceId``, ``observationId``, ``name``, ``value``, ``dataType``,
  ``comment`` -- the body of Langfuse's score creation (3.x: one object a request; 5.x: a
  JSON array of them). ``id`` is derived from the trace, observation, score name and report
  version, so uploading the same scores again updates them instead of adding copies.

A multi-step trace's row (docs/semantics.md §8; where each record goes:
:mod:`ragbatch.report._export_traces`) gets its verdict as a row's, on the trace's root span
(Phoenix) or on the trace itself (Langfuse: ``observationId`` null; a session's on the session,
``sessionId``), its explanation naming the first failing (or deciding) step; and its first
failing step, or the deciding step of an uncertain trace, gets its own: a span annotation
``<name>.step`` on the step's span, a ``<name>.step.diagnosis`` score (``CATEGORICAL``) on its
observation, with the step's diagnosis, judgments and decision. A step without a span id is
annotated on the trace's span (scored on its trace), and its explanation says so.

Numbers in explanations and comments are rounded to 2 decimals (``confidence 0.81``).

Rows that cannot be placed (no trace or span id) or have no verdict (Jev failed on them) are
skipped and listed in :attr:`Export.skipped` with the reason, never dropped silently. Where
the fallback judge failed (e.g. no recorded baseline), Jev's own diagnosis is the verdict.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ragbatch.report._export_traces import (
    NO_OBSERVATION,
    NO_SPAN,
    annotated_step,
    is_trace,
    step_explanation,
    step_metadata,
    step_subject,
    trace_metadata,
    trace_note,
    trace_span,
    trace_subject,
)
from ragbatch.report._models import REPORT_VERSION

ExportFormat = Literal["phoenix", "langfuse"]
EXPORT_FORMATS: tuple[str, ...] = ("phoenix", "langfuse")
DEFAULT_NAME = "ragbatch"
PASS = "PASS"


@dataclass
class Export:
    """The records to upload, and the rows left out (id, reason) in input order."""

    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def verdict_of(row: Mapping[str, Any]) -> tuple[str, float, str] | None:
    """The row's final (label, confidence, judge), or None when Jev gave no verdict.

    The cascade's verdict when it has one; else (the fallback judge failed, e.g. a row with
    no recorded baseline) Jev's own diagnosis, ``JUDGE_UNCERTAIN`` included.
    """
    if row.get("status") != "ok":
        return None
    cascade = row.get("cascade") or {}
    label, confidence = cascade.get("diagnosis"), cascade.get("confidence")
    judge = str(cascade.get("source") or "jev")
    if cascade.get("status") != "ok" or not isinstance(label, str):
        label, confidence, judge = row.get("diagnosis"), row.get("confidence"), "jev"
    if not isinstance(label, str) or not isinstance(confidence, int | float):
        return None
    return label, float(confidence), judge


def fallback_error(row: Mapping[str, Any]) -> str | None:
    cascade = row.get("cascade") or {}
    error = cascade.get("error") or {}
    return str(error.get("kind")) if cascade.get("status") == "failed" and error else None


def shown(value: Any) -> Any:
    """A number as a person reads it in a comment (2 decimals); anything else as it is."""
    if isinstance(value, float):
        return round(value, 2)
    return value


def explanation_of(row: Mapping[str, Any], label: str, confidence: float, judge: str) -> str:
    jev = (
        f"Jev: {row.get('diagnosis')} (confidence {shown(row.get('confidence'))}, "
        f"route {row.get('route')})"
    )
    if judge != "jev":
        return f"{jev}; the fallback judge decided {label} (confidence {shown(confidence)})"
    failed = fallback_error(row)
    return f"{jev}; the fallback judge gave no verdict ({failed})" if failed else jev


def metadata_of(row: Mapping[str, Any], judge: str) -> dict[str, Any]:
    """What a reader of the annotation needs to find the row and see why (no texts)."""
    meta: dict[str, Any] = {
        "row_id": row.get("id"),
        "route": row.get("route"),
        "judge": judge,
        "jev_diagnosis": row.get("diagnosis"),
        "jev_confidence": row.get("confidence"),
        "model": row.get("model"),
        "decision": row.get("decisionId"),
        "fallback_error": fallback_error(row),
    }
    for part in ("retrieval", "generation"):
        if row.get(part):
            meta[part] = row[part]
    return {key: value for key, value in meta.items() if value is not None}


def identifier_of(row: Mapping[str, Any]) -> str:
    """A Phoenix annotation's identifier: stable per decision version (the span and the
    evaluator's name are the rest of Phoenix's key)."""
    return f"ragbatch-decision-{row.get('decisionVersion') or REPORT_VERSION}"


def phoenix_annotation(row: Mapping[str, Any], name: str) -> dict[str, Any] | str:
    """The row's span annotation, or why it has none."""
    spans = row.get("spans") or {}
    span_id = spans.get("root") or spans.get("llm")
    if not span_id:
        return "no span id (root or LLM span) on the row"
    verdict = verdict_of(row)
    if verdict is None:
        return "no verdict (the row failed)"
    label, confidence, judge = verdict
    result = {
        "label": label,
        "score": 1.0 if label == PASS else 0.0,
        "explanation": explanation_of(row, label, confidence, judge),
    }
    return {
        "span_id": span_id,
        "name": name,
        "annotator_kind": "LLM",
        **result,
        "result": result,
        "metadata": {**metadata_of(row, judge), "confidence": confidence},
        "identifier": identifier_of(row),
    }


def score_id(trace_id: str, observation: str | None, name: str) -> str:
    """A stable score id (UUID-shaped) for (trace, observation, score name, report version)."""
    key = "\x00".join(("ragbatch", REPORT_VERSION, trace_id, observation or "", name))
    h = hashlib.sha256(key.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def langfuse_scores(row: Mapping[str, Any], name: str) -> list[dict[str, Any]] | str:
    """The row's scores, or why it has none."""
    trace_id = row.get("traceId")
    if not trace_id:
        return "no traceId on the row"
    verdict = verdict_of(row)
    if verdict is None:
        return "no verdict (the row failed)"
    label, confidence, judge = verdict
    observation = (row.get("spans") or {}).get("root")
    comment = explanation_of(row, label, confidence, judge)
    common = {"traceId": trace_id, "observationId": observation}
    diagnosis, passed = f"{name}.diagnosis", f"{name}.pass"
    return [
        {"id": score_id(trace_id, observation, diagnosis), **common, "name": diagnosis,
         "value": label, "dataType": "CATEGORICAL", "comment": comment},
        {"id": score_id(trace_id, observation, passed), **common, "name": passed,
         "value": 1 if label == PASS else 0, "dataType": "BOOLEAN", "comment": comment},
    ]  # fmt: skip


def annotation(
    span_id: str, name: str, label: str, explanation: str, metadata: dict[str, Any],
    identifier: str,
) -> dict[str, Any]:  # fmt: skip
    """One span annotation: the dataframe helper's columns, and ``result`` for REST."""
    result = {"label": label, "score": 1.0 if label == PASS else 0.0, "explanation": explanation}
    return {"span_id": span_id, "name": name, "annotator_kind": "LLM", **result,
            "result": result, "metadata": metadata, "identifier": identifier}  # fmt: skip


def score(key: str, subject: dict[str, Any], name: str, value: Any, data_type: str,
          comment: str) -> dict[str, Any]:  # fmt: skip
    """One Langfuse score on ``subject`` (trace and observation, or session); ``key`` names
    its trace (or session) in the stable id."""
    return {"id": score_id(key, subject.get("observationId"), name), **subject, "name": name,
            "value": value, "dataType": data_type, "comment": comment}  # fmt: skip


def phoenix_trace(row: Mapping[str, Any], name: str) -> list[dict[str, Any]] | str:
    """A trace's span annotations (its verdict, its annotated step's), or why it has none."""
    span_id = trace_span(row)
    if not span_id:
        return "no span id (root or LLM span) on the row"
    verdict = verdict_of(row)
    if verdict is None:
        return "no verdict (the row failed)"
    label, confidence, judge = verdict
    said = f"{explanation_of(row, label, confidence, judge)}; {trace_note(row)}"
    meta = {**metadata_of(row, judge), **trace_metadata(row), "confidence": confidence}
    key = identifier_of(row)
    records = [annotation(span_id, name, label, said, meta, key)]
    step = annotated_step(row)
    if step is not None:
        said = step_explanation(row, step, shown) + ("" if step.get("span") else f" ({NO_SPAN})")
        records.append(annotation(step.get("span") or span_id, f"{name}.step",
                                  step["diagnosis"], said, step_metadata(row, step), key))  # fmt: skip
    return records


def langfuse_trace(row: Mapping[str, Any], name: str) -> list[dict[str, Any]] | str:
    """A trace's scores (its verdict on the trace or session, its annotated step's on the
    step's observation), or why it has none."""
    subject = trace_subject(row)
    if subject is None:
        return "no traceId on the row"
    verdict = verdict_of(row)
    if verdict is None:
        return "no verdict (the row failed)"
    label, confidence, judge = verdict
    key = subject.get("traceId") or f"session {subject['sessionId']}"
    said = f"{explanation_of(row, label, confidence, judge)}; {trace_note(row)}"
    records = [
        score(key, subject, f"{name}.diagnosis", label, "CATEGORICAL", said),
        score(key, subject, f"{name}.pass", 1 if label == PASS else 0, "BOOLEAN", said),
    ]
    step = annotated_step(row)
    if step is not None:
        where = step_subject(row, step) or subject
        placed = "" if where.get("observationId") else f" ({NO_OBSERVATION})"
        records.append(score(where.get("traceId") or key, where, f"{name}.step.diagnosis",
                             step["diagnosis"], "CATEGORICAL",
                             step_explanation(row, step, shown) + placed))  # fmt: skip
    return records


Maker = Callable[[Mapping[str, Any], str], "dict[str, Any] | list[dict[str, Any]] | str"]
MAKERS: dict[tuple[str, bool], Maker] = {
    ("phoenix", False): phoenix_annotation,
    ("phoenix", True): phoenix_trace,
    ("langfuse", False): langfuse_scores,
    ("langfuse", True): langfuse_trace,
}


def export_rows(
    rows: Iterable[Mapping[str, Any]], format: ExportFormat, name: str = DEFAULT_NAME
) -> Export:
    """Every row's records in ``format``, in input order; unplaceable rows skipped, named."""
    out = Export()
    for row in rows:
        made = MAKERS[format, is_trace(row)](row, name)
        if isinstance(made, str):
            out.skipped.append((str(row.get("id")), made))
        elif isinstance(made, dict):
            out.records.append(made)
        else:
            out.records.extend(made)
    return out
