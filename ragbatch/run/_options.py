"""Every option of a run, written once: name, default, help, environment variable, CLI flag (no I/O).

Modelled on httpx's ``_config.py``: a few small frozen settings objects, grouped by who uses
them (:class:`InputOptions` for the readers, :class:`RetryPolicy` and :class:`RateControl` for
the live client, :class:`RunLimits` for the cost limit and the error budget, ...), and
:class:`RunOptions` holding one of each. ``ragbatch run``'s typer signature
(:mod:`ragbatch.cli._run_command`), ``ragbatch.evaluate(data, **options)`` and the options
reference (docs/reference/cli.md) are generated from, or checked by tests against, these fields.

Adding an option is a one-place edit: add a field to the group that uses it, as

    dask: bool = option(False, "Run the shards on a Dask cluster.", flag="--dask")

(``flag``/``env``/``cli_type``/typer keywords as the neighbours show; ``cli=False`` keeps a
setting out of the CLI and the API); its help is what the options reference shows. It shows at the end of ``ragbatch run --help`` unless its name is
placed in :data:`HELP_ORDER`, and ``RunOptions.of(name=...)`` accepts it at once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ragbatch.core import (
    EXTRACTORS,
    MAX_REQUEST_TOKENS,
    MAX_STATE_QUESTION_TOKENS,
    PROBES,
    ROUTINGS,
    ConfigError,
    Probe,
    RequestLimits,
    Thresholds,
    routing_of,
)
from ragbatch.metrics import DEFAULT_KS, DEFAULT_MAX_FLIP_RATE, DEFAULT_PROBE_RATE, MIN_PROBE_ROWS
from ragbatch.providers import DEFAULT_BASE_URL, DEFAULT_MAX_RESPONSE_BYTES
from ragbatch.providers.cache import CacheMode
from ragbatch.run._config import (
    DEFAULT_CACHE,
    DEFAULT_DATASET,
    DEFAULT_OUT,
    DEFAULT_PRICING,
    PRICING_NAME,
    RowSource,
)
from ragbatch.run._shards import parse_shard

# The values of the options that name one of a few ways (each named in the option's help, a test
# checks): the claim extractors are the core's own and the LLM one of the providers.
PROVIDERS = ("mock", "jev")
BASELINES = ("recorded", "lexical", "llm")
GROUNDEDNESS = ("basic", "claims")
CLAIM_EVIDENCE = ("cited", "context")
CLAIM_EXTRACTORS = (*EXTRACTORS, "llm")
CONTEXT_ORDERS = ("as-is", "reversed", "both")


@dataclass(frozen=True)
class Option:
    """How one setting shows on the command line (the field holds its name and default)."""

    help: str
    flag: str | None = None  # an explicit declaration ("--offline": no --no-offline)
    env: str | None = None
    cli_type: Any = None  # the CLI's type when it differs from the field's
    argument: bool = False
    cli: bool = True  # False: a setting of the Python code only
    typer: dict[str, Any] = field(default_factory=dict)  # min, max, show_default
    choices: tuple[str, ...] = ()  # the values the code accepts (each named in the help)


def option(default: Any, help: str, *, secret: bool = False, **how: Any) -> Any:
    """A settings field: its default and how the CLI and the API show it (see :class:`Option`;
    other keywords go to typer: ``min``, ``max``, ``show_default``). A ``secret`` is left out
    of the group's repr."""
    known = {f.name for f in fields(Option)}
    spec = Option(help, **{k: v for k, v in how.items() if k in known},
                  typer={k: v for k, v in how.items() if k not in known})  # fmt: skip
    return field(default=default, repr=not secret, metadata={"option": spec})


