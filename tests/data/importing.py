"""Reading rows and failures from the importers, and writing input files, for
tests/data/test_importers.py, test_mapped_csv.py, test_golden_yaml.py and test_sources.py.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

import pytest

from ragbatch.core._errors import DatasetError
from ragbatch.core._schema import Row
from ragbatch.data._formats import RowSource

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "datasets/samples"
MAPPING = (
    "id=query_id,question=query,answer=llm_answer,contexts=retrieved,"
    "referenceAnswer=gold_answer,traceId=trace,metadata.topic=topic,metadata.lang=lang"
)


def read(reader: RowSource) -> list[Row]:
    """Every row, checked to survive the JSONL round trip the job relies on."""
    rows = list(reader)
    for row in rows:
        dumped = row.model_dump_json(by_alias=True, exclude_none=True)
        assert Row.model_validate_json(dumped) == row
    assert reader.rows == len(rows)
    return rows


def failure(reader: RowSource) -> str:
    with pytest.raises(DatasetError) as info:
        list(reader)
    return str(info.value)


def sha(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def jsonl(path: Path, records: Iterable[object]) -> Path:
    return write(path, "".join(json.dumps(r) + "\n" for r in records))
