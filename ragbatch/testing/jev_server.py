"""A Jev-compatible HTTP server on loopback for tests and benchmarks (does I/O).

Owns sockets, threads and real sleeps; nothing in the pure core imports it. Answers are
deterministic from content (sha256 of canonical JSON of ``[state, question]``, never of the
question id), so the same question gets the same answer under any id, alone or with others.
Faults are scripted per request: a FIFO queue (``push``) first, then an optional ``fault_fn``.
Error bodies take the reference's shapes: ``{"detail": [...]}`` for 422, else
``{"detail": {"error_type", "message"}}`` (tests/testing/test_jevcompat.py runs ``jevcompat test``).
Run ``python -m ragbatch.testing.jev_server --port 0`` for a separate benchmark process.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import random
import re
import signal
import socket
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, cast

from ragbatch.testing.bias import Bias, BiasedJudge, parse_bias
from ragbatch.testing.bucket import TokenBucket
from ragbatch.testing.jev_errors import JSON_INVALID, error_type, phrase, validation_errors
from ragbatch.testing.loopback import LoopbackServer

__all__ = [
    "AnswerFn",
    "Fault",
    "FaultFn",
    "FaultKind",
    "JevServer",
    "canonical_json",
    "count_input_tokens",
    "default_answer",
    "main",
]

FaultKind = Literal[
    "latency", "status", "hang", "trickle", "drop", "non_json", "truncated", "missing_answer",
    "extra_answer",
    "wrong_type", "out_of_range", "nan", "bad_usage",
]  # fmt: skip
AnswerFn = Callable[[Any, str, dict[str, Any]], dict[str, Any]]
"""``(state, question_id, question) -> answer``: overrides the default answer."""

_ALIASES = frozenset({"jev-latest", "jev-preview"})
_PINNED = re.compile(r"jev-\d+\.\d+\.\d+")
_MODELS = (
    ("jev-1.12.0", "Previous System One release.", "2026-07-15"),
    ("jev-1.13.0", "Current System One release: calibrated noul/choice/score.", "2026-10-01"),
)
_BASE_INPUT_TOKENS = 260


@dataclass(frozen=True)
class Fault:
    """One scripted misbehaviour for one ``POST /v1/systemone`` request.

    ``delay_s`` applies to ``latency`` (default 0) and ``hang`` (default 30), both of which
    then answer normally, and to ``trickle``: a normal answer sent one byte every ``delay_s``
    (default 0.5) after the headers, so that no single read waits long. ``status``/``retry_after``/``retry_after_ms``/``message`` apply to
    ``status``; ``body`` replaces the whole error body (raw text, e.g. a gateway's page that
    echoes the key back). ``usage_value`` replaces ``usage.input_tokens`` for ``bad_usage``. The
    corrupting kinds hit the first noul answer (else the first answer's ``confidence``);
    ``truncated`` sends the first half of the JSON reply, ``non_json`` an HTML page (both 200).
    """

    kind: FaultKind
    delay_s: float | None = None
    status: int = 500
    retry_after: str | None = None
    retry_after_ms: int | None = None
    message: str | None = None
    usage_value: int | str = -1
    body: str | None = None


FaultFn = Callable[[int, dict[str, Any]], Fault | None]
"""``(request_index, body) -> Fault | None``; index counts systemone POSTs from 0."""


def canonical_json(value: Any) -> str:
    """Serialise ``value`` as canonical JSON (sorted keys, no spaces, UTF-8 kept)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _unit(*parts: Any) -> float:
    digest = hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def _distribution(state: Any, question: dict[str, Any], labels: Sequence[str]) -> list[float]:
    """Deterministic probabilities in thousandths summing to exactly 1."""
    weights = [_unit(state, question, label) ** 2 + 1e-9 for label in labels]
    total = sum(weights)
    scaled = [w / total * 1000 for w in weights]
    ints = [math.floor(s) for s in scaled]
    by_remainder = sorted(range(len(ints)), key=lambda i: ints[i] - scaled[i])
    for i in by_remainder[: 1000 - sum(ints)]:
        ints[i] += 1
    return [n / 1000 for n in ints]


def default_answer(state: Any, question: dict[str, Any]) -> dict[str, Any]:
    """The server's answer to ``question`` about ``state`` (deterministic from content)."""
    kind = question["type"]
    if kind == "noul":
        return {"type": "noul", "noul": round(_unit(state, question), 3)}
    criteria = question["criteria"]
    labels = [str(i) for i in range(len(criteria))] if kind == "score" else list(criteria)
    probs = _distribution(state, question, labels)
    top = max(range(len(labels)), key=lambda i: probs[i])
    confidence = score_confidence(probs, top) if kind == "score" else choice_confidence(probs)
    dist = {"confidence": confidence, "probabilities": dict(zip(labels, probs, strict=True))}
    if kind == "choice":
        return {"type": "choice", "choice": labels[top], **dist}
    score = round(sum(i * p for i, p in enumerate(probs)), 3)
    legend = {str(i): level for i, level in enumerate(criteria)}
    return {"type": "score", "score": score, "legend": legend, **dist}


def choice_confidence(probs: Sequence[float]) -> float:
    """The reference formula: the top probability's lift over uniform, in [0, 1]."""
    n = len(probs)
    return 1.0 if n <= 1 else round((max(probs) - 1 / n) / (1 - 1 / n), 6)


def score_confidence(probs: Sequence[float], mode: int) -> float:
    """The reference formula: 1 - the mean distance from the mode, over a uniform answer's."""
    n = len(probs)
    if n <= 1:
        return 1.0
    spread = sum(p * abs(i - mode) for i, p in enumerate(probs))
    uniform = sum(abs(i - (n - 1) / 2) for i in range(n)) / n
    return round(max(0.0, 1 - spread / uniform), 6)


def count_input_tokens(state: Any, questions: dict[str, Any]) -> int:
    """Billed input tokens: 260 + ceil(len/4) of the canonical state and of each question."""
    parts = [state, *questions.values()]
    return _BASE_INPUT_TOKENS + sum(math.ceil(len(canonical_json(p)) / 4) for p in parts)


def _corrupt(answers: dict[str, Any], kind: str) -> None:
    ids = list(answers)
    if kind == "missing_answer":
        del answers[ids[-1]]
    elif kind == "extra_answer":
        answers["__extra_answer__"] = {"type": "noul", "noul": 0.5}
    else:
        value = {"wrong_type": "0.5", "out_of_range": 1.5, "nan": math.nan}[kind]
        target = next((i for i in ids if answers[i].get("type") == "noul"), ids[0])
        answer = dict(answers[target])
        answer["noul" if answer.get("type") == "noul" else "confidence"] = value
        answers[target] = answer


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True

    def __init__(self, jev: JevServer, port: int) -> None:
        self.jev = jev
        super().__init__(("127.0.0.1", port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = 60  # idle keep-alive connections are dropped eventually
    server_version = "jev-test"
    sys_version = ""
    jev: JevServer
    request_id: str

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging (keeps the fast path fast)."""

    def do_GET(self) -> None:
        """Serve ``GET /v1/models``."""
        self._dispatch(self._get)

    def do_POST(self) -> None:
        """Serve ``POST /v1/systemone``."""
        self._dispatch(self._post)

    def _dispatch(self, route: Callable[[bytes], None]) -> None:
        self.jev = cast(_HTTPServer, self.server).jev
        self.request_id = self.jev._begin()
        try:
            length = int(self.headers.get("Content-Length") or 0)
            route(self.rfile.read(length) if length > 0 else b"")
        except ConnectionError:  # the client went away (timeout): nothing to answer
            self.close_connection = True
        finally:
            self.jev._end()

    def _send(
        self,
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
        ok: bool = False,
        ctype: str = "text/html; charset=utf-8",
        trickle_s: float = 0.0,
    ) -> None:
        if isinstance(payload, bytes):
            data = payload
        else:  # allow_nan: the "nan" fault must write a literal NaN
            data, ctype = json.dumps(payload, ensure_ascii=False).encode(), "application/json"
        self.jev._count(status, success=ok)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-typesafe-request-id", self.request_id)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if trickle_s <= 0:
            self.wfile.write(data)
            return
        for i in range(len(data)):
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()
            if self.jev._stopping.wait(trickle_s):
                break

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        if status == 422:
            detail: Any = [{"type": "value_error", "loc": ["body"], "msg": message}]
        else:  # the reference's shape (jevcompat spec §6, errors.shape)
            detail = {"error_type": error_type(status), "message": message}
        self._send(status, {"detail": detail}, headers)

    def _is_authorized(self) -> bool:
        key = self.jev.api_key
        return key is None or self.headers.get("Authorization") == f"Bearer {key}"

    def _get(self, raw: bytes) -> None:
        if self.path.split("?")[0] != "/v1/models":
            self._error(404, "not found")
        elif not self._is_authorized():
            self._error(401, "invalid api key")
        else:
            self._send(200, {"models": self.jev.list_models()})

    def _post(self, raw: bytes) -> None:
        if self.path.split("?")[0] != "/v1/systemone":
            self._error(404, "not found")
            return
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = None
        fault = self.jev._record(body, {k.lower(): v for k, v in self.headers.items()})
        if fault is not None and fault.kind in ("latency", "hang"):
            default = 30.0 if fault.kind == "hang" else 0.0
            self.jev._pause(default if fault.delay_s is None else fault.delay_s)
        elif fault is not None and fault.kind in ("status", "drop", "non_json"):
            self._fault_reply(fault)
            return
        if not self._is_authorized():
            self._error(401, "invalid api key")
        elif errors := validation_errors(body) if body is not None else [JSON_INVALID]:
            self._send(422, {"detail": errors})
        elif body["model"] not in _ALIASES and not _PINNED.fullmatch(body["model"]):
            self._error(404, f"model {body['model']!r} not found")
        else:
            self._answer(body, fault)

    def _answer(self, body: dict[str, Any], fault: Fault | None) -> None:
        jev, state, questions = self.jev, body["state"], body["questions"]
        input_tokens = count_input_tokens(state, questions)
        if jev._bucket is not None:
            if input_tokens > jev._bucket.capacity:
                self._error(400, "request exceeds the token bucket capacity")
                return
            if (wait_ms := jev._bucket.take(input_tokens)) is not None:
                self._error(429, "rate limited", {"retry-after-ms": str(wait_ms)})
                return
        jev._pause(jev._next_latency())
        answer_fn = jev.answer_fn
        answers = {
            qid: answer_fn(state, qid, q) if answer_fn else default_answer(state, q)
            for qid, q in questions.items()
        }
        if jev.judge is not None:  # injected biases replace the noul answers
            biased = jev.judge.answers(state, questions)
            answers.update({qid: {"type": "noul", "noul": p} for qid, p in biased.items()})
        usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": 2 * len(answers)}
        if fault is not None and fault.kind == "bad_usage":
            usage["input_tokens"] = fault.usage_value
        elif fault is not None and fault.kind not in ("latency", "hang", "trickle", "truncated"):
            _corrupt(answers, fault.kind)
        model = jev.release if body["model"] in _ALIASES else body["model"]
        reply = {"model": model, "answers": answers, "usage": usage}
        if fault is not None and fault.kind == "truncated":  # the first half of a JSON reply
            data = json.dumps(reply).encode()
            self._send(200, data[: len(data) // 2], ctype="application/json")
            return
        ok = fault is None or fault.kind in ("latency", "hang", "trickle")
        trickle_s = 0.0
        if fault is not None and fault.kind == "trickle":
            trickle_s = 0.5 if fault.delay_s is None else fault.delay_s
        self._send(200, reply, ok=ok, trickle_s=trickle_s)

    def _fault_reply(self, fault: Fault) -> None:
        if fault.kind == "drop":
            self.jev._count(0)
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
        elif fault.kind == "non_json":
            self._send(200, b"<html>oops</html>")
        else:
            headers = {"Retry-After": fault.retry_after, "retry-after-ms": fault.retry_after_ms}
            message = fault.message or phrase(fault.status)
            present = {k: str(v) for k, v in headers.items() if v is not None}
            if fault.body is not None:
                self._send(fault.status, fault.body.encode(), present)
            else:
                self._error(fault.status, message, present)


class JevServer(LoopbackServer):
    """A threaded Jev server on ``127.0.0.1:<port>`` (0 = random); ``with`` or start()/stop().

    Counters, written under a lock, read as attributes: ``requests_total`` (every HTTP
    request), ``responses_by_status`` (0 = dropped), ``successful`` (200 with valid answers),
    ``max_in_flight``, and per ``POST /v1/systemone`` one entry in ``bodies`` (parsed JSON,
    ``None`` if not JSON) and ``headers_seen`` (lower-cased header names). ``api_key=None``
    turns auth off: any or no ``Authorization`` header is accepted. ``token_bucket`` is
    ``(capacity, refill_per_s)`` or a :class:`~ragbatch.testing.bucket.TokenBucket` (with its
    own clock). ``bias`` (see :mod:`ragbatch.testing.bias`) answers noul questions with
    injected biases, seeded by ``seed``.
    """

    requests_total: int
    responses_by_status: dict[int, int]
    successful: int
    max_in_flight: int
    bodies: list[Any]
    headers_seen: list[dict[str, str]]

    def __init__(
        self,
        api_key: str | None = "test-key",
        release: str = "jev-1.13.0",
        latency_s: float = 0.0,
        *,
        latency_jitter_s: float = 0.0,
        seed: int = 0,
        answer_fn: AnswerFn | None = None,
        fault_fn: FaultFn | None = None,
        token_bucket: tuple[float, float] | TokenBucket | None = None,
        port: int = 0,
        bias: Bias | None = None,
    ) -> None:
        self.api_key, self.release, self._port = api_key, release, port
        self.latency_s, self.latency_jitter_s = latency_s, latency_jitter_s
        self.answer_fn, self.fault_fn = answer_fn, fault_fn
        bucket = TokenBucket(*token_bucket) if isinstance(token_bucket, tuple) else token_bucket
        self._bucket = bucket
        self.judge = None if bias is None else BiasedJudge(bias, seed)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._faults: deque[Fault] = deque()
        super().__init__()
        self._request_counter = self._post_index = self._in_flight = 0
        self.reset_counters()

    def _make_httpd(self) -> _HTTPServer:
        return _HTTPServer(self, self._port)

    def push(self, *faults: Fault) -> None:
        """Queue faults, consumed one per ``POST /v1/systemone`` in FIFO order."""
        with self._lock:
            self._faults.extend(faults)

    def clear_faults(self) -> None:
        """Drop every queued fault."""
        with self._lock:
            self._faults.clear()

    def reset_counters(self) -> None:
        """Zero every counter and forget recorded bodies and headers."""
        with self._lock:
            self.requests_total = self.successful = 0
            self.responses_by_status = {}
            self.bodies, self.headers_seen = [], []
            self.max_in_flight = self._in_flight

    @property
    def in_flight(self) -> int:
        """Requests being handled now (a test waits for 0 before it reads final counts)."""
        with self._lock:
            return self._in_flight

    def list_models(self) -> list[dict[str, str]]:
        """The ``GET /v1/models`` catalogue (the configured release is always listed)."""
        models = [{"name": n, "description": d, "release_date": r} for n, d, r in _MODELS]
        if self.release not in {m["name"] for m in models}:
            models.append({"name": self.release, "description": "Configured.", "release_date": ""})
        return models

    # The handler's side: every shared mutation goes through the lock.
    def _begin(self) -> str:
        with self._lock:
            self._request_counter += 1
            self.requests_total += 1
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            return f"req-{self._request_counter}"

    def _end(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _record(self, body: Any, headers: dict[str, str]) -> Fault | None:
        with self._lock:
            self.bodies.append(body)
            self.headers_seen.append(headers)
            index, self._post_index = self._post_index, self._post_index + 1
            if self._faults:
                return self._faults.popleft()
        fault_fn = self.fault_fn
        return fault_fn(index, body if isinstance(body, dict) else {}) if fault_fn else None

    def _count(self, status: int, *, success: bool = False) -> None:
        with self._lock:
            self.responses_by_status[status] = self.responses_by_status.get(status, 0) + 1
            self.successful += success

    def _next_latency(self) -> float:
        if self.latency_jitter_s <= 0:
            return self.latency_s
        with self._lock:
            return self.latency_s + self._rng.uniform(0.0, self.latency_jitter_s)

    def _pause(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: print the base URL on one stdout line, then serve until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m ragbatch.testing.jev_server")
    parser.add_argument("--port", type=int, default=0, help="0 picks a random free port")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--latency-jitter-ms", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--api-key", default="test-key", help="empty: no key needed (auth off)")
    parser.add_argument("--release", default="jev-1.13.0")
    parser.add_argument("--token-bucket", type=float, nargs=2, metavar=("CAPACITY", "PER_S"))
    parser.add_argument(
        "--bias",
        type=parse_bias,
        help="e.g. order=0.2,yes-lean=0.1; empty: the unbiased seeded judge",
    )
    args = parser.parse_args(argv)
    bucket = cast("tuple[float, float] | None", tuple(args.token_bucket or ()) or None)
    server = JevServer(
        args.api_key or None,
        args.release,
        args.latency_ms / 1000,
        latency_jitter_s=args.latency_jitter_ms / 1000,
        seed=args.seed,
        token_bucket=bucket,
        port=args.port,
        bias=args.bias,
    )
    stop = threading.Event()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    server.start()
    print(server.base_url, flush=True)
    while not stop.wait(0.5):
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
