"""Real-HTTP tests of the shipped Jev test server (ragbatch.testing.jev_server)."""

from __future__ import annotations

import math
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragbatch.testing import Fault, JevServer, count_input_tokens
from ragbatch.testing.bucket import TokenBucket

KEY = "test-key"
ROOT = Path(__file__).resolve().parents[2]
NOUL = {"type": "noul", "instructions": "Is the answer supported?"}
CHOICE = {
    "type": "choice",
    "instructions": "Verdict",
    "criteria": {"supported": None, "contradicted": "the context says otherwise", "unknown": None},
}
SCORE = {"type": "score", "instructions": "Quality", "criteria": ["bad", "ok", "good", "great"]}


def request_body(
    questions: dict[str, Any] | None = None, model: str = "jev-latest", state: Any = "Sky: blue."
) -> dict[str, Any]:
    """A valid systemone request body."""
    qs = {"q1": NOUL, "q2": CHOICE, "q3": SCORE} if questions is None else questions
    return {"model": model, "state": state, "questions": qs}


@pytest.fixture
def server() -> Iterator[JevServer]:
    """A fresh server per test, stopped afterwards."""
    srv = JevServer(api_key=KEY).start()
    yield srv
    srv.stop()


def authed(server: JevServer, timeout: float = 5.0) -> httpx.Client:
    """An httpx client for ``server`` sending the right key."""
    auth = {"Authorization": f"Bearer {KEY}"}
    return httpx.Client(base_url=server.base_url, headers=auth, timeout=timeout)


@pytest.fixture
def client(server: JevServer) -> Iterator[httpx.Client]:
    """An authorised client for ``server``."""
    with authed(server) as c:
        yield c


def post(client: httpx.Client, body: Any = None, **kwargs: Any) -> httpx.Response:
    """POST /v1/systemone with ``body`` (a default request when None)."""
    return client.post("/v1/systemone", json=request_body() if body is None else body, **kwargs)


# -- normal answers ------------------------------------------------------------------------
def test_normal_answer_shape_usage_and_headers(server: JevServer, client: httpx.Client) -> None:
    response = post(client)
    assert response.status_code == 200
    assert response.headers["x-typesafe-request-id"] == "req-1"
    data = response.json()
    assert data["model"] == "jev-1.13.0"
    answers = data["answers"]
    assert set(answers) == {"q1", "q2", "q3"}
    assert answers["q1"].keys() == {"type", "noul"} and 0 <= answers["q1"]["noul"] <= 1
    choice = answers["q2"]
    assert set(choice["probabilities"]) == set(CHOICE["criteria"])
    assert math.isclose(sum(choice["probabilities"].values()), 1.0)
    assert choice["choice"] == max(choice["probabilities"], key=choice["probabilities"].get)
    top, n = choice["probabilities"][choice["choice"]], len(choice["probabilities"])
    assert math.isclose(choice["confidence"], (top - 1 / n) / (1 - 1 / n), abs_tol=1e-6)
    score = answers["q3"]
    assert 0 <= score["confidence"] <= 1
    assert score["legend"] == {"0": "bad", "1": "ok", "2": "good", "3": "great"}
    assert set(score["probabilities"]) == {"0", "1", "2", "3"}
    expected = sum(int(k) * p for k, p in score["probabilities"].items())
    assert math.isclose(score["score"], expected, abs_tol=1e-3)
    body = request_body()
    assert data["usage"] == {
        "input_tokens": count_input_tokens(body["state"], body["questions"]),
        "output_tokens": 6,
    }
    assert server.successful == 1


def test_answers_deterministic_and_independent_of_question_id(client: httpx.Client) -> None:
    first = post(client).json()["answers"]
    assert post(client).json()["answers"] == first
    renamed = request_body({"zz": SCORE, "other": NOUL, "x": {**NOUL, "instructions": "Else?"}})
    again = post(client, renamed).json()["answers"]
    assert again["zz"] == first["q3"] and again["other"] == first["q1"]
    other_state = post(client, request_body(state={"doc": "different"})).json()["answers"]
    assert other_state != first


