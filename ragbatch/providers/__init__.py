"""Who answers: the provider protocol's implementations and what they share.

Owns the mock provider, live Jev over HTTP (``jev``), the OpenAI-compatible ``chat_client``
and the ``llm_judge`` built on it, the ``lexical`` and ``recorded`` baseline judges, the
content-addressed reply cache (``cache``; its store, leases, group-committed writes, merge,
verify and repair, and the journaled swap of a repaired directory: ``cache_*``), rate control
(``ratelimit``) and API key checks and redaction (``apikey``).

Does I/O (HTTP, SQLite files). May import ``core`` and ``ragbatch.files`` only.
"""
