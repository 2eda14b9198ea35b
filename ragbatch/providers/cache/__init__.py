"""The content-addressed reply cache (front door)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragbatch._lazy import lazy_exports

# The front door: what other packages use (the modules behind it are private). Merge, verify
# and repair (the ``cache`` commands, ``--workers`` and Dask) are imported on first use.
from ragbatch.providers.cache._replies import (
    CachedProvider,
    CacheMode,
    CachePath,
    CacheStats,
    ReplyCache,
    decode_entry,
    recorded_models,
)
from ragbatch.providers.cache._swap import finish_interrupted_swap
from ragbatch.providers.cache._writer import deferred_writes

if TYPE_CHECKING:
    from ragbatch.providers.cache._merge import merge_caches, read_entries, store_entries
    from ragbatch.providers.cache._verify import repair_cache, verify_cache

__getattr__ = lazy_exports(
    __name__,
    {
        "_merge": ("merge_caches", "read_entries", "store_entries"),
        "_verify": ("repair_cache", "verify_cache"),
    },
)

__all__ = [
    "CacheMode",
    "CachePath",
    "CacheStats",
    "CachedProvider",
    "ReplyCache",
    "decode_entry",
    "deferred_writes",
    "finish_interrupted_swap",
    "merge_caches",
    "read_entries",
    "recorded_models",
    "repair_cache",
    "store_entries",
    "verify_cache",
]
