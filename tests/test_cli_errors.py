"""Bad input: one clear line on stderr naming file, line and field; exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app

ROOT = Path(__file__).resolve().parent.parent
GOOD = '{"id":"a","question":"q","contexts":[{"id":"c1","text":"t"}],"answer":"x"}'
MOCK = (
    '"mock":{"retrieval":{"chunkRelevance":{"c1":0.9},"sufficiency":0.9,"conflict":0.1},'
    '"generation":{"relevance":0.9,"groundedness":0.9,"contradiction":0.1}}'
)
FULL = GOOD[:-1] + "," + MOCK + "}"

CASES = [
    (
        "invalid-json",
        GOOD + "\n{not json\n",
        ":2: invalid JSON: key must be a string at line 1 column 2",
    ),
    ("not-object", "[1, 2]\n", ":1: expected a JSON object, got array"),
    ("missing", '{"id":"a","contexts":[],"answer":"x"}\n', ":1: missing field 'question'"),
    (
        "wrong-type",
        '{"id":"a","question":3,"contexts":[],"answer":"x"}\n',
        ":1: field 'question': expected a string",
    ),
    (
        "wrong-type-nested",
        '{"id":"a","question":"q","contexts":[{"id":"c1","text":5}],"answer":"x"}\n',
        ":1: field 'contexts[0].text': expected a string",
    ),
    ("duplicate-row", f"{GOOD}\n\n{GOOD}\n", ":3: duplicate row id 'a'"),
    (
        "duplicate-context",
        '{"id":"a","question":"q","contexts":[{"id":"c1","text":"t"},{"id":"c1","text":"u"}],'
        '"answer":"x"}\n',
        ":1: contexts[1].id: duplicate context id 'c1'",
    ),
    (
        "probability-range",
        GOOD[:-1] + ',"mock":{"retrieval":{"chunkRelevance":{"c1":1.5}}}}\n',
        ":1: field 'mock.retrieval.chunkRelevance.c1': must be <= 1.0, got 1.5",
    ),
    (
        "probability-nan",
        GOOD[:-1] + ',"mock":{"generation":{"relevance":NaN}}}\n',
        ":1: field 'mock.generation.relevance': expected a finite number, got NaN or infinity",
    ),
    (
        "unknown-label",
        GOOD[:-1] + ',"expected":{"diagnosis":"GREAT"}}\n',
        ":1: field 'expected.diagnosis': unknown diagnosis label 'GREAT'",
    ),
    (
        "unknown-baseline-label",
        GOOD[:-1] + ',"baseline":{"diagnosis":"OK","confidence":0.5}}\n',
        ":1: field 'baseline.diagnosis': unknown diagnosis label 'OK'",
    ),
    (
        "unknown-field",
        GOOD[:-1] + ',"extra":1}\n',
        ":1: unknown field 'extra' (pass --ignore-unknown-fields to skip unknown top-level fields)",
    ),
    (
        "label-typo",
        GOOD[:-1] + ',"expected":{"retrieval":{"contextSuficiency":true}}}\n',
        ":1: unknown field 'expected.retrieval.contextSuficiency'",
    ),
    (
        "chunk-label-for-unknown-context",
        GOOD[:-1] + ',"expected":{"retrieval":{"chunkRelevance":{"c9":true}}}}\n',
        ":1: expected.retrieval.chunkRelevance: 'c9' is not a context id of this row",
    ),
    (
        "correctness-without-reference",
        GOOD[:-1] + ',"expected":{"generation":{"correctness":true}}}\n',
        ":1: expected.generation.correctness: only allowed on rows with a referenceAnswer",
    ),
    (
        "empty-id",
        '{"id":"","question":"q","contexts":[],"answer":"x"}\n',
        ":1: field 'id': must not be empty",
    ),
    ("empty", "\n\n", ": dataset is empty: no rows"),
    ("bad-utf8", '{"id":"a\udcff"}\n', ":1: not valid UTF-8: invalid start byte"),
]


def run(args: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(("name", "content", "message"), CASES, ids=[c[0] for c in CASES])
def test_bad_dataset_line(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(content.encode("utf-8", "surrogateescape"))
    code, out, err = run(["run", str(path), "--out", str(tmp_path / "r.json")])
    assert code == 2
    assert err == f"error: {path}{message}\n"
    assert out == ""
    assert not (tmp_path / "r.json").exists()


def test_blank_lines_and_bom_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + FULL.encode() + b"\n\n   \n")
    code, _, err = run(["run", str(path), "--out", str(tmp_path / "r.json"), "--quiet"])
    assert (code, err) == (0, "")


def test_ignore_unknown_fields(tmp_path: Path) -> None:
    path = tmp_path / "extra.jsonl"
    path.write_text(FULL[:-1] + ',"traceUrl":"x"}\n', encoding="utf-8")
    code, _, err = run(["run", str(path), "--out", str(tmp_path / "r.json"), "--quiet"])
    assert code == 2 and "unknown field 'traceUrl'" in err
    code, _, err = run(
        ["run", str(path), "--out", str(tmp_path / "r.json"), "--quiet", "--ignore-unknown-fields"]
    )
    assert (code, err) == (0, "")


def test_thresholds_out_of_order() -> None:
    code, _, err = run(["run", "--fail-threshold", "0.9", "--pass-threshold", "0.8"])
    assert code == 2
    assert err == (
        "error: thresholds must satisfy 0 <= fail < pass <= 1, got fail=0.9 pass=0.8; "
        "check --fail-threshold and --pass-threshold\n"
    )


def test_missing_pricing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    code, _, err = run(["run", str(ROOT / "datasets/rag-fixture.jsonl"), "--pricing", str(missing)])
    assert code == 2
    assert err == (
        f"error: cannot read pricing snapshot {missing}: No such file or directory "
        "(pass --pricing FILE)\n"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{oops", "malformed pricing snapshot: file: Invalid JSON"),
        ('{"version":"x"}', "malformed pricing snapshot: effectiveDate: Field required"),
        (
            '{"version":"x","effectiveDate":"2026-01-01","currency":"USD","models":{}}',
            "pricing snapshot lists no models",
        ),
        (
            '{"version":"x","effectiveDate":"2026-13-45","currency":"USD","models":{}}',
            "malformed pricing snapshot: effectiveDate: '2026-13-45' is not a real date "
            "(month must be in 1..12)\n",
        ),
        (
            '{"version":"x","effectiveDate":"1 Dec 2026","currency":"USD","models":{}}',
            "malformed pricing snapshot: effectiveDate: '1 Dec 2026' is not a real date "
            "(write it as YYYY-MM-DD)\n",
        ),
    ],
)
def test_malformed_pricing_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(content, encoding="utf-8")
    code, _, err = run(["run", str(ROOT / "datasets/rag-fixture.jsonl"), "--pricing", str(path)])
    assert code == 2
    assert err.startswith(f"error: {path}: {message}")


def test_missing_dataset(tmp_path: Path) -> None:
    path = tmp_path / "none.jsonl"
    code, _, err = run(["run", str(path)])
    assert (code, err) == (2, f"error: {path}: cannot read dataset: No such file or directory\n")


def test_failed_rows_exit_3_and_are_never_auto(tmp_path: Path) -> None:
    path = tmp_path / "partial.jsonl"
    partial = FULL.replace('"a"', '"b"', 1).replace('"relevance":0.9,', "")  # no relevance
    path.write_text(FULL + "\n" + partial + "\n", encoding="utf-8")
    out = tmp_path / "r.json"
    code, _, _ = run(["run", str(path), "--out", str(out), "--quiet"])
    assert code == 3
    import orjson

    rows = orjson.loads(out.read_bytes())["rows"]
    assert rows[1]["status"] == "failed" and rows[1]["route"] == "failed"
    assert rows[1]["error"]["kind"] == "mock-missing-answer"
    assert "diagnosis" not in rows[1]


def test_seen_ids_are_exact_before_and_after_moving_to_disk() -> None:
    from ragbatch.data._jsonl import SeenIds

    ids = SeenIds(spill=3)
    assert all(ids.add(f"r{i}") for i in range(10))  # past the spill: on disk
    assert not ids.add("r0") and not ids.add("r9")  # spilled from the set, and added later
    assert ids.add("r10") and not ids.add("r10")
    ids.close()


def test_a_duplicate_far_down_a_large_file_names_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragbatch.data import _base as base
    from ragbatch.data import _jsonl as dataset

    monkeypatch.setattr(base, "SPILL_IDS", 5)  # SeenIds lives with every reader's base
    lines = [GOOD.replace('"id":"a"', f'"id":"r{i}"') for i in range(20)]
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join([*lines, lines[2]]) + "\n")
    from ragbatch.core._errors import DatasetError

    with pytest.raises(DatasetError) as caught:
        list(dataset.JsonlReader(path))
    assert str(caught.value) == f"{path}:21: duplicate row id 'r2'"
    path.write_text("\n".join(lines) + "\n")
    assert [row.id for row in dataset.JsonlReader(path)] == [f"r{i}" for i in range(20)]
