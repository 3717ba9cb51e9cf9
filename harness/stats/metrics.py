"""One definition of each metric of the design brief (§3), per request record. Pure.

Every report, the progress line, calibration and the HTML plots take their figures from here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from harness.clock import NS_PER_MS
from harness.config.metric_registry import SLO_LATENCIES, Latency
from harness.config.scenario import SLO
from harness.records import RequestRecord
from harness.stats.schema import Distribution

PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p99.9", 99.9),
)


def distribution(values_ns: Sequence[float] | np.ndarray) -> Distribution:
    """count, mean, std, min, percentiles and max of nanosecond values, in milliseconds."""
    arr = np.asarray(values_ns, dtype=np.float64) / NS_PER_MS
    if arr.size == 0:
        return Distribution.model_validate({"count": 0, "mean": None, "std": None, "min": None,
                                            **{name: None for name, _ in PERCENTILES}, "max": None})
    pct = np.percentile(arr, [q for _, q in PERCENTILES])
    return Distribution.model_validate({
        "count": int(arr.size), "mean": float(arr.mean()), "std": float(arr.std()),
        "min": float(arr.min()), **{name: float(v) for (name, _), v in zip(PERCENTILES, pct, strict=True)},
        "max": float(arr.max()),
    })


def ttft_ns(rec: RequestRecord) -> int | None:
    if rec.first_token_ns is None or rec.sent_ns is None:
        return None
    return rec.first_token_ns - rec.sent_ns


def ttft_from_intended_ns(rec: RequestRecord) -> int | None:
    return None if rec.first_token_ns is None else rec.first_token_ns - rec.intended_ns


def ttft_answer_ns(rec: RequestRecord) -> int | None:
    """Time to the first *answer* text: later than TTFT when a reasoning model thinks first."""
    if rec.first_content_ns is None or rec.sent_ns is None:
        return None
    return rec.first_content_ns - rec.sent_ns


def e2e_ns(rec: RequestRecord) -> int | None:
    if rec.last_token_ns is None or rec.sent_ns is None:
        return None
    return rec.last_token_ns - rec.sent_ns


def e2e_from_intended_ns(rec: RequestRecord) -> int | None:
    return None if rec.last_token_ns is None else rec.last_token_ns - rec.intended_ns


def duration_ns(rec: RequestRecord) -> int | None:
    """From `sent` to the request's end: its last byte, its error or its cancellation."""
    return None if rec.sent_ns is None else rec.end_ns - rec.sent_ns


def tpot_ns(rec: RequestRecord) -> float | None:
    """(last − first token) / (output tokens − 1); none for requests with a single token."""
    if rec.first_token_ns is None or rec.last_token_ns is None or rec.output_tokens < 2:
        return None
    return (rec.last_token_ns - rec.first_token_ns) / (rec.output_tokens - 1)


def itl_array_ns(rec: RequestRecord) -> np.ndarray:
    """Token-normalised gaps after the first token-bearing chunk.

    A gap before a chunk of k tokens contributes k samples of gap/k. The k per chunk comes from
    the server's continuous usage when it sent it; otherwise, when the server's total exceeds
    the chunks seen, each chunk is taken to carry an equal share.
    """
    chunks = rec.chunk_ns
    if len(chunks) < 2:
        return np.zeros(0)
    gaps = np.diff(np.asarray(chunks, dtype=np.float64))
    most = max(1, rec.max_tokens)  # a count past what was asked is a server's error, not a size to allocate
    if len(rec.chunk_tokens) == len(chunks):
        k = np.clip(np.asarray(rec.chunk_tokens[1:]), 1, most)
        return np.repeat(gaps / k, k)
    per_chunk = min(most, max(1.0, (rec.output_tokens - 1) / (len(chunks) - 1))) if rec.completion_tokens else 1.0
    reps = round(per_chunk)
    return gaps if reps == 1 else np.repeat(gaps / reps, reps)


def itl_samples_ns(rec: RequestRecord) -> list[float]:
    """`itl_array_ns` as a list."""
    return list(itl_array_ns(rec).tolist())


def schedule_lag_ns(rec: RequestRecord) -> int | None:
    """`sent − intended`: how late the client sent the request."""
    return None if rec.sent_ns is None else rec.sent_ns - rec.intended_ns


def client_late_ns(rec: RequestRecord) -> int | None:
    """The schedule lag that was the client's own: less the time an in-flight cap held the request by
    design."""
    return None if rec.sent_ns is None else max(0, rec.sent_ns - rec.intended_ns - rec.held_ns)


# The registry's per-request latencies, one value a record (ITL and chunk gaps are many a record:
# itl_array_ns).
PER_RECORD: dict[Latency, Callable[[RequestRecord], float | None]] = {
    Latency.TTFT: ttft_ns, Latency.TTFT_ANSWER: ttft_answer_ns, Latency.TTFT_FROM_INTENDED: ttft_from_intended_ns,
    Latency.TPOT: tpot_ns, Latency.E2E: e2e_ns, Latency.E2E_FROM_INTENDED: e2e_from_intended_ns,
    Latency.SCHEDULE_LAG: schedule_lag_ns}


def slo_misses(rec: RequestRecord, slo: SLO) -> list[str]:
    """The limits (SLO_LATENCIES: `ttft_ms`, `ttft_answer_ms`, …) a request went over: what decided it was not
    good."""
    return [key for key, latency in SLO_LATENCIES
            if (limit_ms := getattr(slo, key)) is not None and (value_ns := PER_RECORD[latency](rec)) is not None
            and value_ns > limit_ms * NS_PER_MS]



def in_flight(records: Sequence[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    """Requests between `sent` and their end, as a step function: (event times in ns, count from each on).

    An end sorts before a send at the same instant, so a closed-loop worker's next request does not
    count twice.
    """
    events = sorted([(r.sent_ns, 1) for r in records if r.sent_ns is not None]
                    + [(r.end_ns, -1) for r in records if r.sent_ns is not None])
    return np.array([t for t, _ in events], dtype=np.int64), np.cumsum([d for _, d in events], dtype=np.int64)


# OpenAI's error types (and the common engines'): kept in a cause; any other text a server puts there is not.
KNOWN_ERROR_TYPES = frozenset({
    "invalid_request_error", "authentication_error", "permission_error", "not_found_error", "rate_limit_error",
    "server_error", "api_error", "overloaded_error", "timeout_error", "BadRequestError", "NotFoundError",
    "InternalServerError", "ServiceUnavailableError",
    "redirect",  # ours: a 3xx never followed (harness.client.backend.redirect)
})


def cause(rec: RequestRecord) -> str:
    """Why a request did not succeed, from a fixed vocabulary (`summary.json` counts these): the server's
    own words stay in the record's `reason` only."""
    if rec.status == "http_error":
        if rec.reason.startswith("error in stream"):
            return "error in stream"
        parts = rec.reason.split(" ")  # "HTTP <status> <type>", as the clients write it
        code = rec.http_status or (parts[1] if len(parts) > 1 and parts[1].isdigit() else "?")
        kind = parts[2] if len(parts) > 2 and parts[2] in KNOWN_ERROR_TYPES else ""
        return f"HTTP {code} {kind}".rstrip()
    if rec.status == "truncated":
        return "context full" if rec.reason.startswith("context full") else "fewer tokens than asked"
    if rec.status == "overrun":
        return "more tokens than max_tokens"
    return rec.reason.split(":")[0] or rec.status
