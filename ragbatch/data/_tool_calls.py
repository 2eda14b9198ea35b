"""Tool calls in OpenInference attributes: the calls an LLM span's reply makes, and what a
TOOL span returned (file I/O free; the trace readers' helpers, docs/semantics.md §8).

- An LLM span's calls are its ``llm.output_messages.N.message.tool_calls.K.tool_call.*``
  (flattened keys, or the lists Phoenix's dataframe keeps): each call's ``id`` and its
  ``function.arguments`` (JSON text, decoded).
- A TOOL span's output is the text the tool returned: LangChain wraps it in the serialised
  ``ToolMessage`` (``{"type": "tool", "data": {"content", "tool_call_id"}}``, which also
  names the call it answers), LlamaIndex in a ``ToolOutput`` (``{"blocks": [{"text"}],
  "tool_name", ...}``); anything else is ``output.value`` as it is.
"""

from __future__ import annotations

import re
from typing import Any

from ragbatch.data._traces import decoded, flatten

_CALL_KEY = re.compile(r"llm\.output_messages\.(\d+)\.message\.tool_calls\.(\d+)\.tool_call\.(.+)")


def llm_tool_calls(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls of an LLM span's reply, each ``{"id", "function.name",
    "function.arguments"}`` as far as recorded, in order."""
    calls: dict[tuple[int, int], dict[str, Any]] = {}
    for key, value in attrs.items():
        if match := _CALL_KEY.fullmatch(key):
            calls.setdefault((int(match[1]), int(match[2])), {})[match[3]] = value
    listed = attrs.get("llm.output_messages")
    if isinstance(listed, list):
        for n, message in enumerate(listed):
            items = (
                flatten(message).get("message.tool_calls") if isinstance(message, dict) else None
            )
            for k, call in enumerate(items if isinstance(items, list) else []):
                if isinstance(call, dict):
                    fields = flatten(call)
                    calls[(n, k)] = {key.removeprefix("tool_call."): v for key, v in fields.items()}
    return [calls[key] for key in sorted(calls)]


def call_arguments(calls: list[dict[str, Any]]) -> tuple[tuple[str, Any], ...]:
    """``(call id, decoded arguments)`` of the calls that have an id."""
    return tuple(
        (c["id"], decoded(c.get("function.arguments")))
        for c in calls
        if isinstance(c.get("id"), str) and c["id"]
    )


def tool_output(value: Any) -> Any:
    """What a TOOL span's tool returned (see the module docstring)."""
    data = decoded(value)
    if not isinstance(data, dict):
        return value
    inner = data.get("data")
    if data.get("type") == "tool" and isinstance(inner, dict) and "content" in inner:
        return inner["content"]
    if isinstance(data.get("blocks"), list) and "tool_name" in data:
        texts = [b.get("text") for b in data["blocks"] if isinstance(b, dict)]
        if all(isinstance(t, str) for t in texts):
            return "\n".join(str(t) for t in texts)
    return value


def answered_call(value: Any) -> str | None:
    """The id of the call a TOOL span's output answers (a LangChain ``ToolMessage``)."""
    data = decoded(value)
    inner = data.get("data") if isinstance(data, dict) and data.get("type") == "tool" else None
    call = inner.get("tool_call_id") if isinstance(inner, dict) else None
    return call if isinstance(call, str) and call else None
