"""An instrumented RAG application: OpenInference traces to Phoenix over OTLP/HTTP (I/O).

Each trace is what an application instrumented with OpenInference sends: a CHAIN root span
(``input.value`` the question, ``output.value`` the answer), one RETRIEVER child per hop
(``input.value`` its query, ``retrieval.documents.N.document.{id,content,score}``) and an
LLM child (``llm.input_messages`` / ``llm.output_messages``: role and content), the project
named by the resource attribute ``openinference.project.name``. The text comes from
:mod:`ragbatch.testing.rag_corpus` (deterministic by seed and trace number); the ids are the
OpenTelemetry SDK's own random ones, so two runs of one seed never collide in one Phoenix.

    app = RagApp(phoenix.url, "demo", seed=1)
    sent = app.send(500, rate_per_s=50)    # one SentTrace per trace
    app.close()                            # flushes what is still batched

    python -m ragbatch.testing.otlp_app --url URL --project P --traces N --rate R --seed S

The command prints one JSON line per trace as it is handed to the SDK (before its batch is
exported: a process killed then loses it) and flushes at the end. The OpenTelemetry SDK and
its OTLP/HTTP exporter are imported on first use (the ``test`` extra).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Self

from ragbatch.testing.rag_corpus import Retrieval, TraceContent, trace_content

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

SERVICE = "ragbatch-rag-app"
MODEL = "rag-app-llm"
SYSTEM_PROMPT = "Answer the question from the documents only."
MS = 1_000_000  # nanoseconds
# How long each span of a trace lasts, in ms, ending just before it is sent (a real app's
# spans lie in the past; explicit times keep the hops' order exact at Phoenix's microseconds).
RETRIEVE_MS, GENERATE_MS, GAP_MS = 5, 30, 1


@dataclass(frozen=True, slots=True)
class SentTrace:
    """One trace the app sent: its ids (hex, as Phoenix shows them) and its content."""

    index: int
    trace_id: str
    root_span_id: str
    span_ids: tuple[str, ...]  # root, retrievers in order, then the LLM span
    kind: str
    hops: int
    question: str
    answer: str
    content: TraceContent

    def to_json(self) -> str:
        """One JSON line: ids, kind, hops, question, answer and the documents' ids."""
        data = asdict(self)
        data.pop("content")
        data["span_ids"] = list(self.span_ids)
        data["documents"] = [[d.id for d in r.documents] for r in self.content.retrievals]
        return json.dumps(data, ensure_ascii=False)


def _tracer_provider(url: str, project: str, delay_ms: int) -> TracerProvider:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"openinference.project.name": project, "service.name": SERVICE})
    provider = TracerProvider(resource=resource)
    exporter = OTLPSpanExporter(endpoint=f"{url.rstrip('/')}/v1/traces", timeout=30)
    provider.add_span_processor(
        BatchSpanProcessor(
            exporter,
            max_queue_size=65_536,
            schedule_delay_millis=delay_ms,
            max_export_batch_size=512,
        )
    )
    return provider


def _hex(span: Span) -> tuple[str, str]:
    context = span.get_span_context()
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


def _retriever_attributes(retrieval: Retrieval) -> dict[str, Any]:
    attrs: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": retrieval.query}
    for n, doc in enumerate(retrieval.documents):
        prefix = f"retrieval.documents.{n}.document"
        attrs |= {f"{prefix}.id": doc.id, f"{prefix}.content": doc.content,
                  f"{prefix}.score": doc.score}  # fmt: skip
    return attrs


def _llm_attributes(content: TraceContent) -> dict[str, Any]:
    documents = "\n".join(d.content for r in content.retrievals for d in r.documents)
    messages = [("system", f"{SYSTEM_PROMPT}\n\n{documents}"), ("user", content.question)]
    attrs: dict[str, Any] = {
        "openinference.span.kind": "LLM",
        "llm.model_name": MODEL,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": content.answer,
    }
    for n, (role, text) in enumerate(messages):
        attrs[f"llm.input_messages.{n}.message.role"] = role
        attrs[f"llm.input_messages.{n}.message.content"] = text
    return attrs


