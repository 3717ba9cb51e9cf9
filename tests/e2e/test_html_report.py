"""The HTML report in a real headless browser (Debian's chromium, installed by `make test` / `.ci/run`)."""

from __future__ import annotations

import html
import json
import re
import struct
import subprocess
from pathlib import Path

from tests.helpers import chromium, harness

ROOT = Path(__file__).resolve().parents[2]

SMALL = """
name: html
seed: 3
workload: {prompt_tokens: 64, output_tokens: 16}
slo: {ttft_ms: 200}
phases:
  - name: open
    load: {type: poisson, rate: 20, requests: 30}
  - name: batch-16
    load: {type: batch, size: 16, batches: 2}
"""

# After load: how many images decoded, how many charts drew a canvas, and what hovering the middle of the
# first phase's per-request chart names (its legend's first value: the request under the cursor).
PROBE = ("<script>window.addEventListener('load', () => { const ok = [...document.images]"
         ".filter(i => i.complete && i.naturalWidth > 0).length;"
         " document.body.setAttribute('data-images-loaded', ok);"
         " const charts = [...document.querySelectorAll('.chart')];"
         " const drawn = charts.filter(c => c.uplot &&"
         " c.querySelector('canvas') && c.querySelector('canvas').width > 0).length;"
         " document.body.setAttribute('data-charts-drawn', drawn);"
         # Every chart: some series with a value, and a legend on screen naming every series before any hover.
         " const bare = charts.filter(c => { const u = c.uplot, legend = u.root.querySelector('.u-legend');"
         "   const named = u.series.slice(1).every(s => legend.textContent.includes(s.label));"
         "   const data = u.data.slice(1).some(v => v.some(x => x != null));"
         "   const blank = [...legend.querySelectorAll('.u-value')].some(v => v.textContent.trim() === '-');"
         "   return !(data && named && !blank && legend.offsetHeight > 0); }).map(c => c.title);"
         " document.body.setAttribute('data-bare', JSON.stringify(bare));"
         # The first screen (1400×900): where the conclusion, the cards and the latency–throughput chart end.
         " const bottom = sel => Math.round(document.querySelector(sel).getBoundingClientRect().bottom);"
         " document.body.setAttribute('data-fold', JSON.stringify({answer: bottom('.answer'), cards: bottom('.cards'),"
         "   thesis: bottom(\".chart[title^='latency against throughput']\")}));"
         " const inflight = charts.filter(c => c.title.startsWith('requests in flight')).map(c => c.uplot.data[1]);"
         " document.body.setAttribute('data-inflight', JSON.stringify(inflight));"
         " const u = document.querySelector(\".chart[title^='each request']\").uplot;"
         " u.setCursor({left: u.bbox.width / devicePixelRatio / 2, top: 5});"
         " document.body.setAttribute('data-hover', u.root.querySelector('.u-legend .u-value').textContent); });"
         "</script>")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--window-size=1400,900", "--virtual-time-budget=5000"]


def test_report_page_and_its_images_load_in_a_browser(tmp_path: Path, sim_url: str) -> None:
    scenario = tmp_path / "html.yaml"
    scenario.write_text(SMALL)
    proc = harness("run", str(scenario), "--endpoint", sim_url, "--reports-dir", str(tmp_path / "r"),
                   "--accelerator", "8xH100, TP 8")
    assert proc.returncode == 0, proc.stderr
    assert f"run html against {sim_url} (8xH100, TP 8)" in proc.stderr
    (run_dir,) = (tmp_path / "r").iterdir()
    page = (run_dir / "report.html").read_text()
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body>", PROBE + "</body>"))
    dom = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                          probed.as_uri()], capture_output=True, text=True, timeout=90).stdout
    assert "harness report: html" in dom and "Batches of 16 deliver" in dom
    # The page opens with what was run against what, asking for what, and how it ended.
    assert '<span class="k">model</span> llama-3.1-8b' in dom
    assert f'<span class="k">target</span> {sim_url} (8xH100, TP 8, as declared)' in dom
    assert '<span class="k">SLOs</span> ttft ≤ 200 ms' in dom and '<span class="k">ended</span> complete' in dom
    assert '<span class="k">phases</span> open, batch-16 · ' in dom
    assert '<span class="k">workload</span> prompts ~64 tokens, answers ~16 tokens' in dom
    # Above the fold of a 1400×900 window: the conclusion, a card per phase with its verdict, the thesis chart.
    fold = json.loads(html.unescape(re.search(r'data-fold="([^"]*)"', dom).group(1)))  # type: ignore[union-attr]
    assert fold["answer"] < fold["cards"] < fold["thesis"] <= 900, fold
    assert dom.count('class="card ') == 2 and "TTFT p99" in dom
    # Every chart has data and a legend that names its series without a hover.
    bare = json.loads(html.unescape(re.search(r'data-bare="([^"]*)"', dom).group(1)))  # type: ignore[union-attr]
    assert bare == [], bare
    # The batch phase's requests in flight: its batch of 16 for the batches' duration, not 0 between events.
    inflight = json.loads(html.unescape(re.search(r'data-inflight="([^"]*)"', dom).group(1)))  # type: ignore
    batch = [v for v in inflight[-1] if v]
    assert max(batch) == 16 and sum(v == 16 for v in batch) >= len(batch) / 2, inflight[-1]
    shot = tmp_path / "first-screen.png"
    subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile2'}",
                    f"--screenshot={shot}", probed.as_uri()], capture_output=True, timeout=90)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (1400, 900)
    assert len(png) > 30_000  # drawn: a blank or text-only first screen compresses far smaller
    loaded = re.search(r'data-images-loaded="(\d+)"', dom)
    assert loaded is not None, dom[:500]
    # No image and nothing fetched from anywhere: the page is one file, its charts drawn in it.
    assert int(loaded.group(1)) == page.count("<img ") == 0
    assert "src='http" not in page and "src=\"http" not in page
    # Every chart drew: the workload's lengths, the three CDFs, and each phase's requests, rates, in flight
    # (and the server's side of the open phase).
    drawn = re.search(r'data-charts-drawn="(\d+)"', dom)
    assert drawn is not None and int(drawn.group(1)) == page.count("class='chart'") >= 2 + 3 + 2 * 3
    hover = re.search(r'data-hover="([^"]*)"', dom)
    named = hover and re.fullmatch(r"([0-9a-f]+-0-\d+) at [\d.]+ s", hover.group(1))
    assert named, hover  # a request of the first phase, by the id requests.csv knows it by
    assert f"\n{named.group(1)},open," in (run_dir / "requests.csv").read_text()


