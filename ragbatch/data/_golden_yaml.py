"""Golden labels from other formats: golden-set YAML joined with outputs (does file I/O).

The YAML is a ``golden_set.yaml`` (docs/semantics.md §3a): a list of entries with ``question``,
``expected_documents``, ``expected_sections``, ``expected_answer_contains``,
``must_not_contain``, ``expected_classification``, ``expected_abstention`` and optionally
``id``, ``category``, ``relevance`` and ``counterfactual_of`` (the snake_case names of
:class:`ragbatch.core._schema.Golden`). Unknown entry fields are an error: a typo in a label must not
silently drop it.

Each output row (read by :class:`ragbatch.data._jsonl.JsonlReader`) that matches an entry gets
the entry's labels as its ``golden`` block; rows without an entry pass through unchanged.
``join="auto"`` joins by ``id`` when every entry has one, else by question text compared after
whitespace normalisation (runs of whitespace become one space, ends stripped). Every entry
must match at least one output row. ``sha256`` covers the YAML bytes, then the outputs bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import ValidationError

from ragbatch.core import ConfigError, Context, DatasetError, Golden, Row
from ragbatch.data._base import BOM, describe
from ragbatch.data._jsonl import JsonlReader

Join = Literal["auto", "id", "question"]
JOINS: tuple[str, ...] = ("auto", "id", "question")
GOLDEN_FIELDS: tuple[str, ...] = tuple(Golden.model_fields)
ENTRY_FIELDS: tuple[str, ...] = ("id", "question", *GOLDEN_FIELDS)
YAML_TYPES = {"dict": "a mapping", "list": "a list", "str": "a string", "int": "a number",
              "float": "a number", "bool": "a boolean", "date": "a date", "NoneType": "null"}  # fmt: skip


def normalise_space(text: str) -> str:
    """Collapse runs of whitespace to one space and strip the ends."""
    return " ".join(text.split())


def expected_documents(contexts: list[Context], references: list[str]) -> list[str]:
    """Golden expectedDocuments from ragas ``reference_contexts`` (texts, not document ids).

    Each reference text maps to the id of the first retrieved context with the same
    whitespace-normalised text. One that was not retrieved gets ``ref<n>`` (its 1-based
    position), which names no context, so it still counts as a relevant document missed.
    """
    by_text: dict[str, str] = {}
    for context in contexts:
        by_text.setdefault(normalise_space(context.text), context.id)
    documents: list[str] = []
    for n, text in enumerate(references, start=1):
        document = by_text.get(normalise_space(text), f"ref{n}")
        if document not in documents:
            documents.append(document)
    return documents


@dataclass(frozen=True, slots=True)
class Entry:
    """One golden-set entry: its 0-based index, 1-based YAML line and labels."""

    index: int
    line: int
    id: str | None
    question: str
    golden: Golden

    @property
    def where(self) -> str:
        return f"entries[{self.index}]"


def _kind(value: object) -> str:
    return YAML_TYPES.get(type(value).__name__, type(value).__name__)


def _entry_lines(text: str) -> list[int]:
    """1-based line of each top-level list item (safe_load keeps no positions)."""
    import yaml  # PyYAML: only when a golden set is read (a run's start-up does not pay it)

    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if isinstance(node, yaml.SequenceNode):
        return [item.start_mark.line + 1 for item in node.value]
    return []


def load_entries(path: Path, data: bytes) -> list[Entry]:
    """Parse and check the golden-set YAML; DatasetError names the entry and its line."""
    where = str(path)
    try:
        text = data.removeprefix(BOM).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(where, 0, f"not valid UTF-8: {exc.reason}") from None
    import yaml  # PyYAML: only when a golden set is read (a run's start-up does not pay it)

    try:
        document: Any = yaml.safe_load(text)
        lines = _entry_lines(text)
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 0
        raise DatasetError(where, line, f"invalid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise DatasetError(where, 0, f"invalid YAML: {exc}") from None
    if document is None or document == []:
        raise DatasetError(where, 0, "golden set is empty: no entries")
    if not isinstance(document, list):
        raise DatasetError(
            where, 1, f"expected a YAML list of entries with a 'question', got {_kind(document)}"
        )
    return [_entry(where, i, lines[i], item) for i, item in enumerate(document)]


def _entry(where: str, index: int, line: int, item: object) -> Entry:
    def fail(message: str) -> DatasetError:
        return DatasetError(where, line, f"entries[{index}]: {message}")

    if not isinstance(item, dict):
        raise fail(f"expected a mapping with a 'question', got {_kind(item)}")
    for key in item:
        if key not in ENTRY_FIELDS:
            raise fail(f"unknown field {key!r}; known fields: {', '.join(ENTRY_FIELDS)}")
    if "question" not in item:
        raise fail("missing field 'question'")
    question, entry_id = item["question"], item.get("id")
    if not isinstance(question, str):
        raise fail(f"field 'question': expected a string, got {_kind(question)}")
    if entry_id is not None and not (isinstance(entry_id, str) and entry_id):
        raise fail("field 'id': expected a non-empty string (quote ids such as '001' in YAML)")
    try:
        golden = Golden.model_validate({k: v for k, v in item.items() if k in GOLDEN_FIELDS})
    except ValidationError as exc:
        raise fail(describe(exc, ignore_hint=False)) from None
    return Entry(index, line, entry_id, question, golden)


def _index(path: Path, entries: list[Entry], join: str) -> dict[str, Entry]:
    """Entries by join key; duplicate keys are an error (the join would be ambiguous)."""
    index: dict[str, Entry] = {}
    for entry in entries:
        if join == "id":
            if entry.id is None:
                raise DatasetError(
                    str(path), entry.line, f"{entry.where}: no 'id' to join on (join='id')"
                )
            key, what = entry.id, f"id {entry.id!r}"
        else:
            key, what = normalise_space(entry.question), f"question {entry.question!r}"
        first = index.setdefault(key, entry)
        if first is not entry:
            hint = (
                ""
                if join == "id"
                else "; joining by question needs unique questions: give the entries ids"
            )
            raise DatasetError(
                str(path), entry.line, f"{entry.where}: duplicate {what} (also {first.where}){hint}"
            )
    return index


def line_of(path: Path, row_id: str) -> int:
    """1-based line of the row with this id in a JSONL file (error path only), else 0."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                data = orjson.loads(raw.removeprefix(BOM) if number == 1 else raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(data, dict) and data.get("id") == row_id:
                return number
    return 0


