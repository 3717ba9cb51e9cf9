"""A picture of a trace's arrivals: requests per second over the trace, the bursts made visible."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.workload.traces import Trace


def arrivals_png(trace: Trace, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    t = trace.arrivals_s
    seconds = int(np.ceil(t[-1])) + 1 if len(t) else 1
    counts = np.bincount(t.astype(np.int64), minlength=seconds)
    fig, ax = plt.subplots(figsize=(10, 3.2), dpi=100)
    ax.plot(np.arange(seconds), counts, linewidth=0.6, color="#1f77b4")
    mean = len(t) / max(t[-1], 1e-9) if len(t) > 1 else 0.0
    ax.axhline(mean, color="#d62728", linewidth=0.8, linestyle="--", label=f"mean {mean:.2f}/s")
    ax.set_xlabel("trace time (s)")
    ax.set_ylabel("arrivals per second")
    ax.set_title(Path(trace.source).name, fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
