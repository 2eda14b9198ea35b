"""The wires against the environment and servers that misbehave on purpose: proxies the
environment names (loopback never proxied, NO_PROXY forms, ALL_PROXY, a proxy that is down)
and a key echoed in another case or backwards."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest

from ragbatch.providers._apikey import Redactor
from ragbatch.providers._http_proxy import find_proxy, is_bypassed, proxy_for
from tests.providers.hostile.hostile_http import (
    KEY,
    Handler,
    Server,
    answer,
    call,
    client,
    failure,
    reply,
)

# --- 5. proxies --------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "127.0.0.2"])
async def test_a_loopback_base_url_never_goes_through_a_proxy(
    serve: Callable[[Handler], Server], no_proxy_env: pytest.MonkeyPatch, host: str
) -> None:
    origin = serve(answer(reply(b'{"from": "origin"}')))
    proxy = serve(answer(reply(b'{"from": "proxy"}')))
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        no_proxy_env.setenv(name, proxy.url)
    assert proxy_for(f"http://{host}:{origin.port}") is None
    assert proxy_for(f"https://{host}/v1") is None
    if host == "127.0.0.1":
        http = client(origin.url)
        try:
            assert (await call(http)).body == b'{"from": "origin"}'
        finally:
            await http.aclose()
        assert proxy.requests == []


@pytest.mark.parametrize(
    ("no_proxy", "url", "bypassed"),
    [
        ("service.example:8080", "http://service.example:8080/v1", True),
        ("service.example:8080", "http://service.example:9090/v1", False),
        ("service.example:443", "https://service.example/v1", True),
        ("10.0.0.0/8", "http://10.1.2.3:80", True),
        ("10.0.0.0/8", "http://11.1.2.3:80", False),
        ("192.168.1.7", "http://192.168.1.7", True),
        ("fd00::/8", "http://[fd12::1]:80", True),
        ("[fd12::1]:8080", "http://[fd12::1]:8080", True),
        ("[fd12::1]:8080", "http://[fd12::1]:80", False),
        (".example.com", "https://api.example.com", True),
        ("*.example.com", "https://example.com", True),
        ("example.com", "https://notexample.com", False),
        ("other, EXAMPLE.com", "https://API.example.com.", True),
        ("*", "https://anything.example", True),
        ("10.0.0.0/8", "http://ten.example", False),
    ],
)
def test_no_proxy_entries_with_ports_and_cidr_blocks_are_honoured(
    no_proxy_env: pytest.MonkeyPatch, no_proxy: str, url: str, bypassed: bool
) -> None:
    no_proxy_env.setenv("HTTP_PROXY", "http://proxy.example:3128")
    no_proxy_env.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    no_proxy_env.setenv("NO_PROXY", no_proxy)
    assert (proxy_for(url) is None) == bypassed


def test_all_proxy_is_the_proxy_of_every_scheme_without_its_own(
    no_proxy_env: pytest.MonkeyPatch,
) -> None:
    no_proxy_env.setenv("ALL_PROXY", "http://all.example:1080")
    assert proxy_for("https://api.example") == "http://all.example:1080"
    no_proxy_env.setenv("https_proxy", "http://tls.example:3128")
    assert proxy_for("https://api.example") == "http://tls.example:3128"
    assert proxy_for("http://api.example") == "http://all.example:1080"
    no_proxy_env.setenv("https_proxy", "")  # an empty lower-case variable hides HTTPS_PROXY
    no_proxy_env.setenv("HTTPS_PROXY", "http://hidden.example:3128")
    proxy = find_proxy("https://api.example")
    assert proxy is not None and str(proxy) == "http://all.example:1080 (from ALL_PROXY)"
    no_proxy_env.setenv("REQUEST_METHOD", "POST")  # CGI: HTTP_PROXY may come from a client
    no_proxy_env.setenv("HTTP_PROXY", "http://client-chosen.example:1")
    assert proxy_for("http://api.example") == "http://all.example:1080"
    assert is_bypassed("api.example", 443, "example:80 api.example")


@pytest.mark.anyio
async def test_a_proxy_that_is_down_is_named_in_the_error(
    no_proxy_env: pytest.MonkeyPatch,
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # closed once this block ends: nothing listens there
    no_proxy_env.setenv("HTTP_PROXY", f"http://user:proxy-secret@127.0.0.1:{port}")
    error = await failure(client("http://service.invalid:8080"))
    assert error.kind == "connection" and error.retryable
    message = str(error)
    assert f"the proxy http://127.0.0.1:{port} (from HTTP_PROXY) could not be reached" in message
    assert "proxy-secret" not in message and KEY not in message


# --- 6. the key in another case, or backwards ---------------------------------------------------


@pytest.mark.parametrize(
    "echo",
    [KEY.upper(), KEY.lower(), KEY.swapcase(), KEY[::-1], KEY[::-1].upper(), KEY.upper()[:9]],
    ids=["upper", "lower", "swapped", "reversed", "reversed-upper", "upper-prefix"],
)
def test_a_key_in_another_case_or_reversed_is_masked(echo: str) -> None:
    masked = Redactor(KEY)(f"invalid key {echo}!")
    assert masked == "invalid key ***!"


def test_case_folding_keeps_other_text_intact() -> None:
    redact = Redactor(KEY)
    text = "İstanbul \u212a KELVIN ß straße"  # letters whose Unicode lower() changes length
    assert redact(text) == text
    assert redact(f"İİ {KEY.upper()} ßß") == "İİ *** ßß"


@pytest.mark.anyio
async def test_a_server_that_echoes_the_key_upper_cased_or_reversed_leaks_it_nowhere(
    serve: Callable[[Handler], Server],
) -> None:
    body = b'{"error": "bad request for %s (%s)"}' % (KEY.upper().encode(), KEY[::-1].encode())
    server = serve(answer(reply(body).replace(b"200 OK", b"400 Bad Request")))
    error = await failure(client(server.url))
    message = str(error).lower()
    assert error.status == 400 and "bad request for *** (***)" in message
    assert KEY.lower()[:8] not in message and KEY[::-1].lower()[:8] not in message
