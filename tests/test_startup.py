"""A run imports only what it uses (start-up), and the front doors still export everything."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Loaded on first use: a JSONL run with the recorded baseline and no views never needs them.
NOT_AT_START = [
    "ragbatch.calibrate",
    "ragbatch.data._deepeval",
    "ragbatch.data._golden_yaml",
    "ragbatch.data._langfuse",
    "ragbatch.data._mapped_csv",
    "ragbatch.data._openinference",
    "ragbatch.data._ragas",
    "ragbatch.providers._llm_judge",
    "ragbatch.providers._lexical",
    "ragbatch.providers.cache._merge",
    "ragbatch.providers.cache._verify",
    "ragbatch.report._html",
    "ragbatch.report._markdown",
    "ragbatch.report._views",
    "ragbatch.run._dask",
    "ragbatch.run._estimate",
    "pysbd",
]
RUN = """
import sys
from ragbatch.cli import main
sys.argv = ["ragbatch", "run", {data!r}, "--out", {out!r}, "--no-cache", "--quiet"]
try:
    main()
except SystemExit as exc:
    assert exc.code == 0, exc.code
print("\\n".join(sorted(sys.modules)))
"""


def test_a_plain_run_does_not_import_what_it_does_not_use(tmp_path: Path) -> None:
    data = ROOT / "datasets/rag-fixture.jsonl"
    code = RUN.format(data=str(data), out=str(tmp_path / "report.json"))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert (tmp_path / "report.json").exists()
    assert "ragbatch.run._job" in loaded  # the run ran in this process
    assert sorted(loaded & set(NOT_AT_START)) == []


@pytest.mark.parametrize(
    "package", ["ragbatch", "ragbatch.data", "ragbatch.providers", "ragbatch.providers.cache",
                "ragbatch.report", "ragbatch.run"],
)  # fmt: skip
def test_every_name_of_a_front_door_resolves(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        module.missing  # noqa: B018
