"""Who answers: the provider protocol's implementations and what they share.

Owns the mock provider, live Jev over HTTP (``jev``), the OpenAI-compatible ``chat_client``
and the ``llm_judge`` built on it, the one retrying HTTP client both use (``http_client``, over
its own HTTP/1.1 wire, ``http_conn`` and ``http_protocol``, or aiohttp's, ``http_aiohttp``,
which ``http_wire`` picks; the leaves they share: ``http_types``, ``http_errors``,
``http_codings``, ``http_proxy``; its reply type in ``replies``), the ``lexical`` and
``recorded`` baseline judges,
the content-addressed reply cache (``cache``; its store, leases, group-committed writes, merge,
verify and repair, and the journaled swap of a repaired directory: ``cache_*``), rate control
(``ratelimit``) and API key checks and redaction (``apikey``).

Does I/O (HTTP, SQLite files). May import ``core`` and ``ragbatch._files`` only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragbatch._lazy import lazy_exports

# The front door: what other packages use (the modules behind it are private). The judges a
# run with ``--baseline recorded`` never builds are imported on first use: start-up.
from ragbatch.providers._apikey import Redactor, check_base_url, clean_key
from ragbatch.providers._baseline import RecordedBaseline
from ragbatch.providers._http_types import DEFAULT_MAX_RESPONSE_BYTES
from ragbatch.providers._jev import (
    DEFAULT_BASE_URL,
    DEFAULT_MODEL,
    ENDPOINT,
    KEY_SOURCE,
    MODEL_ALIASES,
    JevProvider,
    JevSettings,
    OfflineJev,
)
from ragbatch.providers._mock import MOCK_MODEL, OVERLAP_MODEL, MockProvider
from ragbatch.providers._ratelimit import RateLimiter

if TYPE_CHECKING:
    from ragbatch.providers._lexical import LexicalBaseline
    from ragbatch.providers._llm_judge import API_KEY_ENV, ChatClient, LlmClaimExtractor, LlmJudge

__getattr__ = lazy_exports(
    __name__,
    {
        "_lexical": ("LexicalBaseline",),
        "_llm_judge": ("API_KEY_ENV", "ChatClient", "LlmClaimExtractor", "LlmJudge"),
    },
)

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_MODEL",
    "ENDPOINT",
    "KEY_SOURCE",
    "MOCK_MODEL",
    "MODEL_ALIASES",
    "OVERLAP_MODEL",
    "ChatClient",
    "JevProvider",
    "JevSettings",
    "LexicalBaseline",
    "LlmClaimExtractor",
    "LlmJudge",
    "MockProvider",
    "OfflineJev",
    "RateLimiter",
    "RecordedBaseline",
    "Redactor",
    "check_base_url",
    "clean_key",
]
