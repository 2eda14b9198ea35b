"""Wire conformance against a third party: jevcompat's spec, conformance suite and mock server.

``jevcompat mock`` (a reference Jev server, not ours) runs as a real process on a random
loopback port, clean and with each fault that breaks a §4 (response) requirement: a harmless
deviation must still be judged, a meaning-changing one must fail the row and never give a
verdict. ``jevcompat test`` checks ``ragbatch.testing``'s loopback server against the spec.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ragbatch.run._job import run_job
from ragbatch.run._options import RunOptions
from ragbatch.testing import JevServer

ROOT = Path(__file__).resolve().parents[2]
KEY = "test-key"
JEVCOMPAT = [sys.executable, "-m", "jevcompat.cli"]
RAG, CLAIMS = ROOT / "datasets" / "rag-fixture.jsonl", ROOT / "datasets" / "claims-fixture.jsonl"

# fault -> (judged, failed) rows of the rag fixture (48 rows, noul questions) and, for the
# faults in choice and confidence answers, of the claims fixture in claims mode (32 rows, noul
# and choice questions). ragbatch reads a choice from its probabilities, never from ``choice``
# or ``confidence``, and asks no score questions: those faults change nothing it reads.
CLEAN = (48, 0), (32, 0)
EXPECTED: dict[str, tuple[tuple[int, int], tuple[int, int] | None]] = {
    "no-usage": ((0, 48), None),
    "float-usage": ((0, 48), None),
    "extra-answer": ((0, 48), None),
    "boolean-type": ((0, 48), None),
    "nan": ((48, 0), None),  # NaN in an x_ field nobody reads
    "unprefixed-extra": ((48, 0), None),
    "noul-range": ((0, 48), None),
    "choice-no-confidence": ((48, 0), (1, 31)),  # clm-032 has no claim to send
    "choice-key-case": ((48, 0), (32, 0)),  # the claim options are lower case already
    "choice-sum": ((48, 0), (1, 31)),
    "choice-second": ((48, 0), (32, 0)),
    "score-no-legend": ((48, 0), None),
    "legend-1-based": ((48, 0), None),
    "score-keys-1-based": ((48, 0), None),
    "score-sum": ((48, 0), None),
    "score-argmax": ((48, 0), None),
    "confidence-over": ((48, 0), (1, 31)),
    "confidence-margin": ((48, 0), (32, 0)),
}


def jevcompat(*args: str) -> str:
    done = subprocess.run(
        [*JEVCOMPAT, *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr  # test: 0 is conformant
    return done.stdout


def response_faults() -> list[str]:
    """Faults of ``jevcompat mock --list-faults`` that break a §4 (response) requirement."""
    section, in_response = "", set()
    for line in jevcompat("spec").splitlines():
        if line.startswith("§"):
            section = line.split()[0]
        elif line.strip() and section.startswith("§4"):
            in_response.add(line.split()[1])
    faults = [line.split() for line in jevcompat("mock", "--list-faults").splitlines()]
    return [words[0] for words in faults if words[2] in in_response]


@pytest.fixture(scope="module")
def family() -> list[str]:
    return response_faults()


def test_every_response_fault_has_an_expected_outcome(family: list[str]) -> None:
    assert sorted(family) == sorted(EXPECTED)


def start_mock(*faults: str) -> tuple[subprocess.Popen[str], str]:
    args = [*JEVCOMPAT, "mock", "--port", "0", "--key", KEY]
    for fault in faults:
        args += ["--fault", fault]
    process = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    banner = process.stderr.readline()
    found = re.search(r"http://127\.0\.0\.1:\d+", banner)
    if found is None:
        process.kill()
        raise AssertionError(f"jevcompat mock did not start: {banner}")
    return process, found.group(0)


@pytest.fixture
def mock() -> Iterator[Callable[..., str]]:
    started: list[subprocess.Popen[str]] = []

    def start(*faults: str) -> str:
        process, url = start_mock(*faults)
        started.append(process)
        return url

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=10)


def judged_and_failed(url: str, dataset: Path, tmp_path: Path, **changes: Any) -> tuple[int, int]:
    config = RunOptions.of(
        quiet=True,
        provider="jev",
        base_url=url,
        api_key=KEY,
        model="jev-latest",
        cache_dir=tmp_path / f"cache-{dataset.stem}",
        dataset=dataset,
        out=tmp_path / f"{dataset.stem}.json",
        pricing=ROOT / "pricing" / "typesafe-2026-12.json",
        concurrency=2,  # the mock answers 8 at once 3-4 times slower than 2 (30 s vs 9 s)
        max_retries=0,
        **changes,
    )
    rows = orjson.loads(run_job(config).report_bytes)["rows"]
    status = Counter(row["status"] for row in rows)
    for row in rows:
        if row["status"] == "failed":  # a failed call, never a verdict
            assert row["error"]["kind"] == "malformed-response", row["error"]
            assert "diagnosis" not in row and row["route"] == "failed"
    return status["ok"], status["failed"]


@pytest.mark.parametrize("fault", ["", *EXPECTED])
def test_the_fixture_against_jevcompat_mock(
    mock: Callable[..., str], tmp_path: Path, fault: str
) -> None:
    url = mock(*([fault] if fault else []))
    rag, claims = EXPECTED[fault] if fault else CLEAN
    assert judged_and_failed(url, RAG, tmp_path) == rag
    if claims is not None:
        assert judged_and_failed(url, CLAIMS, tmp_path, groundedness="claims") == claims


def test_a_422_from_jevcompat_mock_says_which_field(
    mock: Callable[..., str], tmp_path: Path
) -> None:
    # strict-ids: 422 for question ids outside [A-Za-z0-9_], FastAPI-style with a loc path
    url = mock("strict-ids")
    config = RunOptions.of(
        quiet=True,
        provider="jev",
        base_url=url,
        api_key=KEY,
        model="jev-latest",
        cache_dir=tmp_path / "cache",
        dataset=RAG,
        out=tmp_path / "r.json",
        pricing=ROOT / "pricing" / "typesafe-2026-12.json",
    )
    rows = orjson.loads(run_job(config).report_bytes)["rows"]
    messages = [row["error"]["message"] for row in rows if row["status"] == "failed"]
    assert messages
    expected = "HTTP 422: questions.chunkRelevance:0: Question id must match [A-Za-z0-9_]+"
    assert all(message.startswith(expected) for message in messages), messages[0]


# -- jevcompat test against ragbatch.testing's loopback server -------------------------------
def conformance(tmp_path: Path, api_key: str | None) -> dict[str, Any]:
    out = tmp_path / f"jevcompat-{api_key is not None}.json"
    with JevServer(api_key=api_key) as server:
        key = ["--key", api_key] if api_key else []
        jevcompat("test", server.base_url, *key, "--json", str(out), "--timeout", "30")
    report: dict[str, Any] = orjson.loads(out.read_bytes())
    return report


def failures(report: dict[str, Any], level: str) -> list[str]:
    return [r["id"] for r in report["results"] if r["level"] == level and r["status"] == "fail"]


def test_jevcompat_test_passes_every_must(tmp_path: Path) -> None:
    keyed, keyless = conformance(tmp_path, KEY), conformance(tmp_path, None)
    assert failures(keyed, "MUST") == [] and failures(keyless, "MUST") == []
    skipped = {r["id"] for r in keyed["results"] if r["level"] == "MUST" and r["status"] != "pass"}
    assert skipped == {"auth.ignored-when-off"}  # exercised by the keyless run
    assert {r["id"]: r["status"] for r in keyless["results"]}["auth.ignored-when-off"] == "pass"
    assert failures(keyed, "SHOULD") == []
    must, should = keyed["summary"]["MUST"], keyed["summary"]["SHOULD"]
    guide = (ROOT / "docs" / "guides" / "live-client.md").read_text(encoding="utf-8")
    assert (
        f"MUST {must['passed']}/{must['tested']} and SHOULD {should['passed']}/{should['tested']}"
        in guide
    )
