"""What a tool's output must be to be a retrieval step, and start times (the trace readers'
shared rules, docs/semantics.md §8)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from ragbatch.data._records import CellError
from ragbatch.data._steps import named_documents, recognized_documents
from ragbatch.data._traces import instant


@pytest.mark.parametrize(
    ("output", "found"),
    [
        # LangChain documents, as objects or as JSON text
        ([{"page_content": "a", "metadata": {"id": "k1", "source": "s.md"}}], [("k1", "a", "s.md")]),
        ('[{"page_content": "a", "metadata": {}}]', [(None, "a", None)]),
        # LlamaIndex NodeWithScore, a search result with its source beside the text
        ([{"node": {"id_": "n1", "text": "a"}, "score": 0.5}], [("n1", "a", None)]),
        ([{"id": "kb-1", "content": "a", "source": "f.md", "score": 0.8}], [("kb-1", "a", "f.md")]),
        ({"documents": [{"text": "a", "id": 3}]}, [("3", "a", None)]),
        # not documents: chat messages, MCP content blocks, plain strings, an empty list
        ([{"role": "tool", "content": "a", "id": "x"}], None),
        ([{"type": "text", "text": "sunny"}], None),
        (["a", "b"], None),
        ([], None),
        ({"status": "shipped"}, None),
        ([{"page_content": "a"}, {"type": "text", "text": "b"}], None),  # all or nothing
    ],
)  # fmt: skip
def test_recognized_documents(output: Any, found: list[tuple[Any, ...]] | None) -> None:
    documents = recognized_documents(output)
    if found is None:
        assert documents is None
    else:
        assert documents is not None
        assert [(d.id, d.content, d.source) for d in documents] == found


def test_a_named_retrieval_tool_may_return_strings_or_joined_text() -> None:
    assert [d.content for d in named_documents("one\n\ntwo\n \nthree", "t")] == [
        "one", "two", "three"]  # fmt: skip
    assert [d.content for d in named_documents(["a", "b"], "t")] == ["a", "b"]
    assert named_documents("", "t") == []  # it ran and found nothing
    with pytest.raises(CellError, match="t: a retrieval step without its documents"):
        named_documents(None, "t")
    with pytest.raises(CellError, match="t: a retrieval tool's output must be documents"):
        named_documents({"status": "shipped"}, "t")


def test_start_times_in_nanoseconds() -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    nanos = int(moment.timestamp()) * 10**9 + 678901000
    assert instant("2026-01-02T03:04:05.678901Z") == nanos
    assert instant("2026-01-02T03:04:05.678901") == nanos  # no zone: UTC
    assert instant(moment) == nanos
    assert instant(str(nanos + 1)) == instant(nanos + 1) == nanos + 1  # OTLP's nanoseconds
    assert instant("2026-01-02T03:04:05Z") == nanos - 678901000  # no fraction (pydantic v1)
    assert instant(None) is instant("") is instant("yesterday") is instant(True) is None
    pandas = pytest.importorskip("pandas")
    assert instant(pandas.Timestamp(nanos + 7, tz="UTC")) == nanos + 7
