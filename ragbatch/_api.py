"""The Python API for notebooks: evaluate data in memory or on disk, get the verdicts back (I/O).

    import ragbatch
    result = ragbatch.evaluate(df, fail_threshold=0.1, concurrency=8)
    result.report.modes.jev_only.classification.accuracy
    result.to_pandas()  # one row per input row

``data`` is a list of dicts (ragbatch rows, or ragas samples), a pandas DataFrame (ragbatch or
ragas column names), a Hugging Face ``datasets.Dataset``, or a path (read in ``format``).
``options`` are exactly ``ragbatch run``'s options in snake_case
(:data:`~ragbatch.run._options.OPTION_NAMES`, ``dataset`` aside: that is ``data``), with the
same defaults and environment variables, except that nothing is written unless asked
(``out=None``) and no progress is shown (``quiet=True``). pandas and datasets are extras.

What ``ragbatch run`` prints as ``warning: ...`` is issued here with :func:`warnings.warn` as a
:class:`~ragbatch.core._errors.RagbatchWarning` (pointing at the line that called
``evaluate``; filter it like any warning) and kept in ``Evaluation.warnings``.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from types import FrameType
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from ragbatch.compare import infer
from ragbatch.core import (
    ConfigError,
    DatasetError,
    GenerationJudgments,
    RagbatchWarning,
    RetrievalJudgments,
    Row,
    install_extra,
)
from ragbatch.data import RowSource, SeenIds, describe, drop_nulls, open_dataset, read_labels
from ragbatch.metrics import Inference
from ragbatch.report import Report, RowResult
from ragbatch.run import ENVIRONMENT, OPTION_NAMES, PATH_OPTIONS, RunOptions, run, run_options_async

API_OPTIONS: tuple[str, ...] = tuple(name for name in OPTION_NAMES if name != "dataset")
API_DEFAULTS: dict[str, Any] = {"out": None, "quiet": True}
# Column names that only ragas uses (v0.2, and v0.1's ground_truth).
RAGAS_ONLY = frozenset(
    {"user_input", "retrieved_contexts", "response", "reference", "ground_truth"}
)


class MemoryRows:
    """Rows given as ``Row`` objects or plain dicts (dataset field names), checked like a file."""

    def __init__(self, rows: Iterable[Row | Mapping[str, Any]], name: str = "<memory>") -> None:
        self._rows = rows
        self.name = name
        self.rows = 0
        self._digest = hashlib.sha256()

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

    def __iter__(self) -> Iterator[Row]:
        self.rows = 0
        self._digest = hashlib.sha256()
        with closing(SeenIds()) as ids:
            for number, item in enumerate(self._rows, start=1):
                try:
                    row = item if isinstance(item, Row) else Row.model_validate(dict(item))
                except ValidationError as exc:
                    raise DatasetError(self.name, number, describe(exc)) from None
                if not ids.add(row.id):
                    raise DatasetError(self.name, number, f"duplicate row id {row.id!r}")
                self._digest.update(
                    orjson.dumps(
                        row.model_dump(mode="json", by_alias=True, exclude_none=True),
                        option=orjson.OPT_SORT_KEYS,
                    )
                    + b"\n"
                )
                self.rows += 1
                yield row
        if self.rows == 0:
            raise DatasetError(self.name, 0, "no rows given")


class NamedRows:
    """A file reader shown under another name (a DataFrame spilled to a temporary file)."""

    def __init__(self, reader: RowSource, name: str) -> None:
        self._reader = reader
        self.name = name
        self.rows = 0

    @property
    def sha256(self) -> str:
        return self._reader.sha256

    def __iter__(self) -> Iterator[Row]:
        self.rows = 0
        try:
            for row in self._reader:
                self.rows += 1
                yield row
        except DatasetError as error:
            raise DatasetError(self.name, error.line, error.detail) from None


def api_options(options: Mapping[str, Any]) -> RunOptions:
    """``ragbatch run``'s options by name, with the API's defaults and the environment."""
    if "dataset" in options:
        raise ConfigError("pass the data as the first argument of evaluate(), not dataset=")
    unknown = sorted(set(options) - set(API_OPTIONS))
    if unknown:
        raise ConfigError(
            f"unknown option(s) {', '.join(unknown)}; valid options (those of `ragbatch run`, "
            f"in snake_case): {', '.join(API_OPTIONS)}"
        )
    given = {**API_DEFAULTS, **options}
    for name, variable in ENVIRONMENT.items():
        if name not in given and os.environ.get(variable):
            given[name] = os.environ[variable]
    converted: dict[str, Any] = {
        name: Path(value) if name in PATH_OPTIONS and isinstance(value, str | PathLike) else value
        for name, value in given.items()
    }
    return RunOptions.of(**converted)


def records_of(data: Any) -> tuple[list[dict[str, Any]], str] | None:
    """A DataFrame's or a Hugging Face Dataset's rows as JSON objects (nulls left out)."""
    module = type(data).__module__.split(".")[0]
    if module == "datasets" and hasattr(data, "to_pandas"):
        frame, name = data.to_pandas(), "<Dataset>"
    elif module == "pandas" and hasattr(data, "to_json"):
        frame, name = data, "<DataFrame>"
    else:
        return None
    lines = frame.to_json(orient="records", lines=True, force_ascii=False, date_format="iso")
    records = [orjson.loads(line) for line in lines.splitlines() if line.strip()]
    return [drop_nulls(r) for r in records], name


def is_ragas(records: list[Any]) -> bool:
    """Columns only ragas uses, or contexts given as plain strings (ragas v0.1)."""
    first = records[0] if records and isinstance(records[0], Mapping) else None
    if first is None:
        return False
    contexts = first.get("contexts")
    return bool(RAGAS_ONLY & set(first)) or (
        isinstance(contexts, list) and bool(contexts) and isinstance(contexts[0], str)
    )


@dataclass(frozen=True)
class Source:
    """Where the rows come from: a path (the job reads it) or a row source in memory."""

    dataset: Path | None
    rows: RowSource | None


def spill(
    records: list[dict[str, Any]], name: str, options: RunOptions, stack: ExitStack
) -> Source:
    """Records in a non-native format go through that format's reader, from a temporary file."""
    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ragbatch-api-")))
    path = folder / "rows.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r, default=str) + b"\n" for r in records))
    i = options.input
    reader = open_dataset(path, i.format, ignore_unknown_fields=i.ignore_unknown_fields)
    return Source(None, NamedRows(reader, name))


