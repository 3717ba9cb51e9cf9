"""One self-contained HTML report that opens offline, answer first (harness.report.answer: what was run, the
conclusion, each phase's SLO card, latency against throughput, the notes folded), then the latency CDFs, the
table, the workload's lengths, sweep curves and each phase over time — every chart drawn in the page by uPlot
from the specs of report.charts: every request a point to hover, rates in bins that fit the phase, requests in
flight, failures when any, and the server's scraped side. Nothing is fetched when the page is viewed."""

from __future__ import annotations

import html
import itertools
from collections.abc import Iterator, Sequence

from harness.records import RequestRecord
from harness.report.answer import answer_lines, cards_html, header_html, notes_html, thesis_specs
from harness.report.charts import (
    assets,
    cdf_specs,
    chart_html,
    over_time,
    per_request,
    server_side,
    sweep_specs,
    workload_specs,
)
from harness.report.notes import limited_reasons, notes
from harness.report.table import render_table
from harness.stats.schema import Summary
from harness.stats.server import Row

_STYLE = """body{font-family:system-ui,sans-serif;margin:1em auto;max-width:1300px;color:#222}
pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:13px;white-space:pre-wrap}
.chart{margin:0.6em 0}h1{font-size:1.4em;margin:0.2em 0}h2{font-size:1.15em;margin-top:1.6em}
.note{color:#555}.warn{color:#a33}
.facts{display:flex;flex-wrap:wrap;gap:0.2em 1.6em;font-size:14px}.facts .k{color:#777}
.answer{font-size:16px;line-height:1.4;margin:0.6em 0}.answer p{margin:0.3em 0}
.cards{display:flex;flex-wrap:wrap;gap:0.6em;margin:0.6em 0}
.card{border:1px solid #ccc;border-left:6px solid #2ca02c;border-radius:4px;padding:0.4em 0.8em;font-size:14px;
min-width:200px}.card.missed{border-left-color:#d62728}.card .head{font-size:15px}
.card .verdict{float:right;font-weight:bold}.card .ok{color:#1a7f1a}.card .bad{color:#c00;font-weight:bold}
details.notes{border:1px solid #e0c0c0;background:#fff8f8;border-radius:4px;padding:0.3em 0.8em;margin:0.6em 0}
details.notes summary{cursor:pointer;color:#a33}.u-legend{font-size:13px}"""


def _phase_charts(by_phase: dict[str, list[RequestRecord]], rows: Sequence[Row],
                  ids: Iterator[int], every: int) -> list[str]:
    """Each phase over time, interactive: its requests, rates, in flight, failures, and the server's side."""
    parts: list[str] = []
    for name, recs in by_phase.items():
        t0 = min(r.intended_ns for r in recs)
        end = max(r.end_ns for r in recs)
        inside = [r for r in rows if t0 <= r.t_ns <= end]
        specs = [per_request(recs, t0), *over_time(recs, t0, every),
                 *(server_side(inside, t0) if len(inside) >= 2 else [])]
        parts.append(f"<h2>Phase {html.escape(name)} over time</h2><p class='note'>Drag across a chart to zoom "
                     f"into a burst, double-click to zoom out; hover a point to name its request.</p>")
        parts += [chart_html(spec, next(ids)) for spec in specs if spec is not None]
    return parts


def render_html(summary: Summary, records: Sequence[RequestRecord], rows: Sequence[Row] = (),
                every: int = 1) -> str:
    """The page; `every` > 1: `records` holds 1 record in `every` (a run past client.records_in_memory)."""
    by_phase: dict[str, list[RequestRecord]] = {}
    for rec in records:
        by_phase.setdefault(rec.phase, []).append(rec)
    title = f"harness report: {summary.run.scenario}"
    ids = itertools.count()
    answer = "".join(f"<p>{html.escape(line)}</p>" for line in answer_lines(summary))
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_STYLE}</style>{assets()}</head><body><h1>{html.escape(title)}</h1>",
             header_html(summary), f"<div class='answer'>{answer}</div>", cards_html(summary),
             *(chart_html(spec, next(ids)) for spec in thesis_specs(summary)),
             notes_html([*notes(summary), *limited_reasons(summary)])]
    cdfs = cdf_specs(by_phase)  # none when nothing succeeded: no empty charts
    if cdfs:
        parts += ["<h2>Latency distributions</h2>", *(chart_html(spec, next(ids), small=True) for spec in cdfs)]
    parts += ["<h2>The table</h2>", f"<pre>{html.escape(render_table(summary))}</pre>",
              "<h2>What was sent and received</h2>",
              *(chart_html(spec, next(ids), small=True) for spec in workload_specs(by_phase))]
    for sweep in summary.sweeps:
        name, points, best = sweep.of, list(sweep.points), sweep.knee
        capacity = (f"capacity under the SLOs: {best.name} at {best.throughput.output_tokens_per_s:,.0f} "
                    f"output tokens/s" if best else "no point of the sweep met the SLOs")
        parts += [f"<h2>Sweep {html.escape(name)}</h2><p>{html.escape(capacity)}</p>",
                  *(chart_html(spec, next(ids)) for spec in sweep_specs(name, points, points[0].goodput.slo, best))]
    if every > 1:
        parts.append(f"<p class='note'>The charts below draw 1 record in {every} (the run ended more than "
                     "client.records_in_memory); rates and requests in flight count each drawn record "
                     f"{every} times. The table's figures are from every record.</p>")
    parts += _phase_charts(by_phase, rows, ids, every)
    parts.append("</body></html>\n")
    return "\n".join(parts)
