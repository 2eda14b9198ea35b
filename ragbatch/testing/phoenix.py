"""A real Arize Phoenix server on loopback for tests and benchmarks (starts a process: I/O).

    with PhoenixServer() as phoenix:
        RagApp(phoenix.url, "demo", seed=1).send(20)   # ragbatch.testing.otlp_app
        spans = phoenix.wait_for_spans("demo", 60)

Phoenix runs as ``python -m phoenix.server.main serve`` (``PHOENIX_PYTHON``, else this
interpreter) on free 127.0.0.1 ports, its SQLite database and log (``phoenix.log``) in a
working directory: given, or a temporary one removed by :meth:`PhoenixServer.close`. A stopped
server starts again on the same ports and directory, so what it held survives a restart.
Phoenix takes OTLP/HTTP at ``{url}/v1/traces`` and its REST API at ``{url}/v1/...``; the read
helpers here use only the standard library, so this module imports without Phoenix.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Self

LOG_NAME = "phoenix.log"
# A GET's query string stays well under the server's request-line limit (h11: 16 KiB).
IDS_PER_REQUEST = 200
# Direct connections only: an HTTP(S)_PROXY in the environment must not see loopback calls.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class PhoenixError(RuntimeError):
    """Phoenix did not come up, exited, or answered a REST call with an error."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS's pick; another process may take it later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PhoenixServer:
    """One Phoenix process on loopback: :meth:`start`, :meth:`stop`, start again, :meth:`close`."""

    def __init__(
        self,
        working_dir: str | Path | None = None,
        *,
        port: int | None = None,
        grpc_port: int | None = None,
        start_timeout: float = 120.0,
        stop_timeout: float = 30.0,
        python: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self._owned_dir = working_dir is None
        self.working_dir = Path(working_dir or tempfile.mkdtemp(prefix="phoenix-"))
        self.port = port or free_port()
        self.grpc_port = grpc_port or free_port()
        self.start_timeout, self.stop_timeout = start_timeout, stop_timeout
        self.python = python or os.environ.get("PHOENIX_PYTHON") or sys.executable
        self.extra_env = dict(env or {})
        self.start_seconds: float | None = None  # how long the last start took to be healthy
        self._process: subprocess.Popen[bytes] | None = None
        self._began = 0.0

    @property
    def url(self) -> str:
        """The base URL, ``http://127.0.0.1:PORT`` (the REST API is under ``/v1``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.working_dir / LOG_NAME

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _environment(self) -> dict[str, str]:
        # inherited PHOENIX_* settings (a database URL, a collector) would make it not ours
        env = {k: v for k, v in os.environ.items() if not k.startswith("PHOENIX_")}
        env.update(
            PHOENIX_PORT=str(self.port),
            PHOENIX_GRPC_PORT=str(self.grpc_port),
            PHOENIX_HOST="127.0.0.1",
            PHOENIX_WORKING_DIR=str(self.working_dir),
            PHOENIX_TELEMETRY_ENABLED="false",
        )
        env.update(self.extra_env)
        return env

    def start(self) -> Self:
        """Start Phoenix and wait until ``/healthz`` answers 200 (PhoenixError with the log's
        tail if it exits or is not healthy within ``start_timeout`` seconds)."""
        self.launch()
        return self.wait_started()

    def launch(self) -> Self:
        """Start Phoenix's process without waiting for it (:meth:`wait_started` does): its
        start-up then runs beside whatever the caller does meanwhile."""
        if self.running:
            raise PhoenixError(f"Phoenix already runs at {self.url}")
        self.working_dir.mkdir(parents=True, exist_ok=True)
        self._began = time.monotonic()
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [self.python, "-m", "phoenix.server.main", "serve"],
                env=self._environment(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self

    def wait_started(self) -> Self:
        """Wait until the launched Phoenix is healthy (see :meth:`start`)."""
        try:
            self._wait_healthy(self._began)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - self._began
        return self

    def _wait_healthy(self, began: float) -> None:
        # Asked at least once: a server launched long before the wait (its start-up ran beside
        # other work) is healthy by then, however late the first asking comes.
        assert self._process is not None
        while not self._healthy():
            try:  # waits on the process: an exit ends the wait at once
                code = self._process.wait(timeout=0.25)
            except subprocess.TimeoutExpired:
                if time.monotonic() - began < self.start_timeout:
                    continue
                raise PhoenixError(
                    f"Phoenix was not healthy at {self.url}/healthz within "
                    f"{self.start_timeout:g} s{self._log_tail()}"
                ) from None
            raise PhoenixError(f"Phoenix exited with code {code} before it was healthy"
                               f"{self._log_tail()}")  # fmt: skip

    def _healthy(self) -> bool:
        try:
            with _OPENER.open(f"{self.url}/healthz", timeout=2) as reply:
                return int(reply.status) == 200
        except (OSError, urllib.error.URLError):
            return False

    def _log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return f" (no log at {self.log_path})"
        return f"; the last lines of {self.log_path}:\n" + "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM, wait ``stop_timeout`` seconds, then SIGKILL. The ports and the working
        directory are kept: :meth:`start` serves the same data again."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def restart(self) -> Self:
        """:meth:`stop`, then :meth:`start` on the same port and working directory."""
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop, and remove the working directory if it is the temporary one made here."""
        self.stop()
        if self._owned_dir:
            shutil.rmtree(self.working_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.close()  # no __exit__ follows a failed __enter__
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- REST reads --------------------------------------------------------------------------

    def request_json(
        self, method: str, path: str, params: Sequence[tuple[str, str]] = (), body: Any = None
    ) -> Any:
        """``{method} {url}{path}?params`` (``body`` sent as JSON) and its JSON reply;
        PhoenixError with the status and the start of the body on an error."""
        query = urllib.parse.urlencode(list(params))
        request = urllib.request.Request(
            f"{self.url}{path}" + (f"?{query}" if query else ""),
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"} if body is not None else {},
            method=method,
        )
        try:
            with _OPENER.open(request, timeout=30) as reply:
                return json.loads(reply.read() or b"null")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", errors="replace")[:500]
            raise PhoenixError(f"{method} {path}: HTTP {exc.code}: {detail}") from None

    def get_json(self, path: str, params: Sequence[tuple[str, str]] = ()) -> Any:
        """``GET {url}{path}?params`` as JSON (:meth:`request_json`)."""
        return self.request_json("GET", path, params)

    def spans(self, project: str, *, page_size: int = 1000) -> list[dict[str, Any]]:
        """Every span of ``project`` in insertion order (``sort=id&order=asc``, following
        ``next_cursor``), as the REST API gives them; [] for a project Phoenix has not seen."""
        path = f"/v1/projects/{urllib.parse.quote(project, safe='')}/spans"
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params = [("sort", "id"), ("order", "asc"), ("limit", str(page_size))]
            try:
                page = self.get_json(path, params + ([("cursor", cursor)] if cursor else []))
            except PhoenixError as exc:
                if "HTTP 404" in str(exc) and not found:
                    return []  # no span has reached the project yet
                raise
            found.extend(page["data"])
            cursor = page.get("next_cursor")
            if not cursor:
                return found

    def wait_for_spans(
        self, project: str, count: int, timeout: float = 60.0, interval: float = 0.2
    ) -> list[dict[str, Any]]:
        """:meth:`spans` once ``project`` holds at least ``count`` of them (Phoenix inserts
        what it receives in the background); PhoenixError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.spans(project)
            if len(found) >= count:
                return found
            if time.monotonic() > deadline:
                raise PhoenixError(
                    f"project {project!r} holds {len(found)} spans after {timeout:g} s, "
                    f"{count} expected"
                )
            time.sleep(interval)  # polling a remote store: nothing to wait on

    def span_annotations(
        self, project: str, span_ids: Iterable[str], *, page_size: int = 1000
    ) -> list[dict[str, Any]]:
        """The annotations of these spans (``GET /v1/projects/{project}/span_annotations``,
        :data:`IDS_PER_REQUEST` ids a request, following ``next_cursor``), newest first
        within each request. Phoenix answers 404 when none of a request's spans exists."""
        path = f"/v1/projects/{urllib.parse.quote(project, safe='')}/span_annotations"
        ids = list(dict.fromkeys(span_ids))
        found: list[dict[str, Any]] = []
        for start in range(0, len(ids), IDS_PER_REQUEST):
            chunk = [("span_ids", i) for i in ids[start : start + IDS_PER_REQUEST]]
            cursor: str | None = None
            while True:
                params = [*chunk, ("limit", str(page_size))]
                page = self.get_json(path, params + ([("cursor", cursor)] if cursor else []))
                found.extend(page["data"])
                cursor = page.get("next_cursor")
                if not cursor:
                    break
        return found
