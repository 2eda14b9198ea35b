"""ragas multi-turn samples → traces (file I/O); single-turn samples stay rows.

A ``MultiTurnSample`` is one row whose ``user_input`` is a list of messages ``{content,
type: "human" | "ai" | "tool", tool_calls?: [{name, args}]}`` (a JSON array; in CSV the
Python literal ``to_csv`` writes; in Parquet with Arrow's null keys, dropped). It is read as
one trace, in message order (docs/semantics.md §8):

- a ``human`` message is a user step (a turn's question);
- an ``ai`` message with ``tool_calls`` calls tools: each call is answered by the next
  ``tool`` message (ragas keeps no call id), and becomes a retrieval step when its output
  is documents or its name is a ``--retrieval-tool`` (query: ``args.query``; the output's
  passages split on blank lines, or its JSON documents), else a tool step (``input``: the
  args, ``output``: the tool message's content, decoded when it is JSON);
- an ``ai`` message without tool calls is an answer.

A retrieval tool call without its tool message is an error (a retrieval step without its
documents), as is a turn without an answer. ``reference`` is the trace's referenceAnswer;
its id is ``id``, else ``row-<n>`` (ragas keeps none). A sample whose ``user_input`` is text
is a row, read as :class:`RagasReader` reads it; ``flatten`` gives every sample as a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ragbatch.core import AnswerStep, Row, Trace, UserStep
from ragbatch.data._ragas import V01, RagasReader
from ragbatch.data._records import CellError, cell, kind
from ragbatch.data._steps import (
    Step,
    StepOptions,
    flat_row,
    make_trace,
    retrieval_or_tool,
    step_options,
)
from ragbatch.data._traces import decoded

SINGLE_TURN = ("retrieved_contexts", "response")


def is_multi_turn(columns: Iterable[str]) -> bool:
    """A multi-turn sample has ``user_input`` and none of the single-turn columns."""
    present = set(columns)
    single = {*SINGLE_TURN, *(V01[c] for c in SINGLE_TURN)}
    return "user_input" in present and not present & single


class RagasTraceReader(RagasReader):
    """A ragas file's samples: multi-turn samples as traces, the others as rows."""

    def __init__(
        self,
        path: str | Path,
        *,
        retrieval_tools: Iterable[str] = (),
        flatten: bool = False,
        steps: bool = False,
    ) -> None:
        super().__init__(path)
        self.options = step_options(retrieval_tools, flatten=flatten, steps=steps)

    def _check_columns(self, line: int, columns: list[str]) -> None:
        if not is_multi_turn(columns):
            super()._check_columns(line, columns)

    def items(self) -> Iterator[Row | Trace]:
        """Every sample in file order: a row, or a trace (a row of it with ``flatten``)."""
        return self._each(self._item)

    def __iter__(self) -> Iterator[Row]:
        return self._each(self._row_only)

    def _item(self, line: int, record: dict[str, Any]) -> Row | Trace:
        if not is_multi_turn(record):
            return self._row(line, record)
        messages = record["user_input"]
        if not (isinstance(messages, list) or (self.from_csv and messages.startswith("["))):
            super()._check_columns(line, list(record))  # a single-turn sample's columns
        trace = self._trace(record)
        return flat_row(trace) if self.options.flatten else trace

    def _row_only(self, line: int, record: dict[str, Any]) -> Row:
        item = self._item(line, record)
        if isinstance(item, Trace):
            raise CellError(f"conversation {item.id}: a multi-turn sample is a trace, not a row")
        return item

    def _trace(self, record: dict[str, Any]) -> Trace:
        sample_id = cell(record, "id", self.from_csv, str, True) or self.fallback_id
        where = f"conversation {sample_id}"
        messages = cell(record, "user_input", self.from_csv, list, False)
        return make_trace(
            where,
            id=sample_id,
            steps=message_steps(messages, self.options, where),
            reference_answer=cell(record, "reference", self.from_csv, str, True),
        )


def message_steps(messages: list[Any], options: StepOptions, where: str) -> list[Step]:
    """The steps of a ragas message list, in order (see the module docstring)."""
    steps: list[Step] = []
    calls: list[tuple[str, Any, str]] = []  # (name, args, where) awaiting a tool message
    question = ""

    def unanswered() -> None:
        for name, args, at in calls:
            steps.append(retrieval_or_tool(name, args, None, question, options, at))
        calls.clear()

    for i, message in enumerate(messages):
        at = f"{where}: user_input[{i}]"
        if not isinstance(message, dict):
            raise CellError(f"{at}: expected a message object, got {kind(message)}")
        content, type_ = message.get("content"), message.get("type")
        if not isinstance(content, str):
            raise CellError(f"{at}.content: expected a string, got {kind(content)}")
        if type_ == "tool":
            if not calls:
                raise CellError(f"{at}: a tool message without a tool call before it")
            name, args, _ = calls.pop(0)
            steps.append(retrieval_or_tool(name, args, decoded(content), question, options, at))
            continue
        unanswered()
        if type_ == "human":
            question = content
            steps.append(UserStep(kind="user", text=content))
        elif type_ == "ai" and message.get("tool_calls"):
            calls += tool_calls(message["tool_calls"], at)
        elif type_ == "ai":
            steps.append(AnswerStep(kind="answer", text=content))
        else:
            raise CellError(f"{at}.type: expected human, ai or tool, got {type_!r}")
    unanswered()
    return steps


def tool_calls(value: Any, where: str) -> list[tuple[str, Any, str]]:
    """An ai message's ``tool_calls`` as (name, args, where)."""
    if not isinstance(value, list):
        raise CellError(f"{where}.tool_calls: expected an array, got {kind(value)}")
    calls = []
    for j, call in enumerate(value):
        at = f"{where}.tool_calls[{j}]"
        name = call.get("name") if isinstance(call, dict) else None
        if not (isinstance(name, str) and name):
            raise CellError(f"{at}.name: expected a non-empty string, got {kind(name)}")
        calls.append((name, call.get("args"), at))
    return calls
