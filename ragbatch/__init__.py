"""ragbatch: evaluate RAG systems at scale with TypeSafe's Jev decision model.

``ragbatch.evaluate(data, **options)`` (the CLI's options by name) returns the typed report
and per-row results (see ``ragbatch._api``);
the command line is ``ragbatch run``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ragbatch._api import evaluate, evaluate_async

__all__ = ["evaluate", "evaluate_async"]


def __getattr__(name: str) -> Any:
    """Load the API on first use, so ``import ragbatch.core._schema`` stays light."""
    if name in __all__:
        from ragbatch import _api as api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
