"""ragbatch: evaluate RAG systems at scale with TypeSafe's Jev decision model."""

from __future__ import annotations

__version__ = "0.1.0"
