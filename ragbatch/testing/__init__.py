"""Test doubles shipped with ragbatch: a Jev-compatible HTTP server (does I/O when started).

Imports are lazy so ``python -m ragbatch.testing.jev_server`` runs the module only once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragbatch.testing.jev_server import (
        AnswerFn,
        Fault,
        FaultFn,
        FaultKind,
        JevServer,
        canonical_json,
        count_input_tokens,
        default_answer,
    )

__all__ = [
    "AnswerFn",
    "Fault",
    "FaultFn",
    "FaultKind",
    "JevServer",
    "canonical_json",
    "count_input_tokens",
    "default_answer",
]


def __getattr__(name: str) -> Any:
    """Import ``jev_server`` on first use of one of its public names."""
    if name in __all__:
        from ragbatch.testing import jev_server

        return getattr(jev_server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
