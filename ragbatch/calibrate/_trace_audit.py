"""Human audit of multi-step traces: the line a person labels a trace from, and the first
failing step's judge-human agreement (pure: no I/O; docs/semantics.md §8a).

A trace's sample line carries its steps in order, each with its content from the dataset
(question, hop query and documents, tool call, answer) next to the judge's verdict on it;
never a label (``steps[].expected``, ``firstFailingStepMatch``). People fill in
``human.diagnosis`` for the whole trace and ``human.firstFailingStep``: the index of the
first step that failed, or ``"none"`` when no step did (null: not labelled).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragbatch.calibrate._row_view import row_view
from ragbatch.core import ConfigError, Trace

NO_FAILING_STEP = "none"
TRACE_INSTRUCTIONS = (
    " A line with steps is a multi-step trace: read its steps in order (each with its index, "
    "kind and content next to the judge's verdict on it), give human.diagnosis for the whole "
    "trace, and fill in human.firstFailingStep with the index of the first step that failed, "
    f'or "{NO_FAILING_STEP}" when no step failed.'
)
# The labels a person must not see, and the row-level probabilities a trace does not have.
_LEFT_OUT = {"retrieval", "generation", "expected", "firstFailingStepMatch"}
_STEP_HEAD = ("index", "kind", "turn")


def is_trace_row(row: Mapping[str, Any]) -> bool:
    """Whether a report row (its JSON) is a multi-step trace's."""
    return "steps" in row


def trace_texts(trace: Trace) -> dict[str, Any]:
    """What a person labels a trace from: every step's content, in order, without its mock
    answers or labels."""
    exclude = {"mock", "expected", "span"}
    return {
        "steps": [
            step.model_dump(mode="json", by_alias=True, exclude_none=True, exclude=exclude)
            for step in trace.steps
        ]
    }


def _step(reported: Mapping[str, Any], content: Mapping[str, Any] | None) -> dict[str, Any]:
    out = {k: reported[k] for k in _STEP_HEAD if k in reported}
    out.update((k, v) for k, v in (content or {}).items() if k not in out)
    out.update((k, v) for k, v in reported.items() if k not in out and k != "expected")
    return out


def trace_sample_line(
    row: Mapping[str, Any], text: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """One trace to label: the report's row without labels or row-level probabilities, its
    steps merged with their content (``text``, see :func:`trace_texts`), and empty ``human``
    fields (``diagnosis``, ``firstFailingStep``)."""
    view = row_view(row)
    reported: list[Mapping[str, Any]] = list(row["steps"])
    contents: Sequence[Mapping[str, Any] | None] = [None] * len(reported)
    if text is not None:
        contents = text["steps"]
        if len(contents) != len(reported):
            raise ConfigError(
                f"row {view.id}: the report has {len(reported)} steps and the dataset "
                f"{len(contents)}; pass the dataset the report was run on"
            )
    line: dict[str, Any] = {"id": view.id}
    if view.trace_id is not None:
        line["traceId"] = view.trace_id
    for key, value in row.items():
        if key in _LEFT_OUT or key in line:
            continue
        if key == "steps":
            value = [_step(s, c) for s, c in zip(reported, contents, strict=True)]
        line[key] = value
    line["human"] = {"diagnosis": None, "firstFailingStep": None}
    return line


def human_first_failing_step(key: str, human: Mapping[str, Any], steps: int | None) -> str | None:
    """The person's ``human.firstFailingStep`` as a step index or ``"none"`` (None: not
    labelled); ConfigError naming the label when it is neither, or not a step of the trace
    (``steps``: its step count; None: the row is not a trace)."""
    said = human.get("firstFailingStep")
    if said is None:
        return None
    if steps is None:
        raise ConfigError(
            f"label {key}: human.firstFailingStep is for multi-step traces; row {key} is not one"
        )
    if said == NO_FAILING_STEP:
        return NO_FAILING_STEP
    if isinstance(said, bool) or not isinstance(said, int) or not 0 <= said < steps:
        raise ConfigError(
            f"label {key}: human.firstFailingStep must be a step index of the trace (0 to "
            f'{steps - 1}) or "{NO_FAILING_STEP}", got {said!r}'
        )
    return str(said)


def judged_first_failing_step(first: int | None) -> str:
    """The judge's first failing step as :func:`human_first_failing_step` reads a label."""
    return NO_FAILING_STEP if first is None else str(first)
