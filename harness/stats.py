"""Statistics over request records, with the definitions of the design brief (§3).

Pure functions: records in, plain dicts of numbers out. Latencies are reported in
milliseconds, rates per second; everything is exact from the records (no sketches).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.clock import NS_PER_MS, NS_PER_S
from harness.records import STATUSES, RequestRecord

Metric = Callable[[RequestRecord], float | int | None]

PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p99.9", 99.9),
)


@dataclass(frozen=True, slots=True)
class SLO:
    """Per-request service-level objectives in milliseconds; None means not set."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def met_by(self, rec: RequestRecord) -> bool:
        if rec.status != "ok":
            return False
        checks = ((self.ttft_ms, ttft_ns(rec)), (self.tpot_ms, tpot_ns(rec)), (self.e2e_ms, e2e_ns(rec)))
        for limit_ms, value_ns in checks:
            if limit_ms is not None and value_ns is not None and value_ns > limit_ms * NS_PER_MS:
                return False
        return True


def distribution(values_ns: Sequence[float] | np.ndarray) -> dict[str, float | int | None]:
    """count, mean, std, min, percentiles and max of nanosecond values, in milliseconds."""
    arr = np.asarray(values_ns, dtype=np.float64) / NS_PER_MS
    if arr.size == 0:
        return {"count": 0, "mean": None, "std": None, "min": None,
                **{name: None for name, _ in PERCENTILES}, "max": None}
    pct = np.percentile(arr, [q for _, q in PERCENTILES])
    return {
        "count": int(arr.size), "mean": float(arr.mean()), "std": float(arr.std()),
        "min": float(arr.min()), **{name: float(v) for (name, _), v in zip(PERCENTILES, pct, strict=True)},
        "max": float(arr.max()),
    }


def ttft_ns(rec: RequestRecord) -> int | None:
    if rec.first_token_ns is None or rec.sent_ns is None:
        return None
    return rec.first_token_ns - rec.sent_ns


def ttft_from_intended_ns(rec: RequestRecord) -> int | None:
    return None if rec.first_token_ns is None else rec.first_token_ns - rec.intended_ns


def e2e_ns(rec: RequestRecord) -> int | None:
    if rec.last_token_ns is None or rec.sent_ns is None:
        return None
    return rec.last_token_ns - rec.sent_ns


def e2e_from_intended_ns(rec: RequestRecord) -> int | None:
    return None if rec.last_token_ns is None else rec.last_token_ns - rec.intended_ns


def tpot_ns(rec: RequestRecord) -> float | None:
    """(last − first token) / (output tokens − 1); none for requests with a single token."""
    if rec.first_token_ns is None or rec.last_token_ns is None or rec.output_tokens < 2:
        return None
    return (rec.last_token_ns - rec.first_token_ns) / (rec.output_tokens - 1)


def itl_samples_ns(rec: RequestRecord) -> list[float]:
    """Token-normalised gaps after the first token-bearing chunk.

    When the server reports more tokens than chunks, each chunk is taken to carry an equal
    share, so a gap before a chunk of k tokens contributes k samples of gap/k.
    """
    chunks = rec.chunk_ns
    if len(chunks) < 2:
        return []
    gaps = np.diff(np.asarray(chunks, dtype=np.float64))
    k = max(1.0, (rec.output_tokens - 1) / (len(chunks) - 1)) if rec.completion_tokens else 1.0
    if k == 1.0:
        return list(gaps)
    reps = round(k)
    return list(np.repeat(gaps / reps, reps))


def chunk_gaps_ns(rec: RequestRecord) -> list[int]:
    return [b - a for a, b in zip(rec.chunk_ns, rec.chunk_ns[1:], strict=False)]


def _collect(records: Sequence[RequestRecord], metric: Metric) -> list[float]:
    out: list[float] = []
    for rec in records:
        value = metric(rec)
        if value is not None:
            out.append(float(value))
    return out


