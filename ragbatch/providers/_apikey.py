"""API keys and where they may go: checked before the first request, masked in every message.

A key read from a file (``$(cat keyfile)``) often ends in a newline: surrounding whitespace is
trimmed. Whatever is left must be printable ASCII without spaces (an HTTP header value that
every server reads the same way); anything else is refused up front (exit 4, nothing sent),
with a message that says where the bad character is but never shows the key. A key is sent
over plain ``http://`` only to a loopback host, unless the user says otherwise.

:class:`Redactor` masks every spelling of the key a message can carry: raw, Python-escaped
(``repr`` of str or bytes), unicode-escaped, JSON-quoted, percent-encoded and base64 (of the key
and of its ``Authorization`` header, at any byte offset), untrimmed and trimmed, reversed, and
any start of one of them of 8 characters or more, in any mix of upper and lower case. Messages are masked before they are cut to length, so no
prefix of a key survives a cut. Every string a server chooses (an error body, a request id, the
model a reply names) passes through it before it is stored or shown (:func:`masked_reply`).
"""

from __future__ import annotations

import base64
import ipaddress
import json
import re
from typing import Any
from urllib.parse import quote, quote_plus, urlsplit

from ragbatch.core import ConfigError, RunAborted, WireReply

MASK = "***"
PREFIX = 8  # a start of a key this long is masked: it narrows a guess too much to show
_PERCENT = re.compile(r"%[0-9A-F]{2}")
_URLSAFE = str.maketrans("+/", "-_")
# ASCII letters only: a Unicode lower() may change a text's length, and with it every index
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
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


def _percent_encoded(key: str) -> set[str]:
    """``key`` URL-encoded (path and query styles), with upper- and lower-case hex digits."""
    forms = {quote(key, safe=""), quote(key), quote_plus(key)}
    return forms | {_PERCENT.sub(lambda m: m.group().lower(), f) for f in forms}


def _base64_runs(data: bytes) -> set[str]:
    """What base64 of any byte string holding ``data`` must contain, whatever ``data``'s byte
    offset: for each of the 3 alignments, the characters that depend on ``data`` alone (the
    ones sharing bits with a neighbour byte differ from text to text), standard and URL-safe."""
    runs = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data + bytes(2)).decode("ascii")
        run = encoded[-(-8 * offset // 6) : 8 * (offset + len(data)) // 6]
        runs |= {run, run.translate(_URLSAFE)}
    return runs


def _encoded(key: str) -> set[str]:
    """Every spelling of ``key`` a message can carry: text forms, percent- and base64-encoded,
    and the text forms of the key reversed (a server may echo it backwards)."""
    forms = _spellings(key) | _percent_encoded(key) | _spellings(key[::-1])
    for form in [*forms, f"Bearer {key}"]:  # the Authorization header's value, too
        forms |= _base64_runs(form.encode("utf-8"))
    return forms


class Redactor:
    """Masks every spelling of one or more keys in a text: raw, escaped, JSON-quoted,
    percent-encoded and base64 (standard and URL-safe, at any byte offset; of the key and of
    the ``Authorization`` header it is sent in), reversed, and any start of one of them that is
    at least ``PREFIX`` characters long, whatever the case of its ASCII letters (a server may
    echo the key upper-cased; masking a base64 run in another case costs only a few
    characters of a message). The spellings are computed once; a text that holds none of
    their starts costs one regular-expression search."""

    def __init__(self, *keys: str | None) -> None:
        forms: set[str] = set()
        for key in keys:
            if key:
                forms |= _encoded(key)
                if key.strip():
                    forms |= _encoded(key.strip())
        # longest first: a longer spelling is masked whole before a shorter one inside it
        lowered = {f.translate(_LOWER) for f in forms if f}
        ordered = sorted(lowered, key=lambda f: (-len(f), f))
        self._forms = [(f[:PREFIX], f) for f in ordered]
        heads = sorted({head for head, _ in self._forms}, key=len, reverse=True)
        pattern = "|".join(map(re.escape, heads))
        # re.ASCII: IGNORECASE then folds only ASCII letters, as _LOWER does (in Unicode
        # mode the Kelvin sign would match a "k" that _LOWER leaves apart)
        self._any = re.compile(pattern, re.IGNORECASE | re.ASCII) if heads else None

    def leaks(self, text: str) -> bool:
        """Whether ``text`` holds the start of a spelling of a key (what ``__call__`` masks)."""
        return self._any is not None and self._any.search(text) is not None

    def __call__(self, text: str) -> str:
        """``text`` with every spelling of the keys (or its first ``PREFIX`` characters and
        more) replaced by ``***``."""
        pattern = self._any
        if pattern is None or pattern.search(text) is None:
            return text
        parts, done = [], 0
        folded = text.translate(_LOWER)  # the same length: indices hold in both
        while (found := pattern.search(text, done)) is not None:
            start = found.start()
            # the longest spelling that starts here: a raw key must not be cut short where
            # an escaped spelling with the same start departs from it
            end = max(
                _match_end(folded, start, form)
                for head, form in self._forms
                if folded.startswith(head, start)
            )
            parts += [text[done:start], MASK]
            done = end
        parts.append(text[done:])
        return "".join(parts)


def _match_end(text: str, start: int, form: str) -> int:
    """Where the longest start of ``form`` found at ``text[start:]`` ends."""
    end, stop = start, min(start + len(form), len(text))
    while end < stop and text[end] == form[end - start]:
        end += 1
    return end


def masked_reply(reply: WireReply, redact: Redactor) -> WireReply:
    """``reply`` with every string the server chose masked: the model it names and the
    legends of score answers (the other strings must equal what was asked)."""
    model = redact(reply.model)
    answers = dict(reply.answers)
    for qid, answer in reply.answers.items():
        if answer.type == "score" and any(map(redact.leaks, answer.legend.values())):
            legend = {level: redact(text) for level, text in answer.legend.items()}
            answers[qid] = answer.model_copy(update={"legend": legend})
    if model == reply.model and answers == reply.answers:
        return reply
    return reply.model_copy(update={"model": model, "answers": answers})


def masked_json(value: Any, redact: Redactor) -> Any:
    """A parsed JSON value with every string in it (keys included) masked."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [masked_json(item, redact) for item in value]
    if isinstance(value, dict):
        return {redact(k): masked_json(v, redact) for k, v in value.items()}
    return value


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
    """Refuse (ConfigError, exit 2) to send a key over plain http:// to a non-loopback host,
    and a URL no request can go to: not http:// or https://, no host, a bad port."""
    parts = urlsplit(base_url)
    if "@" in parts.netloc:
        # named before anything echoes the URL: what stands before the @ may be a password
        raise ConfigError(
            f"{option} holds credentials (user:password@host): ragbatch sends the API key in "
            "the Authorization header, which cannot be combined with them; remove them from the URL"
        )
    host = parts.hostname or ""
    if parts.scheme.lower() == "http" and not allow_insecure_http and not is_loopback_host(host):
        raise ConfigError(
            f"{option} {base_url} is plain http:// to {host or 'an empty host'}, which is not "
            f"loopback: the API key would travel unencrypted; use https://, or pass "
            f"{INSECURE_FLAG} if this network is trusted"
        )
    try:
        parts.port  # noqa: B018 (it parses the port: out of range or not a number raises)
    except ValueError as exc:
        raise ConfigError(f"{option} {base_url} has no usable port: {exc}") from None
    if parts.scheme.lower() not in ("http", "https") or not host:
        raise ConfigError(f"{option} {base_url} is not an http:// or https:// URL with a host")
