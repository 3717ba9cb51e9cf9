"""The history page: each metric's trend per scenario and phase, the baseline band, failed runs marked.

One self-contained HTML file (matplotlib PNGs as data), like report.html."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np


def png_data(fig: Any) -> str:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=90)
    pyplot().close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    return plt


class HistoryEntry(Protocol):
    @property
    def scenario(self) -> str: ...
    @property
    def started_at(self) -> str: ...
    @property
    def good(self) -> bool: ...
    @property
    def figures(self) -> dict[tuple[str, str], float]: ...


def _trend(scenario: str, phase: str, metric: str, runs: Sequence[HistoryEntry]) -> str:
    points = [(i, e.figures[(phase, metric)], e.good) for i, e in enumerate(runs) if (phase, metric) in e.figures]
    fig, ax = pyplot().subplots(figsize=(9, 2.6))
    x = np.array([p[0] for p in points])
    y = np.array([p[1] for p in points])
    good = np.array([p[2] for p in points])
    ax.plot(x, y, "-", color="#1f77b4", linewidth=1, alpha=0.6)
    ax.plot(x[good], y[good], "o", color="#1f77b4", markersize=4, label="run")
    if (~good).any():
        ax.plot(x[~good], y[~good], "x", color="#d62728", markersize=8, mew=2, label="failed (threshold, stop, "
                                                                                     "or nothing ok)")
    if good.sum() >= 2:
        mean, sd = float(y[good].mean()), float(y[good].std(ddof=1))
        ax.axhspan(mean - 2 * sd, mean + 2 * sd, color="#2ca02c", alpha=0.12, label="baseline: good runs' mean ± 2 sd")
        ax.axhline(mean, color="#2ca02c", linewidth=0.8)
    ax.set_xticks(x, [runs[i].started_at[:16].replace("T", " ") for i in x], rotation=30, ha="right", fontsize=7)
    ax.set_title(f"{scenario} · {phase} · {metric}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    return png_data(fig)


def render_history(entries: Sequence[HistoryEntry], metrics: Sequence[str]) -> str:
    scenarios = sorted({e.scenario for e in entries})
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>harness history</title>",
             "<style>body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1000px}"
             "img{max-width:100%;border:1px solid #ddd;margin:0.3em 0}</style></head><body>",
             f"<h1>harness history</h1><p>{len(entries)} runs of {len(scenarios)} scenario(s).</p>"]
    for scenario in scenarios:
        runs = [e for e in entries if e.scenario == scenario]
        phases = sorted({phase for e in runs for phase, _ in e.figures}, key=str)
        parts.append(f"<h2>{html.escape(scenario)}</h2>")
        for phase in phases:
            for metric in metrics:
                if any((phase, metric) in e.figures for e in runs):
                    parts.append(f"<img alt='{html.escape(f'{scenario} {phase} {metric}')}' "
                                 f"src='{_trend(scenario, phase, metric, runs)}'>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
