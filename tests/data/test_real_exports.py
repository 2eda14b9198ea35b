"""Files written by the real tools' own APIs are read exactly right (tests/fixtures/real/).

Every file was made by ``tests/fixtures/real/make_fixtures.py`` in the tool's own venv (the
versions are in the file names and MANIFEST.json) from the cases in ``cases.py``; each test
checks every row's question, context ids, texts and sources, answer and reference.
"""

from __future__ import annotations

import base64
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from ragbatch.core._schema import Row
from ragbatch.data._formats import open_dataset

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
sys.path.insert(0, str(REAL))
from cases import CASES  # noqa: E402

MANIFEST = json.loads((REAL / "MANIFEST.json").read_text())


def read(name: str, fmt: str) -> list[Row]:
    assert name in MANIFEST, f"{name} is not a generated fixture"
    return list(open_dataset(REAL / name, fmt))


def expected(
    ids: list[str], context_ids: bool = True, sources: bool = True, reference: bool = True
) -> list[tuple[Any, ...]]:
    """The rows every reader must give for CASES: (id, question, contexts, answer, reference)."""
    rows = []
    for row_id, case in zip(ids, CASES, strict=True):
        contexts = [
            (cid if context_ids else f"c{n}", text, source if sources else None)
            for n, (cid, text, source) in enumerate(case["contexts"], start=1)
        ]
        rows.append((row_id, case["question"], contexts, case["answer"],
                     case["reference"] if reference else None))  # fmt: skip
    return rows


def seen(rows: list[Row]) -> list[tuple[Any, ...]]:
    return [
        (r.id, r.question, [(c.id, c.text, c.source) for c in r.contexts], r.answer,
         r.reference_answer)
        for r in rows
    ]  # fmt: skip


# ragas 0.4.3: items 2 (numpy reprs), 4 (one-line arrays), 5 (Parquet)
@pytest.mark.parametrize(
    ("name", "ids"),
    [
        ("ragas-0.4.3-to-list.json", ["row-1", "row-2"]),  # json.dump(to_list()): one line
        ("ragas-0.4.3-pandas-records.json", ["row-1", "row-2"]),  # to_json(orient=records)
        ("ragas-0.4.3-pandas.parquet", ["row-1", "row-2"]),
        ("ragas-0.4.3-hf.parquet", ["row-1", "row-2"]),
        ("ragas-0.4.3-hf-to-csv.csv", ["row-2", "row-4"]),  # numpy reprs span two lines
        ("ragas-0.4.3-to-csv.csv", ["row-2", "row-3"]),
        ("ragas-0.4.3-to-jsonl.jsonl", ["row-1", "row-2"]),
    ],
)
def test_ragas_exports(name: str, ids: list[str]) -> None:
    assert seen(read(name, "ragas")) == expected(ids, sources=False)


def test_numpy_repr_cells_are_never_merged() -> None:
    # Dataset.to_csv writes ['a' 'b']: literal_eval alone joined the passages into one
    rows = read("ragas-0.4.3-hf-to-csv.csv", "ragas")
    assert [len(r.contexts) for r in rows] == [2, 3]


# deepeval 4.3.1: item 6 (save_as jsonl joins with "|"; RetrievedContextData markers)
@pytest.mark.parametrize("kind", ["json", "jsonl", "csv"])
def test_deepeval_save_as(kind: str) -> None:
    rows = read(f"deepeval-4.3.1-save-as-{kind}.{kind}", "deepeval")
    want = expected(["q1", "q2"], context_ids=False)
    # q1's passages were RetrievedContextData (source kept); q2's plain strings (no source)
    want[1] = (*want[1][:2], [(i, t, None) for i, t, _ in want[1][2]], *want[1][3:])
    assert seen(rows) == want


def b64_hex(value: str) -> str:
    return base64.b64decode(value).hex()


def otlp_ids() -> list[dict[str, str]]:
    """Per trace in file order: its hex trace id and its spans' hex ids by name."""
    data = json.loads((REAL / "openinference-0.1.66-otlp-protobuf.json").read_text())
    traces: dict[str, dict[str, str]] = {}
    for scope in data["resourceSpans"][0]["scopeSpans"]:
        for span in scope["spans"]:
            ids = traces.setdefault(b64_hex(span["traceId"]), {})
            ids[span["name"]] = b64_hex(span["spanId"])
    return [{"trace": t, **spans} for t, spans in traces.items()]


