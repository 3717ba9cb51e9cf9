"""`harness compare`'s outputs: a terminal table, Markdown for a pull-request comment or a CI job summary,
JUnit XML for CI: one test case per phase × metric (a regression is a failure with its reason as the message;
an untrusted, inconclusive or empty one skipped) and one per threshold of each current run (a broken one a
failure), so a broken threshold never hides behind a green comparison."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass

from harness.config.metric_registry import metric
from harness.report.threshold_lines import observed_text
from harness.stats.compare import JUDGED, MetricChange, PhaseChange
from harness.stats.schema import ThresholdResult

_MARK = {"regression": "✗ regression", "improvement": "✓ improvement", "within tolerance": "✓ within tolerance",
         "unclear": "? unclear (no regression by the gate; the interval reaches past the tolerance)",
         "inconclusive": "? inconclusive (not judged: see the notes)", "no data": "– no data",
         "untrusted": "? untrusted (the client could have moved it)"}
_SKIPPED = ("no data", "inconclusive", "untrusted")


@dataclass(frozen=True, slots=True)
class ThresholdOutcome:
    """One threshold of one phase of one current run, as summary.json keeps it."""

    run_id: str
    phase: str
    result: ThresholdResult

    @property
    def text(self) -> str:
        r = self.result
        return f"{self.phase} {r.metric} {r.limit}: {observed_text(r)} (run {self.run_id})"


def _figure(name: str, v: float | None) -> str:
    if v is None:
        return "-"
    if metric(name).absolute:
        return f"{v:.2%}"
    return f"{v:,.1f}/s" if metric(name).higher_is_better else f"{v:,.1f} ms"


def _change(name: str, v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v * 100:+.2f} pt" if metric(name).absolute else f"{v:+.1%}"


def _tolerance(name: str, t: float) -> str:
    worse = "−" if metric(name).higher_is_better else "+"
    return f"{worse}{t * 100:.2f} pt" if metric(name).absolute else f"{worse}{t:.0%}"


def label(r: MetricChange) -> str:
    """The verdict as every output shows it: "within tolerance" only where the whole interval lies inside the
    tolerance. The gate stays as it is (a regression needs the whole interval past it), but a ✓ must not stand
    beside TTFT p50 +13.8% against ±10%: where the interval reaches past the tolerance the change is
    "unclear"."""
    inside = r.low is not None and r.high is not None and -r.tolerance <= r.low and r.high <= r.tolerance
    return "unclear" if r.verdict == "within tolerance" and not inside else r.verdict


# The terminal's marks: short enough for a row to fit 120 columns; what they stand for is said once, below.
_SHORT = {"inconclusive": "? inconclusive¹", "untrusted": "? untrusted²", "unclear": "? unclear³"}
_FOOTNOTES = {"inconclusive": "¹ not judged: too few blocks (--repeat 3 on both sides), too few samples beyond a "
                              "percentile, or not beyond noise across the metrics compared (Holm): the notes say which",
              "untrusted": "² the client could have moved this figure in a run of either side: shown, not judged",
              "unclear": "³ no regression (the whole interval must pass the tolerance for one), but the interval "
                         "reaches past the tolerance: the change may be real; more runs (--repeat) narrow it"}


def inconclusive_lines(results: Sequence[PhaseChange]) -> list[str]:
    """Why each inconclusive figure was not judged, where it has a reason of its own."""
    return [f"inconclusive: {p.phase} {p.result.metric}: {p.result.note}" for p in results
            if p.result.verdict == "inconclusive" and p.result.note]


def rows(results: Sequence[PhaseChange], marks: dict[str, str] | None = None) -> list[list[str]]:
    head = ["phase", "metric", "baseline", "current", "change", "95% interval", "tolerance", "verdict"]
    marks = {**_MARK, **(marks or {})}
    body = [[p.phase, r.metric, _figure(r.metric, r.baseline), _figure(r.metric, r.current),
             _change(r.metric, r.change),
             "-" if r.low is None else f"[{_change(r.metric, r.low)}, {_change(r.metric, r.high)}]",
             _tolerance(r.metric, r.tolerance), marks[label(r)]] for p in results for r in [p.result]]
    return [head, *body]


def render_text(results: Sequence[PhaseChange]) -> str:
    """The table for a terminal: within 120 columns for the usual phase and metric names."""
    table = rows(results, _SHORT)
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]
    used = {label(p.result) for p in results}
    return "\n".join(lines + [note for verdict, note in _FOOTNOTES.items() if verdict in used])


def untrusted_lines(results: Sequence[PhaseChange]) -> list[str]:
    """One line per phase with untrusted figures, naming them and the run the client limited."""
    seen: dict[tuple[str, str], list[str]] = {}
    for p in results:
        if p.result.verdict == "untrusted":
            seen.setdefault((p.phase, p.result.note), []).append(p.result.metric)
    return [f"untrusted: {phase} {', '.join(names)}: {note}; shown but judged nothing (rerun on a quieter "
            "machine, or with --workers)" for (phase, note), names in seen.items()]


def verdict_line(results: Sequence[PhaseChange]) -> str:
    bad = [p for p in results if p.result.verdict == "regression"]
    untrusted = sorted({p.phase for p in results if p.result.verdict == "untrusted"})
    tail = f"; untrusted figures in {', '.join(untrusted)} (client limited)" if untrusted else ""
    if not bad:
        judged = sum(p.result.verdict in JUDGED for p in results)
        return f"no regression in {judged} judged comparison{'s' * (judged != 1)} of {len(results)}{tail}"
    return f"{len(bad)} regression{'s' * (len(bad) > 1)}: " + "; ".join(
        f"{p.phase} {p.result.metric} {_change(p.result.metric, p.result.change)}" for p in bad) + tail


def _threshold_markdown(thresholds: Sequence[ThresholdOutcome]) -> list[str]:
    if not thresholds:
        return []
    broken = sum(not t.result.passed for t in thresholds)
    return ["", f"**Thresholds** ({broken} broken of {len(thresholds)}):", "",
            *(f"- {'✓' if t.result.passed else '✗'} {t.text}" for t in thresholds)]


def render_markdown(results: Sequence[PhaseChange], baseline: str, current: str, method: str,
                    thresholds: Sequence[ThresholdOutcome] = ()) -> str:
    table = rows(results)
    lines = [f"### harness compare: {verdict_line(results)}", "",
             f"Baseline {baseline}; current {current}; intervals: {method}.", "",
             *(f"- {line}" for line in untrusted_lines(results) + inconclusive_lines(results)),
             *([""] if untrusted_lines(results) + inconclusive_lines(results) else []),
             "| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in table[1:]]
    return "\n".join([*lines, *_threshold_markdown(thresholds)]) + "\n"


def render_first(current: str, thresholds: Sequence[ThresholdOutcome], limited: Sequence[str] = ()) -> str:
    """Markdown for a run compared with nothing: no baseline yet, so this one starts it — unless the client
    limited it (`limited`: run and phase), which no baseline may be."""
    head = ("no baseline yet, and this run cannot start one (client limited: "
            f"{', '.join(limited)})" if limited else "no baseline yet: this run starts the baseline")
    return "\n".join([f"### harness compare: {head}", "",
                      f"Current {current}: nothing in the history to compare with.",
                      *_threshold_markdown(thresholds)]) + "\n"


def render_junit(results: Sequence[PhaseChange], name: str = "harness compare",
                 thresholds: Sequence[ThresholdOutcome] = ()) -> str:
    """JUnit XML as CI systems read it: testsuite > testcase (classname, name, time) > failure/skipped."""
    failures = sum(p.result.verdict == "regression" for p in results) + sum(not t.result.passed
                                                                             for t in thresholds)
    skipped = sum(p.result.verdict in _SKIPPED for p in results)
    suite = ET.Element("testsuite", name=name, tests=str(len(results) + len(thresholds)), failures=str(failures),
                       errors="0", skipped=str(skipped), time="0")
    for p in results:
        r = p.result
        case = ET.SubElement(suite, "testcase", classname=f"harness.compare.{p.phase}", name=r.metric, time="0")
        text = (f"{r.metric}: {_figure(r.metric, r.baseline)} → {_figure(r.metric, r.current)} "
                f"({_change(r.metric, r.change)}, 95% interval "
                f"[{_change(r.metric, r.low)}, {_change(r.metric, r.high)}], "
                f"tolerance {_tolerance(r.metric, r.tolerance)}; {r.method})" + (f"; {r.note}" if r.note else ""))
        if r.verdict == "regression":
            ET.SubElement(case, "failure", message=f"regression: {text}", type="regression").text = text
        elif r.verdict in _SKIPPED:
            ET.SubElement(case, "skipped", message=f"{r.verdict}: {text}")
        else:
            ET.SubElement(case, "system-out").text = f"{_MARK[label(r)]}: {text}"
    for t in thresholds:
        case = ET.SubElement(suite, "testcase", classname=f"harness.thresholds.{t.phase}",
                             name=f"{t.result.metric} {t.result.limit} ({t.run_id})", time="0")
        if t.result.passed:
            ET.SubElement(case, "system-out").text = t.text
        else:
            ET.SubElement(case, "failure", message=f"threshold broken: {t.text}", type="threshold").text = t.text
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
