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
    def run_id(self) -> str: ...
    @property
    def scenario(self) -> str: ...
    @property
    def started_at(self) -> str: ...
    @property
    def good(self) -> bool: ...
    @property
    def standing(self) -> str: ...
    @property
    def figures(self) -> dict[tuple[str, str], float]: ...


# How each standing is drawn: (marker, colour, legend). Flagged and broken runs stand out; accepted ones are
# baselines that a person chose.
_STYLE = {"good": ("o", "#1f77b4", "good"), "accepted": ("D", "#9467bd", "accepted by hand"),
          "flagged": ("X", "#d62728", "flagged (a regression compare found)"),
          "thresholds broken": ("x", "#d62728", "thresholds broken"),
          "client limited": ("s", "#ff7f0e", "client limited (untrusted)"),
          "incomplete": ("x", "#7f7f7f", "incomplete or nothing ok"), "nothing ok": ("x", "#7f7f7f", "")}


def _kind(entry: HistoryEntry) -> str:
    return entry.standing.split(":")[0]


def _trend(scenario: str, phase: str, metric: str, runs: Sequence[HistoryEntry], baseline: set[str]) -> str:
    points = [(i, e.figures[(phase, metric)], e) for i, e in enumerate(runs) if (phase, metric) in e.figures]
    fig, ax = pyplot().subplots(figsize=(9, 2.6))
    x = np.array([p[0] for p in points])
    y = np.array([p[1] for p in points])
    ax.plot(x, y, "-", color="#1f77b4", linewidth=1, alpha=0.4)
    for kind, (marker, colour, label) in _STYLE.items():
        at = np.array([_kind(p[2]) == kind for p in points], dtype=bool)
        if at.any():
            ax.plot(x[at], y[at], marker, color=colour, markersize=6, linestyle="", label=label or None)
    chosen = np.array([p[2].run_id in baseline for p in points], dtype=bool)
    if chosen.any():
        ax.plot(x[chosen], y[chosen], "o", markerfacecolor="none", markeredgecolor="#2ca02c", markersize=12,
                mew=2, linestyle="", label="the current baseline")
    good = np.array([p[2].good for p in points], dtype=bool)
    if good.sum() >= 2:
        mean, sd = float(y[good].mean()), float(y[good].std(ddof=1))
        ax.axhspan(mean - 2 * sd, mean + 2 * sd, color="#2ca02c", alpha=0.12, label="good runs' mean ± 2 sd")
        ax.axhline(mean, color="#2ca02c", linewidth=0.8)
    ax.set_xticks(x, [runs[i].started_at[:16].replace("T", " ") for i in x], rotation=30, ha="right", fontsize=7)
    ax.set_title(f"{scenario} · {phase} · {metric}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    return png_data(fig)


def _runs_table(runs: Sequence[HistoryEntry], baseline: set[str]) -> str:
    """Each run's standing, newest first: which are flagged, accepted, and in the current baseline."""
    rows = "".join(f"<tr><td>{html.escape(e.started_at[:19])}</td><td>{html.escape(e.run_id)}</td>"
                   f"<td>{html.escape(e.standing)}</td><td>{'baseline' if e.run_id in baseline else ''}</td></tr>"
                   for e in reversed(runs))
    return ("<table><tr><th>started</th><th>run</th><th>standing</th><th></th></tr>" + rows + "</table>")


def render_history(entries: Sequence[HistoryEntry], metrics: Sequence[str], baseline: set[str] | None = None) -> str:
    scenarios = sorted({e.scenario for e in entries})
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>harness history</title>",
             "<style>body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1000px}"
             "img{max-width:100%;border:1px solid #ddd;margin:0.3em 0}"
             "td,th{padding:0 0.8em;text-align:left;font-size:0.9em}</style></head><body>",
             f"<h1>harness history</h1><p>{len(entries)} runs of {len(scenarios)} scenario(s).</p>"]
    for scenario in scenarios:
        runs = [e for e in entries if e.scenario == scenario]
        phases = sorted({phase for e in runs for phase, _ in e.figures}, key=str)
        parts += [f"<h2>{html.escape(scenario)}</h2>", _runs_table(runs, baseline or set())]
        for phase in phases:
            for metric in metrics:
                if any((phase, metric) in e.figures for e in runs):
                    parts.append(f"<img alt='{html.escape(f'{scenario} {phase} {metric}')}' "
                                 f"src='{_trend(scenario, phase, metric, runs, baseline or set())}'>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
