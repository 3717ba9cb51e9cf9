"""A server's Prometheus counters read off its /metrics page, each summed over its label sets: what the benches
that compare the harness with vLLM read around a run (`vs_vllm_bench.py`, `scheduler_vs_vllm.py`)."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Sequence


def counters(url: str, names: Sequence[str]) -> dict[str, float]:
    """Each named sample the page at `url`/metrics has, summed over its labels; a name it lacks is left out."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for name in names:
        found = re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, re.M)
        if found:
            out[name] = sum(float(v) for v in found)
    return out
