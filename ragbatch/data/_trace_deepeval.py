"""deepeval conversations → traces (file I/O); single-turn test cases stay rows.

A ``ConversationalTestCase`` or ``ConversationalGolden`` (``save_as`` JSON, JSON lines or
CSV, where the ``turns`` cell is JSON; or ``model_dump_json`` lines) is one trace whose
``turns`` are read in order (docs/semantics.md §8):

- a ``user`` turn is a user step;
- an ``assistant`` turn is, in this order, one retrieval step when it has a
  ``retrieval_context`` (deepeval keeps one flat list a turn: no query, so the turn's question
  is the step's query, and no hop boundaries), a step per ``tools_called`` entry in list
  order (``input_parameters``/``inputParameters`` → input; a tool whose output is documents,
  or a ``--retrieval-tool``, is a retrieval step) and the answer (its ``content``).

deepeval keeps no order between a turn's ``retrieval_context`` and its tools, so the
retrieval step comes first. Passages are read as :class:`DeepevalReader` reads a test case's
(``deepeval_source=S,deepeval_context=T`` markers, ``{context, source}`` objects), ids ``c1``,
``c2``, ... within the turn. Id: ``id``, else ``name``, else ``row-<n>``; metadata:
``additional_metadata``, else ``metadata``. A test case with ``input``/``actual_output`` is a
row as before; ``flatten`` gives every conversation as a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from ragbatch.core import AnswerStep, Row, Trace, UserStep
from ragbatch.data._deepeval import DeepevalReader
from ragbatch.data._records import CellError, kind
from ragbatch.data._steps import (
    Step,
    flat_row,
    make_trace,
    retrieval,
    retrieval_or_tool,
    step_options,
)
from ragbatch.data._traces import Document


class DeepevalTraceReader(DeepevalReader):
    """A deepeval file's test cases: conversations as traces, the others as rows."""

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
        if "turns" not in columns:
            super()._check_columns(line, columns)

    def items(self) -> Iterator[Row | Trace]:
        """Every test case in file order: a row, or a trace (a row of it with ``flatten``)."""
        return self._each(self._item)

    def __iter__(self) -> Iterator[Row]:
        return self._each(self._row_only)

    def _item(self, line: int, record: dict[str, Any]) -> Row | Trace:
        if "turns" not in record:
            return self._row(line, record)
        trace = self._conversation(record)
        return flat_row(trace) if self.options.flatten else trace

    def _row_only(self, line: int, record: dict[str, Any]) -> Row:
        item = self._item(line, record)
        if isinstance(item, Trace):
            raise CellError(f"conversation {item.id}: a conversation is a trace, not a row")
        return item

    def _json_cell(self, record: dict[str, Any], key: str) -> Any:
        value = record.get(key)
        if self.from_csv and isinstance(value, str):
            if not value:
                return None
            try:
                return orjson.loads(value)
            except orjson.JSONDecodeError as exc:
                raise CellError(f"field {key!r}: not JSON: {exc}") from None
        return value

    def _conversation(self, record: dict[str, Any]) -> Trace:
        conversation = self._text(record, "id") or self._text(record, "name") or self.fallback_id
        where = f"conversation {conversation}"
        turns = self._json_cell(record, "turns")
        if not isinstance(turns, list):
            raise CellError(f"{where}: field 'turns': expected an array, got {kind(turns)}")
        steps: list[Step] = []
        question = ""
        for i, turn in enumerate(turns):
            at = f"{where}: turns[{i}]"
            if not isinstance(turn, dict):
                raise CellError(f"{at}: expected an object, got {kind(turn)}")
            role, content = turn.get("role"), turn.get("content")
            if not isinstance(content, str):
                raise CellError(f"{at}.content: expected a string, got {kind(content)}")
            if role == "user":
                question = content
                steps.append(UserStep(kind="user", text=content))
            elif role == "assistant":
                steps += self._assistant(turn, question, at)
                steps.append(AnswerStep(kind="answer", text=content))
            else:
                raise CellError(f"{at}.role: expected user or assistant, got {role!r}")
        metadata = self._json_cell(record, "additional_metadata")
        if metadata is None:
            metadata = self._json_cell(record, "metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise CellError(f"{where}: field 'additional_metadata': expected an object")
        return make_trace(where, id=conversation, steps=steps, metadata=metadata or None)

    def _assistant(self, turn: dict[str, Any], question: str, where: str) -> list[Step]:
        """An assistant turn's retrieval step (if any) and tool steps, before its answer."""
        steps: list[Step] = []
        try:
            _, listed = self._value(turn, "retrieval_context")
            passages = self._passages(turn, "retrieval_context")
        except CellError as exc:
            raise CellError(f"{where}: {exc}") from None
        if listed is not None:
            documents = [
                Document(rank=n, id=None, content=text, source=source)
                for n, (text, source) in enumerate(passages)
            ]
            steps.append(retrieval(None, documents, question))
        calls = turn.get("tools_called", turn.get("toolsCalled"))
        if calls is not None and not isinstance(calls, list):
            raise CellError(f"{where}.tools_called: expected an array, got {kind(calls)}")
        for j, call in enumerate(calls or []):
            at = f"{where}.tools_called[{j}]"
            if not isinstance(call, dict):
                raise CellError(f"{at}: expected an object, got {kind(call)}")
            name = call.get("name")
            if not isinstance(name, str):
                raise CellError(f"{at}.name: expected a string, got {kind(name)}")
            arguments = call.get("input_parameters", call.get("inputParameters"))
            output = call.get("output")
            steps.append(retrieval_or_tool(name, arguments, output, question, self.options, at))
        return steps
