"""The HTML report in a real headless browser (Debian's chromium, installed by `make test` / `.ci/run`)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import harness

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

PROBE = ("<script>window.addEventListener('load', () => { const ok = [...document.images]"
         ".filter(i => i.complete && i.naturalWidth > 0).length;"
         " document.body.setAttribute('data-images-loaded', ok); });</script>")


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("Debian's chromium is needed for this test: `make test` and `.ci/run` install it")
    return path


def test_report_page_and_its_images_load_in_a_browser(tmp_path: Path, sim_url: str) -> None:
    scenario = tmp_path / "html.yaml"
    scenario.write_text(SMALL)
    proc = harness("run", str(scenario), "--endpoint", sim_url, "--reports-dir", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp_path / "r").iterdir()
    page = (run_dir / "report.html").read_text()
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body>", PROBE + "</body>"))
    dom = subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
         probed.as_uri()], capture_output=True, text=True, timeout=90).stdout
    assert "harness report: html" in dom and "Batches of 16 deliver" in dom
    # The page opens with what was run against what, asking for what, and how it ended.
    assert "<th>model</th><td>llama-3.1-8b</td>" in dom and f"<td>{sim_url}</td>" in dom
    assert "<th>SLOs</th><td>ttft ≤ 200 ms</td>" in dom and "<th>ended</th><td>complete</td>" in dom
    assert "<th>phases</th><td>open, batch-16 · " in dom
    loaded = re.search(r'data-images-loaded="(\d+)"', dom)
    assert loaded is not None, dom[:500]
    # The CDFs, one time-series figure per phase, and the server's side of any phase scraped twice: all decoded.
    assert int(loaded.group(1)) == page.count("<img ") >= 3


def test_a_phase_of_failures_still_gets_its_figures() -> None:
    """Every request failed, some never sent: the page renders, with the failures plotted by status."""
    import base64

    from harness.config.scenario import SLO
    from harness.report.html import render_html
    from tests.helpers import phase_json
    from tests.unit.test_stats import MS, rec

    records = [rec(0, i, [], status="http_error", idx=i) for i in range(5)]
    records += [rec(0, 5, [8, 9], status="bad_stream", idx=5), rec(0, 0, [], status="cancelled", idx=6)]
    records[-1].sent_ns = None
    for r in records:
        r.end_ns += 3 * MS
    summary = {"run": {"scenario": "broken"}, "phases": [{"name": "p", **phase_json(records, SLO())}]}
    page = render_html(summary, records)
    images = re.findall(r"src='data:image/png;base64,([^']+)'", page)
    assert len(images) == 2 and all(base64.b64decode(b)[:4] == b"\x89PNG" for b in images)
    assert "0 / 6 / 1" in page  # ok / errored / cancelled in the table
