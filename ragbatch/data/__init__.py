"""Rows in: dataset readers with file and line in every error, and derived datasets.

Owns what every reader shares (``base``: the :class:`RowSource` protocol, the
:class:`FileReader` base, bounded line reading, duplicate ids, error wording), the format
registry and :func:`open_dataset` (``formats``), ragbatch's own JSONL (``jsonl``), your own CSV
columns (``mapped_csv``), JSON/CSV/Parquet records with line numbers (``records``), other
tools' exports (``ragas``, ``deepeval``, and trace exports mapped by ``traces``:
``openinference``, ``langfuse``), hints for a file given in the wrong format (``hints``),
golden-set YAML joined with outputs (``golden_yaml``), counterfactual rows
(``counterfactual``) and the human labels file (``labels``). Multi-step traces
(docs/semantics.md §8): :func:`open_items` gives an :class:`ItemSource` of rows and traces,
from native trace lines (``native``) and other tools' agent traces and conversations
(``trace_ragas``, ``trace_deepeval``, ``trace_langfuse``, ``trace_openinference``, sharing
``steps``, ``trace_spans`` and ``tool_calls``). The output files every layer writes are ``ragbatch._files``.

Reads and writes files. May import ``core`` and ``ragbatch._files`` only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragbatch._lazy import lazy_exports

# The front door: what other packages use (the modules behind it are private); the
# counterfactual writer and the importers' record helpers are imported on first use.
from ragbatch.data._base import BOM, ItemSource, RowSource, scan_lines
from ragbatch.data._formats import open_dataset, open_items
from ragbatch.data._hints import DEFAULT_DATASET, foreign_shape
from ragbatch.data._jsonl import JsonlReader, SeenIds, describe
from ragbatch.data._labels import read_labels

if TYPE_CHECKING:
    from ragbatch.data._counterfactual import write_counterfactuals
    from ragbatch.data._native import native_line, parse_item, trace_line
    from ragbatch.data._phoenix_rest import TraceUnreadable, trace_item
    from ragbatch.data._records import drop_nulls

__getattr__ = lazy_exports(
    __name__,
    {
        "_counterfactual": ("write_counterfactuals",),
        "_native": ("native_line", "parse_item", "trace_line"),
        "_phoenix_rest": ("TraceUnreadable", "trace_item"),
        "_records": ("drop_nulls",),
    },
)

__all__ = [
    "BOM",
    "DEFAULT_DATASET",
    "ItemSource",
    "JsonlReader",
    "RowSource",
    "SeenIds",
    "TraceUnreadable",
    "describe",
    "drop_nulls",
    "foreign_shape",
    "native_line",
    "open_dataset",
    "open_items",
    "parse_item",
    "read_labels",
    "scan_lines",
    "trace_item",
    "trace_line",
    "write_counterfactuals",
]
