"""ragas datasets → rows (file I/O): v0.2 and v0.1 column names, JSON lines, arrays and CSV.

- ``user_input`` (v0.1 ``question``) → question; ``response`` (``answer``) → answer;
  ``reference`` (``ground_truth``) → referenceAnswer; ``id`` → id (else ``row-<line>``).
- ``retrieved_contexts`` (``contexts``; strings; in CSV a JSON array or pandas' Python list
  literal) → contexts, ids ``c1``, ``c2``, ... or ``retrieved_context_ids`` when given (one
  per context, in the same order).
- ``reference_context_ids`` → expectedDocuments as they are; else ``reference_contexts``
  (texts) → expectedDocuments by :func:`expected_documents`.

A file is JSON lines (``.jsonl``, or ``.json`` one object a line), a JSON array of samples
(``.json``: what ``EvaluationDataset.to_list()`` gives, items streamed one at a time, even
on one line), CSV (list cells as JSON, Python list literals or numpy array reprs, as
``Dataset.to_csv`` writes them) or Parquet (``to_pandas().to_parquet()``,
``to_hf_dataset().to_parquet()``; needs pyarrow).
When a record has both a v0.2 and a v0.1 name, the v0.2 one is read. Other columns
(metric scores, ``multi_responses``, ...) are ignored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragbatch.core import ConfigError, Context, Golden, Row
from ragbatch.data._golden_yaml import expected_documents
from ragbatch.data._records import CellError, RecordReader, cell, strings

RAGAS_REQUIRED: tuple[str, ...] = ("user_input", "retrieved_contexts", "response")
V01: dict[str, str] = {
    "user_input": "question",
    "retrieved_contexts": "contexts",
    "response": "answer",
    "reference": "ground_truth",
}
REQUIRED = f"{', '.join(RAGAS_REQUIRED)} (ragas v0.1: {', '.join(V01[c] for c in RAGAS_REQUIRED)})"


class RagasReader(RecordReader):
    """Rows of a ragas JSONL, JSON array or CSV file (chosen by the extension and first byte)."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        suffix = self.path.suffix.lower()
        if suffix not in (".jsonl", ".json", ".csv", ".parquet"):
            raise ConfigError(
                f"ragas datasets end in .jsonl, .json, .csv or .parquet: {self.path.name!r}"
            )
        self.from_csv = suffix == ".csv"

    def _check_columns(self, line: int, columns: list[str]) -> None:
        present = set(columns)
        absent = [c for c in RAGAS_REQUIRED if c not in present and V01[c] not in present]
        if absent:
            missing = ", ".join(repr(c) for c in absent)
            raise self._error(line, f"missing ragas column(s) {missing}; required: {REQUIRED}")

    def _row(self, line: int, record: dict[str, Any]) -> Row:
        def get(column: str, want: type, optional: bool = True) -> Any:
            if column not in record and V01.get(column) in record:
                column = V01[column]
            return cell(record, column, self.from_csv, want, optional)

        def name(column: str) -> str:
            return V01[column] if column not in record and V01.get(column) in record else column

        texts = strings(name("retrieved_contexts"), get("retrieved_contexts", list, False))
        ids = strings("retrieved_context_ids", get("retrieved_context_ids", list) or [])
        if ids and len(ids) != len(texts):
            raise CellError(
                f"column 'retrieved_context_ids': {len(ids)} ids for {len(texts)} contexts"
            )
        contexts = [
            Context(id=ids[i - 1] if ids else f"c{i}", text=text)
            for i, text in enumerate(texts, start=1)
        ]
        references = strings("reference_contexts", get("reference_contexts", list) or [])
        reference_ids = strings("reference_context_ids", get("reference_context_ids", list) or [])
        documents = list(dict.fromkeys(reference_ids)) or expected_documents(contexts, references)
        return Row(
            id=get("id", str) or self.fallback_id,
            question=get("user_input", str, False),
            contexts=contexts,
            answer=get("response", str, False),
            reference_answer=get("reference", str),
            golden=Golden(expected_documents=documents) if documents else None,
        )