@dataclass(frozen=True)
class InputOptions:
    """What the readers need: the dataset and how to read it."""

    dataset: Path = option(DEFAULT_DATASET, "The dataset: JSONL rows and traces, one per line (see docs/reference/dataset-format.md), or a file in --format.", argument=True)  # fmt: skip
    format: str = option(
        "jsonl",
        "Dataset format: jsonl (ragbatch rows and traces), ragas (JSONL, JSON array or CSV with "
        "ragas v0.2 or v0.1 columns), csv (with --mapping), golden-yaml (DATASET is "
        "golden_set.yaml, joined with --outputs), deepeval (test cases: JSON, JSONL, CSV), "
        "openinference (OTLP JSON or a Phoenix spans export: JSONL, Parquet), langfuse "
        "(traces with observations, or observations). See docs/guides/importing-data.md.",
        flag="--format",
    )
    mapping: str | None = option(None, "csv: field=column pairs, e.g. question=query,answer=response,contexts=ctx")  # fmt: skip
    outputs: Path | None = option(None, "golden-yaml: the JSONL of system outputs to join.")
    ignore_unknown_fields: bool = option(False, "Skip unknown top-level fields instead of failing.", flag="--ignore-unknown-fields")  # fmt: skip
    retrieval_tools: list[str] | None = option(
        None,
        "A tool whose calls are retrieval steps; its output may then be documents, strings, "
        "or text whose passages are separated by a blank line (repeatable). A tool that "
        "returns documents (LangChain, LlamaIndex, objects with a text and an id, score, "
        "source or metadata) is one without being named.",
        flag="--retrieval-tool",
    )
    flatten: bool = option(
        False,
        "Read each multi-step trace as one row (its last turn's question, first retrieval's "
        "documents and last answer) instead of its steps.",
        flag="--flatten",
    )
    steps: bool = option(
        False,
        "openinference, langfuse: read every trace as its steps, even one with at most one "
        "retrieval and no tool call, which is otherwise read as the row it always was.",
        flag="--steps",
    )
    # rows from somewhere else than a file (the Python API)
    source: RowSource | None = option(None, "", cli=False)


@dataclass(frozen=True)
class OutputOptions:
    """What the run writes (committed together, only when the run succeeds)."""

    out: Path | None = option(DEFAULT_OUT, "Where to write the report JSON.", cli_type=Path)
    markdown: Path | None = option(None, "Also write a Markdown summary (PR comment).")
    html: Path | None = option(None, "Also write a self-contained HTML report.")
    rows_out: Path | None = option(None, "Stream per-row results to this JSONL, in input order, as rows complete.")  # fmt: skip
    max_report_rows: int | None = option(10_000, "Above this many rows the report keeps aggregates only (use --rows-out).", cli_type=int, min=0)  # fmt: skip
    run_record: Path | None = option(None, "Also write run timings (not part of the deterministic report).")  # fmt: skip
    # False: --rows-out is a shard's scratch file its parent reads back whole (RowsWriter)
    flush_rows: bool = option(True, "", cli=False)


@dataclass(frozen=True)
class JevOptions:
    """Who answers the Jev questions, and the request size limits."""

    provider: str = option("mock", "Who answers the Jev questions: 'mock' (the rows' mock blocks, offline; word overlap for a row without one, a stand-in) or 'jev' (the live API, through the reply cache).", choices=PROVIDERS)  # fmt: skip
    model: str | None = option(
        None,
        "Model to request: jev-latest (default for jev), jev-preview or a pinned "
        "release such as jev-1.13.0.",
        env="TYPESAFE_DEFAULT_MODEL",
    )
    base_url: str = option(DEFAULT_BASE_URL, "Jev API base URL.", env="TYPESAFE_BASE_URL")
    allow_insecure_http: bool = option(
        False,
        "Send the API keys over plain http:// to a host that is not loopback "
        "(refused otherwise: the key would travel unencrypted).",
        flag="--allow-insecure-http",
    )
    api_key: str | None = option(
        None,
        "Jev API key (prefer the environment variable; never written anywhere).",
        env="TYPESAFE_API_KEY",
        show_default=False,
        secret=True,
    )
    max_request_tokens: int = option(MAX_REQUEST_TOKENS, "Estimated input tokens per request above which it is not sent.", min=1)  # fmt: skip
    max_state_question_tokens: int = option(MAX_STATE_QUESTION_TOKENS, "The same for the state plus the longest question.", min=1)  # fmt: skip
    max_response_bytes: int = option(DEFAULT_MAX_RESPONSE_BYTES, "Largest reply body, once decoded; a larger one fails the row.", min=1)  # fmt: skip
    keep_alive: bool = option(True, "Reuse connections between requests; --no-keep-alive opens one per request, so no reply a server sends late can land on another request.")  # fmt: skip

    @property
    def request_limits(self) -> RequestLimits:
        """The size limits a request is checked against before it is sent (and by estimate)."""
        return RequestLimits(self.max_request_tokens, self.max_state_question_tokens)


