"""The Phoenix client's answers to a server that misbehaves (a scripted loopback server: the
replies a real Phoenix never gives on purpose): what passes is retried later, what will not is
refused with Phoenix's words, a refused key ends the watcher, the key is never shown."""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.core import ConfigError, RunAborted
from ragbatch.watch._phoenix import (
    MAX_BODY,
    PhoenixClient,
    PhoenixRefused,
    PhoenixUnavailable,
    span_number,
)
from tests.watch._watching import watch_argv

KEY = "phx-secret-key-0123456789"


class Script(BaseHTTPRequestHandler):
    replies: ClassVar[list[tuple[int, bytes, float]]] = []  # (status, body, delay) a request

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        self._reply()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._reply()

    def _reply(self) -> None:
        status, body, delay = self.replies.pop(0)
        time.sleep(delay)  # the server's own slowness, scripted
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(OSError):  # the client may have given up first
            self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Script)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def page(url: str, *replies: tuple[int, bytes, float]) -> Any:
    Script.replies = list(replies)

    async def call() -> Any:
        client = PhoenixClient(url, "p", KEY, timeout_s=0.5)
        try:
            return await client.page(None)
        finally:
            await client.aclose()

    return anyio.run(call)


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        ((503, b"busy", 0.0), "HTTP 503"),
        ((429, b"{}", 0.0), "HTTP 429"),
        ((200, b"<html>proxy</html>", 0.0), "a body that is not JSON"),
        ((200, b'{"data": 3}', 0.0), "a spans page without data[]"),
        ((200, b"{}", 2.0), "TimeoutError"),
        ((200, b"x" * (MAX_BODY + 1), 0.0), f"a reply over {MAX_BODY} bytes"),
    ],
)
def test_what_may_pass_is_unavailable_and_tried_again_later(
    server: str, reply: tuple[int, bytes, float], said: str
) -> None:
    with pytest.raises(PhoenixUnavailable, match=re.escape(said)) as caught:
        page(server, reply)
    assert KEY not in str(caught.value)


def test_a_refusal_carries_phoenix_s_detail_without_the_key(server: str) -> None:
    with pytest.raises(PhoenixRefused) as caught:
        page(server, (422, b'{"detail": "bad cursor ' + KEY.encode() + b'"}', 0.0))
    assert str(caught.value) == "HTTP 422: bad cursor ***"  # the echoed key masked
    assert caught.value.status == 422


def test_a_project_phoenix_has_not_seen_is_an_empty_page(server: str) -> None:
    assert page(server, (404, b"Not Found", 0.0)) == ([], None)


def test_a_refused_key_ends_the_watcher(server: str) -> None:
    with pytest.raises(RunAborted, match="refused the key \\(HTTP 401\\): set PHOENIX_API_KEY"):
        page(server, (401, b"{}", 0.0))


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_is_one_error_line_and_exit_4_from_the_command(
    server: str, tmp_path: Path, status: int
) -> None:
    # the loop's task group fails with it: the command says the cause, never a traceback
    Script.replies = [(status, b'{"detail": "bad key"}', 0.0)]
    result = CliRunner().invoke(app, watch_argv(server, "p", tmp_path, "--once",
                                                "--phoenix-api-key", KEY))  # fmt: skip
    assert result.exit_code == 4, result.output
    assert result.stderr.splitlines() == [
        f"error: Phoenix at {server} refused the key (HTTP {status}): set PHOENIX_API_KEY to a "
        "key it accepts"
    ]
    assert KEY not in result.output and KEY[:8] not in result.output


def test_spans_out_of_id_order_are_refused(server: str) -> None:
    body = b'{"data": [{"id": "U3Bhbjoy"}, {"id": "U3Bhbjox"}], "next_cursor": null}'
    with pytest.raises(ConfigError, match="does not sort spans by id"):
        page(server, (200, body, 0.0))


def test_span_numbers_are_phoenix_s_row_ids() -> None:
    assert span_number("U3Bhbjoz") == 3  # base64("Span:3")
    with pytest.raises(PhoenixUnavailable, match="not Phoenix's"):
        span_number("U3BhbkFubm90YXRpb246MQ==")  # a SpanAnnotation's id
