"""The first screen of report.html: what was run against what, the answer in words, each phase's verdict on
the SLOs as a card, and one picture of the thesis — latency against throughput, each phase a point, a sweep a
curve with its knee — so a screenshot of the page's top (1400×900) says what the run found."""

from __future__ import annotations

import html
from collections.abc import Sequence

from harness.config.metric_registry import CHARTED, LATENCIES, SLO_LATENCIES, Latency, of
from harness.report.charts import Spec, json_values, series_spec
from harness.report.table import UNTRUSTED, swept
from harness.stats.conclusion import phase_sentence, thought
from harness.stats.schema import PhaseSummary, Summary


def header_facts(summary: Summary) -> list[tuple[str, str]]:
    """Which run, against what, with which lengths, asking for what, and how it ended."""
    run = summary.run
    endpoint, sim = run.endpoint, run.simulator
    declared = f" ({endpoint.accelerator}, as declared)" if endpoint and endpoint.accelerator else ""
    simulated = (endpoint and endpoint.bundled_simulator) or run.mode == "predict"
    target = (f"simulated {sim and sim.accelerator} running {sim and sim.model} (bundled{sim and sim.slowed})"
              if simulated
              else (endpoint.base_url if endpoint else "") + declared
              + (" · TLS not checked (--insecure)" if endpoint and endpoint.insecure else ""))
    phases = summary.phases
    limits = ", ".join(f"{k.removesuffix('_ms')} ≤ {v:g} ms" for k, v in _slo(summary).items()) or "none"
    span = sum(p.whole_run.window.duration_s for p in phases)
    ended = "complete" if run.complete else (f"stopped by {run.stopped}" if run.stopped else "incomplete")
    model = run.model
    tags = [("labels", ", ".join(f"{k}={v}" for k, v in run.labels.items()))] if run.labels else []
    tags += [("metadata", ", ".join(f"{k}: {v}" for k, v in run.metadata.items()))] if run.metadata else []
    return [("run", f"{run.run_id} · {run.started_at or run.mode}"), ("model", str(model)), ("target", str(target)),
            *tags, ("workload", _lengths(phases)),
            ("phases", ", ".join(p.name for p in phases) + f" · {span:,.1f} s in all"),
            ("SLOs", limits), ("ended", ended)]


def _slo(summary: Summary) -> dict[str, float]:
    """The SLOs set (every phase shares the scenario's), by field: ttft_ms, ttft_answer_ms, tpot_ms,
    e2e_ms."""
    if not summary.phases:
        return {}
    slo = summary.phases[0].goodput.slo
    return {key: v for key, _ in SLO_LATENCIES if (v := getattr(slo, key)) is not None}


def _lengths(phases: list[PhaseSummary]) -> str:
    """Mean prompt and output tokens of the ok requests, over every phase."""
    ok = sum(p.requests.ok for p in phases)
    if not ok:
        return "no request succeeded"
    prompt = sum(p.tokens.input for p in phases) / ok
    output = sum(p.tokens.output for p in phases) / ok
    return f"prompts ~{prompt:,.0f} tokens, answers ~{output:,.0f} tokens (means of ok requests)"


def header_html(summary: Summary) -> str:
    facts = "".join(f"<div><span class='k'>{html.escape(k)}</span> {html.escape(v)}</div>"
                    for k, v in header_facts(summary))
    return f"<div class='facts'>{facts}</div>"


def answer_lines(summary: Summary) -> list[str]:
    """The conclusion in words: the batch-versus-interactive sentences when the run has both, each sweep's
    capacity, and otherwise what each phase delivered within the SLOs."""
    said = list(summary.comparison.conclusion)
    for sweep in summary.sweeps:
        name, best = sweep.of, sweep.knee
        said.append(f"Sweep {name}: capacity under the SLOs {best.name}, "
                    f"{best.throughput.output_tokens_per_s:,.0f} output tokens/s." if best else
                    f"Sweep {name}: no point met the SLOs for 95% of requests.")
    if not said:
        said = [phase_sentence(p) for p in summary.phases]
    return said