@dataclass(frozen=True)
class CacheOptions:
    """The reply cache and how the run uses it."""

    cache_dir: Path = option(DEFAULT_CACHE, "Content-addressed reply cache directory.")
    offline: bool = option(False, "Answer from the cache only; a miss fails the row (cache-miss).", flag="--offline")  # fmt: skip
    refresh: bool = option(False, "Ignore cached replies, fetch again and overwrite them.", flag="--refresh")  # fmt: skip
    no_cache: bool = option(False, "Neither read nor write the cache.", flag="--no-cache")

    @property
    def mode(self) -> CacheMode:
        """use, offline, refresh or off (ConfigError when two are asked for)."""
        chosen = [name for name, on in (("--offline", self.offline), ("--refresh", self.refresh),
                                        ("--no-cache", self.no_cache)) if on]  # fmt: skip
        if len(chosen) > 1:
            raise ConfigError(f"{' and '.join(chosen)} cannot be used together")
        if self.offline:
            return "offline"
        return "refresh" if self.refresh else "off" if self.no_cache else "use"


@dataclass(frozen=True)
class RetryPolicy:
    """How long an attempt and a row may take, and how often a call is retried."""

    timeout: float = option(30.0, "Seconds per HTTP attempt, the whole reply included.", min=0.001)  # fmt: skip
    row_deadline: float = option(300.0, "Seconds per row, all attempts and waits included.", min=0.001)  # fmt: skip
    max_retries: int = option(4, "Retries after the first attempt (408/429/5xx/network).", min=0)  # fmt: skip
    backoff_initial_s: float = option(0.5, "", cli=False)
    backoff_max_s: float = option(5.0, "", cli=False)


@dataclass(frozen=True)
class RateControl:
    """How many calls are in flight, and how fast they may be sent."""

    concurrency: int = option(32, "Maximum calls in flight at once.", min=1)
    max_rps: float | None = option(None, "Ceiling on requests per second.", min=0.001)
    max_tokens_per_s: float | None = option(None, "Ceiling on input tokens per second (reserved by estimate).", min=1)  # fmt: skip
    adaptive: bool = option(True, "Halve concurrency on 429/529, grow back slowly on success.")


@dataclass(frozen=True)
class RunLimits:
    """When a run stops early: the cost limit (``--max-cost``) and the error budget
    (``--max-error-rate`` after ``--error-budget-rows``)."""

    max_error_rate: float | None = option(None, "Abort (exit 4) once more than this share of rows failed.", min=0.0, max=1.0)  # fmt: skip
    error_budget_rows: int = option(20, "Rows done before --max-error-rate is enforced.", min=1)
    max_cost: float | None = option(
        None,
        "Never spend more than this (USD, pricing snapshot): stop sending, write an "
        "incomplete report, exit 5; rerun with more to resume from the cache.",
        min=0.0,
    )
    # ``ragbatch watch --max-cost-per-hour``: a rolling cap (run/_budget.py); a run has none
    max_cost_per_hour: float | None = option(None, "", cli=False)


@dataclass(frozen=True)
class PolicyOptions:
    """How judgments become verdicts, and how usage is priced."""

    fail_threshold: float | None = option(None, "P(true) at or below this is a confident 'no' (default 0.2).", show_default=False)  # fmt: skip
    pass_threshold: float | None = option(None, "P(true) at or above this is a confident 'yes' (default 0.8).", show_default=False)  # fmt: skip
    routing: str | None = option(
        None,
        "How the precedence is walked: 'showcase' (default; the first rule that "
        "fires wins) or 'guarded' (automatic only when every earlier rule is confidently "
        "ruled out; what a risk guarantee needs). A --policy file brings its own.",
        show_default=False,
        choices=ROUTINGS,
    )
    pricing: Path = option(DEFAULT_PRICING, "Versioned pricing snapshot (JSON) used to price usage.", show_default=f"bundled {PRICING_NAME}")  # fmt: skip
    policy: Path | None = option(None, "Calibrated policy file (ragbatch calibrate): its thresholds win.")  # fmt: skip

    @property
    def thresholds(self) -> Thresholds:
        """The thresholds and routing the flags give (a --policy file's replace them)."""
        default = Thresholds()
        fail_at = default.fail if self.fail_threshold is None else self.fail_threshold
        pass_at = default.pass_ if self.pass_threshold is None else self.pass_threshold
        return Thresholds(fail_at, pass_at, routing=routing_of(self.routing))


@dataclass(frozen=True)
class JudgeOptions:
    """The fallback judge (and the LLM claim extractor's endpoint)."""

    baseline: str = option("recorded", "Fallback judge: 'recorded' (the rows' baseline verdicts), 'lexical' (a deterministic overlap check, offline) or 'llm' (an OpenAI-compatible judge).", choices=BASELINES)  # fmt: skip
    judge_base_url: str = option("https://api.openai.com", "LLM judge base URL.", env="RAGBATCH_JUDGE_BASE_URL")  # fmt: skip
    judge_model: str = option("gpt-4o-mini", "LLM judge model.", env="RAGBATCH_JUDGE_MODEL")
    judge_api_key: str | None = option(
        None, "LLM judge key.", env="RAGBATCH_JUDGE_API_KEY", show_default=False, secret=True
    )


