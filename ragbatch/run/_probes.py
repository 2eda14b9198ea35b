"""The judge audit's probe pass: after the rows, the probes of a stratified sample of them go
through the run's provider chain (cache -> cost limit -> client), then the ``judgeAudit``
section is computed from the replies (async I/O; docs/semantics.md §9).

The sample and the section depend on the rows' verdicts and the replies only; the calls run
``concurrency`` at a time and their readings are kept by sample position, so the section's
bytes are the same whatever order they finish in, and a replay from the cache gives them
again (a ``repeat`` call is cached under its own key).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import anyio

from ragbatch.core import (
    CHUNK_PREFIX,
    Call,
    Judgments,
    Probe,
    Provider,
    ProviderError,
    Row,
    RowOutcome,
    Thresholds,
    Trace,
    is_probed,
    named_answers,
    probe_readings,
    probe_request,
)
from ragbatch.metrics import (
    JudgeAudit,
    ProbedRow,
    ProbeEntry,
    judge_audit,
    probe_entries,
    probe_sample,
)


def judgment_answers(row: Row, judgments: Judgments) -> dict[str, float]:
    """P(true) by question id, read back from a row's judgments (the inverse of
    :func:`~ragbatch.core.read_judgments`, for the judgment questions)."""
    r, g = judgments.retrieval, judgments.generation
    answers = {
        f"{CHUNK_PREFIX}{i}": r.chunk_relevance[c.id]
        for i, c in enumerate(row.contexts)
        if c.id in r.chunk_relevance
    }
    named = named_answers(r.sufficiency, r.conflict, g)
    named.pop("abstention")  # not a judgment the audit probes
    answers.update({qid: p for qid, p in named.items() if p is not None})
    return answers


@dataclass
class ProbeCandidates:
    """What the audit keeps of each finished row, in input order: the rows it may probe (a
    successful single-turn row), and how many it may not (traces, failed rows)."""

    rows: list[ProbedRow] = field(default_factory=list)
    indices: list[int] = field(default_factory=list)  # each candidate's input index
    skipped: Counter[str] = field(default_factory=Counter)

    def add(self, o: RowOutcome) -> None:
        jev = o.jev
        if jev.trace is not None:
            self.skipped["traces"] += 1
            return
        if jev.judgments is None or jev.verdict is None:
            self.skipped["failed"] += 1
            return
        answers = judgment_answers(o.row, jev.judgments)
        verdict = jev.verdict
        probed = ProbedRow(o.row, answers, verdict.diagnosis, verdict.route, jev.claim_summary)
        self.rows.append(probed)
        self.indices.append(o.index)


@dataclass(frozen=True, slots=True)
class AuditSettings:
    probes: tuple[Probe, ...]
    rate: float
    min_rows: int
    max_flip_rate: float
    concurrency: int


async def ask_probe(provider: Provider, probe: Probe, row: Row) -> Mapping[str, float] | None:
    """One probe of one row: its readings by original question id, None if the call failed."""
    request = probe_request(probe, row, provider.model)
    call = Call(request=request, row=row, probe="repeat" if probe == "repeat" else None)
    try:
        reply = await provider.fetch_answers(call)
    except ProviderError:
        return None
    return probe_readings(probe, reply.probabilities())


async def ask_all(
    provider: Provider, probe: Probe, rows: Sequence[Row], concurrency: int
) -> list[Mapping[str, float] | None]:
    """The probe of every row, ``concurrency`` at a time, kept by position."""
    out: list[Mapping[str, float] | None] = [None] * len(rows)
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(k: int) -> None:
        async with limiter:
            out[k] = await ask_probe(provider, probe, rows[k])

    async with anyio.create_task_group() as tg:
        for k in range(len(rows)):
            tg.start_soon(one, k)
    return out


async def run_audit(
    provider: Provider,
    candidates: ProbeCandidates,
    full_rows: Mapping[int, Row],
    settings: AuditSettings,
    thresholds: Thresholds,
) -> JudgeAudit:
    """Probe the sample of ``candidates`` (``full_rows``: each sampled input index's row as
    read, its mock block included) and compute the section."""
    chosen = probe_sample(candidates.rows, settings.rate, settings.min_rows)
    entries: list[ProbeEntry] = []
    failed: dict[str, int] = {}
    for probe in settings.probes:
        picked = [k for k in chosen if is_probed(probe, candidates.rows[k].row)]
        rows = [full_rows[candidates.indices[k]] for k in picked]
        readings = await ask_all(provider, probe, rows, settings.concurrency)
        failed[probe] = sum(r is None for r in readings)
        sample = [candidates.rows[k] for k in picked]
        entries += probe_entries(probe, sample, readings, thresholds, settings.max_flip_rate)
    return judge_audit(
        probe_rate=settings.rate,
        min_rows=settings.min_rows,
        max_flip_rate=settings.max_flip_rate,
        eligible_rows=len(candidates.rows),
        sampled_rows=len(chosen),
        skipped=dict(sorted(candidates.skipped.items())),
        failed_calls=failed,
        entries=entries,
    )


def sampled_rows(
    items: Iterable[Row | Trace], candidates: ProbeCandidates, rate: float, min_rows: int
) -> dict[int, Row]:
    """The sampled rows as read again from the source (by input index)."""
    chosen = probe_sample(candidates.rows, rate, min_rows)
    wanted = {candidates.indices[k] for k in chosen}
    found: dict[int, Row] = {}
    for index, item in enumerate(items):
        if index in wanted and isinstance(item, Row):
            found[index] = item
    return found
