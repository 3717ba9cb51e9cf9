"""A capacity search's own folder: `search.json` (the result, what it started from, what its plan said and
what it took) and `search.html` (the whole curve: harness.report.search_page), beside its trials' run
folders."""

from __future__ import annotations

import json
from pathlib import Path

from harness.config.scenario import SLO
from harness.report.search_page import render_search
from harness.stats.capacity import Capacity
from harness.tools.search_plan import Plan


def write_search(folder: Path, found: Capacity, slo: SLO, goodput: float, the_plan: Plan,
                 bounds: tuple[float, float], took_s: float) -> None:
    """Both files; a trial's folder is `trial-NN` (its index), as the search made them."""
    data = {"schema": "harness.search/1", **found.to_json(), "slo": slo.model_dump(exclude_none=True),
            "goodput": goodput, "low": bounds[0], "high": bounds[1], "started_from": the_plan.whence,
            "planned_trials": the_plan.trials, "planned_s": the_plan.seconds, "took_s": took_s}
    (folder / "search.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    limits = ", ".join(f"{k.removesuffix('_ms')} ≤ {v:g} ms" for k, v in slo.model_dump(exclude_none=True).items())
    start = f"{the_plan.start_rps:.3g} req/s ({the_plan.whence})" if the_plan.start_rps else "the bounds"
    facts = [("SLOs", f"{limits} for ≥ {goodput:.0%} of requests"),
             ("rates", f"Poisson, {bounds[0]:g}–{bounds[1]:g} req/s, from {start}"),
             ("found", _found(found)),
             ("took", f"{took_s:,.0f} s, {len(found.trials)} trials" + (
                 f" (planned ≈{the_plan.seconds:,.0f} s, ≈{the_plan.trials} trials)" if the_plan.seconds else ""))]
    folders = {t.index: f"trial-{t.index:02d}" for t in found.trials}
    page = render_search(found, slo, goodput, facts, folders)
    (folder / "search.html").write_text(page, encoding="utf-8")


def _found(found: Capacity) -> str:
    late = sum(t.client_limited for t in found.trials)
    limited = f"; {late} of {len(found.trials)} trials client-limited" if late else ""
    if found.capacity_rps is None:
        return f"{found.note}{limited}"
    interval = (f" (95% interval {found.interval_rps[0]:.2f}–{found.interval_rps[1]:.2f})"
                if found.interval_rps else " (one seed)")
    claimed = f" — not claimed: {found.untrusted}" if found.untrusted else ""
    return f"capacity {found.capacity_rps:.2f} req/s{interval}{limited}{claimed}"
