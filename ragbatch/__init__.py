"""ragbatch: evaluate RAG systems at scale with TypeSafe's Jev decision model.

``ragbatch.evaluate(data, **options)`` (the CLI's options by name) returns the typed report
and per-row results (see ``ragbatch._api``); its warnings are ``ragbatch.RagbatchWarning``s;
the command line is ``ragbatch run``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragbatch._lazy import lazy_exports

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ragbatch._api import RagbatchWarning, evaluate, evaluate_async

__all__ = ["RagbatchWarning", "evaluate", "evaluate_async"]


# The API is loaded on first use, so ``import ragbatch.core._schema`` stays light.
__getattr__ = lazy_exports(__name__, {"_api": __all__})