class RagApp:
    """Sends traces of seed ``seed`` to ``{url}/v1/traces`` under ``project``; trace numbers
    go on from one :meth:`send` to the next."""

    def __init__(
        self,
        url: str,
        project: str,
        seed: int = 0,
        *,
        multi_hop: float = 0.2,
        schedule_delay_ms: int = 100,
    ) -> None:
        self.project, self.seed, self.multi_hop = project, seed, multi_hop
        self._provider = _tracer_provider(url, project, schedule_delay_ms)
        self._tracer: Tracer = self._provider.get_tracer("ragbatch.testing.otlp_app")
        self._next = 0

    def send(
        self,
        n: int,
        rate_per_s: float | None = None,
        on_sent: Callable[[SentTrace], None] | None = None,
    ) -> list[SentTrace]:
        """Make ``n`` traces, ``rate_per_s`` a second at most (None: as fast as possible);
        they are batched and exported in the background (:meth:`flush` waits for that)."""
        sent: list[SentTrace] = []
        began = time.monotonic()
        for i in range(n):
            if rate_per_s:
                delay = began + i / rate_per_s - time.monotonic()
                if delay > 0:
                    time.sleep(delay)  # pacing the load, as a steady stream of users would
            content = trace_content(self.seed, self._next, self.multi_hop)
            self._next += 1
            sent.append(self._emit(content))
            if on_sent is not None:
                on_sent(sent[-1])
        return sent

    def _emit(self, content: TraceContent) -> SentTrace:
        from opentelemetry import trace

        hops = len(content.retrievals)
        total = (RETRIEVE_MS + GAP_MS) * hops + GENERATE_MS + 2 * GAP_MS
        at = time.time_ns() - total * MS
        root = self._tracer.start_span(
            "rag_pipeline",
            start_time=at,
            attributes={"openinference.span.kind": "CHAIN", "input.value": content.question},
        )
        context = trace.set_span_in_context(root)
        ids = [_hex(root)]
        for retrieval in content.retrievals:
            at += GAP_MS * MS
            span = self._tracer.start_span("retrieve", context, start_time=at,
                                           attributes=_retriever_attributes(retrieval))  # fmt: skip
            at += RETRIEVE_MS * MS
            span.end(end_time=at)
            ids.append(_hex(span))
        at += GAP_MS * MS
        llm = self._tracer.start_span("generate", context, start_time=at,
                                      attributes=_llm_attributes(content))  # fmt: skip
        at += GENERATE_MS * MS
        llm.end(end_time=at)
        ids.append(_hex(llm))
        root.set_attribute("output.value", content.answer)
        root.end(end_time=at + GAP_MS * MS)
        trace_id, root_id = ids[0]
        return SentTrace(content.index, trace_id, root_id, tuple(s for _, s in ids),
                         content.kind, hops, content.question, content.answer, content)  # fmt: skip

    def flush(self, timeout_s: float = 30.0) -> None:
        """Export every span made so far (RuntimeError if that does not end in time)."""
        if not self._provider.force_flush(int(timeout_s * 1000)):
            raise RuntimeError(f"spans not exported within {timeout_s:g} s")

    def close(self) -> None:
        """Flush and shut the SDK down (its exporter thread ends)."""
        self._provider.shutdown()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ragbatch.testing.otlp_app``: send traces, one JSON line each."""
    parser = argparse.ArgumentParser(prog="python -m ragbatch.testing.otlp_app",
                                     description=(__doc__ or "").split("\n\n")[0])  # fmt: skip
    parser.add_argument("--url", required=True, help="Phoenix's base URL (no /v1)")
    parser.add_argument("--project", required=True)
    parser.add_argument("--traces", type=int, required=True)
    parser.add_argument("--rate", type=float, default=None, help="traces a second (max)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--multi-hop", type=float, default=0.2, help="share of 2-hop traces")
    args = parser.parse_args(argv)

    def show(sent: SentTrace) -> None:
        print(sent.to_json(), flush=True)

    with RagApp(args.url, args.project, args.seed, multi_hop=args.multi_hop) as app:
        app.send(args.traces, args.rate, on_sent=show)
        app.flush()
    print(f"sent {args.traces} traces to project {args.project!r}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