@dataclass(frozen=True)
class ClaimOptions:
    """Claim mode (advanced groundedness)."""

    groundedness: str = option("basic", "'basic' judges the answer as a whole; 'claims' judges each claim against its evidence and fails the answer on one bad material claim.", choices=GROUNDEDNESS)  # fmt: skip
    claim_evidence: str = option("cited", "Claim mode evidence: 'cited' (only the passages a claim cites) or 'context' (every retrieved passage).", choices=CLAIM_EVIDENCE)  # fmt: skip
    claim_extractor: str = option("provided", "Claim mode: 'provided' (the rows' claims), 'sentences' (one per sentence) or 'llm' (an OpenAI-compatible model at --judge-base-url splits the answer; key in RAGBATCH_JUDGE_API_KEY).", choices=CLAIM_EXTRACTORS)  # fmt: skip


@dataclass(frozen=True)
class MetricOptions:
    """What the report's metrics are cut by."""

    slice_by: list[str] | None = option(None, "Metadata field to slice metrics by (repeatable; dotted for nested).")  # fmt: skip
    k: list[int] | None = option(None, "Cut-offs for retrieval ranking metrics (repeatable).", flag="--k", min=1)  # fmt: skip

    @property
    def ks(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.k))) if self.k else DEFAULT_KS


@dataclass(frozen=True)
class ScaleOptions:
    """Splitting a run: one shard of it here, several processes on this machine, or the tasks
    of a Dask cluster."""

    shard: str | None = option(None, "Evaluate only shard K/N (rows by hash of id); needs --partial-out.")  # fmt: skip
    partial_out: Path | None = option(None, "Where a shard writes its partial result.")
    workers: int = option(1, "Processes on this machine (shards merged at the end).", min=1)
    dask: str | None = option(None, "Run on a Dask cluster: tcp://HOST:8786, or local:N worker processes.")  # fmt: skip

    @property
    def shard_of(self) -> tuple[int, int] | None:
        """``--shard K/N`` as (K, N)."""
        return parse_shard(self.shard) if self.shard else None


@dataclass(frozen=True)
class AuditOptions:
    """The judge audit's probes (docs/semantics.md §9) and the order the contexts are sent in."""

    probe: str | None = option(None, "Judge-audit probes to run on a stratified sample of the rows, comma-separated: order, length, repeat, complement (any subset); the report gets a judgeAudit section.", show_default=False)  # fmt: skip
    probe_rate: float = option(DEFAULT_PROBE_RATE, f"Share of the rows the probes sample (at least {MIN_PROBE_ROWS} rows when the run has them).", min=0.0, max=1.0)  # fmt: skip
    max_flip_rate: float = option(DEFAULT_MAX_FLIP_RATE, "A probe's flip rate whose 95 % interval lies wholly above this is flagged.", min=0.0, max=1.0)  # fmt: skip
    context_order: str = option("as-is", "Order the retrieved contexts are sent in: 'as-is', 'reversed', or 'both' (asks twice, averages P(true): twice the cost).", choices=CONTEXT_ORDERS)  # fmt: skip

    @property
    def probes(self) -> tuple[Probe, ...]:
        """``--probe`` as probe names, in :data:`~ragbatch.core.PROBES` order."""
        if not self.probe:
            return ()
        asked = [name.strip() for name in self.probe.split(",") if name.strip()]
        unknown = [name for name in asked if name not in PROBES]
        if unknown:
            raise ConfigError(
                f"--probe: unknown probe(s) {', '.join(unknown)}; use any of {', '.join(PROBES)}"
            )
        return tuple(p for p in PROBES if p in asked)


@dataclass(frozen=True)
class DisplayOptions:
    """What the terminal shows while the run goes."""

    progress_interval: float = option(5.0, "Seconds between plain progress lines (non-terminal).", min=0.0)  # fmt: skip
    quiet: bool = option(False, "Print nothing but errors.", flag="--quiet")

    @property
    def progress(self) -> str:
        return "none" if self.quiet else "auto"


