"""The project's HTTP reply type and what the providers read from a reply besides its body:
``Retry-After``, the service's own error message, whether a body is JSON at all."""

from __future__ import annotations

import email.utils
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import orjson


@dataclass(frozen=True, slots=True)
class HttpReply:
    """One complete HTTP reply: status, reason, headers (case-insensitive), decoded body."""

    status: int
    reason: str
    headers: Mapping[str, str]
    body: bytes

    @property
    def text(self) -> str:
        """The body as text (invalid UTF-8 replaced)."""
        return self.body.decode("utf-8", "replace")


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP-date);
    ``headers`` must look names up case-insensitively (the wires' do)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000
            if math.isfinite(value) and value >= 0:
                return value
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
        return value if math.isfinite(value) and value >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _located(entry: dict[str, object]) -> str:
    """One FastAPI ``detail[]`` entry as ``questions.q.noul.criteria: msg`` (``body`` dropped)."""
    loc = entry.get("loc")
    path = [str(p) for p in loc] if isinstance(loc, list) else []
    path = path[1:] if path[:1] == ["body"] else path
    message = str(entry.get("msg", entry))
    return f"{'.'.join(path)}: {message}" if path else message


def is_json(body: bytes) -> bool:
    """Whether ``body`` parses as JSON at all (NaN and Infinity included: a body that uses
    them is the service's own reply, validated as such, not a proxy's page)."""
    try:
        json.loads(body)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
        return False
    return True


def _same(text: str) -> str:
    return text


def error_message(reply: HttpReply, redact: Callable[[str], str] = _same) -> str:
    """The service's own message from a JSON error body, else the start of the body.

    Knows ``{"detail": [...]}`` (422, each message with its ``loc`` path), ``{"detail":
    {"message"}}``, ``{"error": ...}`` and a top-level ``{"message": ...}``. ``redact`` masks
    secrets in the whole text before it is cut to length: a key straddling the cut would
    otherwise leave its prefix behind.
    """
    try:
        body = orjson.loads(reply.body)
    except orjson.JSONDecodeError:
        return redact(reply.text)[:200].strip() or reply.reason
    detail = body.get("error") or body.get("detail") if isinstance(body, dict) else body
    if detail is None and isinstance(body, dict):
        detail = body.get("message")
    if detail is None:  # JSON without a known message field: show the body, not "None"
        return redact(reply.text)[:200].strip() or reply.reason
    if isinstance(detail, dict):
        detail = detail.get("message", detail)
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        detail = "; ".join(_located(d) if isinstance(d, dict) else str(d) for d in detail)
    return redact(str(detail))[:300]
