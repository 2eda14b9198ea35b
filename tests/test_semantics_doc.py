"""The code cites documents that ship with it: ``docs/semantics.md`` sections that exist, never
a file a user of the package does not have (issue 27)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "semantics.md"
# Sections other documents and helpers cite by these exact titles.
REQUIRED = {
    "1": "Judgments",
    "2": "Diagnosis policy",
    "2a": "Guarded routing",
    "3": "Metrics",
    "4": "Cascade",
    "5": "The guarantee",
}
HEADING = re.compile(r"^#{2,} §(\w+) (.+)$", re.MULTILINE)
CITATION = re.compile(r"docs/semantics\.md((?:(?:,| and)? ?§\w+)+)")
SECTION = re.compile(r"§(\w+)")
# Documents that do not ship in the package: the seeds and references the project started from.
FOREIGN = re.compile(
    r"\.\./shared|shared/(?:reference|seeds)|rag-semantics|\bseeds? ?0\d\d\b|\bseed-0\d\d\b",
    re.IGNORECASE,
)


def sections() -> dict[str, str]:
    return dict(HEADING.findall(DOC.read_text(encoding="utf-8")))


def cited_sections(text: str) -> set[str]:
    """Every section a ``docs/semantics.md §X[, §Y]`` citation in ``text`` names."""
    return {s for group in CITATION.findall(text) for s in SECTION.findall(group)}


def foreign_citations(text: str) -> list[str]:
    return [m.group(0) for m in FOREIGN.finditer(text)]


def package_files() -> list[Path]:
    return sorted(
        p for p in (ROOT / "ragbatch").rglob("*") if p.is_file() and p.suffix in {".py", ".j2"}
    )


def test_the_sections_others_cite_exist_with_their_titles() -> None:
    found = sections()
    assert {k: found.get(k) for k in REQUIRED} == REQUIRED


@pytest.mark.parametrize("path", package_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_section_exists(path: Path) -> None:
    missing = cited_sections(path.read_text(encoding="utf-8")) - set(sections())
    assert missing == set()


@pytest.mark.parametrize("path", package_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_package_file_cites_a_document_it_does_not_ship(path: Path) -> None:
    assert foreign_citations(path.read_text(encoding="utf-8")) == []


def test_tests_bench_and_docs_cite_only_what_exists() -> None:
    here = Path(__file__).resolve()
    pages = [p for p in (ROOT / "docs").rglob("*.md") if p != DOC]
    texts = [ROOT / "README.md", ROOT / "CHANGELOG.md", *pages]
    texts += [*(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]
    bad: dict[str, object] = {}
    for path in texts:
        if path.resolve() == here:
            continue  # its own examples of what must be caught
        text = path.read_text(encoding="utf-8")
        problems = [*foreign_citations(text), *sorted(cited_sections(text) - set(sections()))]
        if problems:
            bad[str(path.relative_to(ROOT))] = problems
    assert bad == {}


def test_the_checks_catch_what_they_should() -> None:
    # guards against checks that pass everything
    assert cited_sections("see docs/semantics.md §2a and §9z, docs/semantics.md §3") == {
        "2a",
        "9z",
        "3",
    }
    for text in ("(seed 004)", "Seeds 002/004", "seed-004", "rag-semantics §2", "../shared/x"):
        assert foreign_citations(text), text
    for text in ("seed=7", "a seeded shuffle", "--seed 0", "random.Random(seed)"):
        assert foreign_citations(text) == [], text
