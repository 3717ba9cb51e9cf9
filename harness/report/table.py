"""The side-by-side terminal table: one column per phase, one row per measure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Row = tuple[str, Callable[[dict[str, Any]], str]]


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def _latency_row(label: str, metric: str) -> Row:
    def cell(phase: dict[str, Any]) -> str:
        d = phase["latency_ms"][metric]
        return " / ".join(_ms(d[p]) for p in ("p50", "p90", "p99"))
    return (f"{label} p50/p90/p99 ms", cell)


def _goodput(phase: dict[str, Any]) -> str:
    g = phase["goodput"]
    return f"{g['requests_per_s']:.2f} ({g['fraction']:.0%})"


ROWS: list[Row] = [
    ("requests ok / failed", lambda p: f"{p['requests']['ok']} / {p['requests']['failed']}"),
    _latency_row("TTFT", "ttft"),
    _latency_row("ITL", "itl"),
    _latency_row("TPOT", "tpot"),
    _latency_row("E2E", "e2e"),
    ("output tokens/s", lambda p: f"{p['throughput']['output_tokens_per_s']:,.0f}"),
    ("requests/s", lambda p: f"{p['throughput']['requests_per_s']:.2f}"),
    ("goodput req/s (share)", _goodput),
    ("schedule lag p99 ms", lambda p: _ms(p["latency_ms"]["schedule_lag"]["p99"])),
    ("client limited", lambda p: "YES" if p["client_limited"] else "no"),
]


def render_table(summary: dict[str, Any]) -> str:
    phases = summary["phases"]
    header = ["", *(p["name"] for p in phases)]
    body = [[label, *(cell(p) for p in phases)] for label, cell in ROWS]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        return "  ".join([first, *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))])

    rule = "-" * (sum(widths) + 2 * (len(widths) - 1))
    lines = [line(header), rule, *(line(r) for r in body)]
    conclusion = summary.get("comparison", {}).get("conclusion") or []
    if conclusion:
        lines += ["", *conclusion]
    return "\n".join(lines)
