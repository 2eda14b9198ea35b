"""A headless Chromium smoke test of the HTML report: no console errors, charts in the DOM, the
filter script, and the laid-out page (labels apart, columns on screen)."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import orjson
import pytest

from ragbatch.data._jsonl import JsonlReader
from tests.report.html_page import CHART_IDS, ROOT, Page, overlapping

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium", path="/usr/bin")
    if found:
        return found
    if os.environ.get("CI", "").strip().lower() not in {"", "0", "false", "no"}:
        pytest.fail("chromium is required under CI (apt-get install chromium)")
    pytest.skip("chromium is not installed (apt-get install chromium)")


def load(page: Path, tmp_path: Path, fragment: str = "", *extra: str) -> tuple[str, list[str]]:
    """The DOM after load and the page's console lines (Chromium logs them as CONSOLE)."""
    command = [chromium(), *FLAGS, *extra, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom"]
    result = subprocess.run(
        [*command, page.resolve().as_uri() + fragment], capture_output=True, text=True, timeout=90
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout, [line for line in result.stderr.splitlines() if ":CONSOLE" in line]


@pytest.mark.parametrize(("ci", "outcome"), [("true", "fail"), ("", "skip"), ("false", "skip")])
def test_missing_chromium_fails_only_under_ci(
    ci: str, outcome: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutil, "which", lambda *_, **__: None)
    monkeypatch.setenv("CI", ci)
    expected = pytest.fail.Exception if outcome == "fail" else pytest.skip.Exception
    with pytest.raises(expected):
        chromium()


def test_browser_console_catches_errors(tmp_path: Path) -> None:
    # guards the check below: a throwing page must be seen, or "no console lines" means nothing
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><p>x</p><script>undefinedFunction();</script>", "utf-8")
    _, console = load(page, tmp_path)
    assert any("Uncaught" in line for line in console)


def test_browser_renders_without_console_errors(page_html: str, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(page_html, encoding="utf-8")
    dom, console = load(page, tmp_path, "#diagnosis=JUDGE_UNCERTAIN")
    assert console == []
    for chart in CHART_IDS:
        assert f'id="{chart}"' in dom
    assert dom.count("<svg") >= 3 and 'id="confusion"' in dom and 'id="rows"' in dom
    # the filter script ran: the fragment chose a diagnosis, the other rows are hidden
    rows = Page(dom).rows
    shown = Counter(r["data-diagnosis"] for r in rows if "hidden" not in r)
    assert shown == {"JUDGE_UNCERTAIN": 6}
    assert len(rows) == 48 and '<span id="rows-shown">6</span>' in dom


# Measures the laid-out page (test only: the report's own page has exactly one script).
PROBE = """<script>
(function () {
  function box(el) { var r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }
  var out = {viewport: document.documentElement.clientWidth, heads: {}};
  out.labels = Array.prototype.map.call(
    document.querySelectorAll('#chart-sweep g[id^="sweep-sweep-label-"]'), box);
  out.slices = box(document.querySelector("#slices .scroll"));
  document.querySelectorAll("#slices th").forEach(function (th) { out.heads[th.textContent] = box(th); });
  var key = document.querySelector("#mismatch-legend .mismatch-key");
  var cell = document.querySelector("#rows-table tr.mismatch td.diagnosis");
  out.legend = getComputedStyle(key).color;
  out.mismatch = getComputedStyle(cell).color;
  out.plain = getComputedStyle(document.querySelector("#rows-table tr:not(.mismatch) td.diagnosis")).color;
  var question = document.querySelector("#rows-table td.question");
  out.question = question.textContent;
  out.questionBox = box(question);
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}());
</script>"""


def test_browser_shows_the_new_parts(golden_page: str, tmp_path: Path) -> None:
    page = tmp_path / "golden.html"
    page.write_text(golden_page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom, console = load(page, tmp_path, "", "--window-size=1280,900")
    assert console == []
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found is not None
    probe = orjson.loads(html.unescape(found.group(1)))
    # the threshold-sweep labels, as the browser draws them, do not overlap
    labels = probe["labels"]
    assert len(labels) == 5 and overlapping([tuple(b) for b in labels]) == []
    # the slices' flag and reason columns are on screen without scrolling
    right = min(probe["slices"][2], probe["viewport"])
    for head in ("flag", "reason"):
        assert probe["heads"][head][2] <= right, (head, probe["heads"][head], right)
    # the legend's swatch is the red of a mismatched diagnosis, which plain ones are not
    assert probe["legend"] == probe["mismatch"] == "rgb(185, 28, 28)" != probe["plain"]
    first = next(iter(JsonlReader(ROOT / "datasets/golden-fixture.jsonl")))
    assert probe["question"] == first.question
    assert probe["questionBox"][2] <= probe["viewport"]  # the question column is on screen
