"""What the commands share: one ``error:`` line for a RagbatchError, reading a JSON file or a
report, refusing an output path that cannot be written (file I/O; no evaluation logic).

A leaf of ``ragbatch.cli``: every command module imports it, it imports none of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import typer

from ragbatch._files import check_output
from ragbatch.core import ConfigError, RagbatchError


def fail(error: RagbatchError) -> typer.Exit:
    """Print ``error: <message>`` on stderr; the Exit (its documented code) to raise."""
    typer.echo(f"error: {error}", err=True)
    return typer.Exit(error.exit_code)


def read_json(path: Path, what: str) -> Any:
    """A JSON file, or a ConfigError naming it (exit 2)."""
    try:
        return orjson.loads(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None


def read_report(path: Path) -> dict[str, Any]:
    """A ragbatch report as JSON data, or a ConfigError saying why it is not one."""
    data = read_json(path, "report")
    if not isinstance(data, dict) or "modes" not in data or "rows" not in data:
        raise ConfigError(f"{path}: not a ragbatch report (no 'modes' and 'rows')")
    return data


def check_output_paths(*outputs: tuple[str, Path | None]) -> None:
    """Refuse an output path (``(option, path)``; None: not asked for) that cannot be written,
    before reading or computing anything. A run's own outputs are checked by the run."""
    for option, path in outputs:
        if path is not None:
            check_output(path, option)


__all__ = ["check_output_paths", "fail", "read_json", "read_report"]