def test_model_aliases_and_pinned_release(client: httpx.Client) -> None:
    assert post(client, request_body(model="jev-preview")).json()["model"] == "jev-1.13.0"
    assert post(client, request_body(model="jev-1.12.0")).json()["model"] == "jev-1.12.0"
    assert post(client, request_body(model="gpt-9")).status_code == 404


def test_answer_fn_overrides_default() -> None:
    def answer(state: Any, qid: str, question: dict[str, Any]) -> dict[str, Any]:
        return {"type": "noul", "noul": 0.25 if qid == "q1" else 0.75}

    with JevServer(api_key=KEY, answer_fn=answer) as srv, authed(srv) as c:
        assert post(c).json()["answers"]["q1"] == {"type": "noul", "noul": 0.25}


def test_models_endpoint(client: httpx.Client) -> None:
    models = client.get("/v1/models").json()["models"]
    assert {"name": "jev-1.13.0", "release_date": "2026-10-01"}.items() <= models[-1].items()
    assert httpx.get(f"{client.base_url}/v1/models").status_code == 401


# -- request errors ------------------------------------------------------------------------
@pytest.mark.parametrize("auth", [None, "Bearer wrong", KEY])
def test_bad_or_missing_key_is_401(server: JevServer, auth: str | None) -> None:
    headers = {"Authorization": auth} if auth else {}
    response = httpx.post(f"{server.base_url}/v1/systemone", json=request_body(), headers=headers)
    assert response.status_code == 401
    assert response.json() == {
        "detail": {"error_type": "authentication_error", "message": "invalid api key"}
    }
    assert response.headers["x-typesafe-request-id"].startswith("req-")


@pytest.mark.parametrize(
    "content",
    [b"{not json", b'{"model": "jev-latest", "state": "s"}', b"[]", b'{"model":1,"state":0}'],
)
def test_invalid_body_is_422(client: httpx.Client, content: bytes) -> None:
    response = client.post("/v1/systemone", content=content)
    assert response.status_code == 422
    assert isinstance(response.json()["detail"], list)
    assert "x-typesafe-request-id" in response.headers


def test_without_a_key_auth_is_off() -> None:
    with JevServer(api_key=None) as srv:
        url = f"{srv.base_url}/v1/systemone"
        assert httpx.post(url, json=request_body()).status_code == 200
        assert httpx.post(
            url, json=request_body(), headers={"Authorization": "Bearer x"}
        ).is_success


@pytest.mark.parametrize(
    "criteria", [{"0": "calm", "1": "angry"}, ["calm", None], ["calm"]], ids=["map", "null", "one"]
)
def test_bad_score_levels_are_422(client: httpx.Client, criteria: object) -> None:
    question = {"type": "score", "instructions": "Frustrated?", "criteria": criteria}
    response = post(client, request_body({"q": question}))
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "questions", "q", "score", "criteria"]


def test_unknown_question_type_is_422(client: httpx.Client) -> None:
    response = post(client, request_body({"q": {"type": "essay", "instructions": "?"}}))
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "questions", "q"]


# -- scripted faults -----------------------------------------------------------------------
def test_status_fault_429_carries_retry_headers(server: JevServer, client: httpx.Client) -> None:
    server.push(Fault(kind="status", status=429, retry_after="1", retry_after_ms=1500))
    response = post(client)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "1"
    assert response.headers["retry-after-ms"] == "1500"
    assert response.json() == {
        "detail": {"error_type": "rate_limit_error", "message": "too many requests"}
    }
    assert post(client).status_code == 200  # queue drained: normal again


@pytest.mark.parametrize("status", [408, 400, 401, 403, 404, 500, 502, 503, 529])
def test_status_fault_codes(server: JevServer, client: httpx.Client, status: int) -> None:
    server.push(Fault(kind="status", status=status))
    response = post(client)
    assert response.status_code == status
    assert isinstance(response.json()["detail"]["message"], str)
    assert "retry-after" not in response.headers


