"""The API key against a real Jev test server on 127.0.0.1: trimmed, refused when unusable,
masked in every form in every output (report, rows-out, run record, cache files, stderr)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ragbatch
from ragbatch.cli._app import app
from ragbatch.core._errors import (
    EXIT_ABORTED,
    EXIT_OK,
    EXIT_ROW_FAILURES,
    EXIT_USAGE,
    ConfigError,
    RunAborted,
)
from ragbatch.data._jsonl import JsonlReader
from ragbatch.providers._apikey import Redactor, check_base_url, clean_key
from ragbatch.providers._llm_judge import LlmJudge
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.testing import Fault, JevServer
from ragbatch.testing.chat_server import ChatServer

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "rag-fixture.jsonl"
PRICING = ROOT / "pricing" / "typesafe-2026-12.json"
MODEL = "jev-1.13.0"
SECRET = "sk-ragbatch-secret-5f0c2a"
ROWS = list(JsonlReader(DATASET))

StartServer = Callable[..., JevServer]


def run_cli(server: JevServer, tmp_path: Path, key: str, *extra: str) -> tuple[int, str]:
    """``ragbatch run`` on the fixture with every output; the exit code and stdout + stderr."""
    args = [
        "run", str(DATASET),
        "--provider", "jev",
        "--base-url", server.base_url,
        "--model", MODEL,
        "--cache-dir", str(tmp_path / "cache"),
        "--out", str(tmp_path / "report.json"),
        "--rows-out", str(tmp_path / "rows.jsonl"),
        "--run-record", str(tmp_path / "record.json"),
        "--pricing", str(PRICING),
        "--max-retries", "1",
        *extra,
    ]  # fmt: skip
    result = CliRunner().invoke(app, args, env={"TYPESAFE_API_KEY": key})
    return result.exit_code, result.stdout + result.stderr


def spellings(key: str) -> set[str]:
    """Every way a message could spell ``key`` (and its trimmed form)."""
    forms = set()
    for k in (key, key.strip()):
        forms |= {k, repr(k)[1:-1], json.dumps(k)[1:-1], k.encode("unicode_escape").decode()}
    return forms


def leaks(tmp_path: Path, output: str, key: str) -> list[str]:
    """Where any spelling of ``key`` (or its first 8 characters) shows up: files and output."""
    needles = spellings(key) | {key.strip()[:8]}
    found = [f"output: {n!r}" for n in needles if n in output]
    for path in sorted(p for p in tmp_path.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path.name}: {n!r}" for n in needles if n.encode() in data]
    return found


@pytest.mark.parametrize("key", [SECRET + "\n", SECRET + "\r\n", f"  {SECRET}\t", "\n" + SECRET])
def test_surrounding_whitespace_is_trimmed(
    start_jev_server: StartServer, tmp_path: Path, key: str
) -> None:
    server = start_jev_server(api_key=SECRET)
    code, output = run_cli(server, tmp_path, key)
    assert code == EXIT_OK, output
    assert server.successful == 48 and server.responses_by_status == {200: 48}
    assert {h["authorization"] for h in server.headers_seen} == {f"Bearer {SECRET}"}
    assert leaks(tmp_path, output, key) == []


@pytest.mark.parametrize(
    ("key", "what"),
    [
        ("sk-ragbatch secret", "whitespace at character 12 of 18"),
        ("sk-ragbatch\nsecret", "whitespace at character 12 of 18"),
        ("sk-ragbatch\tsecret\n", "whitespace at character 12 of 18"),
        ("sk-ragbatch\x07secret", "a control character at character 12 of 18"),
        ("sk-ragbatch\x7fsecret", "a control character at character 12 of 18"),
        ("sk-ragbatch\u00e9secret", "a non-ASCII character at character 12 of 18"),
    ],
)
@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_unusable_key_is_refused_before_any_request(
    start_jev_server: StartServer, tmp_path: Path, key: str, what: str, workers: str
) -> None:
    server = start_jev_server(api_key=key)
    code, output = run_cli(server, tmp_path, key, "--workers", workers)
    assert code == EXIT_ABORTED
    assert output == (
        f"error: the API key (TYPESAFE_API_KEY or --api-key) contains {what} (after trimming "
        "the ends); an API key is one word of printable ASCII: check how it was copied (no "
        "request was sent)\n"
    )
    assert server.requests_total == 0
    assert not (tmp_path / "report.json").exists() and not (tmp_path / "rows.jsonl").exists()
    assert leaks(tmp_path, output, key) == []


def test_no_key_aborts_as_before() -> None:
    with pytest.raises(RunAborted, match=r"^no API key: set TYPESAFE_API_KEY or --api-key$"):
        clean_key("  \n", "TYPESAFE_API_KEY or --api-key")


# A key with a quote and a backslash: its raw, Python-escaped and JSON-quoted forms all differ.
ODD = 'sk-"odd"\\key-7d1e'


@pytest.mark.parametrize(
    ("body", "label"),
    [
        (f"<html>denied for {json.dumps(ODD)}</html>", "json-quoted"),
        (f"<html>denied for {ODD!r}</html>", "python-escaped"),
        (f"<html>denied for {ODD.encode()!r}</html>", "bytes repr"),
        (f"<html>denied for {ODD}</html>", "raw"),
        (json.dumps({"error": {"message": f"denied for {ODD}"}}), "raw, in JSON"),
        (json.dumps({"error": {"message": f"denied for {json.dumps(ODD)}"}}), "double-quoted"),
    ],
)
def test_every_spelling_of_the_key_is_masked_in_every_output(
    start_jev_server: StartServer, tmp_path: Path, body: str, label: str
) -> None:
    # a gateway that echoes the key back, in some spelling, in a 400 reply's body
    server = start_jev_server(
        api_key=ODD, fault_fn=lambda index, _: Fault(kind="status", status=400, body=body)
    )
    code, output = run_cli(server, tmp_path, ODD + "\n")
    assert code == EXIT_ROW_FAILURES, output
    assert server.responses_by_status == {400: 48}
    lines = (tmp_path / "rows.jsonl").read_text().splitlines()
    assert len(lines) == 48 and all("denied for " in x and "***" in x for x in lines)
    assert leaks(tmp_path, output, ODD) == [], label


def test_redactor_masks_each_spelling() -> None:
    redact = Redactor(ODD + "\n")
    for form in spellings(ODD + "\n"):
        assert redact(f"<{form}>") == "<***>", form
    assert redact("nothing secret") == "nothing secret"
    assert Redactor(None)("a") == "a" and Redactor("")("a") == "a"


@pytest.mark.parametrize(
    "body",
    [  # the key starts 10 characters before the cut (200 for a raw body, 300 for a message)
        "x" * 186 + "key=" + SECRET + " is revoked",
        json.dumps({"error": {"message": "x" * 286 + "key=" + SECRET}}),
        json.dumps({"detail": [{"msg": "y" * 286 + "key=" + SECRET}]}),
        json.dumps({"message": "z" * 175 + "key=" + SECRET}),  # no known field: the raw body
    ],
    ids=["raw-body", "error-message", "detail-list", "unknown-field"],
)
def test_the_key_is_masked_before_the_message_is_cut(
    start_jev_server: StartServer, tmp_path: Path, body: str
) -> None:
    server = start_jev_server(
        api_key=SECRET, fault_fn=lambda index, _: Fault(kind="status", status=400, body=body)
    )
    code, output = run_cli(server, tmp_path, SECRET)
    assert code == EXIT_ROW_FAILURES, output
    assert server.responses_by_status == {400: 48}
    assert leaks(tmp_path, output, SECRET) == []
    assert "key=***" in (tmp_path / "rows.jsonl").read_text()


# -- plain http:// -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://jev.example.com", True),
        ("http://127.0.0.1:8080", True),
        ("http://127.3.4.5", True),
        ("http://localhost:8080/", True),
        ("HTTP://LocalHost.:1", True),
        ("http://jev.localhost", True),
        ("http://[::1]:9000", True),
        ("http://jev.example.com", False),
        ("http://10.0.0.5:8080", False),
        ("http://localhost.example.com", False),
        ("http://2130706433:8080", False),  # 127.0.0.1 spelled as one number: not recognised
    ],
)
def test_which_base_urls_may_carry_a_key_over_http(url: str, allowed: bool) -> None:
    if allowed:
        check_base_url(url, "--base-url", allow_insecure_http=False)
    else:
        with pytest.raises(ConfigError, match="--allow-insecure-http if this network is trusted"):
            check_base_url(url, "--base-url", allow_insecure_http=False)
    check_base_url(url, "--base-url", allow_insecure_http=True)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://", "plain http:// to an empty host"),
        ("https://", "not an http:// or https:// URL with a host"),
        ("ftp://127.0.0.1:21", "not an http:// or https:// URL with a host"),
        ("127.0.0.1:8080", "not an http:// or https:// URL with a host"),
        ("http://127.0.0.1:99999", "no usable port: Port out of range"),
        ("https://api.typesafe.ai:https", "no usable port"),
    ],
)
def test_a_base_url_no_request_can_go_to_is_refused_up_front(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_base_url(url, "--base-url", allow_insecure_http=False)
    if not url.startswith("http://"):
        return
    with pytest.raises(ConfigError, match=r"no usable port|not an http"):
        check_base_url(url, "--base-url", allow_insecure_http=True)


def test_a_bad_port_is_one_error_line_before_any_request(
    jev_server: JevServer, tmp_path: Path
) -> None:
    url = "http://127.0.0.1:99999"
    code, output = run_cli(jev_server, tmp_path, "test-key", "--base-url", url)
    assert code == EXIT_USAGE
    assert output == (f"error: --base-url {url} has no usable port: Port out of range 0-65535\n")
    assert jev_server.requests_total == 0 and not (tmp_path / "report.json").exists()


def test_credentials_in_the_base_url_are_one_error_line_that_never_shows_them(
    jev_server: JevServer, tmp_path: Path
) -> None:
    # aiohttp refused them beside the Authorization header with a traceback
    url = jev_server.base_url.replace("http://", "http://someone:pa55word@")
    code, output = run_cli(jev_server, tmp_path, "test-key", "--base-url", url)
    assert code == EXIT_USAGE
    assert output == (
        "error: --base-url holds credentials (user:password@host): ragbatch sends the API key "
        "in the Authorization header, which cannot be combined with them; remove them from "
        "the URL\n"
    )
    assert "pa55word" not in output and jev_server.requests_total == 0


def numeric_url(server: JevServer) -> str:
    """The server's URL with 127.0.0.1 spelled ``2130706433``: loopback, but not by its name,
    so it stands for a remote plain-http host while the requests stay on this machine."""
    return server.base_url.replace("127.0.0.1", "2130706433")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_plain_http_to_a_remote_host_is_refused_unless_allowed(
    jev_server: JevServer, tmp_path: Path, workers: str
) -> None:
    url = numeric_url(jev_server)
    args = ["--base-url", url, "--workers", workers]
    code, output = run_cli(jev_server, tmp_path, "test-key", *args)
    assert code == EXIT_USAGE
    assert output == (
        f"error: --base-url {url} is plain http:// to 2130706433, which is not loopback: the "
        "API key would travel unencrypted; use https://, or pass --allow-insecure-http if this "
        "network is trusted\n"
    )
    assert jev_server.requests_total == 0 and not (tmp_path / "report.json").exists()

    code, output = run_cli(jev_server, tmp_path, "test-key", *args, "--allow-insecure-http")
    assert code == EXIT_OK, output
    assert jev_server.successful == 48


def test_the_python_api_takes_allow_insecure_http(jev_server: JevServer, tmp_path: Path) -> None:
    options = {
        "provider": "jev",
        "base_url": numeric_url(jev_server),
        "api_key": "test-key\n",
        "model": MODEL,
        "cache_dir": tmp_path / "cache",
        "pricing": PRICING,
    }
    with pytest.raises(ConfigError, match="is plain http:// to 2130706433"):
        ragbatch.evaluate(ROWS, **options)
    assert jev_server.requests_total == 0
    report = ragbatch.evaluate(ROWS, **options, allow_insecure_http=True).report
    assert report.modes.jev_only.failures.count == 0 and jev_server.successful == 48


def test_the_judge_url_is_checked_too(jev_server: JevServer, tmp_path: Path) -> None:
    url = numeric_url(jev_server)
    result = CliRunner().invoke(
        app,
        ["run", str(DATASET), "--out", str(tmp_path / "r.json"), "--pricing", str(PRICING),
         "--baseline", "llm", "--judge-base-url", url, "--cache-dir", str(tmp_path / "cache")],
        env={"RAGBATCH_JUDGE_API_KEY": "judge-key"},
    )  # fmt: skip
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.startswith(f"error: --judge-base-url {url} is plain http:// to ")
    assert "judge-key" not in result.output


@pytest.mark.anyio
async def test_the_judge_key_is_trimmed_and_checked_too() -> None:
    with ChatServer(api_key="judge-key") as chat:
        judge = LlmJudge(chat.base_url, "judge-key\n", "gpt-4o-mini", None, RateLimiter(1))
        try:
            reply = await judge.judge(ROWS[0])
        finally:
            await judge.aclose()
        assert reply.diagnosis and chat.requests_total == 1
        with pytest.raises(RunAborted, match=r"judge API key \(RAGBATCH_JUDGE_API_KEY\) contains"):
            LlmJudge(chat.base_url, "judge key", "gpt-4o-mini", None, RateLimiter(1))
        assert chat.requests_total == 1
