"""The dataset a run's input options name, read as rows and multi-step traces
(docs/semantics.md §8), or as rows alone for the commands that work on rows (file I/O is
the readers').

:func:`open_source_items` is where ``--format``, ``--mapping``, ``--outputs``,
``--ignore-unknown-fields``, ``--retrieval-tool``, ``--flatten`` and ``--steps`` become one
reader call (``ragbatch parse`` prints what it gives). :func:`open_source_rows` gives its rows
to ``counterfactual``, ``audit-sample`` and ``infer``: a trace there is an error that says to
give ``--flatten``, never a one-row view nobody asked for. :class:`ItemCounts` sums up what
was read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ragbatch.core import DatasetError, Row, Trace
from ragbatch.data import ItemSource, RowSource, open_items
from ragbatch.run._options import InputOptions

__all__ = ["ItemCounts", "SourceItems", "open_source_items", "open_source_rows"]


def open_source_items(options: InputOptions) -> ItemSource:
    """The rows and traces of the dataset ``options`` name, in input order, read in its
    format (``options.source``, rows given in memory, is the caller's to use instead)."""
    return open_items(
        options.dataset,
        options.format,
        mapping=options.mapping,
        outputs=options.outputs,
        ignore_unknown_fields=options.ignore_unknown_fields,
        retrieval_tools=options.retrieval_tools or (),
        flatten=options.flatten,
        steps=options.steps,
    )


class SourceItems:
    """An item source as the run iterates it: its rows and traces in input order, with the
    ``name``, ``rows`` and ``sha256`` a row source has once read."""

    def __init__(self, items: ItemSource) -> None:
        self.items = items

    @property
    def rows(self) -> int:
        return self.items.rows

    @property
    def name(self) -> str:
        return self.items.name

    @property
    def sha256(self) -> str:
        return self.items.sha256

    def __iter__(self) -> Iterator[Row | Trace]:
        return self.items.items()


class ItemRows:
    """The rows of an item source, as a row source: a trace is a DatasetError naming the
    file and the trace (with ``--flatten`` every trace is a row already)."""

    def __init__(self, items: ItemSource, path: str) -> None:
        self.items = items
        self.path = path
        self.rows = 0  # known once iterated, as a reader's

    @property
    def name(self) -> str:
        return self.items.name

    @property
    def sha256(self) -> str:
        return self.items.sha256

    def __iter__(self) -> Iterator[Row]:
        for item in self.items.items():
            if not isinstance(item, Row):
                raise DatasetError(
                    self.path,
                    0,
                    f"{item.id} is a multi-step trace, and this command reads rows; give "
                    "--flatten to read each trace as one row",
                )
            yield item
        self.rows = self.items.rows


def open_source_rows(options: InputOptions) -> RowSource:
    """The rows of the dataset ``options`` name, as :func:`open_source_items` reads it (for
    the commands that work on rows; a trace is an error, see :class:`ItemRows`)."""
    return ItemRows(open_source_items(options), str(options.dataset))


@dataclass
class ItemCounts:
    """What a dataset holds: its rows and traces, and the traces' steps by kind."""

    rows: int = 0
    traces: int = 0
    steps: int = 0
    hops: int = 0
    tools: int = 0
    turns: int = 0

    def add(self, item: Row | Trace) -> None:
        if isinstance(item, Row):
            self.rows += 1
            return
        kinds = [step.kind for step in item.steps]
        self.traces += 1
        self.steps += len(kinds)
        self.hops += kinds.count("retrieval")
        self.tools += kinds.count("tool")
        self.turns += kinds.count("user")

    def text(self, name: str) -> str:
        """``12 items of NAME (3 rows, 9 traces: 41 steps, 17 retrieval hops, 2 tool calls,
        14 turns)``; the steps only when there are traces."""
        shown = f"{_n(self.rows, 'row')}, {_n(self.traces, 'trace')}"
        if self.traces:
            shown += (
                f": {_n(self.steps, 'step')}, {_n(self.hops, 'retrieval hop')}, "
                f"{_n(self.tools, 'tool call')}, {_n(self.turns, 'turn')}"
            )
        return f"{_n(self.rows + self.traces, 'item')} of {name} ({shown})"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
