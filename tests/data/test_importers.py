"""Importers: ragas JSONL/CSV, and the factory that picks a reader (mapped CSV:
test_mapped_csv.py; golden-set YAML joined with outputs: test_golden_yaml.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ragbatch.core._errors import ConfigError
from ragbatch.core._schema import Context, Golden, Row
from ragbatch.data._formats import RowSource, open_dataset
from ragbatch.data._golden_yaml import GoldenYamlReader, expected_documents
from ragbatch.data._jsonl import JsonlReader
from ragbatch.data._mapped_csv import CsvReader, parse_mapping
from ragbatch.data._ragas import RagasReader
from tests.data.importing import MAPPING, ROOT, SAMPLES, failure, jsonl, read, sha, write

REQUIRED = (
    "required: user_input, retrieved_contexts, response (ragas v0.1: question, contexts, answer)"
)


def texts(row: Row) -> list[tuple[str, str]]:
    return [(c.id, c.text) for c in row.contexts]


# --- ragas ------------------------------------------------------------------------------------


def test_ragas_jsonl_sample() -> None:
    path = SAMPLES / "ragas-sample.jsonl"
    reader = RagasReader(path)
    rows = read(reader)
    assert [r.id for r in rows] == ["row-1", "row-2", "row-3", "row-4", "ragas-5"]
    first = rows[0]
    assert first.question == "What is the capital of Australia?"
    assert [c.id for c in first.contexts] == ["c1", "c2"]
    assert first.contexts[0].text.startswith("Canberra is the capital city")
    assert first.answer == "The capital of Australia is Canberra."
    assert first.reference_answer == "Canberra."
    # the reference context differs only in whitespace: it is the retrieved c1
    assert first.golden == Golden(expected_documents=["c1"])
    # a reference context that was not retrieved keeps its place as ref<n>
    assert rows[1].golden is not None
    assert rows[1].golden.expected_documents == ["ref1", "c2"]
    assert rows[2].golden is None and rows[2].reference_answer is None
    assert rows[3].contexts == []
    assert rows[4].golden == Golden(expected_documents=["c1"])
    assert reader.name == "ragas-sample.jsonl"
    assert reader.sha256 == sha(path)


def test_ragas_csv_sample_counts_lines_of_multiline_cells() -> None:
    path = SAMPLES / "ragas-sample.csv"
    reader = RagasReader(path)
    rows = read(reader)
    # header is line 1; the second record's answer spans lines 3-4
    assert [r.id for r in rows] == ["row-2", "row-3", "row-5", "row-6", "row-7"]
    assert (
        rows[1].answer
        == "Frankenstein was written by Mary Shelley.\nIt was first published in 1818."
    )
    assert rows[1].golden == Golden(expected_documents=["ref1", "c2"])
    # a Python list literal (as pandas writes list cells) and empty optional cells
    assert texts(rows[2])[1] == ("c2", "The Moon is about 384,400 km from Earth.")
    assert rows[2].reference_answer is None and rows[2].golden is None
    assert rows[3].contexts == [] and rows[3].reference_answer == "About 78 °C at sea level."
    assert reader.sha256 == sha(path)


def test_expected_documents_maps_texts_to_context_ids() -> None:
    contexts = [
        Context(id="c1", text="a  b"),
        Context(id="c2", text="c"),
        Context(id="c3", text="c"),
    ]
    assert expected_documents(contexts, ["x", " a b\n", "c", "c "]) == ["ref1", "c1", "c2"]
    assert expected_documents([], ["x"]) == ["ref1"]


def test_ragas_jsonl_missing_columns_name_the_record_line(tmp_path: Path) -> None:
    good = {"user_input": "q", "retrieved_contexts": [], "response": "a"}
    path = jsonl(tmp_path / "r.jsonl", [good, {"user_input": "q", "faithfulness": 1.0}])
    missing = "missing ragas column(s) 'retrieved_contexts', 'response'"
    assert failure(RagasReader(path)) == f"{path}:2: {missing}; {REQUIRED}"


def test_ragas_csv_missing_columns_name_the_header(tmp_path: Path) -> None:
    path = write(tmp_path / "r.csv", "query,retrieved_contexts,llm_answer\nq,[],a\n")
    missing = "missing ragas column(s) 'user_input', 'response'"
    assert failure(RagasReader(path)) == f"{path}:1: {missing}; {REQUIRED}"


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"retrieved_contexts": "c"}, "column 'retrieved_contexts': expected an array, got string"),
        (
            {"retrieved_contexts": ["a", 1]},
            "column 'retrieved_contexts': item [1]: expected a string, got number",
        ),
        ({"response": None}, "column 'response': expected a string, got null"),
        ({"reference": 3}, "column 'reference': expected a string, got number"),
        ({"reference_contexts": "a"}, "column 'reference_contexts': expected an array, got string"),
        ({"id": 5}, "column 'id': expected a string, got number"),
    ],
)
def test_ragas_jsonl_bad_values(tmp_path: Path, record: dict[str, object], message: str) -> None:
    base: dict[str, object] = {"user_input": "q", "retrieved_contexts": ["a"], "response": "r"}
    path = jsonl(tmp_path / "r.jsonl", [base, {**base, **record}])
    assert failure(RagasReader(path)) == f"{path}:2: {message}"


def test_ragas_jsonl_file_level_errors(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", "\n[1]\n")
    assert failure(RagasReader(path)) == f"{path}:2: expected a JSON object, got array"
    path = write(tmp_path / "e.json", "\n\n")
    assert failure(RagasReader(path)) == f"{path}: dataset is empty: no rows"
    row = {"id": "x", "user_input": "q", "retrieved_contexts": [], "response": "r"}
    path = jsonl(tmp_path / "d.jsonl", [row, row])
    assert failure(RagasReader(path)) == f"{path}:2: duplicate row id 'x'"
    assert failure(RagasReader(tmp_path / "none.jsonl")).startswith(
        f"{tmp_path / 'none.jsonl'}: cannot read dataset:"
    )


def test_ragas_csv_bad_cells(tmp_path: Path) -> None:
    header = "user_input,retrieved_contexts,response\n"
    path = write(tmp_path / "r.csv", header + 'q,"[""a"", 2]",r\n')
    message = "column 'retrieved_contexts': item [1]: expected a string, got number"
    assert failure(RagasReader(path)) == f"{path}:2: {message}"
    path = write(tmp_path / "s.csv", header + "q,not a list,r\n")
    assert failure(RagasReader(path)).startswith(
        f"{path}:2: column 'retrieved_contexts': not a JSON array: "
    )
    path = write(tmp_path / "t.csv", header + "q,[],r,extra\n")
    assert failure(RagasReader(path)) == f"{path}:2: found 4 columns, the header has 3"
    path = write(tmp_path / "u.csv", "user_input,response,retrieved_contexts,response\n")
    assert failure(RagasReader(path)) == f"{path}:1: duplicate column(s) ['response'] in the header"
    path = write(tmp_path / "v.csv", header)
    assert failure(RagasReader(path)) == f"{path}: dataset is empty: no rows"
    path = write(tmp_path / "w.csv", "")
    assert failure(RagasReader(path)) == f"{path}: dataset is empty: no header row"


def test_ragas_rejects_unknown_extensions(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"ragas datasets end in .jsonl, .json, .csv or .parquet: 'r.tsv'"
    ):
        RagasReader(tmp_path / "r.tsv")


# --- factory and bookkeeping ------------------------------------------------------------------


def test_open_dataset_picks_the_reader() -> None:
    fixture = ROOT / "datasets/rag-fixture.jsonl"
    assert type(open_dataset(fixture, "jsonl")) is JsonlReader
    assert isinstance(open_dataset(SAMPLES / "ragas-sample.csv", "ragas"), RagasReader)
    csv_reader = open_dataset(SAMPLES / "mapped-sample.csv", "csv", mapping=MAPPING)
    assert isinstance(csv_reader, CsvReader)
    assert csv_reader.mapping["contexts"] == "retrieved"
    golden = open_dataset(
        SAMPLES / "golden_set.yaml", "golden-yaml", outputs=SAMPLES / "golden-outputs.jsonl"
    )
    assert isinstance(golden, GoldenYamlReader)
    assert len(read(golden)) == 6


@pytest.mark.parametrize(
    ("fmt", "options", "message"),
    [
        (
            "parquet",
            {},
            "unknown dataset format 'parquet'; choose from jsonl, ragas, csv, golden-yaml, deepeval, "
            "openinference, langfuse",
        ),
        (
            "ragas",
            {"mapping": "question=q"},
            "a column mapping applies only to format 'csv', not 'ragas'",
        ),
        (
            "csv",
            {"outputs": "o.jsonl"},
            "an outputs file applies only to format 'golden-yaml', not 'csv'",
        ),
        ("golden-yaml", {}, "format 'golden-yaml' needs outputs: the JSONL of system outputs"),
        (
            "csv",
            {"mapping": "question"},
            "mapping item 'question': expected field=column, e.g. question=query,answer=response,contexts=ctx",
        ),
    ],
)
def test_open_dataset_errors(fmt: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        open_dataset("x", fmt, **options)  # type: ignore[arg-type]
    assert str(info.value) == message


@pytest.mark.parametrize(
    "make",
    [
        lambda: RagasReader(SAMPLES / "ragas-sample.jsonl"),
        lambda: RagasReader(SAMPLES / "ragas-sample.csv"),
        lambda: CsvReader(SAMPLES / "mapped-sample.csv", parse_mapping(MAPPING)),
        lambda: GoldenYamlReader(SAMPLES / "golden_set.yaml", SAMPLES / "golden-outputs.jsonl"),
    ],
)
def test_sha256_is_stable_and_known_only_at_the_end(make: Callable[[], RowSource]) -> None:
    first, second = make(), make()
    with pytest.raises(RuntimeError, match="once every row has been read"):
        _ = first.sha256
    assert read(first) == read(second)
    assert first.sha256 == second.sha256
    assert len(first.sha256) == 64
