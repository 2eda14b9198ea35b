"""The trace timelines in headless Chromium: no console errors, the diagnosis filter hides the
other traces too, and the laid-out timeline (the outlined step, its dot on the line, the
documents on screen) as test_html_browser.py checks the rest of the page."""

from __future__ import annotations

import html
import re
from collections import Counter
from pathlib import Path

import orjson
import pytest

from ragbatch.report._models import Report
from ragbatch.run._job import run_job
from ragbatch.run._options import RunOptions
from tests.report.html_page import ROOT, Page
from tests.report.test_html_browser import load

OPENINFERENCE = ROOT / "tests/fixtures/real/traces/openinference"
PRICING = ROOT / "pricing/typesafe-2026-12.json"


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, Path]:
    """A real LangGraph export (tool calls, sessions) run offline with its page."""
    page = tmp_path_factory.mktemp("traces") / "langgraph.html"
    config = RunOptions.of(
        quiet=True,
        dataset=OPENINFERENCE / "langgraph-1.2.24-otlp-protobuf.json",
        format="openinference",
        out=None,
        pricing=PRICING,
        html=page,
        baseline="lexical",
    )
    return run_job(config).report, page


def test_the_filter_hides_the_other_traces(traced: tuple[Report, Path], tmp_path: Path) -> None:
    report, page = traced
    dom, console = load(page, tmp_path, "#diagnosis=RETRIEVAL_MISS")
    assert console == []
    wanted = [r.id for r in report.rows if r.steps is not None and r.diagnosis == "RETRIEVAL_MISS"]
    assert wanted  # the filter has something to keep
    shown = re.findall(r'<article class="trace" id="trace-\d+" data-diagnosis="(\w+)">', dom)
    hidden = re.findall(r'<article class="trace" id="trace-\d+" data-diagnosis="(\w+)" hidden', dom)
    assert Counter(shown) == {"RETRIEVAL_MISS": len(wanted)}
    assert "RETRIEVAL_MISS" not in hidden and len(shown) + len(hidden) == sum(
        1 for r in report.rows if r.steps is not None
    )
    assert Counter(r["data-diagnosis"] for r in Page(dom).rows if "hidden" not in r) == {
        "RETRIEVAL_MISS": sum(1 for r in report.rows if r.diagnosis == "RETRIEVAL_MISS")
    }


# Measures the laid-out timelines (test only).
PROBE = """<script>
(function () {
  function box(el) { var r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }
  var out = {viewport: document.documentElement.clientWidth, keys: [], docs: [], steps: 0};
  document.querySelectorAll("#traces li.step.key").forEach(function (li) {
    var dot = getComputedStyle(li, "::before");
    out.keys.push({box: box(li), border: getComputedStyle(li).borderTopColor,
                   dot: dot.backgroundColor, left: parseFloat(dot.left)});
  });
  document.querySelectorAll("#traces table.docs").forEach(function (t) { out.docs.push(box(t)); });
  out.steps = document.querySelectorAll("#traces li.step").length;
  var line = document.querySelector("#traces ol.timeline");
  out.line = box(line);
  out.lineColor = getComputedStyle(line).borderLeftColor;
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}());
</script>"""


def test_the_timeline_lays_out_on_screen(traced: tuple[Report, Path], tmp_path: Path) -> None:
    report, page = traced
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text("utf-8").replace("</body>", PROBE + "</body>"), "utf-8")
    dom, console = load(probed, tmp_path, "", "--window-size=1280,900")
    assert console == []
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found is not None
    probe = orjson.loads(html.unescape(found.group(1)))
    traces = [r for r in report.rows if r.steps is not None]
    assert probe["steps"] == sum(len(r.steps or []) for r in traces)
    # one outlined step a trace that has a failing or deciding step, in red or amber
    keyed = [r for r in traces if r.first_failing_step is not None or r.deciding_step is not None]
    assert len(probe["keys"]) == len(keyed) > 0
    colours = {"rgb(220, 38, 38)", "rgb(217, 119, 6)"}
    for key in probe["keys"]:
        assert key["border"] in colours and key["dot"] in colours
        assert key["box"][2] <= probe["viewport"]  # on screen
        # its dot (14 px with its white ring) is centred on the timeline's 2 px line
        centre = key["box"][0] + key["left"] + 7
        assert probe["line"][0] - 1 <= centre <= probe["line"][0] + 3, (centre, probe["line"])
    assert probe["docs"] and all(d[2] <= probe["viewport"] for d in probe["docs"])
