"""True failure rates of the report's rows from a few human labels (pure: no I/O).

Joins the filled-in ``audit-sample`` lines to the typed report and hands every figure to the
PPI++ estimator of :mod:`ragbatch.metrics._ppi`: each diagnosis and "any failure", for the
Jev-only verdicts and the cascade's final ones; each atomic judgment's positive rate; and the
same diagnosis figures within each ``--slice-by`` slice of the report. The sample's
inclusion probabilities (written by ``audit-sample``) make a stratified sample valid; a label
file without them is treated as a uniform random sample of the successful rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ragbatch.core import DIAGNOSES, JUDGMENTS, ConfigError
from ragbatch.metrics import (
    BUILTIN_ORDER,
    TRACE_DIMENSIONS,
    Estimate,
    Inference,
    Labelled,
    Population,
    hops_bucket,
    ppi_rate,
    slice_keys,
    turns_bucket,
)
from ragbatch.report import Report, RowResult

JEV_ONLY, CASCADE = "jev-only", "cascade"
ANY_FAILURE = "anyFailure"
UNDECIDED_DIAGNOSIS = "JUDGE_UNCERTAIN"  # not a verdict about the row: no failure, no pass
UNIFORM = "all"  # the one stratum of a sample without recorded inclusion probabilities
SHOWN_UNKNOWN = 3
METHOD = (
    "PPI++ (prediction-powered inference, power-tuned): the judge's rate plus the bias its "
    "verdicts show on the human labels of each sampling stratum, weighted by 1 / inclusion "
    "probability; normal interval with the finite-population correction. Labels only: the "
    "same labels weighted by 1 / inclusion probability, without the judge."
)
JUDGMENT_NAMES = JUDGMENTS  # the policy's order (docs/semantics.md §1)

Verdict = Callable[[RowResult], float | None]  # the judge's 0/1 on a row; None: not asked
Truth = Callable[[Mapping[str, Any]], float | None]  # the human's 0/1; None: not labelled


def stratum_of(diagnosis: object, route: object) -> str:
    """The ``audit-sample`` stratum key of a row: ``DIAGNOSIS/route``."""
    return f"{diagnosis}/{route}"


def signal(row: RowResult, name: str) -> float | None:
    """The row's P(true) for one atomic judgment (chunkRelevance: the best chunk)."""
    r, g = row.retrieval, row.generation
    values = {
        "chunkRelevance": max(r.chunk_relevance.values()) if r and r.chunk_relevance else None,
        "contextSufficiency": r.sufficiency if r else None,
        "contextConflict": r.conflict if r else None,
        "answerRelevance": g.relevance if g else None,
        "groundedness": g.groundedness if g else None,
        "contradiction": g.contradiction if g else None,
        "correctness": g.correctness if g else None,
    }
    return values[name]


def _said(line: Mapping[str, Any]) -> str | None:
    human = line.get("human") or {}
    said = human.get("diagnosis") if isinstance(human, Mapping) else None
    return said if isinstance(said, str) else None


def _verdict(mode: str) -> Callable[[RowResult], str | None]:
    if mode == JEV_ONLY:
        return lambda row: row.diagnosis
    return lambda row: row.cascade.diagnosis if row.cascade.status == "ok" else None


def targets(
    report: Report, lines: Sequence[Mapping[str, Any]]
) -> list[tuple[str, str, Verdict, Truth]]:
    """Every figure as (target, mode, judge verdict, human truth), in a fixed order."""
    seen: set[str | None] = {r.diagnosis for r in report.rows}
    seen |= {r.cascade.diagnosis for r in report.rows} | {_said(line) for line in lines}
    shown = [d for d in DIAGNOSES if d in seen and d != UNDECIDED_DIAGNOSIS]
    out: list[tuple[str, str, Verdict, Truth]] = []
    for mode in (JEV_ONLY, CASCADE):
        said = _verdict(mode)
        for d in shown:
            out.append((f"diagnosis:{d}", mode, _is(said, d), _human_is(d)))
        out.append((ANY_FAILURE, mode, _fails(said), _human_fails))
    for name in JUDGMENT_NAMES:
        out.append((f"judgment:{name}", JEV_ONLY, _judged(name), _human_judged(name)))
    return out