def test_a_phase_of_failures_still_gets_its_figures() -> None:
    """Every request failed, some never sent: the page renders, with the failures plotted by status."""
    from harness.config.scenario import SLO
    from harness.report.html import render_html
    from tests.helpers import MS, phase_json, rec, summary_of

    records = [rec(0, i, [], status="http_error", idx=i) for i in range(5)]
    records += [rec(0, 5, [8, 9], status="bad_stream", idx=5), rec(0, 0, [], status="cancelled", idx=6)]
    records[-1].sent_ns = None
    for r in records:
        r.end_ns += 3 * MS
    summary = summary_of([{"name": "p", **phase_json(records, SLO())}], scenario="broken")
    page = render_html(summary, records)
    # The prompt lengths sent; no CDF, no per-request chart and no output lengths: nothing succeeded.
    assert "title='prompt tokens (counted by the server where it said)'" in page
    assert "title='output tokens received (ok requests)'" not in page
    assert "Latency distributions" not in page and "each request: TTFT" not in page
    assert "failed requests per second, by status" in page and '"label":"bad_stream"' in page
    assert "0 / 6 / 1" in page  # ok / errored / cancelled in the table


def test_the_accelerator_matrix_page_fits_1280_px(tmp_path: Path) -> None:
    """matrix.html's table was cut at 1,280 px: every column in view at that width, no sideways scroll."""
    import asyncio

    from harness.config.scenario import parse_scenario
    from harness.report.matrix import matrix_html
    from harness.tools.matrix import accelerator_matrix

    scenario = parse_scenario({
        "name": "matrix", "seed": 3, "workload": {"prompt_tokens": 512, "output_tokens": 64},
        "slo": {"ttft_ms": 300, "tpot_ms": 30}, "simulator": {"accelerator": "h100-sxm", "model": "llama-3.1-8b"},
        "phases": [{"name": "chat", "load": {"type": "poisson", "rate": 8, "requests": 40}},
                   {"name": "bulk", "load": {"type": "batch", "size": 32, "batches": 1}}]}, "test")
    result = asyncio.run(accelerator_matrix(scenario, ["a100-80g", "h100-sxm", "b200", "cerebras-cs3"],
                                            {"a100-80g": 1.6, "h100-sxm": 2.5, "b200": 5.5}, scenario.slo))
    probe = ("<script>addEventListener('load', () => { const pres = [...document.querySelectorAll('pre')];"
             " document.body.setAttribute('data-cut', JSON.stringify(pres.map(p => p.scrollWidth - p.clientWidth)));"
             " document.body.setAttribute('data-page', document.documentElement.scrollWidth - innerWidth); });"
             "</script>")
    page = tmp_path / "matrix.html"
    page.write_text(matrix_html(result).replace("</body>", probe + "</body>"), encoding="utf-8")
    flags = [f if not f.startswith("--window-size") else "--window-size=1280,900" for f in CHROMIUM_FLAGS]
    dom = subprocess.run([chromium(), *flags, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                          page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    cut = json.loads(html.unescape(dom.split('data-cut="', 1)[1].split('"', 1)[0]))
    assert cut and max(cut) <= 0, cut
    assert int(dom.split('data-page="', 1)[1].split('"', 1)[0]) <= 0
