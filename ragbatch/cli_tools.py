"""CLI commands that work on finished reports: gate, diff (file I/O; no evaluation logic).

Registered on the main app by :func:`register`. Every RagbatchError becomes one ``error:``
line with its exit code, as for ``run``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from ragbatch.compare import (
    diff_markdown,
    diff_reports,
    gate,
    gate_junit,
    gate_markdown,
    parse_rules,
)
from ragbatch.errors import ConfigError, RagbatchError
from ragbatch.job import write_bytes


def read_json(path: Path, what: str) -> Any:
    """A JSON file, or a ConfigError naming it (exit 2)."""
    try:
        return orjson.loads(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None


def read_report(path: Path) -> dict[str, Any]:
    data = read_json(path, "report")
    if not isinstance(data, dict) or "modes" not in data or "rows" not in data:
        raise ConfigError(f"{path}: not a ragbatch report (no 'modes' and 'rows')")
    return data


def _fail(error: RagbatchError) -> typer.Exit:
    typer.echo(f"error: {error}", err=True)
    return typer.Exit(error.exit_code)


def gate_command(
    current: Annotated[Path, typer.Argument(help="Report of the change under test.")],
    baseline: Annotated[Path, typer.Option(help="Report of the baseline (e.g. main).")],
    rules: Annotated[
        Path | None,
        typer.Option(help="JSON list of extra rules: {path, maxDrop, direction}."),
    ] = None,
    no_default_rules: Annotated[
        bool, typer.Option("--no-default-rules", help="Use only the rules file.")
    ] = False,
    alpha: Annotated[float, typer.Option(help="Significance level of the paired test.")] = 0.05,
    markdown: Annotated[
        Path | None, typer.Option(help="Also write the Markdown summary here.")
    ] = None,
    junit: Annotated[Path | None, typer.Option(help="Also write JUnit XML here.")] = None,
) -> None:
    """Fail (exit 1) when CURRENT regressed against --baseline beyond the rules.

    Default rules (seed 004): Recall@10 drop > 0.02, groundedness accuracy drop > 0.02,
    claim answer-level accuracy (citation quality) drop > 0.05. A drop only counts when an
    exact paired test on per-row outcomes (McNemar / sign test) says it is not noise.
    Exit 0 pass, 1 regression, 2 usage error.
    """
    try:
        extra = parse_rules(read_json(rules, "rules file")) if rules else []
        result = gate(
            read_report(current),
            read_report(baseline),
            extra,
            defaults=not no_default_rules,
            alpha=alpha,
        )
    except RagbatchError as error:
        raise _fail(error) from None
    text = gate_markdown(result)
    typer.echo(text)
    if markdown is not None:
        write_bytes(markdown, text.encode())
    if junit is not None:
        write_bytes(junit, gate_junit(result).encode())
    raise typer.Exit(result.exit_code)


def diff_command(
    a: Annotated[Path, typer.Argument(help="The earlier report.")],
    b: Annotated[Path, typer.Argument(help="The later report.")],
    markdown: Annotated[Path | None, typer.Option(help="Also write the Markdown here.")] = None,
) -> None:
    """Rows whose diagnosis flipped, metric deltas, model release and pricing changes."""
    try:
        result = diff_reports(read_report(a), read_report(b))
    except RagbatchError as error:
        raise _fail(error) from None
    text = diff_markdown(result, a.name, b.name)
    typer.echo(text)
    if markdown is not None:
        write_bytes(markdown, text.encode())


def register(app: typer.Typer) -> None:
    app.command("gate")(gate_command)
    app.command("diff")(diff_command)
