"""A repeated run's figures as the terminal and `repeats.txt` show them, mean [95% interval] per metric, and
the folder's `repeats.json` and `repeats.txt`."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from harness.config.metric_registry import metric
from harness.stats.repeats import MeanInterval, across_runs
from harness.stats.schema import Summary


def _fmt(name: str, v: float) -> str:
    if math.isnan(v):
        return "-"
    kind = metric(name).kind
    return f"{v:.2%}" if kind == "fraction" else f"{v:,.2f}/s" if kind == "rate" else f"{v:,.1f} ms"


def render_repeats(aggregate: dict[str, dict[str, MeanInterval]], runs: int) -> str:
    lines = [f"across {runs} runs: mean [95% interval]"]
    for phase, metrics in aggregate.items():
        width = max((len(m) for m in metrics), default=0)
        lines.append(f"  {phase}")
        lines += [f"    {m:<{width}}  {_fmt(m, a.mean)}  [{_fmt(m, a.low)}, {_fmt(m, a.high)}]"
                  for m, a in metrics.items()]
    return "\n".join(lines)


def write_repeats(parent: Path, summaries: Sequence[Summary]) -> str:
    """repeats.json and repeats.txt in the folder of the repeated runs; the text, to print."""
    aggregate = across_runs(summaries)
    text = render_repeats(aggregate, len(summaries))
    data = {"runs": [s.run.run_id for s in summaries],
            "phases": {phase: {m: a.to_json() for m, a in metrics.items()} for phase, metrics in aggregate.items()}}
    (parent / "repeats.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    (parent / "repeats.txt").write_text(text + "\n", encoding="utf-8")
    return text
