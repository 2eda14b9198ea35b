"""Importers: ragas JSONL/CSV, mapped CSV and golden-set YAML joined with outputs."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from ragbatch.core._errors import ConfigError, DatasetError
from ragbatch.core._schema import Context, Golden, Row
from ragbatch.data._formats import RowSource, open_dataset
from ragbatch.data._golden_yaml import GoldenYamlReader, expected_documents
from ragbatch.data._jsonl import JsonlReader
from ragbatch.data._mapped_csv import CsvReader, parse_mapping
from ragbatch.data._ragas import RagasReader

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "datasets/samples"
MAPPING = (
    "id=query_id,question=query,answer=llm_answer,contexts=retrieved,"
    "referenceAnswer=gold_answer,traceId=trace,metadata.topic=topic,metadata.lang=lang"
)
CHOICES = "id, question, answer, contexts, referenceAnswer, traceId, metadata.<name>"
REQUIRED = (
    "required: user_input, retrieved_contexts, response (ragas v0.1: question, contexts, answer)"
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


# --- mapped CSV -------------------------------------------------------------------------------


def test_mapped_csv_sample() -> None:
    path = SAMPLES / "mapped-sample.csv"
    reader = CsvReader(path, parse_mapping(MAPPING))
    rows = read(reader)
    assert [r.id for r in rows] == ["q-101", "q-102", "q-103", "q-104", "q-105"]
    first = rows[0]
    assert first.question == "How do I reset my password?"
    assert first.answer == 'Open Settings > Account and choose "Reset password".'
    assert [(c.id, c.source) for c in first.contexts] == [
        ("kb-12", "help-center/account.md"),
        ("kb-40", "help-center/security.md"),
    ]
    assert first.reference_answer == "Settings > Account > Reset password."
    assert first.trace_id == "tr-9f1"
    assert first.metadata == {"topic": "account", "lang": "en"}
    assert rows[1].reference_answer is None  # empty cell: no reference
    assert [c.id for c in rows[2].contexts] == ["c1", "c2"]  # plain strings get c<n>
    assert rows[2].trace_id is None
    assert rows[3].metadata == {"lang": "de"}  # empty metadata cells are left out
    assert rows[4].contexts == []
    assert reader.sha256 == sha(path)


def test_csv_defaults_to_same_named_columns(tmp_path: Path) -> None:
    path = write(
        tmp_path / "d.csv",
        '\ufeffanswer,question,contexts,other\r\n\r\na,q,"[{""text"": ""t"", ""source"": ""s""}]",x\r\n',
    )
    rows = read(CsvReader(path))
    assert rows == [
        Row(id="row-3", question="q", contexts=[Context(id="c1", text="t", source="s")], answer="a")
    ]


def test_csv_missing_mapped_columns_name_the_header(tmp_path: Path) -> None:
    path = write(tmp_path / "m.csv", "q,answer,ctx2\nx,y,[]\n")
    reader = CsvReader(path, parse_mapping("question=query,contexts=ctx"))
    missing = "missing column(s) 'query' (for question), 'ctx' (for contexts)"
    assert failure(reader) == f"{path}:1: {missing}; the header has q, answer, ctx2"


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ('"[{""id"": ""a""}]"', "column 'ctx': item [0]: missing field 'text'"),
        ('"[{""text"": ""t"", ""score"": 1}]"', "column 'ctx': item [0]: unknown field 'score'"),
        (
            '"[""a"", {""id"": ""c1"", ""text"": ""b""}]"',
            "column 'ctx': item [1]: duplicate context id 'c1'",
        ),
        ('"[[""a""]]"', "column 'ctx': item [0]: expected a string or an object, got array"),
        ('"{""text"": ""t""}"', "column 'ctx': expected an array, got object"),
    ],
)
def test_csv_bad_contexts(tmp_path: Path, cell: str, message: str) -> None:
    path = write(tmp_path / "c.csv", f"question,answer,ctx\nq,a,[]\nq,a,{cell}\n")
    assert failure(CsvReader(path, {"contexts": "ctx"})) == f"{path}:3: {message}"


def test_parse_mapping() -> None:
    text = " question = query , answer=response,contexts=ctx,metadata.topic=topic,id=query "
    assert parse_mapping(text) == {
        "question": "query",
        "answer": "response",
        "contexts": "ctx",
        "metadata.topic": "topic",
        "id": "query",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "question",
            "mapping item 'question': expected field=column, e.g. question=query,answer=response,contexts=ctx",
        ),
        (
            "",
            "mapping item '': expected field=column, e.g. question=query,answer=response,contexts=ctx",
        ),
        (
            "question=q,",
            "mapping item '': expected field=column, e.g. question=query,answer=response,contexts=ctx",
        ),
        (
            "question=",
            "mapping item 'question=': expected field=column, e.g. question=query,answer=response,contexts=ctx",
        ),
        ("question=q,foo=bar", f"unknown mapping field 'foo'; choose from {CHOICES}"),
        (
            "reference_answer=ref",
            f"unknown mapping field 'reference_answer'; choose from {CHOICES}",
        ),
        ("metadata.=x", f"unknown mapping field 'metadata.'; choose from {CHOICES}"),
        ("question=a,question=b", "mapping field 'question' is given twice"),
    ],
)
def test_parse_mapping_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_mapping(text)
    assert str(info.value) == message


def test_csv_reader_checks_a_dict_mapping(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown mapping field 'golden'"):
        CsvReader(tmp_path / "x.csv", {"golden": "g"})


# --- golden-set YAML joined with outputs --------------------------------------------------------


def output(row_id: str, question: str, **extra: object) -> dict[str, object]:
    return {"id": row_id, "question": question, "contexts": [], "answer": "a", **extra}


def test_golden_yaml_sample_joins_by_question() -> None:
    yaml_path, outputs = SAMPLES / "golden_set.yaml", SAMPLES / "golden-outputs.jsonl"
    reader = GoldenYamlReader(yaml_path, outputs)
    rows = read(reader)
    plain = list(JsonlReader(outputs))
    assert [r.id for r in rows] == [f"g-00{i}" for i in range(1, 7)]
    assert [r.model_copy(update={"golden": None}) for r in rows] == plain
    first = rows[0].golden
    assert first == Golden(
        expected_documents=["contractor-policy.pdf#page=12"],
        expected_sections=["Approval Requirements"],
        expected_answer_contains=["written approval", "certificate of compliance"],
        must_not_contain=["unsupported cost estimate"],
        expected_classification="policy_question",
        expected_abstention=False,
        category="happy",
        relevance={"contractor-policy.pdf#page=12": 3, "contractor-policy.pdf#page=13": 1},
    )
    # the output's question has a double space: matched after whitespace normalisation
    assert rows[1].golden is not None and rows[1].golden.expected_documents == [
        "leave-policy.pdf#page=3"
    ]
    last = rows[5].golden
    assert last is not None and last.expected_abstention is True and last.category == "unanswerable"
    assert [r.golden.expected_classification for r in rows if r.golden] == [
        "policy_question", "policy_question", "how_to", "comparison", "policy_question", "out_of_scope",
    ]  # fmt: skip
    assert all(r.mock is not None and r.mock.generation.abstention is not None for r in rows)
    assert reader.name == "golden-outputs.jsonl+golden_set.yaml"
    assert reader.sha256 == sha(yaml_path, outputs)
    again = GoldenYamlReader(yaml_path, outputs, "question")
    list(again)
    assert again.sha256 == reader.sha256


def test_golden_yaml_joins_by_id_and_passes_other_rows_through(tmp_path: Path) -> None:
    yaml_path = write(
        tmp_path / "g.yaml",
        "- id: r2\n  question: Two?\n  expected_documents: [d2]\n"
        "- id: r1\n  question: One?\n  expected_abstention: true\n",
    )
    outputs = jsonl(
        tmp_path / "o.jsonl", [output("r1", "One?"), output("r2", "Two?"), output("r3", "Two?")]
    )
    rows = read(GoldenYamlReader(yaml_path, outputs))
    assert [r.golden for r in rows] == [
        Golden(expected_abstention=True),
        Golden(expected_documents=["d2"]),
        None,  # r3 asks the same question, but the join is by id
    ]
    rows = read(GoldenYamlReader(yaml_path, outputs, "question"))
    assert [r.golden for r in rows][1:] == [Golden(expected_documents=["d2"])] * 2


def test_golden_yaml_merges_with_a_golden_block_already_on_the_row(tmp_path: Path) -> None:
    yaml_path = write(
        tmp_path / "g.yaml", "- question: Q?\n  expected_documents: [d1]\n  category: edge\n"
    )
    mine = {"golden": {"expectedDocuments": ["d1"], "expectedSections": ["S"]}}
    outputs = jsonl(tmp_path / "o.jsonl", [output("r1", "Q?", **mine)])
    [row] = read(GoldenYamlReader(yaml_path, outputs))
    assert row.golden == Golden(expected_documents=["d1"], expected_sections=["S"], category="edge")


def test_golden_yaml_conflicting_golden_block(tmp_path: Path) -> None:
    yaml_path = write(tmp_path / "g.yaml", "- question: Q?\n  expected_documents: [d1]\n")
    conflict = {"golden": {"expectedDocuments": ["d9"]}}
    outputs = jsonl(tmp_path / "o.jsonl", [output("r0", "Other?"), output("r1", "Q?", **conflict)])
    assert failure(GoldenYamlReader(yaml_path, outputs)) == (
        f"{outputs}:2: row 'r1': golden.expectedDocuments ['d9'] conflicts with ['d1'] "
        "from g.yaml entries[0]; keep one of them"
    )


def test_golden_yaml_unmatched_entry(tmp_path: Path) -> None:
    yaml_path = write(
        tmp_path / "g.yaml", "- question: One?\n\n- question: Two?\n  category: edge\n"
    )
    outputs = jsonl(tmp_path / "o.jsonl", [output("r1", "One?")])
    assert failure(GoldenYamlReader(yaml_path, outputs)) == (
        f"{yaml_path}:3: entries[1] (question 'Two?'): no output row with this question in o.jsonl"
    )
    yaml_path = write(
        tmp_path / "i.yaml", "- id: r1\n  question: One?\n- id: r2\n  question: Two?\n"
    )
    assert failure(GoldenYamlReader(yaml_path, outputs)) == (
        f"{yaml_path}:3: entries[1] (question 'Two?'): no output row with id 'r2' in o.jsonl"
    )


def test_golden_yaml_duplicate_question(tmp_path: Path) -> None:
    yaml_path = write(
        tmp_path / "g.yaml", "- question: What?\n- question: Why?\n- question: ' What? '\n"
    )
    outputs = jsonl(tmp_path / "o.jsonl", [output("r1", "What?")])
    assert failure(GoldenYamlReader(yaml_path, outputs)) == (
        f"{yaml_path}:3: entries[2]: duplicate question ' What? ' (also entries[0]); "
        "joining by question needs unique questions: give the entries ids"
    )
    yaml_path = write(tmp_path / "i.yaml", "- id: a\n  question: A?\n- id: a\n  question: B?\n")
    assert failure(GoldenYamlReader(yaml_path, outputs)) == (
        f"{yaml_path}:3: entries[1]: duplicate id 'a' (also entries[0])"
    )


def test_golden_yaml_id_join_checks_the_question(tmp_path: Path) -> None:
    yaml_path = write(tmp_path / "g.yaml", "- id: r1\n  question: One?\n")
    outputs = jsonl(tmp_path / "o.jsonl", [output("r1", "Uno?")])
    assert failure(GoldenYamlReader(yaml_path, outputs)) == (
        f"{outputs}:1: row 'r1': question 'Uno?' differs from 'One?' of g.yaml entries[0] "
        "with the same id; fix the id or join by question"
    )
    with pytest.raises(DatasetError, match=r"g.yaml:1: entries\[0\]: no 'id' to join on"):
        list(GoldenYamlReader(write(tmp_path / "g.yaml", "- question: One?\n"), outputs, "id"))


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "- question: Q?\n  expected_document: [d]\n",
            1,
            "entries[0]: unknown field 'expected_document'; known fields: id, question, expected_documents,",
        ),
        (
            "- question: Q?\n- expected_abstention: false\n",
            2,
            "entries[1]: missing field 'question'",
        ),
        (
            "- question: 2024-01-01\n",
            1,
            "entries[0]: field 'question': expected a string, got a date",
        ),
        (
            "- question: Q?\n  id: 7\n",
            1,
            "entries[0]: field 'id': expected a non-empty string (quote ids such as '001' in YAML)",
        ),
        (
            "- question: Q?\n  expected_abstention: 'no'\n",
            1,
            "entries[0]: field 'expected_abstention': expected true or false",
        ),
        (
            "- question: Q?\n  category: hard\n",
            1,
            "entries[0]: field 'category': Input should be 'happy', 'edge' or 'unanswerable'",
        ),
        (
            "- question: Q?\n  relevance: {d1: 5}\n",
            1,
            "entries[0]: field 'relevance.d1': must be <= 3, got 5",
        ),
        ("- just a string\n", 1, "entries[0]: expected a mapping with a 'question', got a string"),
        ("question: Q?\n", 1, "expected a YAML list of entries with a 'question', got a mapping"),
        ("- question: [unclosed\n", 2, "invalid YAML: expected ',' or ']', but got '<stream end>'"),
        ("", 0, "golden set is empty: no entries"),
    ],
)
def test_golden_yaml_bad_entries(tmp_path: Path, text: str, line: int, message: str) -> None:
    yaml_path = write(tmp_path / "g.yaml", text)
    outputs = jsonl(tmp_path / "o.jsonl", [output("r1", "Q?")])
    where = f"{yaml_path}:{line}" if line else str(yaml_path)
    assert failure(GoldenYamlReader(yaml_path, outputs)).startswith(f"{where}: {message}")


def test_golden_yaml_bad_outputs_and_join(tmp_path: Path) -> None:
    yaml_path = write(tmp_path / "g.yaml", "- question: Q?\n")
    outputs = write(tmp_path / "o.jsonl", '{"id": "r1"}\n')
    assert failure(GoldenYamlReader(yaml_path, outputs)) == f"{outputs}:1: missing field 'question'"
    missing = tmp_path / "none.yaml"
    assert failure(GoldenYamlReader(missing, outputs)).startswith(
        f"{missing}: cannot read golden set:"
    )
    with pytest.raises(ConfigError, match="unknown join 'text'; choose from auto, id, question"):
        GoldenYamlReader(yaml_path, outputs, "text")  # type: ignore[arg-type]


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
