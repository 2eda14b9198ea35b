"""Claim mode: offsets, extraction, evidence scope, request grouping, the veto, bad input."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.core._claims import (
    MISSING_CITATION,
    ClaimResult,
    ClaimSummary,
    ProvidedClaims,
    Scope,
    SentenceClaims,
    claim_groups,
    claim_result,
    summarize_claims,
)
from ragbatch.core._policy import Thresholds, Verdict
from ragbatch.core._provider import Call, Reply
from ragbatch.core._schema import Claim, Row
from ragbatch.providers._mock import MockProvider
from ragbatch.run._runner import ClaimConfig, judge_row

ROOT = Path(__file__).resolve().parent.parent
GOOD = {"supported": 0.95, "contradicted": 0.02, "insufficient": 0.02, "not_applicable": 0.01}
BAD = {"supported": 0.03, "contradicted": 0.9, "insufficient": 0.05, "not_applicable": 0.02}


def make_row(n_good: int = 10, bad: bool = True, **extra: Any) -> Row:
    contexts = [{"id": f"p{i}", "text": f"Fact number {i} is true."} for i in range(n_good + 1)]
    sentences = [f"Fact number {i} is true." for i in range(n_good)]
    claims = [{"id": f"k{i}", "text": s, "citations": [f"p{i}"]} for i, s in enumerate(sentences)]
    mock_claims = {f"k{i}": GOOD for i in range(n_good)}
    if bad:
        sentences.append("Fact number 99 is false.")
        claims.append(
            {"id": "bad", "text": "Fact number 99 is false.", "citations": [f"p{n_good}"]}
        )
        mock_claims["bad"] = BAD
    data: dict[str, Any] = {
        "id": "r1",
        "question": "Which facts hold?",
        "contexts": contexts,
        "answer": " ".join(sentences),
        "claims": claims,
        "mock": {
            "retrieval": {
                "chunkRelevance": {c["id"]: 0.9 for c in contexts},
                "sufficiency": 0.9,
                "conflict": 0.05,
            },
            "generation": {"relevance": 0.95, "groundedness": 0.95, "contradiction": 0.05},
            "claims": mock_claims,
        },
    }
    data.update(extra)
    return Row.model_validate_json(orjson.dumps(data))


class Recorder(MockProvider):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Call] = []

    async def fetch_answers(self, call: Call) -> Reply:
        self.calls.append(call)
        return await super().fetch_answers(call)


@dataclass
class Judged:
    verdict: Verdict
    summary: ClaimSummary
    claims: tuple[ClaimResult, ...]
    calls: list[Call]


def judge(row: Row, scope: Scope = "cited") -> Judged:
    provider = Recorder()
    outcome = anyio.run(
        judge_row, row, provider, Thresholds(), ClaimConfig(ProvidedClaims(), scope)
    )
    assert outcome.verdict and outcome.claim_summary and outcome.claims is not None
    return Judged(outcome.verdict, outcome.claim_summary, outcome.claims, provider.calls)


def test_offsets_round_trip_to_the_exact_answer_substring() -> None:
    row = make_row(5)
    assert row.claims is not None
    for claim in row.claims:
        assert claim.start is not None and claim.end is not None
        assert row.answer[claim.start : claim.end] == claim.text


def test_sentence_extractor_keeps_offsets_and_has_no_citations() -> None:
    row = make_row(3, bad=False)
    claims = SentenceClaims().extract(row)
    assert [c.text for c in claims] == [f"Fact number {i} is true." for i in range(3)]
    for claim in claims:
        assert row.answer[claim.start or 0 : claim.end] == claim.text and claim.citations == []


SPLIT_CASES = [
    (
        "The limit is at most 1.5 % (e.g. …). Dr. Smith agreed.",
        ["The limit is at most 1.5 % (e.g. …).", "Dr. Smith agreed."],
    ),
    ("Costs $3.50 each. See fig. 2 for details.", ["Costs $3.50 each.", "See fig. 2 for details."]),
    ("Yes. Yes.  Yes", ["Yes.", "Yes.", "Yes"]),
    ("  Lead space. Why?! \nNew line", ["Lead space.", "Why?!", "New line"]),
    ("", []),
]


@pytest.mark.parametrize(("answer", "expected"), SPLIT_CASES)
def test_sentence_extractor_splits_on_sentences_not_on_every_dot(
    answer: str, expected: list[str]
) -> None:
    row = Row.model_validate({"id": "r", "question": "q", "contexts": [], "answer": answer})
    claims = SentenceClaims().extract(row)
    assert [c.text for c in claims] == expected
    assert [c.id for c in claims] == [f"s{i}" for i in range(1, len(expected) + 1)]
    for claim in claims:
        assert answer[claim.start or 0 : claim.end] == claim.text


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(["Dr.", "Smith", "1.5", "%", "e.g.", "…", "(", ")", "?", "!", ".", "a b"]),
        max_size=20,
    ).map(" ".join)
    | st.text(alphabet="ab .!?\n…", max_size=40)
)
def test_sentence_offsets_are_exact_ordered_and_cover_the_answer(answer: str) -> None:
    row = Row.model_validate({"id": "r", "question": "q", "contexts": [], "answer": answer})
    claims = SentenceClaims().extract(row)
    end = 0
    for claim in claims:
        assert claim.start is not None and claim.end is not None
        assert answer[claim.start : claim.end] == claim.text == claim.text.strip() != ""
        assert claim.start >= end
        assert answer[end : claim.start].strip() == ""  # nothing but space is left out
        end = claim.end
    assert answer[end:].strip() == ""


def test_veto_fires_on_one_bad_claim_among_ten_good_ones() -> None:
    outcome = judge(make_row(10))
    summary = outcome.summary
    assert summary.answer_fails and summary.vetoed_by == ("bad",)
    assert summary.coverage == 10 / 11
    assert (summary.mean_support_probability or 0) > 0.85  # the mean alone would have passed it
    assert outcome.verdict.diagnosis == "GENERATOR_UNGROUNDED"
    assert outcome.verdict.confidence == 0.9
    good = judge(make_row(10, bad=False))
    assert good.verdict.diagnosis == "PASS"


def test_missing_citation_counts_as_unsupported_and_is_not_sent() -> None:
    row = make_row(2, bad=False)
    data = orjson.loads(row.model_dump_json(by_alias=True, exclude_none=True))
    data["claims"][1]["citations"] = []
    data["claims"][0]["start"] = data["claims"][0]["end"] = None
    row = Row.model_validate_json(orjson.dumps(data))
    outcome = judge(row)
    verdicts = {r.claim.id: r.verdict for r in outcome.claims}
    assert verdicts["k1"] == MISSING_CITATION
    sent = {q for c in outcome.calls for q in c.request.questions if q.startswith("claim:")}
    assert "claim:k1" not in sent
    assert outcome.summary.answer_fails and outcome.summary.vetoed_by == ("k1",)
    assert outcome.summary.coverage == 0.5


def test_low_impact_unsupported_claim_does_not_fail_the_answer() -> None:
    claim = Claim(id="k", text="x", start=0, end=1, citations=["p"], impact="low")
    result = claim_result(claim, ("p",), {"insufficient": 0.9, "supported": 0.1}, 0.8)
    assert not summarize_claims([result]).answer_fails
    material = claim.model_copy(update={"impact": "high"})
    result = claim_result(material, ("p",), {"insufficient": 0.9, "supported": 0.1}, 0.8)
    assert summarize_claims([result]).answer_fails


def test_uncertain_claim_sends_the_row_to_the_fallback() -> None:
    row = make_row(2, bad=False)
    data = orjson.loads(row.model_dump_json(by_alias=True, exclude_none=True))
    data["mock"]["claims"]["k0"] = {
        "supported": 0.6, "contradicted": 0.2, "insufficient": 0.1, "not_applicable": 0.1,
    }  # fmt: skip
    outcome = judge(Row.model_validate_json(orjson.dumps(data)))
    assert outcome.verdict.diagnosis == "JUDGE_UNCERTAIN" and outcome.verdict.route == "fallback"


def test_cited_scope_never_puts_an_uncited_passage_in_the_state() -> None:
    row = make_row(4)
    provider = judge(row)
    for call in provider.calls:
        questions = [q for q in call.request.questions if q.startswith("claim:")]
        if not questions:
            continue
        passages = {p["id"] for p in call.request.state["passages"]}
        cited = {
            c
            for claim in row.claims or []
            for c in claim.citations
            if f"claim:{claim.id}" in questions
        }
        assert passages == cited
        assert set(call.request.state) == {"passages"}


def test_requests_are_grouped_by_evidence_set() -> None:
    row = make_row(3, bad=False)
    data = orjson.loads(row.model_dump_json(by_alias=True, exclude_none=True))
    for claim in data["claims"]:
        claim["citations"] = ["p0"] if claim["id"] != "k2" else ["p1", "p0"]
    row = Row.model_validate_json(orjson.dumps(data))
    groups = claim_groups(row, row.claims or [], "cited", "m")
    assert len(groups) == 2  # {p0} and {p0, p1}
    provider = judge(row)
    assert len(provider.calls) == 1 + 2  # the row request + one per distinct evidence set
    provider = judge(row, "context")
    assert len(provider.calls) == 1 + 1  # context scope: one evidence set


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"text": "Not in the answer."},
            "claims[0].text: not found in the answer and no start/end offsets given",
        ),
        ({"start": 0, "end": 5}, "claims[0]: answer[0:5] is 'Fact ', not the claim text"),
        ({"start": 3}, "claims[0]: give both start and end, or neither"),
        ({"start": 0, "end": 999}, "claims[0]: offsets 0..999 outside the answer"),
        ({"citations": ["nope"]}, "claims[0].citations: 'nope' is not a context id of this row"),
        ({"id": "k1"}, "claims[1].id: duplicate claim id 'k1'"),
    ],
)
def test_bad_claim_input_names_file_and_line(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    row = make_row(2, bad=False)
    data = orjson.loads(row.model_dump_json(by_alias=True, exclude_none=True))
    for claim in data["claims"]:
        claim.pop("start"), claim.pop("end")
    data["claims"][0].update(change)
    path = tmp_path / "claims.jsonl"
    path.write_bytes(b"\n" + orjson.dumps(data) + b"\n")
    result = CliRunner().invoke(app, ["run", str(path), "--groundedness", "claims"])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {path}:2: {message}")


def test_llm_extractor_feeds_claim_mode_end_to_end(tmp_path: Path) -> None:
    """`--claim-extractor llm`: claims come from a chat model, then Jev (mock) judges them."""
    from ragbatch.testing.chat_server import ChatServer

    row = make_row(2, bad=False)
    data = orjson.loads(row.model_dump_json(by_alias=True, exclude_none=True))
    del data["claims"]
    data["mock"]["claims"] = {"x1": GOOD, "x2": GOOD}
    path = tmp_path / "rows.jsonl"
    path.write_bytes(orjson.dumps(data) + b"\n")
    listed = {
        "claims": [{"text": f"Fact number {i} is true.", "citations": [f"p{i}"]} for i in range(2)]
    }
    with ChatServer(api_key="judge", content_fn=lambda body: orjson.dumps(listed).decode()) as chat:
        result = CliRunner().invoke(
            app,
            ["run", str(path), "--groundedness", "claims", "--claim-extractor", "llm",
             "--judge-base-url", chat.base_url, "--out", str(tmp_path / "r.json"), "--quiet"],
            env={"RAGBATCH_JUDGE_API_KEY": "judge"},
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
        assert chat.requests_total == 1
    report = orjson.loads((tmp_path / "r.json").read_bytes())
    claims = report["rows"][0]["claims"]
    assert [(c["id"], c["verdict"], c["citations"]) for c in claims] == [
        ("x1", "supported", ["p0"]),
        ("x2", "supported", ["p1"]),
    ]
    assert report["modes"]["jevOnly"]["claims"]["extractor"] == "llm"
