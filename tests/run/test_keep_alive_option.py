"""``--no-keep-alive`` reaches the live client: one connection per request (providers._http_conn
says what keep-alive cannot protect against; tests/providers/test_wire_hostile.py shows the
client then never reads a stray reply)."""

from __future__ import annotations

from ragbatch.run import RunOptions
from ragbatch.run._preflight import jev_settings


def test_no_keep_alive_reaches_the_live_client_s_policy() -> None:
    live = RunOptions().replace(provider="jev", api_key="sk-test-key")
    settings = jev_settings(live)
    assert settings is not None and settings.policy().keep_alive
    closed = jev_settings(live.replace(keep_alive=False))
    assert closed is not None and not closed.policy().keep_alive
