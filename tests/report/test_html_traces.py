"""The HTML report's trace timelines (docs/semantics.md §8): each trace of datasets/traces.jsonl
drawn step by step from a real run's page, the failing or deciding step outlined, recovered
hops and answers without retrieval marked, tool calls cut short, everything escaped; the rows
table as it was (the headless Chromium check: test_html_browser_traces.py)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import orjson
import pytest

from ragbatch.core import ToolStep, Trace
from ragbatch.data._native import TraceJsonlReader
from ragbatch.report._html import report_html
from ragbatch.report._models import Report
from ragbatch.run._job import run_job
from ragbatch.run._options import RunOptions
from tests.report.html_page import ROOT, Page

TRACES = ROOT / "datasets/traces.jsonl"
PRICING = ROOT / "pricing/typesafe-2026-12.json"


def traces_of(path: Path) -> dict[str, Trace]:
    return {t.id: t for t in TraceJsonlReader(path).items() if isinstance(t, Trace)}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, str]:
    """The run's own page (``--html``: the run keeps each trace for its timeline)."""
    html = tmp_path_factory.mktemp("traces") / "traces.html"
    config = RunOptions.of(
        quiet=True, dataset=TRACES, out=None, pricing=PRICING, html=html, baseline="lexical"
    )
    return run_job(config).report, html.read_text(encoding="utf-8")


def article(page: str, row_id: str) -> str:
    """One trace's timeline (its <article>)."""
    start = page.index(f"<h3>{row_id}</h3>")
    begin = page.rindex("<article", 0, start)
    return page[begin : page.index("</article>", start)]


def step(block: str, index: int) -> tuple[str, str]:
    """A step's class attribute and its HTML."""
    found = re.search(rf'<li class="([^"]*)" id="trace-\d+-step-{index}">(.*?)</li>', block, re.S)
    assert found is not None, index
    return found.group(1), found.group(2)


def test_every_trace_is_a_timeline_and_the_rows_table_stays(traced: tuple[Report, str]) -> None:
    report, page = traced
    parsed = Page(page)
    articles = re.findall(r'<article class="trace" id="(trace-\d+)" data-diagnosis="(\w+)">', page)
    assert articles == [(f"trace-{n}", r.diagnosis) for n, r in enumerate(report.rows, start=1)]
    assert '<a href="#traces">Traces</a>' in page and "traces" in parsed.ids
    assert [i for i, n in Counter(parsed.ids).items() if n > 1] == []
    # the rows table is the rows', one row each, with its usual columns
    assert len(parsed.rows) == len(report.rows) == 8
    assert "<th>id</th><th>question</th><th>diagnosis</th><th>route</th>" in page
    for row in report.rows:
        steps = row.steps or []
        block = article(page, row.id)
        assert block.count('<li class="step ') == len(steps)
        assert [k for k in re.findall(r'<li class="step (\w+)', block)] == [s.kind for s in steps]
    assert "Step texts are not in the report" not in page  # the run kept them


def test_the_first_failing_step_is_outlined_with_its_documents(
    traced: tuple[Report, str],
) -> None:
    _, page = traced
    block = article(page, "second-hop-misses")
    assert "first failing step 2" in block
    classes, body = step(block, 2)
    assert classes.split() == ["step", "retrieval", "fail", "key"]
    assert '<span class="flag key">first failing step</span>' in body
    assert '<span class="verdict fail">RETRIEVAL_MISS · 0.94</span>' in body
    assert '<span class="label">query</span>enterprise seat cost' in body
    # the document, its relevance to the question and to the query (low: read as bad)
    cells = re.search(r"<td class=\"text\">blog-9.*?</tr>", body, re.S)
    assert cells is not None
    assert re.findall(r'<td class="(\w+)">([\d.]+)</td>', cells.group(0)) == [
        ("bad", "0.06"),
        ("bad", "0.06"),
    ]
    assert "Our team grew to forty people this year." in cells.group(0)
    assert '<span class="bad">sufficiency 0.10</span>' in body
    passed, _ = step(block, 1)
    assert passed.split() == ["step", "retrieval", "pass"]
    answer, body = step(block, 3)
    assert answer.split() == ["step", "answer", "fail"]  # failed, but not the deciding step
    assert '<span class="bad">groundedness 0.12</span>' in body


