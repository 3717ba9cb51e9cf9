"""A repeated run's figures as the terminal and `repeats.txt` show them: mean [95% interval] per metric."""

from __future__ import annotations

import math
from typing import Any

_UNITS = {"error_rate": "share", "goodput_fraction": "share", "output_tokens_per_s": "/s", "requests_per_s": "/s"}


def _fmt(metric: str, v: float) -> str:
    if math.isnan(v):
        return "-"
    unit = _UNITS.get(metric, "ms")
    return f"{v:.2%}" if unit == "share" else f"{v:,.2f}/s" if unit == "/s" else f"{v:,.1f} ms"


def render_repeats(aggregate: dict[str, dict[str, dict[str, Any]]], runs: int) -> str:
    lines = [f"across {runs} runs: mean [95% interval]"]
    for phase, metrics in aggregate.items():
        width = max((len(m) for m in metrics), default=0)
        lines.append(f"  {phase}")
        lines += [f"    {m:<{width}}  {_fmt(m, a['mean'])}  [{_fmt(m, a['low'])}, {_fmt(m, a['high'])}]"
                  for m, a in metrics.items()]
    return "\n".join(lines)