def test_status_fault_422_is_fastapi_style(server: JevServer, client: httpx.Client) -> None:
    server.push(Fault(kind="status", status=422, message="bad question"))
    assert post(client).json()["detail"][0]["msg"] == "bad question"


def test_faults_are_fifo(server: JevServer, client: httpx.Client) -> None:
    server.push(Fault(kind="status", status=503), Fault(kind="status", status=529))
    assert [post(client).status_code for _ in range(3)] == [503, 529, 200]


def test_fault_fn_every_third_request(server: JevServer, client: httpx.Client) -> None:
    seen: list[int] = []

    def every_third(index: int, body: dict[str, Any]) -> Fault | None:
        seen.append(index)
        return Fault(kind="status", status=429) if index % 3 == 2 else None

    server.fault_fn = every_third
    assert [post(client).status_code for _ in range(6)] == [200, 200, 429, 200, 200, 429]
    assert seen == list(range(6))


def test_drop_closes_without_response(server: JevServer, client: httpx.Client) -> None:
    server.push(Fault(kind="drop"))
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        post(client)
    assert server.responses_by_status == {0: 1}
    assert post(client).status_code == 200


def test_hang_times_out_client_and_server_survives(server: JevServer) -> None:
    server.push(Fault(kind="hang", delay_s=1.0))
    with authed(server, timeout=0.2) as short:
        with pytest.raises(httpx.ReadTimeout):
            post(short)
        assert post(short).status_code == 200


def test_latency_fault_and_server_latency() -> None:
    with JevServer(api_key=KEY, latency_s=0.05) as srv, authed(srv) as c:
        srv.push(Fault(kind="latency", delay_s=1.0))
        start = time.perf_counter()
        assert post(c).status_code == 200
        assert time.perf_counter() - start >= 1.05
        start = time.perf_counter()
        post(c)
        elapsed = time.perf_counter() - start
        assert 0.05 <= elapsed < 1.0  # the server's latency; the fault was used up


def test_non_json_fault(server: JevServer, client: httpx.Client) -> None:
    server.push(Fault(kind="non_json"))
    response = post(client)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.text == "<html>oops</html>"
    assert server.successful == 0


def test_trickle_fault_sends_the_answer_a_byte_at_a_time(
    server: JevServer, client: httpx.Client
) -> None:
    server.push(Fault(kind="trickle", delay_s=0.05))
    with client.stream("POST", "/v1/systemone", json=request_body({"q1": NOUL})) as response:
        started = time.perf_counter()
        chunks = [chunk for chunk, _ in zip(response.iter_raw(), range(4), strict=False)]
        elapsed = time.perf_counter() - started
    assert response.status_code == 200 and all(len(c) == 1 for c in chunks)
    assert b"".join(chunks) == b'{"mo'
    assert elapsed >= 0.1  # at least three 0.05 s gaps between the four bytes


def test_truncated_fault(server: JevServer, client: httpx.Client) -> None:
    server.push(Fault(kind="truncated"))
    cut, whole = post(client), post(client)
    assert cut.status_code == 200 and cut.headers["content-type"] == "application/json"
    assert whole.text.replace(" ", "").startswith(cut.text.replace(" ", ""))
    assert 0 < len(cut.content) < len(whole.content) and server.successful == 1


def test_missing_and_extra_answer(server: JevServer, client: httpx.Client) -> None:
    server.push(Fault(kind="missing_answer"), Fault(kind="extra_answer"))
    assert len(post(client).json()["answers"]) == 2
    extra = post(client).json()["answers"]
    assert len(extra) == 4 and {"q1", "q2", "q3"} < set(extra)


@pytest.mark.parametrize(
    ("kind", "literal"), [("wrong_type", '"noul": "0.5"'), ("out_of_range", '"noul": 1.5')]
)
def test_bad_noul_values(server: JevServer, client: httpx.Client, kind: Any, literal: str) -> None:
    server.push(Fault(kind=kind))
    assert literal in post(client).text


def test_nan_is_written_literally(server: JevServer, client: httpx.Client) -> None:
    server.push(Fault(kind="nan"))
    text = post(client).text
    assert '"noul": NaN' in text
    assert math.isnan(httpx.Response(200, content=text.encode()).json()["answers"]["q1"]["noul"])


