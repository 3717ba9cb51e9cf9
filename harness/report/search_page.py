"""A capacity search on one page (`search.html` in its folder): what it found and what that rests on, goodput
and each SLO's latency p99 against the rate of every trial with the target and SLO lines, the capacity and its
interval marked, and a row per trial linking to its own run folder's report."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from harness.config.metric_registry import LATENCIES, SLO_LATENCIES
from harness.config.scenario import SLO
from harness.report.charts import Spec, assets, chart_html, json_values, series_spec
from harness.stats.capacity import Capacity, SearchTrial

_STYLE = ("body{font:14px system-ui,sans-serif;margin:24px;max-width:1200px} table{border-collapse:collapse}"
          "td,th{padding:3px 10px;text-align:right;border-bottom:1px solid #ddd} .bad{color:#b00}"
          ".facts div{margin:2px 0} .k{color:#666;display:inline-block;min-width:9em}")


def search_specs(found: Capacity, slo: SLO, goodput: float) -> list[Spec]:
    """Goodput against rate with the target share, then each SLO's latency p99 against rate with its limit."""
    by_rate = {round(t.rate, 3): t for t in sorted(found.trials, key=lambda t: t.rate)}
    xs = sorted(by_rate)
    trials = [by_rate[x] for x in xs]
    marks = _marks(found, xs, goodput)
    share = [series_spec("goodput of each trial", "%", [100 * t.goodput for t in trials], points=True, line=True),
             series_spec(f"target {goodput:.0%}", "%", [100 * goodput] * len(xs), line=True, dash=True,
                         color="#d62728"), *marks]
    specs: list[Spec] = [{"title": "goodput against the trial's rate", "xlabel": "Poisson rate, req/s",
                          "x": json_values(xs), "series": share, "height": 280}]
    for key, latency in SLO_LATENCIES:
        limit: float | None = getattr(slo, key)
        if limit is None:
            continue
        label = LATENCIES[latency].label
        series = [series_spec(f"{label} p99", "ms", [t.p99_ms.get(key) for t in trials], points=True, line=True,
                              log=True),
                  series_spec(f"SLO {limit:g} ms", "ms", [limit] * len(xs), line=True, log=True, dash=True,
                              color="#d62728")]
        specs.append({"title": f"{label} p99 against the trial's rate", "xlabel": "Poisson rate, req/s",
                      "x": json_values(xs), "series": series, "height": 280})
    return specs


def _marks(found: Capacity, xs: Sequence[float], goodput: float) -> list[Spec]:
    """The capacity (and its interval's ends) as points on the target line, at the nearest trial's rate (the
    chart's x are the trials' rates)."""
    if found.capacity_rps is None or not xs:
        return []
    points = {"capacity": found.capacity_rps}
    if found.interval_rps is not None:
        points |= {"interval low": found.interval_rps[0], "interval high": found.interval_rps[1]}
    out = []
    for name, rate in points.items():
        near = min(range(len(xs)), key=lambda i: abs(xs[i] - rate))
        values: list[float | None] = [None] * len(xs)
        values[near] = 100 * goodput
        out.append({**series_spec(f"{name} {rate:.2f} req/s", "%", values, points=True, color="#000"), "size": 12})
    return out


def _row(trial: SearchTrial, folders: Mapping[int, str]) -> str:
    where = folders.get(trial.index)
    link = f"<a href='{html.escape(where)}/report.html'>{html.escape(where)}</a>" if where else ""
    late = " <span class='bad'>client-limited</span>" if trial.client_limited else ""
    verdict = "✓" if trial.met else f"✗ {html.escape(trial.failed_on)}"
    return (f"<tr><td>{trial.index}</td><td>{trial.rate:.3f}</td><td>{trial.seed}</td><td>{trial.requests:,}</td>"
            f"<td>{trial.goodput:.0%}</td><td>{verdict}{late}</td><td>{trial.output_tokens_per_s:,.0f}</td>"
            f"<td>{link}</td></tr>")


def render_search(found: Capacity, slo: SLO, goodput: float, facts: Sequence[tuple[str, str]],
                  folders: Mapping[int, str]) -> str:
    """The page; `facts`: what was searched, how, and what was found, as (name, value) lines; `folders`: each
    trial's run folder, relative to the page."""
    title = "harness search"
    ids = iter(range(100))
    rows = "".join(_row(t, folders) for t in found.trials)
    head = ("<tr><th>trial</th><th>rate req/s</th><th>seed</th><th>requests</th><th>goodput</th><th>verdict</th>"
            "<th>output tok/s</th><th>run folder</th></tr>")
    said = "".join(f"<div><span class='k'>{html.escape(k)}</span> {html.escape(v)}</div>" for k, v in facts)
    return "\n".join([f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>",
                      f"<style>{_STYLE}</style>{assets()}</head><body><h1>{title}</h1>",
                      f"<div class='facts'>{said}</div>",
                      *(chart_html(spec, next(ids)) for spec in search_specs(found, slo, goodput)),
                      f"<h2>Trials</h2><table>{head}{rows}</table>", "</body></html>\n"])