def test_recovered_hops_and_answers_without_retrieval_are_marked(
    traced: tuple[Report, str],
) -> None:
    _, page = traced
    recovered = article(page, "recovered-hop")
    classes, body = step(recovered, 1)
    assert "recovered" in classes.split() and "key" not in classes.split()
    assert "recovered by another hop of its turn" in body
    assert "1 wasted hop" in recovered
    alone = article(page, "answer-without-retrieval")
    classes, body = step(alone, 1)
    assert classes.split() == ["step", "answer", "fail", "key"]
    assert '<span class="flag">no retrieval before it in its turn</span>' in body


def test_an_uncertain_trace_outlines_its_deciding_step(traced: tuple[Report, str]) -> None:
    report, page = traced
    row = next(r for r in report.rows if r.id == "final-answer-uncertain")
    block = article(page, row.id)
    classes, body = step(block, 2)
    assert classes.split() == ["step", "answer", "uncertain", "key"]
    assert '<span class="flag key">deciding step</span>' in body
    assert "route fallback" in block and "deciding step 2" in block
    assert f"the fallback judge decided {row.cascade.diagnosis}" in block


def test_turns_and_tool_calls(traced: tuple[Report, str]) -> None:
    _, page = traced
    turns = article(page, "second-answer-contradicts")
    assert re.findall(r'<span class="turn">turn (\d)</span>', turns) == ["1", "2", "3"]
    classes, _ = step(turns, 3)
    assert "turn-start" in classes.split()
    tool = article(page, "tool-between-hops")
    classes, body = step(tool, 2)
    assert classes.split() == ["step", "tool", "plain"]
    trace = traces_of(TRACES)["tool-between-hops"]
    call = trace.steps[2]
    assert isinstance(call, ToolStep)
    assert f'<span class="step-title">tool {call.name}</span>' in body
    assert '<span class="label">input</span><code>' in body
    assert '<span class="label">output</span><code>' in body


def test_a_report_alone_shows_ids_and_judgments(traced: tuple[Report, str]) -> None:
    report, _ = traced
    page = report_html(report)  # no traces given: no step texts
    assert "Step texts are not in the report" in page
    block = article(page, "second-hop-misses")
    _, body = step(block, 2)
    assert "blog-9" in body and "Our team grew" not in body
    assert "enterprise seat cost" not in body
    with_texts = report_html(report, traces=traces_of(TRACES))
    assert "Step texts are not in the report" not in with_texts
    assert report_html(report, traces=traces_of(TRACES)) == with_texts  # deterministic


def test_texts_ids_and_tool_calls_are_escaped_and_cut(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    long = "x" * 500
    trace = {
        "id": f"t {evil}",
        "steps": [
            {"kind": "user", "text": f"Why {evil}?"},
            {"kind": "retrieval", "query": f"q {evil}",
             "contexts": [{"id": "d<1>", "text": f"{evil} {long}", "source": '"s"&'}]},
            {"kind": "tool", "name": "look<up>", "input": {"k": evil}, "output": long},
            {"kind": "answer", "text": f"Because {evil}."},
        ],
    }  # fmt: skip
    data = tmp_path / "evil.jsonl"
    data.write_bytes(orjson.dumps(trace) + b"\n")
    config = RunOptions.of(quiet=True, dataset=data, out=None, pricing=PRICING)
    page = report_html(run_job(config).report, traces=traces_of(data))
    parsed = Page(page)
    assert parsed.tags["script"] == 1 and "<script>alert" not in page
    block = page[page.index('<section id="traces">') : page.index('<footer id="limits">')]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in block
    assert "<h3>t &lt;script&gt;" in block and "d&lt;1&gt;" in block
    assert "tool look&lt;up&gt;" in block and "&#34;s&#34;&amp;" in block
    # a long document is cut, its whole text the tooltip; a tool's output is cut short
    assert f'title="&lt;script&gt;alert(1)&lt;/script&gt; {long}"' in block
    assert re.search(r"<code>x{159}…</code>", block) is not None
    assert "x" * 300 not in block.replace(f'{long}"', "")
