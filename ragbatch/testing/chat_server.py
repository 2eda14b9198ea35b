"""A fake OpenAI-compatible chat server on loopback for tests (does I/O: sockets, threads).

Serves ``POST /v1/chat/completions`` with a bearer-key check. By default it plays a judge: the
reply content is ``{"diagnosis": ..., "confidence": ...}`` derived from the last user message
(the first diagnosis name of the vocabulary written in it, else any word ``UNGROUNDED`` for
``GENERATOR_UNGROUNDED``, else ``PASS`` at 0.9), so replies are deterministic from content.
``content_fn`` replaces the content (e.g. claim lists). Faults are scripted per request in a
FIFO queue (``push``). A 401 echoes the key it was given, as some services do, so tests can
check that clients redact it. Nothing in the pure core imports this module.
"""

from __future__ import annotations

import json
import math
import sys
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, cast

from ragbatch.testing.loopback import LoopbackServer

__all__ = ["ChatFault", "ChatFaultKind", "ChatServer", "ContentFn", "default_verdict"]

ChatFaultKind = Literal[
    "status", "latency", "malformed_content", "unknown_diagnosis", "bad_confidence",
    "missing_choices", "missing_usage",
]  # fmt: skip
ContentFn = Callable[[dict[str, Any]], str]
"""``(request body) -> message content``: overrides the default verdict."""

_VOCABULARY = (
    "RETRIEVAL_MISS", "RETRIEVAL_INSUFFICIENT", "CONFLICTING_EVIDENCE", "GENERATOR_UNGROUNDED",
    "ANSWER_IRRELEVANT", "ANSWER_INCORRECT", "JUDGE_UNCERTAIN",
)  # fmt: skip
_BAD_CONTENT = {
    "malformed_content": "not json",
    "unknown_diagnosis": json.dumps({"diagnosis": "PROBABLY_FINE", "confidence": 0.5}),
    "bad_confidence": json.dumps({"diagnosis": "PASS", "confidence": 1.5}),
}


@dataclass(frozen=True)
class ChatFault:
    """One scripted misbehaviour for one ``POST /v1/chat/completions``.

    ``status`` answers ``status`` with ``retry_after`` as the ``Retry-After`` header;
    ``latency`` waits ``delay_s`` and then answers normally; the other kinds answer 200 with
    a bad reply: content ``not json``, an unknown diagnosis, confidence 1.5, no choices, or
    (``missing_usage``) a good verdict without a ``usage`` block.
    """

    kind: ChatFaultKind
    status: int = 500
    retry_after: str | None = None
    delay_s: float = 0.0


def default_verdict(body: dict[str, Any]) -> str:
    """The judge's content for a request: JSON of the diagnosis named in the user message."""
    messages = body.get("messages") or []
    users = [
        m.get("content", "") for m in messages if isinstance(m, dict) and m.get("role") == "user"
    ]
    text = str(users[-1]) if users else ""
    named = [d for d in _VOCABULARY if d in text]
    if named:
        return json.dumps({"diagnosis": named[0], "confidence": 0.8})
    if "UNGROUNDED" in text:
        return json.dumps({"diagnosis": "GENERATOR_UNGROUNDED", "confidence": 0.8})
    return json.dumps({"diagnosis": "PASS", "confidence": 0.9})


def _tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, chat: ChatServer) -> None:
        self.chat = chat
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "chat-test"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging."""

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        cast(_HTTPServer, self.server).chat._count(status)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", "chatreq-1")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, {"error": {"message": message, "type": "test_error"}}, headers)

    def do_POST(self) -> None:
        """Serve ``POST /v1/chat/completions``."""
        chat = cast(_HTTPServer, self.server).chat
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        if self.path.split("?")[0] != "/v1/chat/completions":
            self._error(404, "not found")
            return
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = None
        fault = chat._record(body)
        if fault is not None and fault.kind == "latency":
            chat._stopping.wait(fault.delay_s)
        elif fault is not None and fault.kind == "status":
            extra = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
            self._error(fault.status, f"scripted status {fault.status}", extra)
            return
        given = self.headers.get("Authorization", "")
        if given != f"Bearer {chat.api_key}":
            self._error(401, f"Incorrect API key provided: {given.removeprefix('Bearer ')}")
        elif not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._error(400, "body must be a JSON object with messages")
        else:
            self._answer(chat, body, fault)

    def _answer(self, chat: ChatServer, body: dict[str, Any], fault: ChatFault | None) -> None:
        model = str(body.get("model", ""))
        if fault is not None and fault.kind in _BAD_CONTENT:
            content = _BAD_CONTENT[fault.kind]
        else:
            content = chat.content_fn(body) if chat.content_fn else default_verdict(body)
        prompt = _tokens(json.dumps(body["messages"], sort_keys=True))
        completion = _tokens(content)
        reply: dict[str, Any] = {
            "id": f"chatcmpl-{chat.requests_total}",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
        if fault is not None and fault.kind in ("missing_choices", "missing_usage"):
            del reply[fault.kind.removeprefix("missing_")]
        self._send(200, reply)


class ChatServer(LoopbackServer):
    """A threaded chat server on ``127.0.0.1:<random port>``; ``with`` or start()/stop().

    Counters (written under a lock): ``requests_total`` (chat POSTs), ``responses_by_status``,
    and per chat POST one entry in ``bodies`` (parsed JSON, None if not JSON).
    """

    requests_total: int
    responses_by_status: dict[int, int]
    bodies: list[Any]

    def __init__(self, api_key: str = "judge-key", *, content_fn: ContentFn | None = None) -> None:
        self.api_key = api_key
        self.content_fn = content_fn
        self._lock = threading.Lock()
        self._faults: deque[ChatFault] = deque()
        super().__init__()
        self.requests_total = 0
        self.responses_by_status = {}
        self.bodies = []

    def _make_httpd(self) -> _HTTPServer:
        return _HTTPServer(self)

    def push(self, *faults: ChatFault) -> None:
        """Queue faults, consumed one per chat POST in FIFO order."""
        with self._lock:
            self._faults.extend(faults)

    def _record(self, body: Any) -> ChatFault | None:
        with self._lock:
            self.requests_total += 1
            self.bodies.append(body)
            return self._faults.popleft() if self._faults else None

    def _count(self, status: int) -> None:
        with self._lock:
            self.responses_by_status[status] = self.responses_by_status.get(status, 0) + 1