def _card(p: PhaseSummary, slo: dict[str, float]) -> str:
    """One phase: ✓ when every SLO's p99 is within its limit (the table's rule) and every threshold passed. A
    figure the client could have moved carries the table's `*`; on a reasoning stream TTFT says it timed the
    thinking, and the answer's TTFT is shown beside it when no SLO judges it."""
    lines, good = [], True
    for key, latency in SLO_LATENCIES:
        limit, p99, label = slo.get(key), getattr(p.latency_ms, latency).p99, LATENCIES[latency].label
        label += " (thinking)" if latency is Latency.TTFT and thought(p) else ""
        star = UNTRUSTED if p.untrusted(of(latency, "p99").name) else ""
        shown = "no data" if p99 is None else f"{p99:,.0f} ms{star}"
        if limit is None:
            if latency is Latency.TTFT_ANSWER and thought(p) and "ttft_ms" in slo:
                lines.append(f"<div>{label} p99 {shown} (no SLO)</div>")
            continue
        ok = p99 is not None and p99 <= limit
        good &= ok
        lines.append(f"<div class='{'ok' if ok else 'bad'}'>{label} p99 {shown} {'✓' if ok else '✗'} "
                     f"(≤ {limit:g})</div>")
    for t in p.thresholds:
        good &= t.passed
        lines.append(f"<div class='{'ok' if t.passed else 'bad'}'>{html.escape(t.metric)} "
                     f"{html.escape(t.limit)} {'✓' if t.passed else '✗'}</div>")
    verdict = ("✓" if good else "✗") if lines else "·"
    lines += [f"<div>{p.goodput.fraction:.0%} within the SLOs · {p.requests.ok:,} ok of {p.requests.total:,}</div>",
              f"<div>{p.throughput.output_tokens_per_s:,.0f} output tokens/s</div>"]
    return (f"<div class='card {'good' if good else 'missed'}'><div class='head'><b>{html.escape(p.name)}</b> "
            f"<span class='verdict'>{verdict}</span></div>{''.join(lines)}</div>")


def cards_html(summary: Summary) -> str:
    """A card per phase: its verdict on the SLOs and thresholds, its goodput and throughput."""
    slo = _slo(summary)
    return f"<div class='cards'>{''.join(_card(p, slo) for p in summary.phases)}</div>"


def thesis_specs(summary: Summary) -> list[Spec]:
    """TTFT p99 (and the answer's TTFT p99, TPOT p99 when they are objectives) against output tokens/s: each
    phase a point, each sweep a curve with its knee, the SLO a line across the whole chart — drawn even for
    one phase, whose lone x would leave a line nothing to span (the x range is padded on both sides)."""
    keys = {latency: key for key, latency in SLO_LATENCIES}
    return [spec for latency in CHARTED if (spec := _thesis(summary, keys[latency], latency)) is not None]


def _thesis(summary: Summary, key: str, metric: Latency) -> Spec | None:
    phases = [p for p in summary.phases if getattr(p.latency_ms, metric).p99 is not None]
    limit = _slo(summary).get(key)
    if not phases or (metric is not Latency.TTFT and limit is None):  # the others drawn when they are objectives
        return None
    in_sweeps = swept(summary)
    reached = sorted({round(p.throughput.output_tokens_per_s, 1) for p in phases})
    xs = [round(reached[0] * 0.8, 1), *reached, round(reached[-1] * 1.25 + 1, 1)]

    def column(points: Sequence[PhaseSummary]) -> list[float | None]:
        at = {round(p.throughput.output_tokens_per_s, 1): getattr(p.latency_ms, metric).p99 for p in points}
        return [at.get(x) for x in xs]

    label = LATENCIES[metric].label
    series = [{**series_spec(p.name, "ms", column([p]), points=True, log=True), "size": 11, "tag": True}
              for p in phases if p.name not in in_sweeps]
    for sweep in summary.sweeps:
        series.append({**series_spec(f"sweep {sweep.of}", "ms", column(sweep.points), points=True, line=True,
                                     log=True), "span": True, "size": 7})
        best = sweep.knee
        if best is not None:
            series.append({**series_spec(f"knee: {best.name}", "ms", column([best]), points=True, log=True,
                                         color="#000"), "size": 14})
    if limit is not None:
        series.append(series_spec(f"{label} SLO {limit:g} ms", "ms", [limit] * len(xs), line=True, log=True,
                                  dash=True, color="#d62728"))
    return {"title": f"latency against throughput: each phase's {label} p99 at the output tokens/s it reached",
            "xlabel": "output tokens/s", "xlog": True, "x": json_values(xs, 1), "series": series, "height": 300}


def notes_html(lines: list[str]) -> str:
    """Every note in one box, closed: the first screen stays the answer's."""
    if not lines:
        return ""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return (f"<details class='notes'><summary>{len(lines)} note{'s' if len(lines) > 1 else ''} on how to read "
            f"these figures</summary><ul>{items}</ul></details>")
