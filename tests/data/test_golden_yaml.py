"""Golden-set YAML joined with outputs: by question or by id, merged with a golden block already
on the row, and errors that name the file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragbatch.core._errors import ConfigError, DatasetError
from ragbatch.core._schema import Golden
from ragbatch.data._golden_yaml import GoldenYamlReader
from ragbatch.data._jsonl import JsonlReader
from tests.data.importing import SAMPLES, failure, jsonl, read, sha, write


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
