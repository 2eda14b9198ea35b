"""Readers of other tools' exports: ragas v0.1 and arrays, deepeval, OpenInference, Langfuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragbatch.core.errors import ConfigError, DatasetError
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


# --- deepeval ---------------------------------------------------------------------------------


def test_deepeval_json_sample() -> None:
    rows = read(open_dataset(SAMPLES / "deepeval-sample.json", "deepeval"))
    assert [r.id for r in rows] == ["refund-window", "ship-norway", "row-23"]
    first, second, third = rows
    assert first.question == "What is the refund window for online orders?"
    assert first.answer == "Online orders can be refunded within 30 days of delivery."
    assert first.reference_answer == "30 days from delivery."
    assert ids(first) == ["c1", "c2"]
    assert first.golden == Golden(expected_documents=["c1"])
    assert first.metadata == {"topic": "returns"}
    # camelCase aliases and {context, source} passages
    assert second.answer.startswith("Yes, we ship to Norway")
    assert [(c.text, c.source) for c in second.contexts] == [
        ("We ship to all EU member states.", "shipping.md#zones"),
        ("Shipping to the EU takes 3 to 5 business days.", "shipping.md#times"),
    ]
    assert second.reference_answer is None and second.golden is None
    assert third.contexts == [] and third.reference_answer is None


def test_deepeval_csv_sample_splits_contexts_on_the_bar() -> None:
    rows = read(open_dataset(SAMPLES / "deepeval-sample.csv", "deepeval"))
    assert [r.id for r in rows] == ["refund-window", "ship-norway"]
    assert [c.text for c in rows[0].contexts] == [
        "Online orders may be returned for a full refund within 30 days of delivery.",
        "Gift cards are not refundable.",
    ]
    assert rows[0].golden == Golden(expected_documents=["c1"])
    assert rows[1].answer == "Yes, we ship to Norway\nwithin 3 business days."
    assert rows[1].reference_answer is None and rows[1].golden is None


def test_deepeval_csv_takes_a_json_array_cell(tmp_path: Path) -> None:
    path = write(
        tmp_path / "d.csv", 'input,actual_output,retrieval_context\nq,a,"[""x|y"", ""z""]"\n'
    )
    assert [c.text for c in read(open_dataset(path, "deepeval"))[0].contexts] == ["x|y", "z"]


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (
            {"input": "q"},
            "missing deepeval field(s) 'actual_output'; required: input, "
            "actual_output (or actualOutput)",
        ),
        (
            {"input": "q", "actual_output": None},
            "field 'actual_output': expected a string, got null",
        ),
        ({"input": 3, "actualOutput": "a"}, "field 'input': expected a string, got number"),
        (
            {"input": "q", "actual_output": "a", "retrieval_context": "x"},
            "field 'retrieval_context': expected an array, got string",
        ),
        (
            {"input": "q", "actual_output": "a", "retrievalContext": [{"text": "x"}]},
            "field 'retrievalContext': item [0]: field 'context': expected a string, got null",
        ),
        (
            {"input": "q", "actual_output": "a", "retrieval_context": [1]},
            "field 'retrieval_context': item [0]: expected a string or {context, source}, "
            "got number",
        ),
        (
            {"input": "q", "actual_output": "a", "additional_metadata": [1]},
            "field 'additional_metadata': expected an object, got array",
        ),
    ],
)
def test_deepeval_bad_test_cases(tmp_path: Path, record: dict[str, object], message: str) -> None:
    good = {"input": "q", "actual_output": "a"}
    path = write(tmp_path / "d.jsonl", json.dumps(good) + "\n" + json.dumps(record) + "\n")
    assert failure(open_dataset(path, "deepeval")) == f"{path}:2: {message}"


def test_deepeval_bad_files(tmp_path: Path) -> None:
    path = write(tmp_path / "d.json", '{"input": "q", "actual_output": "a"}\n[1]\n')
    assert failure(open_dataset(path, "deepeval")) == f"{path}:2: expected a JSON object, got array"
    path = write(tmp_path / "d.csv", "input,expected_output\nq,a\n")
    assert failure(open_dataset(path, "deepeval")) == (
        f"{path}:1: missing deepeval field(s) 'actual_output'; required: input, actual_output "
        "(or actualOutput)"
    )
    with pytest.raises(ConfigError, match=r"deepeval datasets end in .json, .jsonl or .csv"):
        open_dataset(tmp_path / "d.yaml", "deepeval")
