"""What the trace readers share: their options, documents in a tool's output, contexts, a
checked :class:`Trace`, and the one-row view of a trace (docs/semantics.md §8).

- A tool is a *retrieval step* when its output is a list of documents (LangChain
  ``{page_content, metadata}``, LlamaIndex ``{node: {text, ...}, score}``, or objects with a
  text and an id, score, source or metadata), or when its name is one of
  ``retrieval_tools`` (``--retrieval-tool NAME``): its output may then also be a list of
  strings, or text whose passages are separated by a blank line (as ragas tool messages
  join them). Anything else is a tool step; a list of chat messages or of MCP content
  blocks is never documents.
- A context's id is the document's own (its ``id``, else ``metadata.id``), else ``c1``,
  ``c2``, ... in order within the step, as the single-turn readers number them.
- The one-row view (``--flatten``) of a trace is its last turn: that turn's question, the
  documents of its first retrieval step and its last answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ragbatch.core import (
    AnswerStep,
    ConfigError,
    Context,
    RetrievalStep,
    Row,
    ToolStep,
    Trace,
    UserStep,
    turns_of,
)
from ragbatch.data._base import describe
from ragbatch.data._records import CellError, kind
from ragbatch.data._traces import Document, decoded, document

Step = UserStep | RetrievalStep | ToolStep | AnswerStep
TEXT_KEYS = ("page_content", "pageContent", "text", "content")
# a text with one of these beside it is a document; a chat message or an MCP content block
# ({"type": "text", "text": ...}) has none of them
DOCUMENT_KEYS = ("id", "id_", "metadata", "score", "source", "file_id", "document_id")
_BLANK_LINE = re.compile(r"\n[ \t\r]*\n")


@dataclass(frozen=True, slots=True)
class StepOptions:
    """How a trace reader maps records: ``retrieval_tools`` are tools read as retrieval
    steps; ``flatten`` gives the one-row view of every trace; ``steps`` gives every span
    trace as a trace, even one the single-turn readers read as a row; ``sessions`` joins the
    traces of one session into one trace of turns (span formats)."""

    retrieval_tools: frozenset[str] = frozenset()
    flatten: bool = False
    steps: bool = False
    sessions: bool = True


def step_options(
    retrieval_tools: Iterable[str] = (),
    *,
    flatten: bool = False,
    steps: bool = False,
    sessions: bool = True,
) -> StepOptions:
    """Checked :class:`StepOptions` (ConfigError for a contradiction)."""
    names = frozenset(retrieval_tools)
    if "" in names:
        raise ConfigError("--retrieval-tool needs a tool name")
    if flatten and steps:
        raise ConfigError("--flatten gives one row per trace; it cannot also keep every step")
    return StepOptions(names, flatten, steps, sessions)


def _document_fields(item: Any) -> dict[str, Any] | None:
    """The id, content and metadata of one document object, or None when it is not one."""
    if not isinstance(item, dict) or "role" in item:
        return None
    for holder in (item, item.get("node"), item.get("document")):
        if not isinstance(holder, dict):
            continue
        langchain = isinstance(holder.get("page_content", holder.get("pageContent")), str)
        marked = holder is not item or any(k in holder for k in DOCUMENT_KEYS)
        content = next((holder[k] for k in TEXT_KEYS if isinstance(holder.get(k), str)), None)
        doc_id = holder.get("id", holder.get("id_"))
        if content is not None and (langchain or marked) and _is_id(doc_id):
            metadata = holder.get("metadata")
            if isinstance(holder.get("source"), str) and not isinstance(metadata, dict):
                metadata = {"source": holder["source"]}  # a source beside the text
            return {"id": doc_id, "content": content, "metadata": metadata}
    return None


def _is_id(value: Any) -> bool:
    return value is None or (isinstance(value, str | int) and not isinstance(value, bool))


def recognized_documents(output: Any) -> list[Document] | None:
    """The documents in a tool's output when it is a non-empty list of documents (or
    ``{"documents": [...]}``), else None."""
    output = decoded(output)
    if isinstance(output, dict) and isinstance(output.get("documents"), list):
        output = output["documents"]
    if not isinstance(output, list) or not output:
        return None
    fields = [_document_fields(item) for item in output]
    if any(f is None for f in fields):
        return None
    return [document(rank, f, "") for rank, f in enumerate(fields) if f is not None]


def named_documents(output: Any, where: str) -> list[Document]:
    """The documents a named retrieval tool returned: documents, strings, or text whose
    passages are separated by blank lines; CellError when there are none to read."""
    found = recognized_documents(output)
    if found is not None:
        return found
    output = decoded(output)
    if isinstance(output, dict) and isinstance(output.get("documents"), list):
        output = output["documents"]
    if output is None:
        raise CellError(f"{where}: a retrieval step without its documents (no output)")
    if isinstance(output, str):
        output = [p.strip() for p in _BLANK_LINE.split(output) if p.strip()]
    if isinstance(output, list) and all(isinstance(p, str) for p in output):
        return [Document(rank=n, id=None, content=p) for n, p in enumerate(output)]
    raise CellError(
        f"{where}: a retrieval tool's output must be documents, strings or text, got {kind(output)}"
    )


def contexts(documents: list[Document]) -> list[Context]:
    """Documents in rank order as contexts (ids ``c<n>`` where a document has none)."""
    ranked = sorted(documents, key=lambda d: d.rank)
    return [
        Context(id=d.id or f"c{n}", text=d.content, source=d.source)
        for n, d in enumerate(ranked, start=1)
    ]


def query_of(value: Any) -> str | None:
    """A retrieval's query from its input: text, or an object's ``query`` (or only) string."""
    value = decoded(value)
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if isinstance(value.get("query"), str):
            return str(value["query"])
        texts = [v for v in value.values() if isinstance(v, str)]
        if len(texts) == 1 and len(value) == 1:
            return texts[0]
    return None


def retrieval_or_tool(
    name: str,
    tool_input: Any,
    output: Any,
    question: str,
    options: StepOptions,
    where: str,
    span: str | None = None,
) -> RetrievalStep | ToolStep:
    """A tool call as a retrieval step (by its output, or its name in ``retrieval_tools``)
    or a tool step. A retrieval step's query is its input's; where the input holds none, the
    turn's ``question`` (what a single-turn row's documents are judged against)."""
    if not name:
        raise CellError(f"{where}: a tool call without a name")
    documents = recognized_documents(output)
    if name in options.retrieval_tools and documents is None:
        documents = named_documents(output, where)
    if documents is None:
        return ToolStep(kind="tool", name=name, input=tool_input, output=output, span=span)
    return retrieval(query_of(tool_input), documents, question, span)


def retrieval(
    query: str | None, documents: list[Document], question: str, span: str | None = None
) -> RetrievalStep:
    """A retrieval step; without a query of its own, its query is the turn's question."""
    return RetrievalStep(
        kind="retrieval",
        query=question if query is None else query,
        contexts=contexts(documents),
        span=span,
    )


def make_trace(where: str, **fields: Any) -> Trace:
    """A checked :class:`Trace`; CellError (``where``: the problem) when it is not one."""
    try:
        return Trace(**fields)
    except ValidationError as exc:
        raise CellError(f"{where}: {describe(exc, ignore_hint=False)}") from None


def flat_row(trace: Trace) -> Row:
    """The one-row view of a trace: its last turn's question, first retrieval's documents
    and last answer (``--flatten``)."""
    turn = turns_of(trace)[-1]
    question, answer = trace.steps[turn.user], trace.steps[turn.answers[-1]]
    assert isinstance(question, UserStep) and isinstance(answer, AnswerStep)
    hop = trace.steps[turn.hops[0]] if turn.hops else None
    return Row(
        id=trace.id,
        question=question.text,
        contexts=hop.contexts if isinstance(hop, RetrievalStep) else [],
        answer=answer.text,
        reference_answer=trace.reference_answer,
        metadata=trace.metadata,
        trace_id=trace.trace_id,
    )
