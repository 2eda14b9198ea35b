"""One evaluation job end to end: files in, report bytes out (does I/O; no CLI concerns).

Reads the pricing snapshot, streams the dataset through :func:`ragbatch.runner.run_batch`,
summarizes, and writes the report and the optional run record. The CLI and the Python API
both call :func:`run_job`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import orjson

from ragbatch.dataset import DatasetReader
from ragbatch.errors import ConfigError, PricingError, RagbatchError
from ragbatch.policy import Thresholds
from ragbatch.pricing import PricingSnapshot, parse_pricing
from ragbatch.providers.base import Provider
from ragbatch.providers.baseline import BaselineJudge, RecordedBaseline
from ragbatch.providers.mock import MockProvider
from ragbatch.report import Report, report_bytes
from ragbatch.runner import RunConfig, run_batch
from ragbatch.summarize import RunInfo, summarize

DEFAULT_DATASET = Path("datasets/rag-fixture.jsonl")
DEFAULT_OUT = Path("reports/report.json")
DEFAULT_PRICING = Path("pricing/typesafe-2026-12.json")


@dataclass(frozen=True)
class JobConfig:
    dataset: Path = DEFAULT_DATASET
    out: Path | None = DEFAULT_OUT
    provider: str = "mock"
    model: str | None = None
    concurrency: int = 32
    thresholds: Thresholds = field(default_factory=Thresholds)
    pricing: Path = DEFAULT_PRICING
    baseline: str = "recorded"
    ignore_unknown_fields: bool = False
    run_record: Path | None = None


@dataclass(frozen=True)
class JobResult:
    report: Report
    report_bytes: bytes
    wall_s: float
    rows_per_s: float


def load_pricing(path: Path) -> PricingSnapshot:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PricingError(
            f"cannot read pricing snapshot {path}: {exc.strerror or exc} (pass --pricing FILE)"
        ) from None
    return parse_pricing(data, str(path))


def make_provider(config: JobConfig) -> Provider:
    if config.provider == "mock":
        return MockProvider(config.model) if config.model else MockProvider()
    raise ConfigError(f"unknown provider {config.provider!r}; choose mock")


def make_baseline(config: JobConfig) -> BaselineJudge:
    if config.baseline == "recorded":
        return RecordedBaseline()
    raise ConfigError(f"unknown baseline {config.baseline!r}; choose recorded")


def _unwrap(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first real error inside (possibly nested) task-group exception groups."""
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first


async def evaluate_async(config: JobConfig) -> JobResult:
    """Run the job inside an existing event loop."""
    if config.concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1, got {config.concurrency}")
    pricing = load_pricing(config.pricing)
    provider = make_provider(config)
    baseline = make_baseline(config)
    reader = DatasetReader(config.dataset, ignore_unknown_fields=config.ignore_unknown_fields)
    started = time.perf_counter()
    try:
        outcomes = await run_batch(
            reader, provider, baseline, RunConfig(config.concurrency, config.thresholds)
        )
    except BaseExceptionGroup as group:
        error = _unwrap(group)
        if isinstance(error, RagbatchError):
            raise error from None
        raise
    finally:
        await provider.aclose()
    wall = time.perf_counter() - started
    info = RunInfo(
        dataset_name=reader.name,
        dataset_sha256=reader.sha256,
        provider=provider.name,
        requested_model=provider.model,
        baseline=baseline.name,
        thresholds=config.thresholds,
        pricing=pricing,
    )
    report = summarize(outcomes, info)
    data = report_bytes(report)
    if config.out is not None:
        write_bytes(config.out, data)
    result = JobResult(report, data, wall, len(outcomes) / wall if wall > 0 else 0.0)
    if config.run_record is not None:
        record = {"wallSeconds": wall, "rowsPerSecond": result.rows_per_s, "rows": len(outcomes)}
        write_bytes(config.run_record, orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n")
    return result


def run_job(config: JobConfig) -> JobResult:
    """Run the job in a fresh event loop (the CLI's entry)."""
    return anyio.run(evaluate_async, config)


def write_bytes(path: Path, data: bytes) -> None:
    """Write atomically: a reader never sees half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