# OpenInference 0.1.66 + openai: items 1 (raw ChatCompletion JSON) and 3 (base64 ids)
def test_otlp_protobuf_json_from_the_openai_instrumentor() -> None:
    rows = read("openinference-0.1.66-otlp-protobuf.json", "openinference")
    ids = otlp_ids()
    order = {c["question"]: n for n, c in enumerate(CASES)}
    rows.sort(key=lambda r: order[r.question])
    ids.sort(key=lambda i: [r.id for r in rows].index(i["trace"]))
    assert seen(rows) == expected([i["trace"] for i in ids], reference=False)
    for row, span_ids in zip(rows, ids, strict=True):
        assert row.trace_id == span_ids["trace"] and len(row.trace_id) == 32
        assert row.spans is not None
        assert (row.spans.root, row.spans.retriever, row.spans.llm) == (
            span_ids["rag"],
            span_ids["retrieve"],
            span_ids["ChatCompletion"],
        )
        assert not row.answer.startswith("{")  # never the provider's response document


def phoenix_trace_ids() -> list[str]:
    spans = json.loads((REAL / "phoenix-20.26.1-get-spans.json").read_text())
    return list(dict.fromkeys(s["context"]["trace_id"] for s in spans))


def by_case(rows: list[Row]) -> list[Row]:
    order = {c["question"]: n for n, c in enumerate(CASES)}
    return sorted(rows, key=lambda r: order[r.question])


# Phoenix 20.26.1: item 8 (get_spans, metadata.source keys) and its dataframe exports
@pytest.mark.parametrize(
    "name",
    ["phoenix-20.26.1-get-spans.json", "phoenix-20.26.1-spans.jsonl",
     "phoenix-20.26.1-spans.parquet"],
)  # fmt: skip
def test_phoenix_exports(name: str) -> None:
    rows = by_case(read(name, "openinference"))
    traces = {r.id for r in rows}
    assert traces == set(phoenix_trace_ids())
    assert seen(rows) == expected([r.id for r in rows], reference=False)
    for row in rows:
        assert row.spans is not None and row.spans.root and row.spans.retriever and row.spans.llm


# Langfuse 3.14.6 (api.trace.get) and 5.2.0 (observations v2: JSON strings): item 7
@pytest.mark.parametrize(
    "name",
    ["langfuse-3.14.6-trace-get.jsonl", "langfuse-5.2.0-observations-v2-page.json",
     "langfuse-5.2.0-observations-v2.jsonl"],
)  # fmt: skip
def test_langfuse_exports(name: str) -> None:
    rows = read(name, "langfuse")
    ids = [f"{n:032x}" for n in range(1, len(CASES) + 1)]
    assert seen(rows) == expected(ids, reference=False)  # context ids from metadata.id
    for n, row in enumerate(rows, start=1):
        assert row.spans is not None
        assert (row.spans.root, row.spans.retriever, row.spans.llm) == (
            f"{n:08x}00000001",
            f"{n:08x}00000002",
            f"{n:08x}00000003",
        )


# datasets 5.2.0: item 9 (Arrow fills missing nested keys with null)
def test_a_hugging_face_dataset_of_ragbatch_rows() -> None:
    datasets = pytest.importorskip("datasets")
    from ragbatch._api import records_of

    dataset = datasets.Dataset.from_parquet(str(REAL / "datasets-ragbatch-rows.parquet"))
    found = records_of(dataset)
    assert found is not None
    records, name = found
    rows = [Row.model_validate(r) for r in records]
    assert name == "<Dataset>"
    assert seen(rows) == expected(["q1", "q2"])
    labels = [r.expected.retrieval.chunk_relevance for r in rows if r.expected and
              r.expected.retrieval]  # fmt: skip
    assert labels == [{"doc-7": True, "doc-9": False},
                      {"doc-3": True, "doc-4": False, "doc-5": False}]  # fmt: skip


@pytest.mark.parametrize(
    ("cell_text", "expected"),
    [
        ("['a, b' 'c']", ["a, b", "c"]),  # numpy: items by token, commas inside kept
        ("['only']", ["only"]),
        ("['a', 'b']", ["a", "b"]),  # pandas' Python list literal
        ("[1 2 3]", [1, 2, 3]),  # numpy ints
        ("['a' 'b' ... 'z']", "a numpy array printed with '...' (items left out)"),
        ("['a' 'b', 'c']", "strings without a comma between them, not an array"),
    ],
)
def test_python_list_cells(cell_text: str, expected: Any) -> None:
    from ragbatch.data._records import CellError, cell

    record = {"ctx": cell_text}
    if isinstance(expected, list):
        assert cell(record, "ctx", True, list, False) == expected
    else:
        with pytest.raises(CellError, match=re.escape(expected)):
            cell(record, "ctx", True, list, False)
