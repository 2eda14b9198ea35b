"""The one preflight of a run: every check made before the first row is sent (I/O: reads the
pricing snapshot, the policy file and, for ``--slice-by``, the dataset as far as it must).

:func:`preflight` runs once per run, in the process the user talks to: the single process, the
parent of ``--workers``, the client of ``--dask``. It refuses options that contradict each other
(:func:`check_options`) or name what does not exist (:func:`check_choices`), outputs that cannot
be written (:func:`check_output_paths`), a ``--max-cost`` the snapshot cannot price, a key that
cannot be sent, and ``--slice-by`` fields no row has (:func:`check_slice_fields`: one ``(none)``
slice would look like a result); it says the :func:`option_warnings` and returns a
:class:`Checked` run, what the parts are built from. A part of the run (a worker's shard, a
Dask task) is built from its share of the parent's :class:`Checked` and checked no more.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ragbatch._files import check_output
from ragbatch.core import (
    EXTRACTORS,
    ConfigError,
    PricingError,
    PricingSnapshot,
    Thresholds,
    parse_pricing,
)
from ragbatch.data import scan_lines
from ragbatch.metrics import has_metadata_value, metadata_fields
from ragbatch.providers import (
    DEFAULT_MODEL,
    KEY_SOURCE,
    MOCK_MODEL,
    MODEL_ALIASES,
    JevSettings,
    check_base_url,
    clean_key,
)
from ragbatch.run._items import open_source_items
from ragbatch.run._options import RunOptions

if TYPE_CHECKING:  # calibration is loaded only by a run with --policy (start-up)
    from ragbatch.calibrate import PolicyFile

LISTED_FIELDS = 20  # fields named in the --slice-by error, at most


@dataclass(frozen=True, repr=False)
class Checked:
    """A run's options after :func:`preflight`, with what the checks read: the pricing
    snapshot, the thresholds (the flags', or the --policy file's), the policy and the live Jev
    settings (None unless the run calls the API). Travels to the workers and Dask tasks, so a
    part reads neither file again."""

    options: RunOptions
    pricing: PricingSnapshot
    thresholds: Thresholds
    policy: PolicyFile | None
    jev: JevSettings | None

    def replace(self, **names: Any) -> Checked:
        """A part's share of this run: the options with ``names`` changed (its shard, files
        and budgets; what was checked stays as it was)."""
        return dataclasses.replace(self, options=self.options.replace(**names))

    def __repr__(self) -> str:  # the options hold the key
        return "Checked(...)"


def ignore(message: str) -> None:
    """A ``warn`` that drops the warning (a part's: its parent has said them)."""
    return None


def preflight(o: RunOptions, warn: Callable[[str], None] = ignore) -> Checked:
    """Every check of the run ``o`` describes, once; ``warn`` hears the options' warnings."""
    check_options(o)
    check_choices(o)
    check_output_paths(o)
    pricing = load_pricing(o.policy.pricing)
    check_max_cost(o, pricing)
    settings = jev_settings(o)
    thresholds, policy = load_thresholds(o)
    check_slice_fields(o)  # stops reading once every field is seen
    for warning in option_warnings(o):
        warn(warning)
    return Checked(o, pricing, thresholds, policy, settings)


def check_options(o: RunOptions) -> None:
    """Refuse options that contradict each other (ConfigError, exit 2), before anything is read."""
    if o.rate.concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1, got {o.rate.concurrency}")
    _ = o.cache.mode  # refuses two cache modes at once
    _ = o.scale.shard_of  # refuses a --shard that is not K/N
    if o.audit.probes and o.scale.shard:
        raise ConfigError(
            "--probe needs the whole run's rows, which a --shard has not: drop --shard (use "
            "--workers or --dask), or probe the merged report with ragbatch probe REPORT "
            "--dataset DATA"
        )
    if (
        o.audit.probes
        and (o.scale.workers > 1 or o.scale.dask)
        and o.claims.groundedness != "basic"
    ):
        raise ConfigError(  # the merged report keeps no claim summaries to diagnose with
            "--probe with --workers or --dask probes the merged report, which keeps no claims: "
            "run claim mode's probes in one process"
        )
    if o.policy.routing is not None and o.policy.policy is not None:
        raise ConfigError(
            "--routing and --policy cannot be used together: the policy file "
            "names its own routing (see `ragbatch calibrate --routing`)"
        )
    given = [flag for flag, value in (("--fail-threshold", o.policy.fail_threshold),
             ("--pass-threshold", o.policy.pass_threshold)) if value is not None]  # fmt: skip
    if given and o.policy.policy is not None:
        raise ConfigError(
            f"{', '.join(given)} and --policy cannot be used together: the policy file "
            "sets its own thresholds (refit them with `ragbatch calibrate`)"
        )
    if o.scale.workers > 1 and o.scale.shard is not None:
        raise ConfigError("--workers and --shard cannot be used together")
    if o.scale.dask is not None and o.scale.shard is not None:
        raise ConfigError("--dask and --shard cannot be used together: --dask makes its own parts")
    if o.scale.dask is not None and o.scale.workers > 1:
        raise ConfigError(
            "--dask and --workers cannot be used together: the cluster's workers run the parts"
        )
    if o.scale.shard is not None and o.scale.partial_out is None:
        raise ConfigError("--shard needs --partial-out PATH (merge partials with ragbatch merge)")


def check_choices(o: RunOptions) -> None:
    """Refuse a provider, baseline or claim setting that names nothing ragbatch has, and an LLM
    judge without a key it can send (ConfigError, exit 2)."""
    if o.jev.provider not in ("mock", "jev"):
        raise ConfigError(f"unknown provider {o.jev.provider!r}; choose mock or jev")
    baseline = o.judge.baseline
    if baseline not in ("recorded", "lexical", "llm"):
        raise ConfigError(f"unknown baseline {baseline!r}; choose recorded, lexical or llm")
    if baseline == "llm":
        check_llm_judge(o, "--baseline llm", need_key=o.cache.mode != "offline")
    check_claims(o)


def check_claims(o: RunOptions) -> None:
    """Refuse a claim mode, extractor or evidence scope that does not exist, and the LLM claim
    extractor without a key it can send (ConfigError, exit 2); basic groundedness reads none."""
    c = o.claims
    if c.groundedness == "basic":
        return
    if c.groundedness != "claims":
        raise ConfigError(f"unknown groundedness mode {c.groundedness!r}; choose basic or claims")
    if c.claim_extractor == "llm":
        check_llm_judge(o, "--claim-extractor llm", need_key=True)
    elif c.claim_extractor not in EXTRACTORS:
        raise ConfigError(
            f"unknown claim extractor {c.claim_extractor!r}; choose "
            + " or ".join([*sorted(EXTRACTORS), "llm"])
        )
    if c.claim_evidence not in ("cited", "context"):
        raise ConfigError(
            f"unknown claim evidence scope {c.claim_evidence!r}; choose cited or context"
        )


def check_llm_judge(o: RunOptions, flag: str, need_key: bool) -> None:
    """The OpenAI-compatible judge's key and URL, as its client will take them: a missing key
    is a ConfigError when ``need_key`` (else its client refuses it, RunAborted, exit 4)."""
    from ragbatch.providers import API_KEY_ENV  # with the LLM judge's module (start-up)

    if need_key and not o.judge.judge_api_key:
        raise ConfigError(f"{flag} needs a key: set {API_KEY_ENV}")
    clean_key(o.judge.judge_api_key, API_KEY_ENV, "judge API key")
    check_base_url(
        o.judge.judge_base_url, "--judge-base-url", allow_insecure_http=o.jev.allow_insecure_http
    )


def check_output_paths(o: RunOptions) -> None:
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


def load_pricing(path: Path) -> PricingSnapshot:
    """The pricing snapshot at ``path`` (PricingError naming it, exit 2)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PricingError(
            f"cannot read pricing snapshot {path}: {exc.strerror or exc} (pass --pricing FILE)"
        ) from None
    return parse_pricing(data, str(path))


def run_model(o: RunOptions) -> str:
    """The model the run asks for (the provider's default unless --model)."""
    return o.jev.model or (DEFAULT_MODEL if o.jev.provider == "jev" else MOCK_MODEL)


def check_max_cost(o: RunOptions, pricing: PricingSnapshot) -> None:
    """Refuse ``--max-cost`` when the snapshot cannot price the model (the limit could not be
    enforced: every call would count as free)."""
    model = run_model(o)
    limits = [
        ("--max-cost", o.limits.max_cost),
        ("--max-cost-per-hour", o.limits.max_cost_per_hour),
    ]
    flag = next((flag for flag, value in limits if value is not None), None)
    if flag is not None and pricing.price_for(model) is None:
        raise PricingError(
            f"{flag} needs a price for model {model!r}, but the pricing snapshot "
            f"{o.policy.pricing} (version {pricing.version}) does not price it: add the model to "
            f"the snapshot (or pass --pricing FILE), or run without {flag}"
        )


def jev_settings(o: RunOptions) -> JevSettings | None:
    """The live Jev settings of a run (None unless it calls the API): the key is trimmed and
    refused (RunAborted, exit 4) when it holds whitespace or control characters; a plain
    http:// base URL that is not loopback is refused (ConfigError, exit 2) unless
    ``--allow-insecure-http``."""
    if o.jev.provider != "jev" or o.cache.mode == "offline":
        return None
    key = clean_key(o.jev.api_key, KEY_SOURCE)
    check_base_url(o.jev.base_url, "--base-url", allow_insecure_http=o.jev.allow_insecure_http)
    return JevSettings(
        api_key=key,
        base_url=o.jev.base_url,
        model=o.jev.model or DEFAULT_MODEL,
        attempt_timeout_s=o.retry.timeout,
        row_deadline_s=o.retry.row_deadline,
        max_retries=o.retry.max_retries,
        backoff_initial_s=o.retry.backoff_initial_s,
        backoff_max_s=o.retry.backoff_max_s,
        allow_insecure_http=o.jev.allow_insecure_http,
        limits=o.jev.request_limits,
        max_response_bytes=o.jev.max_response_bytes,
        keep_alive=o.jev.keep_alive,
    )


def load_thresholds(o: RunOptions) -> tuple[Thresholds, PolicyFile | None]:
    """The thresholds (and routing) of --policy and the policy itself, else the configured
    thresholds and None."""
    if o.policy.policy is None:
        return o.policy.thresholds, None
    try:
        data = o.policy.policy.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read policy {o.policy.policy}: {exc.strerror or exc}") from None
    from ragbatch.calibrate import load_policy, thresholds_of

    policy = load_policy(data, str(o.policy.policy))
    per = tuple(
        (name, pair[0], pair[1])
        for name, pair in sorted(thresholds_of(policy).items())
        if pair != (policy.fail_threshold, policy.pass_threshold)
    )
    thresholds = Thresholds(policy.fail_threshold, policy.pass_threshold, per, policy.routing)
    return thresholds, policy


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
    for item in open_source_items(o.input).items():
        yield item.metadata


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
    model = run_model(o)
    if o.jev.provider == "jev" and model in MODEL_ALIASES and o.cache.mode != "off":
        warnings.append(
            f"model {model!r} is an alias: the release behind it can change between runs, so "
            "a cache keyed on it can mix releases; pin a release (e.g. --model jev-1.13.0) "
            "for reproducible backfills"
        )
    return warnings


def rows_warning(o: RunOptions, rows: int | None) -> str | None:
    """The warning of a run of ``rows`` rows (None: not known before it runs) whose report
    will keep no per-row results."""
    limit = o.output.max_report_rows
    if rows is None or limit is None or rows <= limit or o.output.rows_out is not None:
        return None
    return (
        f"{rows} rows > --max-report-rows {limit}: the report will keep aggregates only; "
        "add --rows-out PATH to keep per-row results"
    )
