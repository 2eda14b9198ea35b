"""The human labels file: JSONL lines as ``audit-sample`` wrote them and people filled in.

Reads the file only; what the lines mean is :mod:`ragbatch.compare._inference`'s job. Every
error names the file (and the line), exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ragbatch.core import ConfigError


def read_labels(path: Path) -> list[dict[str, Any]]:
    """The objects of a labels file, blank lines skipped; ConfigError naming file and line."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read labels {path}: {exc.strerror or exc}") from None
    lines = []
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{number}: not valid JSON ({exc})") from None
        if not isinstance(value, dict):
            raise ConfigError(f"{path}:{number}: expected a JSON object per line")
        lines.append(value)
    return lines
