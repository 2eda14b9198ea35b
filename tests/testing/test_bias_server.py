"""Real-HTTP tests of the Jev test server's injected biases (ragbatch.testing.bias)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ragbatch.core import Row, build_request
from ragbatch.testing import JevServer
from ragbatch.testing.bias import Bias, parse_bias

KEY = "test-key"
SHORT = "Paris."
ROW = Row.model_validate(
    {
        "id": "r1",
        "question": "What is the capital of France?",
        "contexts": [
            {"id": "a", "text": "Paris is the capital of France."},
            {"id": "b", "text": "France is in Europe."},
            {"id": "c", "text": "Lyon is a city in France."},
        ],
        "answer": SHORT,
    }
)


def body(
    reverse: bool = False, answer: str = SHORT, negate: bool = False, seed_row: Row = ROW
) -> dict[str, Any]:
    """The row's request as the run sends it, changed as a probe would change it (the chunk
    questions keep their ids and name their context: reversing the state leaves them as they
    are)."""
    request = build_request(seed_row, "jev-latest").model_dump(mode="json", exclude_none=True)
    state = request["state"]
    if reverse:
        state["contexts"] = list(reversed(state["contexts"]))
    state["answer"] = answer
    if negate:  # the complement probe's convention: question ids prefixed "not:"
        request["questions"] = {f"not:{q}": v for q, v in request["questions"].items()}
    return request


def asked(server: JevServer, request: dict[str, Any]) -> dict[str, float]:
    """P(true) per question id of one real request to ``server``."""
    with httpx.Client(headers={"Authorization": f"Bearer {KEY}"}) as client:
        response = client.post(f"{server.base_url}/v1/systemone", json=request)
    response.raise_for_status()
    return {q: a["noul"] for q, a in response.json()["answers"].items()}


@pytest.fixture
def serve() -> Iterator[Any]:
    """Start servers with a given bias; all are stopped afterwards."""
    started: list[JevServer] = []

    def start(bias: Bias, seed: int = 3) -> JevServer:
        started.append(JevServer(api_key=KEY, bias=bias, seed=seed).start())
        return started[-1]

    yield start
    for server in started:
        server.stop()


def by_context(answers: dict[str, float], order: list[str]) -> dict[str, float]:
    return {cid: answers[f"chunkRelevance:{i}"] for i, cid in enumerate(order)}


def test_unbiased_judge_ignores_order_length_and_repeats_and_complements(serve: Any) -> None:
    server = serve(Bias())
    plain = asked(server, body())
    assert asked(server, body()) == plain  # the repeat
    reordered = asked(server, body(reverse=True))
    assert by_context(reordered, ["a", "b", "c"]) == by_context(plain, ["a", "b", "c"])
    assert {q: p for q, p in reordered.items() if ":" not in q} == {
        q: p for q, p in plain.items() if ":" not in q
    }
    assert asked(server, body(answer=SHORT * 40)) == plain
    negated = asked(server, body(negate=True))
    assert all(abs(negated[f"not:{q}"] - (1 - p)) < 1e-9 for q, p in plain.items())


def test_order_bias_raises_the_first_listed_contexts_relevance(serve: Any) -> None:
    unbiased, biased = serve(Bias()), serve(Bias(order=0.2))
    base = by_context(asked(unbiased, body()), ["a", "b", "c"])
    forward = by_context(asked(biased, body()), ["a", "b", "c"])
    backward = by_context(asked(biased, body(reverse=True)), ["a", "b", "c"])
    assert forward == {**base, "a": pytest.approx(min(base["a"] + 0.2, 1.0))}
    assert backward == {**base, "c": pytest.approx(min(base["c"] + 0.2, 1.0))}


def test_length_bias_raises_groundedness_per_doubling(serve: Any) -> None:
    server = serve(Bias(length=0.05))
    answer = "x" * 100  # the origin: no bias at 100 characters
    plain, doubled = asked(server, body(answer=answer)), asked(server, body(answer=answer * 2))
    assert doubled["groundedness"] == pytest.approx(plain["groundedness"] + 0.05, abs=1e-9)
    assert {q: p for q, p in doubled.items() if q != "groundedness"} == {
        q: p for q, p in plain.items() if q != "groundedness"
    }


def test_repeat_jitter_answers_the_same_request_differently(serve: Any) -> None:
    server = serve(Bias(repeat=0.05))
    first, second = asked(server, body()), asked(server, body())
    deltas = [abs(first[q] - second[q]) for q in first]
    assert any(d > 0 for d in deltas) and all(d <= 0.1 + 1e-9 for d in deltas)
    # deterministic: a fresh server with the same seed answers the same sequence
    again = serve(Bias(repeat=0.05))
    assert [asked(again, body()), asked(again, body())] == [first, second]


def test_yes_lean_breaks_complementarity_by_its_size(serve: Any) -> None:
    server = serve(Bias(yes_lean=0.1))
    plain, negated = asked(server, body()), asked(server, body(negate=True))
    leans = [plain[q] + negated[f"not:{q}"] - 1 for q in plain]
    assert leans == pytest.approx([0.1] * len(plain), abs=1e-9)


def test_parse_bias_and_the_cli_option() -> None:
    assert parse_bias("order=0.2, yes-lean=0.1") == Bias(order=0.2, yes_lean=0.1)
    assert parse_bias("") == Bias()
    with pytest.raises(ValueError, match="expected NAME=SIZE"):
        parse_bias("tilt=0.3")
    command = [sys.executable, "-m", "ragbatch.testing.jev_server", "--bias", "tilt=1"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--bias" in result.stderr
