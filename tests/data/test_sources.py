"""Readers of other tools' exports: ragas v0.1 and arrays, deepeval, OpenInference, Langfuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragbatch.core.errors import DatasetError
from ragbatch.core.schema import Golden, Row
from ragbatch.data.formats import Reader, open_dataset
from ragbatch.data.ragas import RagasReader

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "datasets/samples"


def read(reader: Reader) -> list[Row]:
    """Every row, checked to survive the JSONL round trip the job relies on."""
    rows = list(reader)
    for row in rows:
        dumped = row.model_dump_json(by_alias=True, exclude_none=True)
        assert Row.model_validate_json(dumped) == row
    assert reader.rows == len(rows)
    return rows


def failure(reader: Reader) -> str:
    with pytest.raises(DatasetError) as info:
        list(reader)
    return str(info.value)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def ids(row: Row) -> list[str]:
    return [c.id for c in row.contexts]


GOOD = '{"question": "q", "contexts": [], "answer": "a"}'


# --- ragas ------------------------------------------------------------------------------------


def test_ragas_v01_names_in_a_json_array() -> None:
    rows = read(RagasReader(SAMPLES / "ragas-v01.json"))
    # items of a pretty-printed array take the line their opening brace is on
    assert [r.id for r in rows] == ["row-2", "row-11", "row-19"]
    first = rows[0]
    assert first.question == "When was the Eiffel Tower completed?"
    assert ids(first) == ["c1", "c2"]
    assert first.answer == "It was completed in 1889."
    assert first.reference_answer == "March 1889."
    assert rows[2].question == 'What does a "bit" stand for?'
    assert rows[2].reference_answer is None


def test_ragas_to_list_with_context_ids() -> None:
    rows = read(open_dataset(SAMPLES / "ragas-list.json", "ragas"))
    assert ids(rows[0]) == ["handbook#leave-1", "handbook#leave-4"]
    assert rows[0].golden == Golden(expected_documents=["handbook#leave-1"])
    # a reference id that was not retrieved stays: a relevant document missed
    assert rows[1].golden == Golden(expected_documents=["facilities#gym-access"])


def test_ragas_v02_names_win_over_v01(tmp_path: Path) -> None:
    record = {"user_input": "new", "question": "old", "retrieved_contexts": [], "response": "a"}
    path = write(tmp_path / "r.jsonl", json.dumps(record) + "\n")
    assert read(RagasReader(path))[0].question == "new"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[\n" + GOOD, "2: invalid JSON: the array is not closed"),
        ("[" + GOOD + ",\n]\n", "2: invalid JSON: a comma before the closing ]"),
        ("[" + GOOD + ",,\n]\n", "1: invalid JSON: an empty array item"),
        ("[]\n[]\n", "2: expected one JSON array of objects"),
        ("[1]", "1: expected a JSON object, got number"),
        (
            '[\n {"question": "q",\n  "answer": "a"}\n]',
            "2: missing ragas column(s) 'retrieved_contexts'; required: user_input, "
            "retrieved_contexts, response (ragas v0.1: question, contexts, answer)",
        ),
        (
            '[\n\n  {"question": "q", "contexts": ["x"], "answer": "a"},\n  {"question": 1}\n]',
            "4: missing ragas column(s) 'retrieved_contexts', 'response'; required: user_input, "
            "retrieved_contexts, response (ragas v0.1: question, contexts, answer)",
        ),
        (
            '[{"question": "q", "contexts": "x", "answer": "a"}]',
            "1: column 'contexts': expected an array, got string",
        ),
        (
            '[{"question": "q", "contexts": ["x"], "answer": "a", "retrieved_context_ids": []},'
            '\n {"question": "q", "contexts": ["x"], "answer": "a", '
            '"retrieved_context_ids": ["d1", "d2"]}]',
            "2: column 'retrieved_context_ids': 2 ids for 1 contexts",
        ),
        (
            '[{"question": "q", "contexts": ["x", "y"], "answer": "a", '
            '"retrieved_context_ids": ["d", "d"]}]',
            "1: contexts[1].id: duplicate context id 'd'",
        ),
    ],
)
def test_ragas_json_array_errors_name_the_item_line(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path / "r.json", text)
    assert failure(RagasReader(path)) == f"{path}:{message}"


def test_ragas_json_array_keeps_brackets_inside_strings(tmp_path: Path) -> None:
    item = {"question": 'a ] , [ "{', "contexts": ['\\"]'], "answer": "}"}
    path = write(tmp_path / "r.json", json.dumps([item, item | {"id": "two"}], indent=1))
    rows = read(RagasReader(path))
    assert [r.question for r in rows] == ['a ] , [ "{'] * 2
    assert rows[0].contexts[0].text == '\\"]' and rows[1].id == "two"