def summarize_phase(records: Sequence[RequestRecord], slo: SLO, lag_bound_ms: float = 5.0) -> dict[str, Any]:
    """Everything the reports need about one phase."""
    ok = [r for r in records if r.status == "ok"]
    counts = Counter(r.status for r in records)
    start_ns = min((r.intended_ns for r in records), default=0)
    end_ns = max((r.end_ns for r in records), default=start_ns)
    duration_s = max(end_ns - start_ns, 1) / NS_PER_S
    sent = [r for r in records if r.sent_ns is not None]
    itl: list[float] = []
    for rec in ok:
        itl.extend(itl_samples_ns(rec))
    lag = [r.sent_ns - r.intended_ns for r in sent if r.sent_ns is not None]
    lag_dist = distribution(lag)
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_requested for r in ok)
    good = sum(1 for r in ok if slo.met_by(r))
    lag_p99 = lag_dist["p99"]
    batches = batch_summary(records)
    return {
        "requests": {
            "total": len(records), "ok": len(ok), "failed": len(records) - len(ok),
            "by_status": {s: counts.get(s, 0) for s in STATUSES},
            "failure_reasons": dict(Counter(r.reason for r in records if r.status != "ok" and r.reason)),
        },
        "window": {"start_ns": start_ns, "end_ns": end_ns, "duration_s": duration_s},
        "load": {
            "offered_rps": len(records) / duration_s,
            "sent_rps": len(sent) / duration_s,
            "completed_rps": len(ok) / duration_s,
        },
        "latency_ms": {
            "ttft": distribution(_collect(ok, ttft_ns)),
            "ttft_from_intended": distribution(_collect(ok, ttft_from_intended_ns)),
            "itl": distribution(itl),
            "tpot": distribution(_collect(ok, tpot_ns)),
            "e2e": distribution(_collect(ok, e2e_ns)),
            "e2e_from_intended": distribution(_collect(ok, e2e_from_intended_ns)),
            "schedule_lag": lag_dist,
        },
        "throughput": {
            "output_tokens_per_s": out_tokens / duration_s,
            "total_tokens_per_s": (out_tokens + in_tokens) / duration_s,
            "requests_per_s": len(ok) / duration_s,
        },
        "goodput": {
            "requests_per_s": good / duration_s,
            "fraction": good / len(records) if records else 0.0,
            "slo": {"ttft_ms": slo.ttft_ms, "tpot_ms": slo.tpot_ms, "e2e_ms": slo.e2e_ms},
        },
        "tokens": {
            "output": out_tokens, "input": in_tokens,
            "estimated": sum(1 for r in ok if r.tokens_estimated),
            "mismatched": sum(1 for r in ok if r.token_mismatch),
        },
        "batches": batches,
        **_client_limited(lag_p99, lag_bound_ms, batches),
    }


def _client_limited(lag_p99_ms: float | int | None, bound_ms: float, batches: dict[str, Any] | None) -> dict[str, Any]:
    """Whether the client's own lateness could distort the phase, and why.

    Open and closed loop: schedule lag p99 above the bound. Fixed batches are sent from one
    event loop, so their last request always leaves a little after the first; that spread only
    matters once it is a visible share of the batch (2% of the median batch time).
    """
    if batches is not None:
        bound_ms = max(bound_ms, 0.02 * float(batches["batch_time_ms"]["p50"]))
    limited = lag_p99_ms is not None and float(lag_p99_ms) > bound_ms
    reason = f"schedule lag p99 {float(lag_p99_ms or 0):.1f} ms > {bound_ms:.1f} ms" if limited else None
    return {"client_limited": limited, "client_limited_reason": reason, "schedule_lag_bound_ms": bound_ms}


def batch_summary(records: Sequence[RequestRecord]) -> dict[str, Any] | None:
    """Fixed-batch phases: time from a batch's send to its last completion, and its tokens/s."""
    by_batch: dict[int, list[RequestRecord]] = {}
    for rec in records:
        if rec.batch is not None:
            by_batch.setdefault(rec.batch, []).append(rec)
    if not by_batch:
        return None
    times, rates = [], []
    for recs in by_batch.values():
        elapsed = max(r.end_ns for r in recs) - min(r.intended_ns for r in recs)
        times.append(elapsed)
        tokens = sum(r.output_tokens for r in recs if r.status == "ok")
        rates.append(tokens / max(elapsed, 1) * NS_PER_S)
    return {
        "count": len(by_batch),
        "batch_time_ms": distribution(times),
        "output_tokens_per_s_mean": float(np.mean(rates)),
    }
