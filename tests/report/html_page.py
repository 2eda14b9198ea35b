"""Reading an HTML report page (html.parser) and its chart boxes, for tests/report/test_html.py
and test_html_browser.py (the pages themselves: conftest.py).
"""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

from ragbatch.data._jsonl import JsonlReader

ROOT = Path(__file__).resolve().parents[2]
CHART_IDS = ("chart-reliability", "chart-risk-coverage", "chart-tradeoff")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


class Page(HTMLParser):
    """What the tests look at: ids, their nesting, resource URLs, marks and row-table rows."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, str | None]] = []
        self.ids: list[str] = []
        self.svg_in: set[str] = set()
        self.urls: list[str] = []
        self.tags: Counter[str] = Counter()
        self.marks: list[dict[str, str]] = []
        self.rows: list[dict[str, str]] = []
        self._mark: dict[str, str] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        self.tags[tag] += 1
        self.urls += [v for k, v in found.items() if k in {"src", "href", "xlink:href", "action"}]
        if "id" in found:
            self.ids.append(found["id"])
        if tag == "svg":
            self.svg_in.update(i for _, i in self.stack if i)
        if tag == "mark":
            self._mark = {
                "class": found.get("class", ""),
                "title": found.get("title", ""),
                "text": "",
            }
        if tag == "tr" and "data-diagnosis" in found:
            self.rows.append(found)
        if tag not in VOID:
            self.stack.append((tag, found.get("id")))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self.urls += [v or "" for k, v in attrs if k in {"src", "href", "xlink:href"}]

    def handle_endtag(self, tag: str) -> None:
        if tag == "mark" and self._mark is not None:
            if self._mark["title"]:  # claim marks only, not the legend
                self.marks.append(self._mark)
            self._mark = None
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._mark is not None:
            self._mark["text"] += data


def dataset_texts(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Answers and questions by row id."""
    rows = list(JsonlReader(path))
    return {r.id: r.answer for r in rows}, {r.id: r.question for r in rows}


def overlapping(boxes: list[tuple[float, ...]]) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i, a in enumerate(boxes)
        for j, b in enumerate(boxes[i + 1 :], start=i + 1)
        if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
    ]
