"""A run's summary pushed to a Prometheus Pushgateway when it ends, for nightly jobs that leave no process
to scrape: gauges per phase, grouped by job, scenario and instance (and any labels a CI system adds).

A push replaces the group's previous metrics (HTTP PUT), so the gateway always holds the latest run of each
scenario and instance; `harness_run_timestamp_seconds` says when that was.
"""

from __future__ import annotations

import datetime as dt
import socket
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, push_to_gateway

from harness.config.scenario import Pushgateway

QUANTILES = {"p50": "0.5", "p90": "0.9", "p99": "0.99"}
_LATENCIES = {"ttft": "time to first token", "itl": "inter-token latency", "tpot": "time per output token",
              "e2e": "end-to-end latency"}
_TIMEOUT_S = 10.0


def summary_registry(summary: dict[str, Any]) -> CollectorRegistry:
    """The summary's headline figures as gauges (seconds, fractions, per-second rates; base units)."""
    registry = CollectorRegistry()
    run = summary.get("run", {})
    for name, doc in _LATENCIES.items():
        gauge = Gauge(f"harness_summary_{name}_seconds", f"{doc} of ok requests, by phase and quantile",
                      ["phase", "quantile"], registry=registry)
        for phase in summary.get("phases", []):
            for q, label in QUANTILES.items():
                value = phase["latency_ms"][name][q]
                if value is not None:
                    gauge.labels(phase["name"], label).set(value / 1000)
    per_phase: dict[str, tuple[str, Callable[[dict[str, Any]], float]]] = {
        "output_tokens_per_second": ("output tokens per second of the phase", lambda p: p["throughput"][
            "output_tokens_per_s"]),
        "requests_per_second": ("ok requests per second of the phase", lambda p: p["throughput"]["requests_per_s"]),
        "goodput_fraction": ("share of the phase's requests within every SLO", lambda p: p["goodput"]["fraction"]),
        "schedule_lag_p99_seconds": ("the client's own lateness, p99",
                                     lambda p: (p["latency_ms"]["schedule_lag"]["p99"] or 0) / 1000),
    }
    for name, (doc, value_of) in per_phase.items():
        gauge = Gauge(f"harness_summary_{name}", doc, ["phase"], registry=registry)
        for phase in summary.get("phases", []):
            gauge.labels(phase["name"]).set(value_of(phase))
    requests = Gauge("harness_summary_requests", "requests of the phase by status", ["phase", "status"],
                     registry=registry)
    for phase in summary.get("phases", []):
        for status, n in phase["requests"]["by_status"].items():
            requests.labels(phase["name"], status).set(n)
    Gauge("harness_run_complete", "1: every phase ran to its end; 0: stopped, or a phase never ran",
          registry=registry).set(1 if run.get("complete", True) else 0)
    started = run.get("started_at")
    when = dt.datetime.fromisoformat(started).timestamp() if started else dt.datetime.now(dt.UTC).timestamp()
    Gauge("harness_run_timestamp_seconds", "when the run started (Unix time)", registry=registry).set(when)
    return registry


def grouping(cfg: Pushgateway, scenario: str) -> dict[str, str]:
    return {"scenario": scenario, "instance": socket.gethostname(), **cfg.labels}


def push_summary(cfg: Pushgateway, summary: dict[str, Any], warn: Callable[[str], None]) -> bool:
    """Push; a gateway that is down or refuses is a warning (the run and its reports stand), never an error."""
    group = grouping(cfg, summary.get("run", {}).get("scenario", ""))
    try:
        push_to_gateway(cfg.url, job=cfg.job, registry=summary_registry(summary), grouping_key=group,
                        timeout=_TIMEOUT_S)
    except Exception as exc:  # urllib's errors, a bad URL, a refused connection: all only worth a warning
        warn(f"pushgateway {cfg.url}: not pushed ({type(exc).__name__}: {exc})")
        return False
    return True
