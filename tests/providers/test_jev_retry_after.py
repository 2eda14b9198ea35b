"""What JevProvider reads from a refused reply: Retry-After (seconds, milliseconds, an HTTP
date against the clock) and the error message (pure).
"""

from __future__ import annotations

import time
from email.utils import formatdate

import pytest
from multidict import CIMultiDict

from ragbatch.providers._jev import error_message, parse_retry_after
from ragbatch.providers._replies import HttpReply

NOW = 1_800_000_000


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "3"}, 3.0),
        ({"Retry-After": "0"}, 0.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "Retry-After": "9"}, 0.25),
        ({"retry-after-ms": "soon", "Retry-After": "9"}, 9.0),
        ({"Retry-After": formatdate(NOW + 30, usegmt=True)}, 30.0),
        ({"Retry-After": formatdate(NOW - 30, usegmt=True)}, 0.0),
        ({"Retry-After": "-5"}, None),
        ({"Retry-After": "nan"}, None),
        ({"Retry-After": "next tuesday"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(CIMultiDict(headers), now=NOW) == expected


def test_parse_retry_after_http_date_against_the_clock() -> None:
    headers = CIMultiDict({"Retry-After": formatdate(time.time() + 120, usegmt=True)})
    wait = parse_retry_after(headers)
    assert wait is not None and 115 <= wait <= 120


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"error": {"message": "quota exceeded"}}', "quota exceeded"),
        (b'{"error": "bad key"}', "bad key"),
        (b'{"detail": [{"msg": "a"}, {"msg": "b"}]}', "a; b"),
        (
            b'{"detail": [{"type": "missing", "loc": ["body", "questions", "groundedness", '
            b'"noul", "criteria"], "msg": "Field required"}, {"loc": ["body"], "msg": "bad"}]}',
            "questions.groundedness.noul.criteria: Field required; bad",
        ),
        (
            b'{"detail": {"error_type": "not_found", "message": "no model jev-9"}}',
            "no model jev-9",
        ),
        (b'{"message": "quota exceeded"}', "quota exceeded"),
        (b'{"unknown": "field"}', '{"unknown": "field"}'),
        (b"<html>oops</html>", "<html>oops</html>"),
        (b"", "Internal Server Error"),
    ],
)
def test_error_message(content: bytes, expected: str) -> None:
    assert (
        error_message(HttpReply(500, "Internal Server Error", CIMultiDict(), content)) == expected
    )
