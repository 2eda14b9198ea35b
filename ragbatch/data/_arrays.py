"""One top-level JSON array split into its items as text, streamed (pure text in, text out).

A JSON array file (``json.dump(ds.to_list(), f)``, pandas ``to_json(orient="records")``) may
be one line of any length: :func:`array_items` finds the items' boundaries by tokenising
strings and brackets, piece by piece, so only one item is held at a time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from ragbatch.data._base import too_long

Lines = Iterator[tuple[int, str]]
# Outside strings: structure; inside: an escape pair (so \" does not end the string) or ".
_TOKEN = re.compile(r'\\.|["{}\[\],]')


def array_items(
    lines: Lines, error: Callable[[int, str], Exception], limit: int | None = None
) -> Lines:
    """The items of one top-level JSON array as ``(line, text)``, one at a time.

    ``lines`` are ``(number, text)`` pieces in order (whole lines, or pieces of a long line
    sharing its number; a piece must not end inside an escape pair);
    ``error(line, message)`` builds the exception for a file that is not one array. Items
    are not parsed here: ``orjson`` does that per item, so a bad item is reported at its own
    line. An item longer than ``limit`` characters is an error.
    """
    depth, in_string, opened, closed, items = 0, False, False, False, 0
    parts: list[tuple[int, str]] = []
    number = 0
    size = 0

    def item() -> tuple[int, str] | None:
        nonlocal size
        text = "".join(part for _, part in parts)
        line = next((n for n, part in parts if part.strip()), number)
        parts.clear()
        size = 0
        if limit is not None and len(text.strip()) > limit:
            raise error(line, too_long(limit, "array item"))
        return (line, text) if text.strip() else None

    for number, text in lines:
        start = 0
        for match in _TOKEN.finditer(text):
            token = match.group()
            if in_string:
                in_string = token != '"'
                continue
            if closed or not opened:
                if closed or token != "[" or text[: match.start()].strip():
                    raise error(number, "expected one JSON array of objects")
                opened, depth, start = True, 1, match.end()
            elif token == '"':
                in_string = True
            elif token in "{[":
                depth += 1
            elif token in "}]":
                depth -= 1
                if depth == 0:
                    parts.append((number, text[start : match.start()]))
                    last = item()
                    if last is not None:
                        yield last
                    elif items:
                        raise error(number, "invalid JSON: a comma before the closing ]")
                    closed, start = True, match.end()
            elif depth == 1:  # a comma between items
                parts.append((number, text[start : match.start()]))
                found = item()
                if found is None:
                    raise error(number, "invalid JSON: an empty array item")
                items += 1
                yield found
                start = match.end()
        rest = text[start:]
        if closed or not opened:
            if rest.strip():
                raise error(number, "expected one JSON array of objects")
        else:
            parts.append((number, rest))
            size += len(rest)
            if limit is not None and size > limit:
                raise error(parts[0][0], too_long(limit, "array item"))
    if not closed:
        raise error(number, "invalid JSON: the array is not closed")
