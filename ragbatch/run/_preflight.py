"""Checks of a run's options against its data and its output paths, made before the first row
is sent (reads the dataset only as far as it must).

- ``--slice-by FIELD`` when no row's metadata has FIELD: an error naming it and the fields the
  rows do have (one ``(none)`` slice would look like a result).
- ``--claim-extractor sentences`` with ``--claim-evidence cited``: a warning, since sentences
  carry no citations and every claim would be a missing citation.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from ragbatch._files import check_output
from ragbatch.core import ConfigError
from ragbatch.data import open_dataset, scan_lines
from ragbatch.metrics import has_metadata_value, metadata_fields
from ragbatch.run._options import RunOptions

LISTED_FIELDS = 20  # fields named in the error, at most


def _metadata(o: RunOptions) -> Iterator[Mapping[str, Any] | None]:
    """Each row's metadata: a light scan of a JSONL file, the reader for other formats."""
    if o.input.format == "jsonl":
        try:
            with o.input.dataset.open("rb") as handle:
                for line in scan_lines(handle):
                    if line.strip():
                        data = orjson.loads(line.removeprefix(b"\xef\xbb\xbf"))
                        metadata = data.get("metadata") if isinstance(data, dict) else None
                        yield metadata if isinstance(metadata, dict) else None
        except (OSError, orjson.JSONDecodeError):
            return  # the reader reports it, with file and line
        return
    reader = open_dataset(
        o.input.dataset,
        o.input.format,
        mapping=o.input.mapping,
        outputs=o.input.outputs,
        ignore_unknown_fields=o.input.ignore_unknown_fields,
    )
    for row in reader:
        yield row.metadata


def check_slice_fields(o: RunOptions) -> None:
    """ConfigError (exit 2) when a ``--slice-by`` field has a value in no row; stops reading
    as soon as every field was seen."""
    if not o.metrics.slice_by or o.input.source is not None:
        return
    missing = dict.fromkeys(o.metrics.slice_by)
    seen: set[str] = set()
    for metadata in _metadata(o):
        seen |= metadata_fields(metadata)
        for field in [f for f in missing if has_metadata_value(metadata, f)]:
            del missing[field]
        if not missing:
            return
    names = sorted(seen)
    listed = ", ".join(names[:LISTED_FIELDS]) + (", …" if len(names) > LISTED_FIELDS else "")
    fields = ", ".join(missing)
    which = "this metadata field" if len(missing) == 1 else "these metadata fields"
    have = f"fields in the rows' metadata: {listed}" if names else "the rows carry no metadata"
    raise ConfigError(f"--slice-by {fields}: no row of {o.input.dataset} has {which}; {have}")


def option_warnings(o: RunOptions) -> list[str]:
    """Warnings about options that work but not as one would expect."""
    warnings = []
    claims = o.claims.groundedness == "claims"
    if claims and o.claims.claim_extractor == "sentences" and o.claims.claim_evidence == "cited":
        warnings.append(
            "--claim-extractor sentences does not parse citations, so with --claim-evidence "
            "cited every claim is a missing citation; use --claim-evidence context (every "
            "retrieved passage) or claims with citations (--claim-extractor provided)"
        )
    return warnings


def check_outputs(o: RunOptions) -> None:
    """Refuse, before anything is read or sent, an output that cannot be written (and --html
    without the html extra: a base install must not find out after the whole run)."""
    out = o.output
    first = ("--partial-out", o.scale.partial_out) if o.scale.shard else ("--out", out.out)
    for option, path in (first, ("--rows-out", out.rows_out), ("--run-record", out.run_record),
                         ("--markdown", out.markdown), ("--html", out.html)):  # fmt: skip
        if path is not None:
            check_output(path, option)
    if out.html is not None:
        from ragbatch.report import require_html_extra  # the HTML view: when asked for

        require_html_extra()