@pytest.mark.parametrize("value", [-1, "12"])
def test_bad_usage(server: JevServer, client: httpx.Client, value: int | str) -> None:
    server.push(Fault(kind="bad_usage", usage_value=value))
    assert post(client).json()["usage"]["input_tokens"] == value


# -- token bucket --------------------------------------------------------------------------
def test_token_bucket_throttles_with_retry_after_ms() -> None:
    need = count_input_tokens("Sky: blue.", {"q1": NOUL})
    body = request_body({"q1": NOUL})
    now = [0.0]  # the bucket's clock moves only when the test moves it
    bucket = TokenBucket(2.5 * need, need * 10.0, clock=lambda: now[0])
    with JevServer(api_key=KEY, token_bucket=bucket) as srv, authed(srv) as c:
        assert [post(c, body).status_code for _ in range(2)] == [200, 200]
        throttled = post(c, body)
        assert throttled.status_code == 429
        wait_ms = int(throttled.headers["retry-after-ms"])
        assert wait_ms == 50  # half a request's tokens at ten requests a second
        now[0] += wait_ms / 2000  # half the wait: still short of tokens
        assert post(c, body).status_code == 429
        now[0] += wait_ms / 2000 + 0.001  # the whole wait (and a little more)
        assert post(c, body).status_code == 200
        too_big = request_body({f"q{i}": NOUL for i in range(100)})
        assert post(c, too_big).status_code == 400


# -- counters and concurrency --------------------------------------------------------------
def test_counters_bodies_headers_and_reset(server: JevServer, client: httpx.Client) -> None:
    server.push(Fault(kind="status", status=500))
    post(client)
    post(client, headers={"X-Trace": "abc"})
    client.post("/v1/systemone", content=b"nope")
    client.get("/v1/models")
    assert server.requests_total == 4
    assert server.responses_by_status == {500: 1, 200: 2, 422: 1}
    assert server.successful == 1
    assert server.bodies == [request_body(), request_body(), None]
    assert server.headers_seen[1]["x-trace"] == "abc"
    assert server.headers_seen[0]["authorization"] == f"Bearer {KEY}"
    server.reset_counters()
    assert (server.requests_total, server.responses_by_status, server.bodies) == (0, {}, [])


def test_max_in_flight_with_concurrent_clients() -> None:
    # no request is answered before all 8 have arrived: only a server that handles them at
    # once gets past the barrier (a serial one would break it, and fail every request)
    together = threading.Barrier(8, timeout=60)

    def wait_for_all(index: int, body: dict[str, Any]) -> None:
        together.wait()

    with JevServer(api_key=KEY, fault_fn=wait_for_all) as srv:
        statuses: list[int] = []
        lock = threading.Lock()

        def call() -> None:
            try:
                with authed(srv, timeout=60) as c:
                    status = post(c).status_code
            except httpx.HTTPError:
                status = 0
            with lock:
                statuses.append(status)

        threads = [threading.Thread(target=call) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert statuses == [200] * 8
        assert srv.max_in_flight == 8


def test_latency_jitter_is_seeded() -> None:
    a = JevServer(latency_s=0.0, latency_jitter_s=1.0, seed=7)
    b = JevServer(latency_s=0.0, latency_jitter_s=1.0, seed=7)
    draws = [a._next_latency() for _ in range(5)]
    assert draws == [b._next_latency() for _ in range(5)]
    assert all(0.0 <= d <= 1.0 for d in draws)


# -- CLI -----------------------------------------------------------------------------------
def test_cli_prints_url_and_stops_on_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragbatch.testing.jev_server", "--port", "0", "--api-key", "k"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        models = httpx.get(f"{url}/v1/models", headers={"Authorization": "Bearer k"})
        assert models.status_code == 200
        proc.terminate()
        out, err = proc.communicate(timeout=5)
        assert (proc.returncode, out, err) == (0, "", "")
    finally:
        if proc.poll() is None:
            proc.kill()