def source_of(data: Any, options: RunOptions, stack: ExitStack) -> tuple[Source, RunOptions]:
    if isinstance(data, str | PathLike):
        return Source(Path(data), None), options
    found = records_of(data)
    records, name = found if found is not None else (data, "<memory>")
    if options.input.format == "jsonl" and isinstance(records, list) and is_ragas(records):
        options = options.replace(format="ragas")
    if options.input.format == "jsonl":
        return Source(None, MemoryRows(records, name)), options
    if options.input.format in ("csv", "golden-yaml"):
        raise ConfigError(
            f"format {options.input.format!r} is read from files: pass its path as data "
            "(in memory: ragbatch rows, or records of a JSON format such as ragas)"
        )
    return spill(list(records), name, options, stack), options


class Warnings:
    """The run's ``warn``: each warning is issued as a :class:`RagbatchWarning` at the line
    that called :func:`evaluate` (or :func:`evaluate_async`) and kept, in order."""

    def __init__(self) -> None:
        self.heard: list[str] = []

    def __call__(self, message: str) -> None:
        self.heard.append(message)
        warnings.warn(message, RagbatchWarning, stacklevel=caller_level())


def caller_level() -> int:
    """The ``stacklevel`` of the frame that called :func:`evaluate` or :func:`evaluate_async`,
    seen from :meth:`Warnings.__call__` (its caller when neither is on the stack)."""
    frame: FrameType | None = sys._getframe(2)  # the frame that called Warnings.__call__
    level = 2
    while frame is not None:
        if frame.f_code in ENTRIES:
            return level + 1
        frame, level = frame.f_back, level + 1
    return 2


