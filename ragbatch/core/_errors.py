"""The one error tree of ragbatch (pure: no I/O).

::

    RagbatchError                  anything the CLI reports as ``error: <message>``
    ├── ConfigError                bad options or thresholds          (exit 2)
    ├── DatasetError(path, line)   a dataset line that cannot be used (exit 2)
    ├── PricingError               missing or malformed pricing file  (exit 2)
    ├── CacheError                 the cache directory cannot be used (exit 2)
    ├── RunAborted                 the run stopped itself (auth, error budget) (exit 4)
    ├── Interrupted(signum)        SIGINT/SIGTERM stopped the run     (exit 128 + signum)
    └── ProviderError(status, retryable, request_id, retry_after)
        └── RateLimited                429/529: also slows the whole run down

Warnings (options that work, but not as one would expect; a cache that holds another model's
replies) are :class:`RagbatchWarning`: the CLI prints them as ``warning: <message>``, the
Python API issues them with :func:`warnings.warn` (filter them by this category).

A row whose call fails after retries is *data* (:class:`RowFailure`), not an exception
that escapes the runner: the run goes on and the report counts it as a failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_ROW_FAILURES = 3
EXIT_ABORTED = 4
EXIT_INCOMPLETE = 5

# The failure kind of a row not sent because the --max-cost budget ran out.
BUDGET_KIND = "budget-exhausted"
TOO_LARGE_KIND = "request-too-large"  # over a request size limit: never sent


def install_extra(extra: str) -> str:
    """How to install the optional ``extra``, for a message that needs it: from the package
    index, or into a source checkout (where ``ragbatch[extra]`` would fetch a release)."""
    return f"pip install 'ragbatch[{extra}]' (in a source checkout: pip install -e '.[{extra}]')"


class RagbatchError(Exception):
    """Base of every error the CLI turns into a one-line message."""

    exit_code = EXIT_USAGE


class ConfigError(RagbatchError):
    """Options that cannot work together, or out of range."""


class DatasetError(RagbatchError):
    """A dataset problem, located by file and 1-based line (0 = the file as a whole)."""

    def __init__(self, path: str, line: int, message: str) -> None:
        self.path = path
        self.line = line
        self.detail = message
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")


class PricingError(RagbatchError):
    """The pricing snapshot is missing, malformed or does not price a model."""


class CacheError(RagbatchError):
    """The cache directory cannot be opened or written."""


class RunAborted(RagbatchError):
    """The run stopped on purpose before the end (bad key, error budget exceeded)."""

    exit_code = EXIT_ABORTED


class Interrupted(RagbatchError):
    """A signal stopped the run (or the parent process of a worker went away): nothing was
    written but the replies already cached. Exit code 128 + the signal (130 SIGINT, 143 SIGTERM),
    as a shell reports a process killed by it."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum


class ProviderError(RagbatchError):
    """A provider call that did not give a usable reply."""

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        status: int | None = None,
        retryable: bool = False,
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.kind = kind
        self.status = status
        self.retryable = retryable
        self.request_id = request_id
        self.retry_after = retry_after  # seconds the service asked us to wait (Retry-After)
        self.wall_ms = 0.0  # time spent on the call, retries included; set by the provider
        self.retries: dict[str, int] = {}  # retries by status or kind before giving up
        suffix = f" (request id {request_id})" if request_id else ""
        super().__init__(f"{message}{suffix}")


class RateLimited(ProviderError):
    """HTTP 429/529: the service asks us to slow down, maybe saying for how long."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        retry_after: float | None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(
            message,
            kind="rate-limited",
            status=status,
            retryable=True,
            request_id=request_id,
            retry_after=retry_after,
        )


class RagbatchWarning(UserWarning):
    """What a run warns about through the Python API (``warnings.simplefilter("ignore",
    ragbatch.RagbatchWarning)`` silences them; ``Evaluation.warnings`` keeps them)."""


@dataclass(frozen=True, slots=True)
class RowFailure:
    """Why one row has no verdict: recorded in the report, never turned into a diagnosis."""

    kind: str
    message: str
    # Retries spent before giving up (run record only; not part of the report).
    retries: dict[str, int] = field(default_factory=dict, compare=False)
