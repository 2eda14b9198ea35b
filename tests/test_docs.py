"""The documentation: a short README whose quick start is what CI runs, a site whose nav holds
every page, links and anchors that resolve, and code that cites pages, never README headings."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """``text`` without its fenced code blocks (a ``# comment`` there is not a heading)."""
    return FENCE.sub("", text)


def anchors(text: str) -> set[str]:
    """The heading anchors MkDocs gives a page of ``text`` (its ``toc`` slugs)."""
    headings = re.findall(r"^#{1,6} (.+?)\s*$", prose(text), re.M)
    return {slugify(h.replace("`", ""), "-") for h in headings}


def broken_links(page: Path, text: str | None = None) -> list[str]:
    """The relative links of ``page`` (or of ``text`` as if it were there) whose file or anchor
    does not exist."""
    bad = []
    text = page.read_text(encoding="utf-8") if text is None else text
    for target in LINK.findall(prose(text)):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        name, _, anchor = target.partition("#")
        if not name:
            if anchor not in anchors(text):
                bad.append(target)
            continue
        linked = (page.parent / name).resolve()
        if not linked.is_file() or (anchor and anchor not in anchors(linked.read_text("utf-8"))):
            bad.append(target)
    return bad


def nav_pages(nav: list[object]) -> list[str]:
    pages: list[str] = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages += nav_pages(value) if isinstance(value, list) else [str(value)]
    return pages


def doc_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def test_the_readme_is_a_first_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert re.findall(r"`[0-9a-f]{7,40}`", text) == []  # no commit hashes: history is elsewhere
    headings = re.findall(r"^## (.+)$", prose(text), re.M)
    assert headings[0] == "Quick start" and headings[-1] == "Documentation"


def test_the_quick_start_is_what_ci_runs() -> None:
    commands = ["pip install -e . && ragbatch run", "pip install -e '.[test]' && pytest"]
    for page in (README, DOCS / "getting-started.md"):
        text = page.read_text(encoding="utf-8")
        block = re.search(r"^## Quick start\n\n```bash\n(.*?)```", text, re.M | re.S)
        assert block is not None and block[1].splitlines() == commands, page
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert any(line.endswith(" -e '.[test]'") and "pip install" in line for line in ci)
    assert "pytest" in ci
    bare = [re.sub(r"^(\w+=\S*\s+)*", "", line) for line in ci]  # without VAR=value prefixes
    assert any(line.startswith("mkdocs build --strict") for line in bare)


def test_the_nav_holds_every_page_once() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = nav_pages(config["nav"])
    assert len(nav) == len(set(nav))
    pages = {str(p.relative_to(DOCS)) for p in doc_pages()}
    assert set(nav) == pages


def test_links_and_anchors_resolve() -> None:
    pages = [README, *doc_pages()]
    assert {str(p.relative_to(ROOT)): broken_links(p) for p in pages if broken_links(p)} == {}


def test_the_link_check_catches_what_it_should() -> None:
    # guards against a check that passes everything
    text = "[a](../index.md#no-such-heading) [b](nowhere.md) [c](../semantics.md#3-metrics)\n"
    text += (
        "[d](#here) [e](#gone) [f](https://example.com/x.md)\n\n## Here\n\n```\n[g](g.md)\n```\n"
    )
    page = DOCS / "guides" / "probe.md"  # never written: links resolve from its folder
    assert broken_links(page, text) == ["../index.md#no-such-heading", "nowhere.md", "#gone"]
    assert "2a-guarded-routing" in anchors((DOCS / "semantics.md").read_text("utf-8"))


def test_every_readme_example_is_a_tested_one() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert blocks
    pages = "\n".join(p.read_text(encoding="utf-8") for p in doc_pages())
    assert [b for b in blocks if b not in pages] == []


def test_code_cites_doc_pages_never_the_readme() -> None:
    files = [*(ROOT / "ragbatch").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]
    citing = [str(f.relative_to(ROOT)) for f in files if "README" in f.read_text(encoding="utf-8")]
    assert citing == []
    cited = {m for f in files for m in re.findall(r"\bdocs/[\w/-]+\.md\b", f.read_text("utf-8"))}
    assert cited
    assert sorted(c for c in cited if not (ROOT / c).is_file()) == []
