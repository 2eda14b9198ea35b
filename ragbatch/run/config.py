"""Options of a run and its result, and the check of its output paths (small I/O)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ragbatch.core.policy import Thresholds
from ragbatch.core.questions import MAX_REQUEST_TOKENS, MAX_STATE_QUESTION_TOKENS
from ragbatch.core.schema import Row
from ragbatch.files import check_output, write_bytes
from ragbatch.metrics.ranking import DEFAULT_KS
from ragbatch.providers.cache import CacheMode
from ragbatch.providers.jev import (
    DEFAULT_BASE_URL,
)
from ragbatch.report.models import Report

DEFAULT_DATASET = Path("datasets/rag-fixture.jsonl")
DEFAULT_OUT = Path("reports/report.json")
# The default snapshot ships inside the package (a copy of the repository's versioned
# pricing/typesafe-2026-12.json, checked byte-identical by a test), so a run works anywhere.
PRICING_NAME = "typesafe-2026-12.json"
DEFAULT_PRICING = Path(__file__).resolve().parents[1] / "pricing" / PRICING_NAME
DEFAULT_CACHE = Path("cache")

__all__ = [
    "DEFAULT_CACHE",
    "DEFAULT_DATASET",
    "DEFAULT_OUT",
    "DEFAULT_PRICING",
    "PRICING_NAME",
    "JobConfig",
    "JobResult",
    "RowSource",
    "check_outputs",
    "write_bytes",
]


class RowSource(Protocol):
    """Rows to evaluate; ``name``, ``rows`` and ``sha256`` are known once iterated."""

    name: str
    rows: int

    @property
    def sha256(self) -> str: ...

    def __iter__(self) -> Iterator[Row]: ...


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
    # live Jev
    api_key: str | None = field(default=None, repr=False)
    base_url: str = DEFAULT_BASE_URL
    allow_insecure_http: bool = False  # send keys over http:// to a non-loopback host
    cache_dir: Path = DEFAULT_CACHE
    cache_mode: CacheMode = "use"
    attempt_timeout_s: float = 30.0
    row_deadline_s: float = 300.0
    max_retries: int = 4
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 5.0
    max_rps: float | None = None
    max_tokens_per_s: float | None = None
    max_request_tokens: int = MAX_REQUEST_TOKENS
    max_state_question_tokens: int = MAX_STATE_QUESTION_TOKENS
    adaptive: bool = True
    max_error_rate: float | None = None
    error_budget_rows: int = 20
    # claim mode
    groundedness: str = "basic"
    claim_evidence: str = "cited"
    claim_extractor: str = "provided"
    slice_by: tuple[str, ...] = ()
    ks: tuple[int, ...] = DEFAULT_KS
    # sharding: evaluate only shard K of N and write a partial result instead of a report
    judge_base_url: str = "https://api.openai.com"
    judge_api_key: str | None = field(default=None, repr=False)
    judge_model: str = "gpt-4o-mini"
    policy: Path | None = None  # a calibrated policy file: its thresholds win
    max_cost: float | None = None
    rows_out: Path | None = None
    max_report_rows: int | None = 10_000
    progress: str = "none"  # auto | rich | plain | none
    progress_interval: float = 5.0
    format: str = "jsonl"  # jsonl | ragas | csv | golden-yaml
    mapping: str | None = None  # csv: field=column,...
    outputs: Path | None = None  # golden-yaml: the JSONL of system outputs
    # rows from somewhere else than a file (the Python API)
    source: RowSource | None = field(default=None, compare=False)
    shard: tuple[int, int] | None = None
    partial_out: Path | None = None


@dataclass(frozen=True, repr=False)
class JobResult:
    report: Report
    report_bytes: bytes
    wall_s: float
    rows_per_s: float
    record: dict[str, Any]

    def __repr__(self) -> str:
        # Short on purpose: asyncio may repr the finished task's result, report included.
        return f"JobResult(rows={self.report.dataset.rows}, wall_s={self.wall_s:.3f})"


def check_outputs(config: JobConfig) -> None:
    """Refuse, before anything is read or sent, an output path that cannot be written."""
    outputs = [("--partial-out", config.partial_out)] if config.shard else [("--out", config.out)]
    outputs += [("--rows-out", config.rows_out), ("--run-record", config.run_record)]
    for option, path in outputs:
        if path is not None:
            check_output(path, option)