@dataclass(frozen=True)
class Evaluation:
    """What :func:`evaluate` returns: the typed report, per-row results as a DataFrame, and the
    warnings the run gave (each also issued as a :class:`RagbatchWarning`)."""

    report: Report
    rows_out: Path | None = None
    warnings: tuple[str, ...] = field(default=())

    def row_results(self) -> list[RowResult]:
        """Every row's result, in input order (from the report, else from ``rows_out``)."""
        if self.report.rows_omitted is None:
            return list(self.report.rows)
        if self.rows_out is None:
            raise ConfigError(
                f"the report kept no rows ({self.report.rows_omitted.reason}): evaluate with "
                "max_report_rows=None, or rows_out='rows.jsonl' to stream them"
            )
        results = []
        for line in self.rows_out.read_bytes().splitlines():
            data = orjson.loads(line)
            data.pop("question", None)
            results.append(RowResult.model_validate(data))
        return results

    def infer(
        self,
        labels: str | PathLike[str] | Iterable[Mapping[str, Any]],
        confidence: float = 0.95,
        target_width: float | None = None,
    ) -> Inference:
        """Corrected rates from human labels (``ragbatch infer``): a labels file or its lines.

        The result is also the report's ``inference`` section: ``report.model_copy(update=
        {"inference": result})`` gives the report ``ragbatch infer --out`` writes."""
        given = labels if not isinstance(labels, str | PathLike) else read_labels(Path(labels))
        return infer(self.report, list(given), confidence, target_width)

    def to_pandas(self) -> Any:
        """One row per input row: id, status, error kind, diagnosis, confidence, route, trace
        id, the cascade's diagnosis and every judgment probability (``None``: not asked)."""
        try:
            import pandas
        except ImportError:
            raise ConfigError(f"to_pandas() needs pandas: {install_extra('pandas')}") from None
        return pandas.DataFrame([table_row(r) for r in self.row_results()], columns=COLUMNS)


def judgment_columns(prefix: str, model: type[BaseModel]) -> list[str]:
    return [f"{prefix}_{name}" for name in model.model_fields]


COLUMNS: list[str] = [
    "id", "status", "error_kind", "diagnosis", "confidence", "route", "trace_id",
    "cascade_diagnosis",
    *judgment_columns("retrieval", RetrievalJudgments),
    *judgment_columns("generation", GenerationJudgments),
]  # fmt: skip


def table_row(result: RowResult) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": result.id,
        "status": result.status,
        "error_kind": result.error.kind if result.error else None,
        "diagnosis": result.diagnosis,
        "confidence": result.confidence,
        "route": result.route,
        "trace_id": result.trace_id,
        "cascade_diagnosis": result.cascade.diagnosis,
    }
    for prefix, judgments in (("retrieval", result.retrieval), ("generation", result.generation)):
        if judgments is not None:
            row.update({f"{prefix}_{k}": v for k, v in judgments.model_dump().items()})
    return row


def _options(data: Any, options: Mapping[str, Any], stack: ExitStack) -> RunOptions:
    """The run's options: the data as its dataset (a path) or its row source (in memory)."""
    source, checked = source_of(data, api_options(options), stack)
    if source.dataset is not None:
        return checked.replace(dataset=source.dataset)
    return checked.replace(source=source.rows)


async def evaluate_async(data: Any, **options: Any) -> Evaluation:
    """Evaluate inside a running event loop (Jupyter: ``await ragbatch.evaluate_async(...)``)."""
    warn = Warnings()
    with ExitStack() as stack:
        checked = _options(data, options, stack)
        if checked.scale.workers > 1:  # the worker processes' signal handling needs the main thread
            raise ConfigError("workers > 1 needs ragbatch.evaluate(), not evaluate_async()")
        if checked.scale.dask is not None:  # the Dask client blocks the thread it runs in
            raise ConfigError("dask needs ragbatch.evaluate(), not evaluate_async()")
        result = await run_options_async(checked, warn)
    return Evaluation(result.report, checked.output.rows_out, tuple(warn.heard))


def evaluate(data: Any, **options: Any) -> Evaluation:
    """Evaluate ``data`` with ``ragbatch run``'s options; see the module docstring."""
    warn = Warnings()
    with ExitStack() as stack:
        checked = _options(data, options, stack)
        result = run(checked, warn)  # blocks this thread, as `ragbatch run` does
    return Evaluation(result.report, checked.output.rows_out, tuple(warn.heard))


# The frames whose caller a warning points at.
ENTRIES = frozenset({evaluate.__code__, evaluate_async.__code__})


__all__ = [
    "API_OPTIONS",
    "Evaluation",
    "MemoryRows",
    "RagbatchWarning",
    "evaluate",
    "evaluate_async",
]
