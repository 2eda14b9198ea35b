"""``ragbatch watch``: judge a Phoenix project's traces as they arrive (no logic here:
:mod:`ragbatch.watch` does the work; docs/guides/continuous-evaluation.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ragbatch.cli._common import fail, read_report
from ragbatch.cli._run_command import with_options
from ragbatch.core import RagbatchError
from ragbatch.run import RunOptions

# What judging needs of a run's options: the provider chain, the fallback judge, the policy,
# claim mode, and how a trace's spans are read (never a dataset or an output file).
JUDGING = ("provider", "model", "base_url", "allow_insecure_http", "api_key",
           "max_request_tokens", "max_state_question_tokens", "max_response_bytes",
           "keep_alive", "cache_dir", "offline", "no_cache", "timeout", "row_deadline",
           "max_retries", "concurrency", "max_rps", "max_tokens_per_s", "adaptive", "max_cost",
           "fail_threshold", "pass_threshold", "routing", "pricing", "policy",
           "judge_base_url", "judge_model", "judge_api_key", "groundedness", "claim_evidence",
           "claim_extractor", "k", "context_order", "retrieval_tools", "flatten", "steps",
           "quiet")  # fmt: skip


def _say(quiet: bool) -> Any:
    def say(line: str) -> None:
        is_problem = line.startswith(("warning:", "alert:", "error:"))
        if is_problem or not quiet:
            typer.echo(line, err=is_problem)

    return say


def _opt(help: str, *flags: str, **how: Any) -> Any:
    return typer.Option(*flags, help=help, **how)


Phoenix = Annotated[
    str, _opt("The Phoenix server's base URL, e.g. http://127.0.0.1:6006 (without /v1).")
]
Project = Annotated[str, _opt("The Phoenix project whose traces to judge.")]
PhoenixKey = Annotated[
    str | None,
    _opt(
        "Phoenix's API key, when it has authentication on (sent only in the Authorization header).",
        envvar="PHOENIX_API_KEY",
        show_default=False,
    ),
]
Interval = Annotated[float, _opt("Seconds between polls of Phoenix.", min=0.05)]
Idle = Annotated[
    float,
    _opt(
        "A trace is complete once Phoenix lists a span that ended this many seconds after its "
        "last one, or nothing new came for this long.",
        min=0.0,
    ),
]
Since = Annotated[
    str | None,
    _opt(
        "Backfill from this time (ISO 8601; no offset = UTC); without it a new watcher starts "
        "at the newest span present.",
        show_default=False,
    ),
]
Until = Annotated[
    str | None,
    _opt("Only traces whose root span started before this time (ISO 8601; no offset = UTC).",
         show_default=False),
]  # fmt: skip
Once = Annotated[
    bool,
    _opt(
        "Judge every idle trace, store its annotations, write the windows that are complete, "
        "then exit 0 (for cron and CI).",
        "--once",
    ),
]
SampleRate = Annotated[
    float, _opt("Share of the traces to judge (by a hash of the trace id).", min=0.0, max=1.0)
]
PerHour = Annotated[
    float | None,
    _opt(
        "Never spend more than this in any hour (USD, pricing snapshot): traces wait in "
        "flight meanwhile.",
        min=0.0,
        show_default=False,
    ),
]
Every = Annotated[str, _opt("The rolling report's window of traffic: 3600, 90s, 15m, 1h, 1d.")]
ReportDir = Annotated[
    Path, _opt("Where the window reports go (<start>.json, .diff.md, .audit.jsonl).")
]
Baseline = Annotated[
    Path | None,
    _opt(
        "A report to compare each window with: the gate's rules and the drift flags raise an "
        "alert.",
        show_default=False,
    ),
]
AlertCommand = Annotated[
    str | None,
    _opt("A shell command run on an alert, with the alert as JSON on stdin.", show_default=False),
]
AuditRate = Annotated[
    float | None,
    _opt(
        "Share of each window's rows written for people to label (<start>.audit.jsonl, as "
        "ragbatch audit-sample writes).",
        min=0.0,
        max=1.0,
        show_default=False,
    ),
]
Batch = Annotated[int, _opt("Traces judged together.", min=1)]
RetryFor = Annotated[
    float,
    _opt("With --once: how long Phoenix may stay unreachable before giving up (exit 3).", min=0),
]
Name = Annotated[str, _opt("The annotations' name (as ragbatch export --name).")]
Fallback = Annotated[
    str,
    _opt(
        "The fallback judge of uncertain traces (run's --baseline): 'lexical' (an offline "
        "overlap check), 'llm' (an OpenAI-compatible judge at --judge-base-url) or 'recorded' "
        "(none: Jev's own verdict stands)."
    ),
]


@with_options(*JUDGING)
def watch_command(
    phoenix: Phoenix,
    project: Project = "default",
    phoenix_api_key: PhoenixKey = None,
    interval_s: Interval = 10.0,
    idle_s: Idle = 60.0,
    since: Since = None,
    until: Until = None,
    once: Once = False,
    sample_rate: SampleRate = 1.0,
    max_cost_per_hour: PerHour = None,
    report_every: Every = "1h",
    report_dir: ReportDir = Path("reports/watch"),
    baseline: Baseline = None,
    alert_command: AlertCommand = None,
    audit_rate: AuditRate = None,
    batch: Batch = 256,
    phoenix_retry_s: RetryFor = 300.0,
    name: Name = "ragbatch",
    fallback_judge: Fallback = "lexical",
    **options: Any,
) -> None:
    """Judge a Phoenix project's traces as they arrive; verdicts back as span annotations.

    Polls Phoenix's REST API for new spans (by id, so a late span is never missed), judges each
    trace once it is idle through the same client, cache, limiter and cost limits as run, and
    stores the verdicts as span annotations (the records export --format phoenix writes),
    exactly once across restarts: the cursor and the traces in flight live in the cache
    directory. Every --report-every it writes the window's report (and, with --baseline, a diff
    and an alert line). SIGTERM finishes the batch in hand and exits 0.
    """
    from ragbatch.watch import WatchSettings, WindowSettings, parse_duration, parse_instant, watch

    try:
        every = parse_duration(report_every, "--report-every")
        settings = WatchSettings(
            interval_s=interval_s, idle_s=idle_s, once=once, sample_rate=sample_rate,
            since=parse_instant(since, "--since") if since else None,
            until=parse_instant(until, "--until") if until else None,
            batch=batch, name=name, retry_for_s=phoenix_retry_s, retrieval_tools=tuple(options["retrieval_tools"] or ()),
            flatten=options["flatten"], steps=options["steps"],
        )  # fmt: skip
        windows = WindowSettings(
            report_dir, every, f"phoenix {phoenix.rstrip('/')} project {project}",
            read_report(baseline) if baseline is not None else None, baseline, alert_command,
            audit_rate,
        )  # fmt: skip
        run_options = RunOptions.of(
            out=None, max_cost_per_hour=max_cost_per_hour, baseline=fallback_judge, **options
        )
        code = watch(phoenix, project, phoenix_api_key, settings, windows, run_options,
                     _say(options["quiet"]))  # fmt: skip
    except RagbatchError as error:
        raise fail(error) from None
    raise typer.Exit(code)
