"""What one POST costs the client's CPU, by HTTP stack, beside the least it can cost.

    python bench/bench_transport.py [--requests 4000] [--concurrency 32] [--repeat 3]

Starts ``bench_ceiling``'s loopback server (its own process, no latency), takes the request
body ragbatch sends for a bench row (its own ``build_request``), and POSTs it ``--requests``
times at ``--concurrency`` in flight through each stack in turn, in this process, after a
warm-up; the CPU of this process (user + sys) over the requests is the figure. Stacks:

- ``minimal``: a keep-alive HTTP/1.1 client on ``asyncio.Protocol`` that writes the request
  line and headers by hand and reads a ``Content-Length`` reply — no chunked bodies, no
  compression, no proxies, no TLS, no timeout but one ``asyncio.timeout``: the least a
  Python client on asyncio can spend on the exchange, a reference, not a client to use;
- ``aiohttp``: one ``aiohttp.ClientSession``, as the floor client of ``bench_ceiling`` uses it;
- ``wire``: ragbatch's own wire to a direct origin (``providers._http_conn.ConnWire.post``:
  asyncio transports, llhttp's framing, the pool, the deadline, the body cap);
- ``aiohttp-wire``: the wire a proxy gets (``providers._http_aiohttp.AiohttpWire.post``:
  aiohttp with the body cap and the transfer-coding check);
- ``client``: ragbatch's ``RetryingClient.call`` over the default wire (limiter slot, row
  deadline, status handling; the reply is not parsed).

Prints each stack's CPU a request and its ratio to ``minimal`` and to ``aiohttp``, the median
over ``--repeat`` rounds (stacks rotated). The gap between ``aiohttp`` and ``minimal`` is what
a leaner transport could save a live row (docs/benchmarks.md); times are this machine's.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_ceiling import KEY, MODEL, ServerProcess, write_rows
from ragbatch.core import build_request
from ragbatch.data._jsonl import JsonlReader
from ragbatch.providers._apikey import Redactor
from ragbatch.providers._http_aiohttp import AiohttpWire
from ragbatch.providers._http_client import Policy, RetryingClient
from ragbatch.providers._http_conn import ConnWire
from ragbatch.providers._jev import JEV
from ragbatch.providers._ratelimit import RateLimiter

PATH = "/v1/systemone"
HEADERS = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
Post = Callable[[], Awaitable[object]]


class _Exchange(asyncio.Protocol):
    """One keep-alive connection of the minimal client: one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.status = 0
        self.length: int | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.length is None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).split(b"\r\n")
            del self.buffer[: end + 4]
            self.status = int(head[0].split(b" ", 2)[1])
            for line in head[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    self.length = int(value)
            if self.length is None:
                raise ValueError("the minimal client reads Content-Length replies only")
        if len(self.buffer) >= self.length and self.waiter is not None:
            body = bytes(self.buffer[: self.length])
            del self.buffer[: self.length]
            self.length = None
            self.waiter.set_result((self.status, body))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("the server closed the connection"))


def minimal(base_url: str, body: bytes) -> tuple[Post, Callable[[], Awaitable[None]]]:
    host, _, port_text = base_url.removeprefix("http://").partition(":")
    port = int(port_text)
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: bench\r\n"
        + "".join(f"{k}: {v}\r\n" for k, v in HEADERS.items())
        + f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    idle: list[_Exchange] = []

    async def post() -> object:
        loop = asyncio.get_running_loop()
        exchange = idle.pop() if idle else (await loop.create_connection(_Exchange, host, port))[1]
        assert exchange.transport is not None
        exchange.waiter = loop.create_future()
        exchange.transport.write(head + body)
        async with asyncio.timeout(30):
            status, reply = await exchange.waiter
        if status != 200:
            raise RuntimeError(f"HTTP {status}")
        idle.append(exchange)
        return reply

    async def close() -> None:
        for exchange in idle:
            assert exchange.transport is not None
            exchange.transport.close()

    return post, close


def plain_aiohttp(base_url: str, body: bytes) -> tuple[Post, Callable[[], Awaitable[None]]]:
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

    async def post() -> object:
        async with session.post(base_url + PATH, data=body, headers=HEADERS) as response:
            if response.status != 200:
                raise RuntimeError(f"HTTP {response.status}")
            return await response.read()

    return post, session.close


def wire(base_url: str, body: bytes) -> tuple[Post, Callable[[], Awaitable[None]]]:
    return _wire(ConnWire(base_url, Policy()), body)


def aiohttp_wire(base_url: str, body: bytes) -> tuple[Post, Callable[[], Awaitable[None]]]:
    return _wire(AiohttpWire(base_url, Policy()), body)


def _wire(ours: ConnWire | AiohttpWire, body: bytes) -> tuple[Post, Callable[[], Awaitable[None]]]:

    async def post() -> object:
        reply = await ours.post(PATH, body, HEADERS)
        if reply.status != 200:
            raise RuntimeError(f"HTTP {reply.status}")
        return reply.body

    return post, ours.aclose


def client(base_url: str, body: bytes) -> tuple[Post, Callable[[], Awaitable[None]]]:
    ours = RetryingClient(base_url, KEY, RateLimiter(1024), Policy(), JEV, Redactor(KEY))

    async def post() -> object:
        return await ours.call(PATH, body, 1000, lambda reply: (reply.body, 0))

    return post, ours.aclose


STACKS = {
    "minimal": minimal,
    "aiohttp": plain_aiohttp,
    "wire": wire,
    "aiohttp-wire": aiohttp_wire,
    "client": client,
}


async def measure(
    make: Callable[..., tuple[Post, Callable[[], Awaitable[None]]]],
    base_url: str,
    body: bytes,
    requests: int,
    concurrency: int,
) -> float:
    """CPU µs a request of one stack (after a warm-up of 20 requests a worker)."""
    post, close = make(base_url, body)

    async def worker(count: int) -> None:
        for _ in range(count):
            await post()

    await asyncio.gather(*(worker(20) for _ in range(concurrency)))
    started = time.process_time()
    await asyncio.gather(*(worker(requests // concurrency) for _ in range(concurrency)))
    spent = time.process_time() - started
    await close()
    return spent / (requests // concurrency * concurrency) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        row = next(iter(JsonlReader(write_rows(Path(tmp) / "rows.jsonl", 1))))
    body = build_request(row, MODEL).body()
    server = ServerProcess.start(0)
    figures: dict[str, list[float]] = {name: [] for name in STACKS}
    try:
        names = list(STACKS)
        for round_ in range(args.repeat):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                figures[name].append(
                    asyncio.run(measure(STACKS[name], server.url, body, args.requests,
                                        args.concurrency))
                )  # fmt: skip
    finally:
        server.stop()
    print(f"{args.requests} POSTs of {len(body)} bytes at {args.concurrency} in flight, "
          f"loopback server, no latency; CPU of this process, median of {args.repeat}")  # fmt: skip
    low = statistics.median(figures["minimal"])
    floor = statistics.median(figures["aiohttp"])
    print("| stack | CPU µs a request (each round) | ÷ minimal | ÷ aiohttp |")
    print("|---|---|---|---|")
    for name, values in figures.items():
        mid = statistics.median(values)
        spread = " / ".join(f"{v:.0f}" for v in values)
        print(f"| {name} | {mid:.0f} ({spread}) | {mid / low:.2f}x | {mid / floor:.2f}x |")


if __name__ == "__main__":
    main()
