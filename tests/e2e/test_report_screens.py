"""report.html read off a screenshot, as pages are shared: three reports (the demo's, a one-phase run, a reasoning
model's) drawn in Debian's chromium at 1,280 px, every chart's axes checked as drawn — at least two tick labels
each, none wider than its axis or past the chart's edge or over its neighbour (charts.js's harnessCheck) — and
every legend swatch filled. The screenshots in docs/ are these pages: `UPDATE_SCREENSHOTS=1` writes them."""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.config.scenario import load_scenario, parse_scenario
from harness.records import RequestRecord
from harness.report.charts import assets, chart_html
from harness.report.html import render_html
from harness.stats.schema import Summary
from harness.tools.predict import predict_runs
from tests.helpers import ROOT, chromium

WIDTH = 1280
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         f"--window-size={WIDTH},900", "--virtual-time-budget=5000"]
ONE_PHASE = """
name: one-phase
seed: 3
workload: {prompt_tokens: 512, output_tokens: 128}
slo: {ttft_ms: 200, tpot_ms: 30}
phases:
  - name: interactive
    load: {type: poisson, rate: 8, requests: 120}
"""
REASONING = """
name: reasoning
seed: 3
workload: {prompt_tokens: 512, output_tokens: 260}
simulator: {reasoning_tokens: 200}
slo: {ttft_ms: 500, ttft_answer_ms: 2000, tpot_ms: 30}
phases:
  - name: chat
    load: {type: poisson, rate: 4, requests: 60}
"""
# After load: each chart's check (charts.js), and the legend swatches left without a fill.
PROBE = ("<script>window.addEventListener('load', () => {"
         " const charts = [...document.querySelectorAll('.chart')];"
         " document.body.setAttribute('data-checks', JSON.stringify(charts.map(c => ["
         "   c.title, JSON.parse(c.dataset.check || 'null')])));"
         " const hollow = [...document.querySelectorAll('.u-legend .u-marker')]"
         "   .filter(m => m.style.borderColor && !m.style.background);"
         " document.body.setAttribute('data-hollow', hollow.length); });</script>")


def _predicted(text: str | None) -> tuple[Summary, list[RequestRecord]]:
    scenario = (load_scenario(ROOT / "scenarios" / "quickstart.yaml") if text is None
                else parse_scenario(yaml.safe_load(text), "test"))
    summary, runs = asyncio.run(predict_runs(scenario))
    return summary, [r for run in runs for r in run.records]


def _probe(page: str, tmp_path: Path, name: str) -> tuple[list[tuple[str, list[dict]]], int]:
    probed = tmp_path / f"{name}.html"
    probed.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={tmp_path / ('p-' + name)}", "--dump-dom",
                          probed.as_uri()], capture_output=True, text=True, timeout=90).stdout
    checks = re.search(r'data-checks="([^"]*)"', dom)
    hollow = re.search(r'data-hollow="(\d+)"', dom)
    assert checks is not None and hollow is not None, dom[:500]
    return json.loads(html.unescape(checks.group(1))), int(hollow.group(1))


def _problems(checks: list[tuple[str, list[dict]]]) -> list[str]:
    out = []
    for title, axes in checks:
        if axes is None:
            out.append(f"{title}: not checked (the chart did not draw)")
            continue
        for axis in axes:
            if axis["ticks"] < 2:
                out.append(f"{title}: axis {axis['axis']} ({axis['label']}) has {axis['ticks']} tick labels")
            if axis["clipped"]:
                out.append(f"{title}: axis {axis['axis']} ({axis['label']}) clips {axis['clipped']}")
    return out


@pytest.mark.parametrize("name", ["demo", "one-phase", "reasoning"])
def test_every_chart_reads_off_a_screenshot(name: str, tmp_path: Path) -> None:
    summary, records = _predicted({"demo": None, "one-phase": ONE_PHASE, "reasoning": REASONING}[name])
    page = render_html(summary, records)
    checks, hollow = _probe(page, tmp_path, name)
    assert len(checks) >= 5 and not _problems(checks), _problems(checks)
    assert hollow == 0
    if name == "reasoning":
        assert "TTFT (answer) p99" in page and "TTFT (thinking) p99" in page
    shot = tmp_path / f"report-{name}.png"
    subprocess.run([chromium(), *FLAGS, f"--user-data-dir={tmp_path / ('s-' + name)}", f"--screenshot={shot}",
                    (tmp_path / f"{name}.html").as_uri()], capture_output=True, timeout=90)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("UPDATE_SCREENSHOTS"):
        shutil.copy(shot, ROOT / "docs" / f"report-{name}.png")


def test_the_check_sees_a_clipped_tick_label(tmp_path: Path) -> None:
    """The same check on a chart whose latency axis is forced 12 px wide: its "1,000" cannot fit, and it says so."""
    spec = {"title": "narrow", "xlabel": "s", "x": [1, 2, 3, 4],
            "series": [{"label": "TTFT", "unit": "ms", "values": [900, 1500, 3000, 12000], "points": True,
                        "log": False, "step": False, "line": True, "dash": False}]}
    squeeze = ("<script>const Plain = uPlot; uPlot = new Proxy(Plain, {construct(t, [opts, data, el]) {"
               " opts.axes.forEach(a => { if (a.scale === 'ms') a.size = 12; }); return new t(opts, data, el); }});"
               "</script>")
    page = (f"<!doctype html><html><head><meta charset='utf-8'>{assets()}{squeeze}</head><body>"
            f"{chart_html(spec, 0)}</body></html>")
    checks, _ = _probe(page, tmp_path, "narrow")
    problems = _problems(checks)
    assert problems and "axis 1 (ms) clips" in problems[0] and "10,000" in problems[0], checks
