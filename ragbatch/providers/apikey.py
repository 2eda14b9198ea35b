"""API keys and where they may go: checked before the first request, masked in every message.

A key read from a file (``$(cat keyfile)``) often ends in a newline: surrounding whitespace is
trimmed. Whatever is left must be printable ASCII without spaces (an HTTP header value that
every server reads the same way); anything else is refused up front (exit 4, nothing sent),
with a message that says where the bad character is but never shows the key. A key is sent
over plain ``http://`` only to a loopback host, unless the user says otherwise.

:class:`Redactor` masks every spelling of the key a message can carry: raw, Python-escaped
(``repr`` of str or bytes), unicode-escaped and JSON-quoted, untrimmed and trimmed. Messages are
masked before they are cut to length, so no prefix of a key survives a cut.
"""

from __future__ import annotations

import ipaddress
import json
from urllib.parse import urlsplit

from ragbatch.core.errors import ConfigError, RunAborted

MASK = "***"
INSECURE_FLAG = "--allow-insecure-http"


def clean_key(key: str | None, source: str, label: str = "API key") -> str:
    """``key`` without surrounding whitespace; RunAborted if it is missing or unusable.

    ``source`` says where the key comes from (e.g. ``TYPESAFE_API_KEY``), ``label`` what it is.
    """
    trimmed = (key or "").strip()
    if not trimmed:
        raise RunAborted(f"no {label}: set {source}")
    for position, char in enumerate(trimmed, start=1):
        if not "!" <= char <= "~":  # printable ASCII, no space
            what = (
                "whitespace" if char.isspace()
                else "a control character" if char.isascii() or not char.isprintable()
                else "a non-ASCII character"
            )  # fmt: skip
            raise RunAborted(
                f"the {label} ({source}) contains {what} at character {position} of "
                f"{len(trimmed)} (after trimming the ends); an API key is one word of printable "
                "ASCII: check how it was copied (no request was sent)"
            )
    return trimmed


def _spellings(key: str) -> set[str]:
    """The forms ``key`` takes in text: raw, escaped, JSON-quoted (without the quotes)."""
    forms = {
        key,
        repr(key)[1:-1],
        json.dumps(key)[1:-1],
        json.dumps(key, ensure_ascii=False)[1:-1],
        key.encode("unicode_escape").decode("ascii"),
    }
    try:
        forms.add(repr(key.encode("latin-1"))[2:-1])
    except UnicodeEncodeError:
        forms.add(repr(key.encode("utf-8"))[2:-1])
    return forms


class Redactor:
    """Masks every spelling of one or more keys in a text (the longest spellings first)."""

    def __init__(self, *keys: str | None) -> None:
        forms: set[str] = set()
        for key in keys:
            if key:
                forms |= _spellings(key)
                if key.strip():
                    forms |= _spellings(key.strip())
        self._forms = sorted((f for f in forms if f), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        """``text`` with every spelling of the keys replaced by ``***``."""
        for form in self._forms:
            if form in text:
                text = text.replace(form, MASK)
        return text


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` (and ``*.localhost``) and loopback IP literals."""
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def check_base_url(base_url: str, option: str, *, allow_insecure_http: bool) -> None:
    """Refuse (ConfigError, exit 2) to send a key over plain http:// to a non-loopback host."""
    parts = urlsplit(base_url)
    if parts.scheme.lower() != "http" or allow_insecure_http:
        return
    host = parts.hostname or ""
    if not is_loopback_host(host):
        raise ConfigError(
            f"{option} {base_url} is plain http:// to {host or 'an empty host'}, which is not "
            f"loopback: the API key would travel unencrypted; use https://, or pass "
            f"{INSECURE_FLAG} if this network is trusted"
        )