def _is(said: Callable[[RowResult], str | None], d: str) -> Verdict:
    return lambda row: float(said(row) == d)


def _fails(said: Callable[[RowResult], str | None]) -> Verdict:
    return lambda row: float(said(row) not in (None, "PASS", UNDECIDED_DIAGNOSIS))


def _judged(name: str) -> Verdict:
    def verdict(row: RowResult) -> float | None:
        p = signal(row, name)
        return None if p is None else float(p >= 0.5)

    return verdict


def _human_is(d: str) -> Truth:
    return lambda line: None if _said(line) is None else float(_said(line) == d)


def _human_fails(line: Mapping[str, Any]) -> float | None:
    said = _said(line)
    return None if said in (None, UNDECIDED_DIAGNOSIS) else float(said != "PASS")


def _human_judged(name: str) -> Truth:
    def truth(line: Mapping[str, Any]) -> float | None:
        value = (line.get("human") or {}).get("judgments", {}) or {}
        said = value.get(name) if isinstance(value, Mapping) else None
        return float(said) if isinstance(said, bool) else None

    return truth


def sample_lines(
    lines: Iterable[Mapping[str, Any]],
) -> tuple[dict[str, Any], list[Mapping[str, Any]]]:
    """The sample header (``sample`` of the instructions line; {} when absent) and the rows."""
    header: dict[str, Any] = {}
    rows: list[Mapping[str, Any]] = []
    for line in lines:
        if "instructions" in line and "id" not in line:
            header = dict(line.get("sample") or {})
        else:
            rows.append(line)
    return header, rows


def check_sample(
    report: Report, header: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], source: str
) -> dict[str, RowResult]:
    """The report's successful rows by id; ConfigError (exit 2) when the labels are not a
    sample of this report (another dataset's sha256, ids it does not have, another stratum)."""
    sha = header.get("datasetSha256")
    if sha is not None and sha != report.dataset.sha256:
        raise ConfigError(
            f"{source} was sampled from another dataset (sha256 {str(sha)[:12]}…, the report's "
            f"is {report.dataset.sha256[:12]}…); label a sample of this report"
        )
    by_id = {r.id: r for r in report.rows if r.status == "ok"}
    unknown = [str(line.get("id")) for line in rows if str(line.get("id")) not in by_id]
    if unknown:
        named = ", ".join(unknown[:SHOWN_UNKNOWN]) + (", …" if len(unknown) > SHOWN_UNKNOWN else "")
        raise ConfigError(
            f"{source}: {len(unknown)} labelled ids are not successful rows of the report "
            f"({named}); label a sample of this report"
        )
    ids = [str(line.get("id")) for line in rows]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ConfigError(f"{source}: rows labelled twice ({', '.join(twice[:SHOWN_UNKNOWN])})")
    counts: dict[str, int] = {}
    for row in by_id.values():
        key = stratum_of(row.diagnosis, row.route)
        counts[key] = counts.get(key, 0) + 1
    for key, recorded in (header.get("strata") or {}).items():
        if isinstance(recorded, Mapping) and recorded.get("rows") != counts.get(key, 0):
            raise ConfigError(
                f"{source} was drawn from another run: stratum {key} had {recorded.get('rows')} "
                f"rows, the report has {counts.get(key, 0)}; label a sample of this report"
            )
    for line in rows:
        row = by_id[str(line.get("id"))]
        stratum = line.get("stratum")
        if stratum is not None and stratum != stratum_of(row.diagnosis, row.route):
            raise ConfigError(
                f"{source}: row {row.id} was sampled in stratum {stratum} but is "
                f"{stratum_of(row.diagnosis, row.route)} in the report; label a sample of it"
            )
    return by_id


def _weight(line: Mapping[str, Any], uniform: float, source: str) -> float:
    p = line.get("inclusionProbability", uniform)
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 < p <= 1.0:
        raise ConfigError(f"{source}: row {line.get('id')}: inclusionProbability must be in (0, 1]")
    return 1.0 / float(p)


