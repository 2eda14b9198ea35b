"""The mapped CSV importer: --map column mappings, same-named columns by default, and errors
that name the header or the cell."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragbatch.core._errors import ConfigError
from ragbatch.core._schema import Context, Row
from ragbatch.data._mapped_csv import CsvReader, parse_mapping
from tests.data.importing import MAPPING, SAMPLES, failure, read, sha, write

CHOICES = "id, question, answer, contexts, referenceAnswer, traceId, metadata.<name>"


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
