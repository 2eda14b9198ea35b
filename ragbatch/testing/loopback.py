"""The lifecycle shared by the loopback test servers: bind 127.0.0.1, serve on a thread, stop.

Subclasses build their ``socketserver``-style HTTP server in :meth:`_make_httpd`; everything
else (start/stop, context manager, ``base_url``) is here. Does I/O when started.
"""

from __future__ import annotations

import threading
from typing import Any, Self


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1, started and stopped explicitly or with ``with``."""

    def __init__(self) -> None:
        self._httpd: Any = None
        self._stopping = threading.Event()  # set on stop: wakes scripted sleeps and hangs

    def _make_httpd(self) -> Any:
        raise NotImplementedError

    def start(self) -> Self:
        """Bind the loopback port and serve on a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError(f"{type(self).__name__} already started")
        self._stopping.clear()
        self._httpd = self._make_httpd()
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        """Stop serving, wake pending sleeps, close the listening socket."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            self._stopping.set()
            httpd.shutdown()
            httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (raises if not started)."""
        if self._httpd is None:
            raise RuntimeError(f"{type(self).__name__} not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"