class GoldenYamlReader:
    """Output rows of a JSONL file, each labelled from its golden-set YAML entry."""

    def __init__(
        self,
        yaml_path: str | Path,
        outputs_path: str | Path,
        join: Join = "auto",
        *,
        ignore_unknown_fields: bool = False,
    ) -> None:
        if join not in JOINS:
            raise ConfigError(f"unknown join {join!r}; choose from {', '.join(JOINS)}")
        self.yaml_path = Path(yaml_path)
        self.path = Path(outputs_path)
        self.join: Join = join
        self.ignore_unknown_fields = ignore_unknown_fields
        self.rows = 0
        self._sha256: str | None = None

    @property
    def name(self) -> str:
        return f"{self.path.name}+{self.yaml_path.name}"

    @property
    def sha256(self) -> str:
        if self._sha256 is None:
            raise RuntimeError("sha256 is known only once every row has been read")
        return self._sha256

    def _read_yaml(self) -> bytes:
        try:
            return self.yaml_path.read_bytes()
        except OSError as exc:
            message = f"cannot read golden set: {exc.strerror or exc}"
            raise DatasetError(str(self.yaml_path), 0, message) from None

    def __iter__(self) -> Iterator[Row]:
        data = self._read_yaml()
        entries = load_entries(self.yaml_path, data)
        join = self.join
        if join == "auto":
            join = "id" if all(e.id is not None for e in entries) else "question"
        index = _index(self.yaml_path, entries, join)
        outputs = JsonlReader(self.path, ignore_unknown_fields=self.ignore_unknown_fields)
        matched: set[int] = set()
        for row in outputs:
            key = row.id if join == "id" else normalise_space(row.question)
            entry = index.get(key)
            if entry is not None:
                matched.add(entry.index)
                row = self._label(row, entry)
            self.rows += 1
            yield row
        for entry in entries:
            if entry.index not in matched:
                by = f"id {entry.id!r}" if join == "id" else "this question"
                raise DatasetError(
                    str(self.yaml_path),
                    entry.line,
                    f"{entry.where} (question {entry.question!r}): "
                    f"no output row with {by} in {self.path.name}",
                )
        self._sha256 = self._digest(data, outputs.sha256)

    def _label(self, row: Row, entry: Entry) -> Row:
        """The row with the entry's labels; a differing label already on the row is an error."""
        if normalise_space(row.question) != normalise_space(entry.question):
            raise self._row_error(
                row,
                f"question {row.question!r} differs from {entry.question!r} of "
                f"{self.yaml_path.name} {entry.where} with the same id; fix the id or "
                "join by question",
            )
        labels = {k: getattr(entry.golden, k) for k in entry.golden.model_fields_set}
        if row.golden is not None:
            for key in row.golden.model_fields_set:
                mine = getattr(row.golden, key)
                if key in labels and labels[key] != mine:
                    alias = Golden.model_fields[key].alias or key
                    raise self._row_error(
                        row,
                        f"golden.{alias} {mine!r} conflicts with {labels[key]!r} from "
                        f"{self.yaml_path.name} {entry.where}; keep one of them",
                    )
                labels[key] = mine
        return row.model_copy(update={"golden": Golden.model_validate(labels)})

    def _row_error(self, row: Row, message: str) -> DatasetError:
        return DatasetError(
            str(self.path), line_of(self.path, row.id), f"row {row.id!r}: {message}"
        )

    def _digest(self, data: bytes, outputs_sha256: str) -> str:
        """sha256 of the YAML bytes then the outputs bytes (re-read, checked unchanged)."""
        both, alone = hashlib.sha256(data), hashlib.sha256()
        with self.path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 16), b""):
                both.update(chunk)
                alone.update(chunk)
        if alone.hexdigest() != outputs_sha256:
            raise DatasetError(str(self.path), 0, "file changed while being read; run again")
        return both.hexdigest()
