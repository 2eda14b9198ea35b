"""A server that echoes the key back, in any field and any spelling, leaks it nowhere.

Real Jev test servers on 127.0.0.1; every output of a run (cache, report, rows-out, run record,
Markdown, HTML, stdout and stderr) is searched for the key in each spelling, computed here
independently of the redactor.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from ragbatch.core._errors import EXIT_OK, EXIT_ROW_FAILURES
from ragbatch.providers._apikey import Redactor
from ragbatch.providers._chat_client import ChatClient
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.testing import Fault
from ragbatch.testing.chat_server import ChatServer
from tests.providers.test_jev_secrets import StartServer, run_cli

# +, / and = are changed by URL encoding; the bytes give base64 runs with + and /
KEY = "sk-Rb+9/qx=Zk?>~tw&Pm%0"


def b64(data: bytes) -> set[str]:
    """Base64 runs of ``data`` inside longer byte strings, standard and URL-safe: the encoding
    of ``data`` after 0, 1 or 2 other bytes, less the groups that share bits with those."""
    runs = set()
    for pad in (b"", b"\x00", b"\x00\x00"):
        encoded = base64.b64encode(pad + data + b"\x00").decode()
        run = encoded[4 if pad else 0 : -8]  # whole groups of ``data`` only
        runs |= {run, run.replace("+", "-").replace("/", "_")}
    return runs


def needles(key: str) -> set[str]:
    """The key's spellings an output must not hold (each at least 8 characters)."""
    forms = {key, json.dumps(key)[1:-1], quote(key, safe=""), quote(key), quote_plus(key)}
    forms |= {f.replace("%2F", "%2f").replace("%2B", "%2b") for f in forms}
    forms |= b64(key.encode()) | b64(f"Bearer {key}".encode()) | {key[:8]}
    assert all(len(f) >= 8 for f in forms)
    return forms


def leaks(tmp_path: Path, output: str) -> list[str]:
    found = [f"output: {n!r}" for n in needles(KEY) if n in output]
    for path in sorted(p for p in tmp_path.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path.name}: {n!r}" for n in needles(KEY) if n.encode() in data]
    return found


def views(tmp_path: Path) -> list[str]:
    return ["--markdown", str(tmp_path / "r.md"), "--html", str(tmp_path / "r.html")]


def test_a_model_field_that_echoes_the_key_is_stored_nowhere(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    # the release behind the alias is the key itself: every reply's ``model`` echoes it
    server = start_jev_server(api_key=KEY, release=KEY)
    code, output = run_cli(server, tmp_path, KEY, "--model", "jev-latest", *views(tmp_path))
    assert code == EXIT_OK, output
    assert server.successful == 48
    assert (tmp_path / "cache" / "cache.db").exists() and (tmp_path / "r.html").exists()
    assert leaks(tmp_path, output) == []


def _echoes() -> dict[str, str]:
    raw = KEY.encode()
    header = f"Bearer {KEY}".encode()
    return {
        "base64": base64.b64encode(raw).decode(),
        "base64 after 1 byte": base64.b64encode(b"u:" + raw).decode()[1:],
        "base64 after 2 bytes": base64.b64encode(b"us:" + raw + b"\n").decode(),
        "base64 after 3 bytes": base64.b64encode(b"use:" + raw + b"xy").decode(),
        "url-safe base64 after 1 byte": base64.urlsafe_b64encode(b"x" + raw).decode(),
        "url-safe base64 after 2 bytes": base64.urlsafe_b64encode(b"xy" + raw).decode(),
        "base64 of the header": base64.b64encode(header).decode(),
        "url-safe base64 of the header": base64.urlsafe_b64encode(b"h=" + header).decode(),
        "percent-encoded": quote(KEY, safe=""),
        "percent-encoded, path style": quote(KEY),
        "percent-encoded, lower-case hex": re.sub("%..", lambda m: m[0].lower(), quote(KEY)),
        "form-encoded": quote_plus(KEY),
        "first 8 characters": KEY[:8] + "...",
        "first 13 characters": KEY[:13] + "[cut]",
    }


def denied(echo: str) -> Fault:
    body = json.dumps({"error": {"message": f"denied for token {echo} (see logs)"}})
    return Fault(kind="status", status=400, body=body)


# The views (Markdown, HTML) are built from the report, and drawing the HTML's charts costs
# more than the run: they are checked once, on a run whose rows hold every echo, below.
@pytest.mark.parametrize(("label", "echo"), list(_echoes().items()), ids=list(_echoes()))
def test_an_encoded_key_in_an_error_body_is_masked_in_every_output(
    start_jev_server: StartServer, tmp_path: Path, label: str, echo: str
) -> None:
    server = start_jev_server(api_key=KEY, fault_fn=lambda index, _: denied(echo))
    code, output = run_cli(server, tmp_path, KEY)
    assert code == EXIT_ROW_FAILURES, output
    lines = (tmp_path / "rows.jsonl").read_text().splitlines()
    assert len(lines) == 48 and all("denied for token " in x and "***" in x for x in lines)
    assert "first rag-001: HTTP 400: denied for token " in output
    assert leaks(tmp_path, output) == [], label


def test_every_encoded_echo_is_masked_in_the_views(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    echoes = list(_echoes().values())
    server = start_jev_server(
        api_key=KEY, fault_fn=lambda index, _: denied(echoes[index % len(echoes)])
    )
    code, output = run_cli(server, tmp_path, KEY, *views(tmp_path))
    assert code == EXIT_ROW_FAILURES, output
    lines = (tmp_path / "rows.jsonl").read_text().splitlines()
    assert len(lines) == 48 and all("denied for token " in x and "***" in x for x in lines)
    assert (tmp_path / "r.md").exists() and (tmp_path / "r.html").exists()
    assert leaks(tmp_path, output) == []


def test_the_redactor_leaves_other_text_alone() -> None:
    redact = Redactor(KEY)
    text = "HTTP 400: denied for token sk-Rb+9 (a 6-character start is not masked) req-17"
    assert redact(text) == text
    assert redact(f"a{KEY[:8]}b") == "a***b"  # an 8-character start is


@pytest.mark.anyio
async def test_a_judge_reply_that_echoes_the_key_is_masked() -> None:
    # the chat server answers with the request's model; the content quotes the key encoded
    content = json.dumps({"diagnosis": "PASS", "note": f"token {quote(KEY, safe='')}"})
    with ChatServer(api_key=KEY, content_fn=lambda body: content) as server:
        client = ChatClient(server.base_url, KEY, KEY, RateLimiter(1), backoff_initial_s=0.01)
        try:
            reply = await client.complete([{"role": "user", "content": "judge"}])
        finally:
            await client.aclose()
    assert reply.model == "***" and reply.content == {"diagnosis": "PASS", "note": "token ***"}
