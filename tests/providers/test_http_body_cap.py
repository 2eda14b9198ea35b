"""The body cap of the one HTTP client: decompression bombs, huge or endless bodies, and a run
against a bomb (a raw-socket server on 127.0.0.1, over both wires).
"""

from __future__ import annotations

import functools
import gzip
import socket
import struct
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.core._errors import EXIT_ROW_FAILURES
from ragbatch.providers._http_client import RESPONSE_TOO_LARGE_KIND
from ragbatch.providers.cache._replies import ReplyCache
from tests.providers.raw_http import (
    KEY,
    Handler,
    RawServer,
    answer,
    client,
    failure,
    hang_up,
    post,
    reply,
)

ROOT = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024


@functools.cache
def gzip_bomb(inflated: int) -> bytes:
    """A gzip stream of ``inflated`` zero bytes (about 1,000 times smaller).

    Each MiB is compressed after a full flush, which resets the compressor, so every MiB
    compresses to the same bytes: one is compressed and repeated (deflating 256 MiB takes
    seconds), then the gzip header and trailer (CRC-32 and length) are written around them.
    """
    block = bytes(MiB)
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    piece = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    assert packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH) == piece
    crc = functools.reduce(lambda crc, _: zlib.crc32(block, crc), range(inflated // MiB), 0)
    head = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # gzip, deflate, no name or time
    trailer = struct.pack("<II", crc, inflated & 0xFFFFFFFF)
    return head + piece * (inflated // MiB) + packer.flush() + trailer


def test_the_bomb_is_a_gzip_stream_of_zeros() -> None:
    assert gzip.decompress(gzip_bomb(4 * MiB)) == bytes(4 * MiB)


@pytest.mark.usefixtures("each_wire")
@pytest.mark.anyio
async def test_a_decompression_bomb_fails_as_response_too_large(
    serve: Callable[[Handler], RawServer],
) -> None:
    bomb = gzip_bomb(256 * MiB)  # ~250 KB on the wire
    extra = b"content-encoding: gzip\r\ncontent-type: application/json\r\n"
    server = serve(answer(reply(bomb, extra)))
    started = time.perf_counter()
    error = await failure(client(server.url, max_response_bytes=MiB))
    assert error.kind == RESPONSE_TOO_LARGE_KIND and not error.retryable
    assert "1048576-byte cap" in str(error)
    assert time.perf_counter() - started < 5  # stopped at the cap, not after 256 MiB


@pytest.mark.usefixtures("each_wire")
@pytest.mark.anyio
async def test_a_huge_content_length_fails_before_reading(
    serve: Callable[[Handler], RawServer],
) -> None:
    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2000000000\r\n\r\n" + bytes(65536))
        hang_up(conn)  # the rest never comes: the client must stop at the head
        return False

    error = await failure(client(serve(handler).url))
    assert error.kind == RESPONSE_TOO_LARGE_KIND
    assert "Content-Length 2000000000" in str(error)


@pytest.mark.usefixtures("each_wire")
@pytest.mark.anyio
async def test_an_endless_chunked_body_is_capped(serve: Callable[[Handler], RawServer]) -> None:
    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        piece = b"%x\r\n%s\r\n" % (65536, bytes(65536))
        while True:  # until the client hangs up
            conn.sendall(piece)

    error = await failure(client(serve(handler).url, max_response_bytes=4 * MiB))
    assert error.kind == RESPONSE_TOO_LARGE_KIND


@pytest.mark.usefixtures("each_wire")
@pytest.mark.anyio
async def test_a_body_at_the_cap_is_accepted(serve: Callable[[Handler], RawServer]) -> None:
    body = gzip.compress(b"x" * MiB)
    server = serve(answer(reply(body, b"content-encoding: gzip\r\n")))
    got = await post(client(server.url, max_response_bytes=MiB))
    assert got.body == b"x" * MiB


def test_a_run_against_a_bomb_fails_its_rows_and_caches_nothing(
    serve: Callable[[Handler], RawServer], tmp_path: Path
) -> None:
    bomb = reply(
        gzip_bomb(64 * MiB), b"content-encoding: gzip\r\ncontent-type: application/json\r\n"
    )
    server = serve(answer(bomb))
    args = [
        "run", str(ROOT / "datasets" / "rag-fixture.jsonl"), "--provider", "jev",
        "--base-url", server.url, "--model", "jev-1.13.0",
        "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "report.json"),
        "--pricing", str(ROOT / "pricing" / "typesafe-2026-12.json"),
        "--max-response-bytes", str(MiB), "--concurrency", "4",
    ]  # fmt: skip
    result = CliRunner().invoke(app, args, env={"TYPESAFE_API_KEY": KEY})
    output = result.stdout + result.stderr
    assert result.exit_code == EXIT_ROW_FAILURES, output
    assert "response-too-large: 48 rows" in output and "1048576-byte cap" in output
    assert len(server.requests) == 48  # not retried
    assert len(ReplyCache(tmp_path / "cache", read_only=True)) == 0
