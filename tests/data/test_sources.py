"""Readers of other tools' exports: ragas v0.1 and arrays, deepeval, OpenInference, Langfuse."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ragbatch.core._errors import ConfigError
from ragbatch.core._schema import Golden, Row, Spans
from ragbatch.data._formats import open_dataset
from ragbatch.data._ragas import RagasReader
from tests.data.importing import failure, read

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "datasets/samples"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def ids(row: Row) -> list[str]:
    return [c.id for c in row.contexts]


GOOD = '{"question": "q", "contexts": [], "answer": "a"}'


# --- ragas ------------------------------------------------------------------------------------


def test_ragas_v01_names_in_a_json_array() -> None:
    rows = read(RagasReader(SAMPLES / "ragas-v01.json"))
    # an array item's default id is its position, whatever the layout (one line or indented)
    assert [r.id for r in rows] == ["row-1", "row-2", "row-3"]
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


def test_a_pretty_printed_json_object_is_not_a_ragas_dataset(tmp_path: Path) -> None:
    path = write(tmp_path / "r.json", json.dumps(json.loads(GOOD), indent=2))
    assert failure(RagasReader(path)) == (
        f"{path}:1: invalid JSON: unexpected end of data: line 2 column 1 (char 2) (a .json "
        "dataset is JSON lines (one object a line) or one JSON array)"
    )


def test_ragas_json_array_keeps_brackets_inside_strings(tmp_path: Path) -> None:
    item = {"question": 'a ] , [ "{', "contexts": ['\\"]'], "answer": "}"}
    path = write(tmp_path / "r.json", json.dumps([item, item | {"id": "two"}], indent=1))
    rows = read(RagasReader(path))
    assert [r.question for r in rows] == ['a ] , [ "{'] * 2
    assert rows[0].contexts[0].text == '\\"]' and rows[1].id == "two"


# --- deepeval ---------------------------------------------------------------------------------


def test_deepeval_json_sample() -> None:
    rows = read(open_dataset(SAMPLES / "deepeval-sample.json", "deepeval"))
    assert [r.id for r in rows] == ["refund-window", "ship-norway", "row-3"]  # by position
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
            {"input": "q", "actual_output": "a", "retrieval_context": 7},
            "field 'retrieval_context': expected an array, got number",
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
    path = write(tmp_path / "g.csv", "input,actual_output,context\nq,a,x\nq,,x|y\n")
    assert failure(open_dataset(path, "deepeval")) == (
        f"{path}:3: field 'actual_output': empty (a golden not run yet? fill it in first)"
    )
    with pytest.raises(ConfigError, match=r"deepeval datasets end in .json, .jsonl or .csv"):
        open_dataset(tmp_path / "d.yaml", "deepeval")


# --- OpenInference: OTLP JSON and Phoenix spans -----------------------------------------------

RESET = "5b8efff798038103d269b633813fc60c"
INVOICE = "0af7651916cd43dd8448eb211c80319c"
WARRANTY = "7f3c9a0e4b2d4c1e9f8a6b5c4d3e2f10"
CHARGING = "1e2d3c4b5a6978877665544332211000"


def test_otlp_json_one_row_per_trace() -> None:
    rows = read(open_dataset(SAMPLES / "openinference-otlp.json", "openinference"))
    # traces in order of their first span; their spans interleave in the document
    assert [r.id for r in rows] == [RESET, INVOICE]
    reset, invoice = rows
    assert reset.trace_id == RESET
    assert reset.spans == Spans(
        root="eee19b7ec3c1b173", retriever="eee19b7ec3c1b174", llm="eee19b7ec3c1b175"
    )
    assert reset.question == "How do I reset my password?"  # the retriever's input
    assert [(c.id, c.source) for c in reset.contexts] == [
        ("kb-112", "help/security.md"),
        ("kb-007", None),
    ]
    assert reset.contexts[1].text == "Passwords must be at least 12 characters long."
    assert reset.answer.startswith("Open Settings > Security")  # the LLM's output
    # no LLM span, a retriever without input: the root's JSON input and output
    assert invoice.question == "Can I pay by invoice?"
    assert invoice.answer == "Yes, business accounts can pay by invoice within 30 days."
    assert ids(invoice) == ["c1"]
    assert invoice.spans == Spans(root="b7ad6b7169203331", retriever="b7ad6b7169203332")


def test_phoenix_spans_jsonl() -> None:
    rows = read(open_dataset(SAMPLES / "phoenix-spans.jsonl", "openinference"))
    assert [(r.id, r.trace_id) for r in rows] == [(WARRANTY, WARRANTY), (CHARGING, CHARGING)]
    warranty, charging = rows
    assert warranty.question == "What is the warranty on the X200 headphones?"
    assert ids(warranty) == ["warranty-x200", "returns"]
    assert warranty.contexts[0].source == "products/x200.md"
    assert warranty.answer == "The X200 headphones have a two-year warranty."
    assert warranty.spans == Spans(
        root="a1b2c3d4e5f60001", retriever="a1b2c3d4e5f60002", llm="a1b2c3d4e5f60003"
    )
    assert charging.question == "X200 wireless charging"


def test_phoenix_spans_parquet_reads_like_jsonl(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    source = SAMPLES / "phoenix-spans.jsonl"
    records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    path = tmp_path / "spans.parquet"
    pq.write_table(pa.Table.from_pylist(records), path, row_group_size=2)
    reader = open_dataset(path, "openinference")
    assert read(reader) == read(open_dataset(source, "openinference"))
    assert reader.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_phoenix_nested_records_and_listed_documents(tmp_path: Path) -> None:
    span = {
        "context": {"trace_id": "t1", "span_id": "s1"},
        "parent_id": None,
        "span_kind": "retriever",
        "attributes": {
            "input": {"value": "q"},
            "output": {"value": "a"},
            "retrieval": {"documents": [{"document": {"content": "x", "id": 7}}]},
        },
    }
    path = write(tmp_path / "spans.json", json.dumps([span]))
    (row,) = read(open_dataset(path, "openinference"))
    assert (row.question, row.answer, ids(row)) == ("q", "a", ["7"])
    assert row.spans == Spans(root="s1", retriever="s1")


def phoenix(trace: str, span: str, **attributes: object) -> str:
    record = {"context.trace_id": trace, "context.span_id": span, "parent_id": None}
    return json.dumps(record | {f"attributes.{k}": v for k, v in attributes.items()}) + "\n"


def test_openinference_errors(tmp_path: Path) -> None:
    def fails(name: str, text: str) -> str:
        return failure(open_dataset(write(tmp_path / name, text), "openinference"))

    expected = (
        "expected an OTLP JSON export (resourceSpans[].scopeSpans[].spans[]) or a Phoenix "
        "spans export (columns context.trace_id, context.span_id, attributes.*)"
    )
    ok = phoenix("t1", "s1", **{"input.value": "q", "output.value": "a"})
    path = tmp_path / "a.jsonl"
    assert fails("a.jsonl", ok + '{"question": "q"}\n') == f"{path}:2: {expected}"
    assert fails("a.jsonl", ok + "[1]\n") == f"{path}:2: {expected}, got array"
    assert fails("a.jsonl", ok + '{"resourceSpans": []}\n') == f"{path}:2: {expected}"
    no_answer = phoenix("t2", "s2", **{"input.value": "q"})
    assert fails("a.jsonl", ok + no_answer) == (
        f"{path}:2: trace t2: no plain-text answer (no assistant message or text output on its "
        "LLM span, no text output on its root)"
    )
    no_question = phoenix("t2", "s2", **{"output.value": "a"})
    assert fails("a.jsonl", ok + no_question) == (
        f"{path}:2: trace t2: no plain-text question (no text input on its RETRIEVER span or "
        "root, no user message on its LLM span)"
    )
    other = phoenix("t2", "s2", **{"input.value": "q", "output.value": "a"})
    assert fails("a.jsonl", ok + other + ok.replace("s1", "s3")) == (
        f"{path}:3: trace t1: its spans are not together (another trace came between them); "
        "sort the export by trace id"
    )
    documents = [{"document.id": "d", "document.content": "x"}] * 2
    twice = phoenix(
        "t2", "s2", **{"input.value": "q", "output.value": "a", "retrieval.documents": documents,
                       "openinference.span.kind": "RETRIEVER"}
    )  # fmt: skip
    assert fails("a.jsonl", ok + twice) == (
        f"{path}:2: trace t2: contexts[1].id: duplicate context id 'd'"
    )
    no_content = phoenix("t2", "s2", **{"retrieval.documents.0.document.id": "d"})
    assert fails("a.jsonl", ok + no_content) == (
        f"{path}:2: retrieval.documents.0: content: expected a string, got null"
    )
    no_id = ok.replace('"t1"', "null")
    assert fails("a.jsonl", no_id) == (
        f"{path}:1: context.trace_id: expected a non-empty string, got null"
    )
    bad = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "t"}]}]}]})
    assert fails("b.json", bad) == (
        f"{tmp_path / 'b.json'}:1: resourceSpans[0].scopeSpans[0].spans[0]: spanId: "
        "expected a non-empty string, got null"
    )
    bad = json.dumps({"resourceSpans": [{"scopeSpans": {}}]}, indent=2)
    assert fails("b.json", bad) == (
        f"{tmp_path / 'b.json'}:1: resourceSpans[0].scopeSpans: expected an array, got object"
    )
    with pytest.raises(ConfigError, match=r"openinference exports end in .json, .jsonl or"):
        open_dataset(tmp_path / "spans.csv", "openinference")
    path = write(tmp_path / "x.parquet", "not parquet")
    assert failure(open_dataset(path, "openinference")).startswith(
        f"{path}: not a readable Parquet file: "
    )


# --- Langfuse ---------------------------------------------------------------------------------


def test_langfuse_traces_with_observations() -> None:
    rows = read(open_dataset(SAMPLES / "langfuse-export.json", "langfuse"))
    assert [(r.id, r.trace_id) for r in rows] == [
        ("lf-trace-7d1e", "lf-trace-7d1e"),
        ("lf-trace-9a02", "lf-trace-9a02"),
    ]
    backups, rota = rows
    # a SPAN named like a retriever: its input, and LangChain documents in its output (the
    # context id from metadata.id when the document has no id of its own)
    assert backups.question == "How often are backups taken?"
    assert [(c.id, c.text, c.source) for c in backups.contexts] == [
        ("ops-12", "Database backups run every 6 hours.", "ops/backups.md"),
        ("c2", "Backups are retained for 30 days, then deleted.", "ops/retention.md"),
    ]
    # the GENERATION's output message content
    assert backups.answer == "Backups are taken every 6 hours and kept for 30 days."
    # three top-level observations: no root span
    assert backups.spans == Spans(retriever="obs-7d1e-1", llm="obs-7d1e-2")
    # a RETRIEVER observation with {"query"} input and {"documents"} output; no GENERATION:
    # the trace's output
    assert rota.question == "on-call rota"
    assert ids(rota) == ["ops-3"]
    assert rota.answer == "Yes, there is a weekly on-call rota."
    assert rota.spans == Spans(root="obs-9a02-1", retriever="obs-9a02-1")


def test_langfuse_observations_export_and_document_shapes(tmp_path: Path) -> None:
    (row,) = read(open_dataset(SAMPLES / "langfuse-observations.jsonl", "langfuse"))
    assert (row.id, row.question, row.answer) == (
        "lf-trace-b",
        "What is the VPN address?",
        "Use vpn.example.com.",
    )
    assert [c.text for c in row.contexts] == ["Connect to vpn.example.com with your staff account."]
    assert row.spans == Spans(retriever="obs-b1", llm="obs-b2")
    # a trace's Download JSON: {trace, observations}, pretty-printed, read whole
    download = {
        "trace": {"id": "t9", "input": {"question": "q"}, "output": {"answer": "a"}},
        "observations": [{"id": "o1", "type": "EVENT", "name": "log"}],
    }
    path = write(tmp_path / "trace-t9.json", json.dumps(download, indent=2))
    (row,) = read(open_dataset(path, "langfuse"))
    assert (row.id, row.question, row.answer, row.contexts) == ("t9", "q", "a", [])
    assert row.spans == Spans(root="o1")
    # an API list page
    page = {"data": [{"id": "t1", "input": "q", "output": "a", "observations": []}], "meta": {}}
    path = write(tmp_path / "page.json", json.dumps(page))
    assert [r.id for r in read(open_dataset(path, "langfuse"))] == ["t1"]


def test_langfuse_errors(tmp_path: Path) -> None:
    def fails(name: str, *records: object) -> str:
        text = "".join(json.dumps(r) + "\n" for r in records)
        return failure(open_dataset(write(tmp_path / name, text), "langfuse"))

    path = tmp_path / "t.jsonl"
    expected = (
        "expected a Langfuse export: traces with id, input, output and observations[] (type "
        "SPAN/GENERATION/EVENT, name, input, output), or observations with traceId"
    )
    ok = {"id": "t1", "input": "q", "output": "a", "observations": []}
    assert fails("t.jsonl", ok, {"id": "t2"}) == f"{path}:2: {expected}"
    assert fails("t.jsonl", ok, [1]) == f"{path}:2: {expected}, got array"
    observation = {"id": "o", "traceId": "t3", "type": "SPAN"}
    assert fails("t.jsonl", ok, observation) == f"{path}:2: {expected} (not both in one file)"
    assert fails("t.jsonl", ok, ok) == f"{path}:2: duplicate row id 't1'"
    assert fails("t.jsonl", ok, {"id": "t2", "observations": []}) == (
        f"{path}:2: trace t2: no plain-text question (no text input on its RETRIEVER span or "
        "root, no user message on its LLM span)"
    )
    assert fails("t.jsonl", ok | {"observations": ["o1"]}) == (
        f"{path}:1: trace t1: observations[0]: expected an object, got string (export the "
        "trace with its observations, e.g. its Download JSON)"
    )
    bad_docs = {"id": "o", "type": "RETRIEVER", "output": "just text"}
    assert fails("t.jsonl", ok | {"observations": [bad_docs]}) == (
        f"{path}:1: trace t1: observations[0]: output: expected a list of documents, got string"
    )
    assert fails("t.jsonl", ok | {"id": ""}) == (
        f"{path}:1: trace id: expected a non-empty string, got string"
    )
    a = observation | {"input": "q", "output": "x"}
    b = a | {"id": "o2", "traceId": "t4"}
    assert fails("t.jsonl", a, b, a | {"id": "o3"}) == (
        f"{path}:3: trace t3: its spans are not together (another trace came between them); "
        "sort the export by trace id"
    )
    assert fails("t.jsonl", observation | {"id": None}) == (
        f"{path}:1: id: expected a non-empty string, got null"
    )
    with pytest.raises(ConfigError, match=r"langfuse exports end in .json or .jsonl"):
        open_dataset(tmp_path / "t.csv", "langfuse")


def otlp_request(*spans: dict[str, object]) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}) + "\n"


def otlp_span(trace: str, span: str, parent: str = "", **attrs: str) -> dict[str, object]:
    values = [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]
    return {"traceId": trace, "spanId": span, "parentSpanId": parent, "attributes": values}


def test_otlp_json_lines_stream_traces_across_requests(tmp_path: Path) -> None:
    retriever = {"openinference.span.kind": "RETRIEVER", "input.value": "q1",
                 "retrieval.documents.1.document.content": "second",
                 "retrieval.documents.0.document.content": "first"}  # fmt: skip
    llm = {"openinference.span.kind": "LLM", "output.value": "a1"}
    lines = [
        otlp_request(otlp_span("t1", "r", "root", **retriever)),
        otlp_request(otlp_span("t1", "l", "root", **llm), otlp_span("t1", "root")),
        otlp_request(otlp_span("t2", "x", **{"input.value": "q2", "output.value": "a2"})),
    ]
    path = write(tmp_path / "otlp.jsonl", "".join(lines))
    first, second = read(open_dataset(path, "openinference"))
    assert (first.id, first.question, first.answer) == ("t1", "q1", "a1")
    assert [c.text for c in first.contexts] == ["first", "second"]  # by rank, not key order
    assert first.spans == Spans(root="root", retriever="r", llm="l")
    assert (second.question, second.answer, second.spans) == ("q2", "a2", Spans(root="x"))
    path = write(tmp_path / "otlp.jsonl", "".join([*lines, lines[0]]))
    assert failure(open_dataset(path, "openinference")) == (
        f"{path}:4: trace t1: its spans are not together (another trace came between them); "
        "sort the export by trace id"
    )
