"""``ragbatch probe``: the judge audit's probes on an existing report (no logic here:
:mod:`ragbatch.run._probe_report` does the work; docs/semantics.md §9)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ragbatch.cli._common import check_output_paths, fail
from ragbatch.cli._run_command import SOURCE, with_options
from ragbatch.core import PROBES, RagbatchError
from ragbatch.run import RunOptions

# What the probe calls need: the provider chain a run builds, and the audit's settings.
PROVIDER = ("provider", "model", "base_url", "allow_insecure_http", "api_key", "cache_dir",
            "offline", "refresh", "no_cache", "timeout", "max_retries", "max_rps",
            "max_tokens_per_s", "concurrency", "max_cost", "pricing", "max_request_tokens",
            "max_state_question_tokens", "probe", "probe_rate", "max_flip_rate", "quiet")  # fmt: skip


@with_options(*SOURCE, *PROVIDER, defaults={"probe": ",".join(PROBES)}, as_options={"dataset"})
def probe_command(
    report: Annotated[Path, typer.Argument(help="The judged report to audit.")],
    out: Annotated[
        Path | None,
        typer.Option(
            help="Where to write the report with its judgeAudit section (default: REPORT)."
        ),
    ] = None,
    **options: Any,
) -> None:
    """Audit the judge on a report's rows: order, length, repeat and complement probes.

    Re-asks a stratified sample of the report's rows (read again from --dataset, the dataset
    the report was run on) in ways the answer should not depend on, through the same client,
    cache and budget as a run, and writes the report with its judgeAudit section.
    """
    from ragbatch.run import probe_report

    target = report if out is None else out
    try:
        check_output_paths(("--out", target))
        result = probe_report(RunOptions.of(**options), report, target)
    except RagbatchError as error:
        raise fail(error) from None
    audit = result.judge_audit
    assert audit is not None
    flagged = [f"{e.probe}/{e.judgment}" for e in audit.probes if e.flagged]
    typer.echo(
        f"probed {audit.sampled_rows} of {audit.eligible_rows} rows; "
        f"flagged: {', '.join(flagged) or 'none'}; wrote {target}"
    )
