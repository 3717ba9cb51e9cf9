"""`harness compare`'s outputs: a terminal table, Markdown for a pull-request comment, JUnit XML for CI
(one test case per phase × metric; a regression is a failure with its reason as the message)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from harness.stats.compare import ABSOLUTE, HIGHER_IS_BETTER, PhaseComparison

_MARK = {"regression": "✗ regression", "improvement": "✓ improvement", "within tolerance": "✓ within tolerance",
         "inconclusive": "? inconclusive (too few blocks: --repeat 3)", "no data": "– no data"}


def _figure(metric: str, v: float | None) -> str:
    if v is None:
        return "-"
    if metric in ABSOLUTE:
        return f"{v:.2%}"
    return f"{v:,.1f}/s" if metric in HIGHER_IS_BETTER else f"{v:,.1f} ms"


def _change(metric: str, v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v * 100:+.2f} pt" if metric in ABSOLUTE else f"{v:+.1%}"


def _tolerance(metric: str, t: float) -> str:
    worse = "−" if metric in HIGHER_IS_BETTER else "+"
    return f"{worse}{t * 100:.2f} pt" if metric in ABSOLUTE else f"{worse}{t:.0%}"


def rows(results: Sequence[PhaseComparison]) -> list[list[str]]:
    head = ["phase", "metric", "baseline", "current", "change", "95% interval", "tolerance", "verdict"]
    body = [[p.phase, r.metric, _figure(r.metric, r.baseline), _figure(r.metric, r.current),
             _change(r.metric, r.change),
             "-" if r.low is None else f"[{_change(r.metric, r.low)}, {_change(r.metric, r.high)}]",
             _tolerance(r.metric, r.tolerance), _MARK[r.verdict]] for p in results for r in [p.result]]
    return [head, *body]


def render_text(results: Sequence[PhaseComparison]) -> str:
    table = rows(results)
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
                     for row in table)


def verdict_line(results: Sequence[PhaseComparison]) -> str:
    bad = [p for p in results if p.result.verdict == "regression"]
    if not bad:
        return f"no regression in {len(results)} comparisons"
    return f"{len(bad)} regression{'s' * (len(bad) > 1)}: " + "; ".join(
        f"{p.phase} {p.result.metric} {_change(p.result.metric, p.result.change)}" for p in bad)


def render_markdown(results: Sequence[PhaseComparison], baseline: str, current: str, method: str) -> str:
    table = rows(results)
    lines = [f"### harness compare: {verdict_line(results)}", "",
             f"Baseline `{baseline}`, current `{current}`; intervals: {method}.", "",
             "| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in table[1:]]
    return "\n".join(lines) + "\n"


def render_junit(results: Sequence[PhaseComparison], name: str = "harness compare") -> str:
    """JUnit XML as CI systems read it: testsuite > testcase (classname, name, time) > failure/skipped."""
    failures = sum(p.result.verdict == "regression" for p in results)
    skipped = sum(p.result.verdict in ("no data", "inconclusive") for p in results)
    suite = ET.Element("testsuite", name=name, tests=str(len(results)), failures=str(failures), errors="0",
                       skipped=str(skipped), time="0")
    for p in results:
        r = p.result
        case = ET.SubElement(suite, "testcase", classname=f"harness.compare.{p.phase}", name=r.metric, time="0")
        text = (f"{r.metric}: {_figure(r.metric, r.baseline)} → {_figure(r.metric, r.current)} "
                f"({_change(r.metric, r.change)}, 95% interval "
                f"[{_change(r.metric, r.low)}, {_change(r.metric, r.high)}], "
                f"tolerance {_tolerance(r.metric, r.tolerance)}; {r.method})")
        if r.verdict == "regression":
            ET.SubElement(case, "failure", message=f"regression: {text}", type="regression").text = text
        elif r.verdict in ("no data", "inconclusive"):
            ET.SubElement(case, "skipped", message=f"{r.verdict}: {text}")
        else:
            ET.SubElement(case, "system-out").text = text
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
