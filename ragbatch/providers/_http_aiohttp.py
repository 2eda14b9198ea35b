"""The wire through a proxy (or to a URL with credentials): one aiohttp session, the body cap
and the transfer-coding check (async I/O). Imported only when such a client is built: aiohttp
takes a tenth of a second to import. A direct origin gets the project's own connections
(:mod:`ragbatch.providers._http_conn`); :mod:`ragbatch.providers._http_wire` chooses.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping

import aiohttp
from aiohttp.http_exceptions import LineTooLong

from ragbatch.providers._http_codings import inflater, transfer_coding
from ragbatch.providers._http_errors import BadReply, ProxyError, TooLarge
from ragbatch.providers._http_proxy import Proxy
from ragbatch.providers._http_types import USER_AGENT, Policy
from ragbatch.providers._replies import HttpReply


def _ssl(verify: bool | str) -> ssl.SSLContext | bool:
    if verify is False:
        return False
    if verify is True:
        return True  # aiohttp's default context (built once per connector)
    return ssl.create_default_context(cafile=verify)


def _refused(exc: aiohttp.ClientResponseError) -> Exception:
    """The error of a reply aiohttp's parser refused: its own reason, on one line."""
    cause = exc.__cause__
    detail = getattr(cause, "message", None) or exc.message or "the reply breaks HTTP"
    first = " ".join(str(detail).split())[:200]  # one line: the parser's spans it over several
    # aiohttp re-raises its parser's LineTooLong as a plain HttpProcessingError
    if isinstance(cause, Exception) and isinstance(cause.__cause__, LineTooLong):
        return TooLarge(f"a line of the reply's head is over aiohttp's limit: {first}")
    return BadReply(f"the reply breaks HTTP: {first}")


class AiohttpWire:
    """POST over one aiohttp session (opened on first use, inside the event loop)."""

    # What one exchange may raise besides a reply: each becomes a failure kind.
    errors: tuple[type[BaseException], ...] = (
        aiohttp.ClientError,
        OSError,
        TimeoutError,
        TooLarge,
        BadReply,
    )

    def __init__(self, base_url: str, policy: Policy, proxy: Proxy | None = None) -> None:
        """``base_url`` and ``proxy`` as :func:`~ragbatch.providers._http_wire.open_wire`
        made them (written the usual way; the environment's proxy for it, if any)."""
        self.base_url = base_url
        self.policy = policy
        self.proxy = proxy
        self._session: aiohttp.ClientSession | None = None
        self._timeout = aiohttp.ClientTimeout(total=policy.attempt_timeout_s)

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=0, ssl=_ssl(self.policy.verify), force_close=not self.policy.keep_alive
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=self._timeout,
            headers={"User-Agent": f"{USER_AGENT} aiohttp/{aiohttp.__version__}"},
            trust_env=False,  # proxies: see ragbatch.providers._http_client
        )
        return self._session

    async def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> HttpReply:
        """One exchange; aiohttp's errors as they come, but a reply its parser refuses
        (:class:`BadReply`, or :class:`TooLarge` for a line over its 8,190 bytes) and a
        certificate that fails verification (:class:`ssl.SSLCertVerificationError`)."""
        try:
            return await self._post(path, body, headers)
        except aiohttp.ClientHttpProxyError as exc:  # the proxy's doing: a connection error
            answer = f"{exc.status} {exc.message}".strip()
            raise ProxyError(f"the proxy {self.proxy} answered {answer}") from None
        except aiohttp.ClientProxyConnectionError as exc:
            reason = exc.os_error.strerror or exc.os_error
            raise ProxyError(f"the proxy {self.proxy} could not be reached: {reason}") from None
        except aiohttp.ClientResponseError as exc:  # what aiohttp's parser refused
            raise _refused(exc) from None
        except aiohttp.ClientConnectorCertificateError as exc:
            raise exc.certificate_error from None

    async def _post(self, path: str, body: bytes, headers: Mapping[str, str]) -> HttpReply:
        session = self._session or self._open()
        cap = self.policy.max_response_bytes
        async with session.post(
            self.base_url + path,
            data=body,
            headers=headers,
            allow_redirects=False,
            proxy=None if self.proxy is None else self.proxy.url,
        ) as response:
            declared = response.content_length
            if declared is not None and declared > cap:
                raise TooLarge(f"Content-Length {declared} is over the {cap}-byte cap")
            coding = transfer_coding(response.headers)  # aiohttp decodes Content-Encoding
            inflate = None
            parts: list[bytes] = []
            size = 0
            async for part in response.content.iter_any():  # decoded, in bounded pieces
                if coding is not None:
                    inflate = inflate or inflater(coding, part)
                    part = inflate.decompress(part, cap - size + 1)
                    if inflate.unconsumed_tail:  # more output than the cap allows
                        size = cap
                size += len(part)
                if size > cap:
                    raise TooLarge(f"the decoded body passed the {cap}-byte cap")
                parts.append(part)
            if inflate is not None and not inflate.eof:
                raise BadReply("the compressed body ends early")
            body = b"".join(parts)
            return HttpReply(response.status, response.reason or "", response.headers, body)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