GROUPS: dict[str, type[Any]] = {
    "input": InputOptions, "output": OutputOptions, "jev": JevOptions, "cache": CacheOptions,
    "retry": RetryPolicy, "rate": RateControl, "limits": RunLimits, "policy": PolicyOptions,
    "judge": JudgeOptions, "claims": ClaimOptions, "metrics": MetricOptions,
    "scale": ScaleOptions, "audit": AuditOptions, "display": DisplayOptions,
}  # fmt: skip
# Each setting's group, by name (names are unique across groups).
GROUP_OF: dict[str, str] = {f.name: g for g, cls in GROUPS.items() for f in fields(cls)}


@dataclass(frozen=True)
class RunOptions:
    """One run's settings, a group each; build it by option name with :meth:`of`."""

    input: InputOptions = field(default_factory=InputOptions)
    output: OutputOptions = field(default_factory=OutputOptions)
    jev: JevOptions = field(default_factory=JevOptions)
    cache: CacheOptions = field(default_factory=CacheOptions)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    rate: RateControl = field(default_factory=RateControl)
    limits: RunLimits = field(default_factory=RunLimits)
    policy: PolicyOptions = field(default_factory=PolicyOptions)
    judge: JudgeOptions = field(default_factory=JudgeOptions)
    claims: ClaimOptions = field(default_factory=ClaimOptions)
    metrics: MetricOptions = field(default_factory=MetricOptions)
    scale: ScaleOptions = field(default_factory=ScaleOptions)
    audit: AuditOptions = field(default_factory=AuditOptions)
    display: DisplayOptions = field(default_factory=DisplayOptions)

    @classmethod
    def of(cls, **names: Any) -> RunOptions:
        """Options by their ``ragbatch run`` names (snake_case), the rest at their defaults."""
        return cls().replace(**names)

    def replace(self, **names: Any) -> RunOptions:
        """A copy with the named settings changed (a ConfigError names an unknown one)."""
        unknown = sorted(set(names) - set(GROUP_OF))
        if unknown:
            raise ConfigError(f"unknown option(s) {', '.join(unknown)}")
        changes: dict[str, dict[str, Any]] = {}
        for name, value in names.items():
            changes.setdefault(GROUP_OF[name], {})[name] = value
        groups = {g: dataclasses.replace(getattr(self, g), **c) for g, c in changes.items()}
        return dataclasses.replace(self, **groups)

    def __repr__(self) -> str:  # keys never appear, not even in a traceback
        return "RunOptions(...)"


def option_fields() -> list[dataclasses.Field[Any]]:
    """Every setting's field, group by group."""
    return [f for cls in GROUPS.values() for f in fields(cls)]


def spec_of(f: dataclasses.Field[Any]) -> Option:
    """How the setting ``f`` shows on the command line."""
    spec: Option = f.metadata["option"]
    return spec


# The order of ``ragbatch run --help`` (kept as it was); options not named here come after.
# fmt: off
HELP_ORDER = [
    "dataset", "out", "format", "mapping", "outputs", "provider", "model", "base_url",
    "allow_insecure_http", "api_key", "cache_dir", "offline", "refresh", "no_cache", "timeout",
    "row_deadline", "max_retries", "max_rps", "max_tokens_per_s", "max_request_tokens",
    "max_state_question_tokens", "max_response_bytes", "keep_alive", "adaptive", "max_error_rate", "error_budget_rows", "concurrency",
    "fail_threshold", "pass_threshold", "routing", "pricing", "baseline", "judge_base_url",
    "judge_model", "judge_api_key", "policy", "markdown", "html", "ignore_unknown_fields",
    "retrieval_tools", "flatten", "steps",
    "groundedness", "claim_evidence", "claim_extractor", "slice_by", "k", "rows_out",
    "max_report_rows", "progress_interval", "max_cost", "shard", "partial_out", "workers",
    "run_record", "quiet", "dask",
]
# fmt: on


def cli_fields() -> list[dataclasses.Field[Any]]:
    """The settings ``ragbatch run`` and ``ragbatch.evaluate`` take, in ``--help`` order."""
    shown = {f.name: f for f in option_fields() if spec_of(f).cli}
    order = [n for n in HELP_ORDER if n in shown] + [n for n in shown if n not in HELP_ORDER]
    return [shown[name] for name in order]


OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in cli_fields())
DEFAULTS: dict[str, Any] = {f.name: f.default for f in cli_fields()}
# Options the CLI also reads from the environment (the API does the same when not given).
ENVIRONMENT: dict[str, str] = {f.name: spec_of(f).env for f in cli_fields() if spec_of(f).env}  # type: ignore[misc]
PATH_OPTIONS = frozenset(f.name for f in cli_fields() if "Path" in str(f.type))