def _figure(
    rows: Sequence[RowResult],
    labelled: Sequence[tuple[Mapping[str, Any], RowResult, float]],
    verdict: Verdict,
    truth: Truth,
    stratified: bool,
    confidence: float,
    target_width: float | None,
) -> Estimate | None:
    population: dict[str, Population] = {}
    for row in rows:
        f = verdict(row)
        if f is None:
            continue
        key = stratum_of(row.diagnosis, row.route) if stratified else UNIFORM
        old = population.get(key, Population(0, 0.0))
        population[key] = Population(old.rows + 1, old.judged + f)
    items = []
    for line, row, weight in labelled:
        y, f = truth(line), verdict(row)
        if y is not None and f is not None:
            key = stratum_of(row.diagnosis, row.route) if stratified else UNIFORM
            items.append(Labelled(key, y, f, weight))
    return ppi_rate(population, items, confidence, target_width)


def infer(
    report: Report,
    lines: Sequence[Mapping[str, Any]],
    confidence: float = 0.95,
    target_width: float | None = None,
    source: str = "labels",
) -> Inference:
    """Every figure's corrected estimate (see the module docstring); ConfigError (exit 2)
    when the labels do not belong to the report or hold no human label."""
    if target_width is not None and not 0.0 < target_width < 1.0:
        raise ConfigError(f"--target-width must lie in (0, 1), got {target_width}")
    header, rows = sample_lines(lines)
    by_id = check_sample(report, header, rows, source)
    stratified = bool(rows) and all("inclusionProbability" in line for line in rows)
    uniform = len(rows) / max(1, len(by_id))
    labelled = [(line, by_id[str(line["id"])], _weight(line, uniform, source)) for line in rows]
    ok = list(by_id.values())
    estimates: list[Estimate] = []
    for target, mode, verdict, truth in targets(report, rows):
        found = _figure(ok, labelled, verdict, truth, stratified, confidence, target_width)
        if found is not None:
            estimates.append(found.model_copy(update={"target": target, "mode": mode}))
    if not estimates:
        raise ConfigError(
            f"{source}: no human labels: fill in human.diagnosis or human.judgments on the "
            "lines written by ragbatch audit-sample"
        )
    for dimension, value in _metadata_slices(report):
        inside = {r.id for r in ok if _slice_value(r, dimension) == value}
        part = [item for item in labelled if item[1].id in inside]
        members = [r for r in ok if r.id in inside]
        for target, mode, verdict, truth in targets(report, rows):
            if target.startswith("judgment:"):
                continue
            found = _figure(members, part, verdict, truth, stratified, confidence, target_width)
            if found is not None:
                where = {"dimension": dimension, "value": value}
                estimates.append(
                    found.model_copy(update={"target": target, "mode": mode, "slice": where})
                )
    needs = [e.more_labels for e in estimates if e.more_labels is not None and e.slice is None]
    return Inference(
        confidence=confidence,
        target_width=target_width,
        sample="stratified" if stratified else "uniform",
        labelled_rows=len(rows),
        method=METHOD,
        estimates=estimates,
        more_labels=max(needs) if needs else None,
    )


def judge_failure_rates(report: Report) -> dict[str, float]:
    """The judge's raw any-failure rate per mode over the successful rows (no labels)."""
    ok = [r for r in report.rows if r.status == "ok"]
    return {
        mode: sum(_fails(_verdict(mode))(r) or 0.0 for r in ok) / max(1, len(ok))
        for mode in (JEV_ONLY, CASCADE)
    }


def _metadata_slices(report: Report) -> list[tuple[str, str]]:
    """The report's ``--slice-by`` slices (metadata fields; the built-in ones need the text)
    and a trace's ``hops`` and ``turns`` (its row has both counts)."""
    if report.slices is None:
        return []
    return [
        (s.dimension, s.value)
        for s in report.slices.slices
        if s.dimension not in BUILTIN_ORDER or s.dimension in TRACE_DIMENSIONS
    ]


def _slice_value(row: RowResult, dimension: str) -> str:
    if dimension in TRACE_DIMENSIONS:  # a row that is not a trace is in no such slice
        count = row.hops if dimension == "hops" else row.turns
        bucket = hops_bucket if dimension == "hops" else turns_bucket
        return "" if count is None else bucket(count)
    field = dimension.removeprefix("metadata.") if dimension.startswith("metadata.") else dimension
    return slice_keys("", (), row.metadata, [field]).get(dimension, "")
