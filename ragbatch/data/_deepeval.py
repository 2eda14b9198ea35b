"""deepeval test cases → rows (file I/O): a JSON array, JSON lines or CSV.

What ``EvaluationDataset.save_as("json")`` writes: test cases with snake_case keys, or the
camelCase aliases (``actualOutput``, ...). Per test case:

- ``input`` → question; ``actual_output`` → answer (both required);
- ``retrieval_context`` → contexts ``c1``, ``c2``, ... in order: strings, or objects
  ``{context, source}`` (``source`` → the context's source, its document id);
- ``expected_output`` → referenceAnswer; ``context`` (the ideal passages, texts) →
  expectedDocuments by :func:`expected_documents`;
- ``additional_metadata`` → metadata; ``id``, else ``name``, else ``row-<line>`` → id.

In CSV and JSON lines (``save_as("csv")``, ``save_as("jsonl")``) the ``retrieval_context`` and
``context`` values are the passages joined with ``|`` (so a passage that itself holds ``|``
cannot be told apart: use ``save_as("json")``), or a JSON array. A passage deepeval wrote
from ``RetrievedContextData`` is the marker string ``deepeval_source=S,deepeval_context=T``:
T is the text, S the source. Other keys (``tools_called``, ``comments``, ...) are
ignored; ``null`` is absent.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from ragbatch.core import ConfigError, Context, Golden, Row
from ragbatch.data._golden_yaml import expected_documents
from ragbatch.data._records import CellError, RecordReader, kind

FIELDS: dict[str, str] = {
    "input": "input",
    "actual_output": "actualOutput",
    "expected_output": "expectedOutput",
    "retrieval_context": "retrievalContext",
    "context": "context",
    "additional_metadata": "additionalMetadata",
    "id": "id",
    "name": "name",
}
REQUIRED: tuple[str, ...] = ("input", "actual_output")
EXPECTED = "required: input, actual_output (or actualOutput)"
SEPARATOR = "|"
# How deepeval writes a RetrievedContextData(context, source) passage to a file.
MARKER = re.compile(r"deepeval_source=(?P<source>.*?),deepeval_context=(?P<context>.*)", re.DOTALL)


class DeepevalReader(RecordReader):
    """Rows of deepeval test cases: a ``.json`` array, ``.jsonl`` lines or ``.csv``."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        suffix = self.path.suffix.lower()
        if suffix not in (".jsonl", ".json", ".csv"):
            raise ConfigError(f"deepeval datasets end in .json, .jsonl or .csv: {self.path.name!r}")
        self.from_csv = suffix == ".csv"

    def _check_columns(self, line: int, columns: list[str]) -> None:
        present = set(columns)
        absent = [f for f in REQUIRED if f not in present and FIELDS[f] not in present]
        if absent:
            missing = ", ".join(repr(f) for f in absent)
            raise self._error(line, f"missing deepeval field(s) {missing}; {EXPECTED}")

    def _value(self, record: dict[str, Any], field: str) -> tuple[str, Any]:
        """The field's key as found and its value (None: absent, null or an empty CSV cell)."""
        key = field if field in record else FIELDS[field]
        value = record.get(key)
        return key, None if (self.from_csv and value == "") else value

    def _text(self, record: dict[str, Any], field: str) -> str | None:
        key, value = self._value(record, field)
        if value is not None and not isinstance(value, str):
            raise CellError(f"field {key!r}: expected a string, got {kind(value)}")
        return value

    def _required(self, record: dict[str, Any], field: str) -> str:
        key, value = self._value(record, field)
        if value is None and self.from_csv:
            raise CellError(f"field {key!r}: empty (a golden not run yet? fill it in first)")
        if not isinstance(value, str):
            raise CellError(f"field {key!r}: expected a string, got {kind(value)}")
        return value

    def _passages(self, record: dict[str, Any], field: str) -> list[tuple[str, str | None]]:
        """``(text, source)`` of each passage of a context list, in order."""
        key, value = self._value(record, field)
        if value is None:
            return []
        if isinstance(value, str):  # save_as csv and jsonl join the passages with "|"
            try:
                value = orjson.loads(value) if value.lstrip().startswith("[") else None
            except orjson.JSONDecodeError:
                value = None
            if not isinstance(value, list):
                value = record[key].split(SEPARATOR)
        if not isinstance(value, list):
            raise CellError(f"field {key!r}: expected an array, got {kind(value)}")
        passages: list[tuple[str, str | None]] = []
        for i, item in enumerate(value):
            where = f"field {key!r}: item [{i}]"
            if isinstance(item, str):
                marker = MARKER.fullmatch(item)
                passages.append(
                    (marker["context"], marker["source"] or None) if marker else (item, None)
                )
                continue
            if not isinstance(item, dict):
                raise CellError(
                    f"{where}: expected a string or {{context, source}}, got {kind(item)}"
                )
            text, source = item.get("context"), item.get("source")
            if not isinstance(text, str):
                raise CellError(f"{where}: field 'context': expected a string, got {kind(text)}")
            if source is not None and not (isinstance(source, str) and source):
                raise CellError(f"{where}: field 'source': expected a non-empty string")
            passages.append((text, source))
        return passages

    def _row(self, line: int, record: dict[str, Any]) -> Row:
        contexts = [
            Context(id=f"c{i}", text=text, source=source)
            for i, (text, source) in enumerate(self._passages(record, "retrieval_context"), 1)
        ]
        ideal = [text for text, _ in self._passages(record, "context")]
        documents = expected_documents(contexts, ideal)
        key, metadata = self._value(record, "additional_metadata")
        if self.from_csv and isinstance(metadata, str):
            try:
                metadata = orjson.loads(metadata)
            except orjson.JSONDecodeError:
                raise CellError(f"field {key!r}: not a JSON object") from None
        if metadata is not None and not isinstance(metadata, dict):
            raise CellError(f"field {key!r}: expected an object, got {kind(metadata)}")
        return Row(
            id=self._text(record, "id") or self._text(record, "name") or self.fallback_id,
            question=self._required(record, "input"),
            contexts=contexts,
            answer=self._required(record, "actual_output"),
            reference_answer=self._text(record, "expected_output"),
            golden=Golden(expected_documents=documents) if documents else None,
            metadata=metadata or None,
        )
