"""The Python API's warnings: what ``ragbatch run`` prints as ``warning: ...`` reaches API users
as a :class:`ragbatch.RagbatchWarning` at their own line, and stays in ``Evaluation.warnings``."""

from __future__ import annotations

import warnings
from pathlib import Path

import anyio
import orjson
import pytest

import ragbatch

ROOT = Path(__file__).resolve().parents[1]
ROWS = [
    orjson.loads(line) for line in (ROOT / "datasets/rag-fixture.jsonl").read_bytes().splitlines()
]
ALIAS = (
    "model 'jev-latest' is an alias: the release behind it can change between runs, so a cache "
    "keyed on it can mix releases; pin a release (e.g. --model jev-1.13.0) for reproducible "
    "backfills"
)
CLAIMS = (
    "--claim-extractor sentences does not parse citations, so with --claim-evidence cited every "
    "claim is a missing citation; use --claim-evidence context (every retrieved passage) or "
    "claims with citations (--claim-extractor provided)"
)


def replay(tmp_path: Path) -> dict[str, object]:
    """An --offline replay of an empty cache under an alias (nothing is sent), in claim mode
    with sentences cited: two warnings."""
    return {
        "provider": "jev", "model": "jev-latest", "offline": True, "cache_dir": tmp_path / "c",
        "groundedness": "claims", "claim_extractor": "sentences", "claim_evidence": "cited",
    }  # fmt: skip


def test_evaluate_warns_at_the_callers_line_and_keeps_the_warnings(tmp_path: Path) -> None:
    with pytest.warns(ragbatch.RagbatchWarning) as caught:
        result = ragbatch.evaluate(ROWS, **replay(tmp_path))
    assert [str(w.message) for w in caught] == [CLAIMS, ALIAS]
    assert {w.filename for w in caught} == {__file__}  # the line that called evaluate()
    assert result.warnings == (CLAIMS, ALIAS)
    assert result.report.dataset.rows == len(ROWS)


def test_the_warnings_filter_by_their_category(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", ragbatch.RagbatchWarning)
        result = ragbatch.evaluate(ROWS, **replay(tmp_path))
    assert result.warnings == (CLAIMS, ALIAS)  # silenced, still kept
    with warnings.catch_warnings():
        warnings.simplefilter("error", ragbatch.RagbatchWarning)
        with pytest.raises(ragbatch.RagbatchWarning, match="--claim-extractor sentences"):
            ragbatch.evaluate(ROWS, **replay(tmp_path))


def test_evaluate_async_warns_too(tmp_path: Path) -> None:
    async def main() -> ragbatch._api.Evaluation:
        return await ragbatch.evaluate_async(ROWS, **replay(tmp_path))

    with pytest.warns(ragbatch.RagbatchWarning) as caught:
        result = anyio.run(main)
    assert [str(w.message) for w in caught] == [CLAIMS, ALIAS]
    assert {w.filename for w in caught} == {__file__}
    assert result.warnings == (CLAIMS, ALIAS)


def test_a_run_without_warnings_keeps_none() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ragbatch.RagbatchWarning)
        result = ragbatch.evaluate(ROWS, pricing=ROOT / "pricing/typesafe-2026-12.json")
    assert result.warnings == ()
