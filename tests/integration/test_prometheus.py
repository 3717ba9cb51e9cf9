"""The exporter, the Pushgateway push and the Grafana dashboard against the real things: Debian's `prometheus`
and `prometheus-pushgateway` on loopback (installed by `make test`), a real `harness run` as a user runs it.

The dashboard is checked against what is really exported: every query of every panel, its variables
substituted, must return data from that Prometheus after the run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "docker" / "grafana" / "dashboards" / "harness.json"
SCENARIO = """
name: prom
seed: 5
workload: {prompt_tokens: 64, output_tokens: 16}
phases:
  - name: open
    load: {type: poisson, rate: 20, requests: 60}
  - name: batch
    load: {type: batch, size: 8, batches: 2}
"""


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"Debian's {name} is needed for this test: `make test` and `.ci/run` install it")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, headers: dict[str, str] | None = None) -> bytes:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
        return bytes(r.read())


def _wait_ready(url: str, proc: subprocess.Popen[bytes], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{proc.args[0]} exited: {proc.stderr.read() if proc.stderr else ''!r}"
        try:
            _get(url)
            return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"{url} not ready in {seconds} s")


def _stop(proc: subprocess.Popen[Any]) -> None:
    proc.terminate()
    try:
        proc.communicate(timeout=15)  # reads and closes its pipes
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


@pytest.fixture
def faulty_sim() -> Iterator[str]:
    """A simulator answering one request in five with HTTP 500, so the failure panels have data."""
    proc = subprocess.Popen([sys.executable, "-m", "harness", "sim", "serve", "--port", "0", "--seed", "4",
                             "--fault-error-rate", "0.2"], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True)
    try:
        assert proc.stdout is not None
        yield json.loads(proc.stdout.readline())["url"]
    finally:
        _stop(proc)


class Prometheus:
    def __init__(self, tmp: Path, targets: dict[str, str]) -> None:
        self.port = _free_port()
        config = tmp / "prometheus.yml"
        jobs = "".join(f"  - job_name: {job}\n    static_configs: [{{targets: ['{t}']}}]\n"
                       for job, t in targets.items())
        config.write_text(f"global: {{scrape_interval: 500ms, scrape_timeout: 400ms}}\nscrape_configs:\n{jobs}")
        self.proc = subprocess.Popen(
            [_binary("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--enable-feature=exemplar-storage",
             "--log.level=warn"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _wait_ready(f"http://127.0.0.1:{self.port}/-/ready", self.proc)

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        answer = json.loads(_get(url))
        assert answer["status"] == "success", (expr, answer)
        return list(answer["data"]["result"])

    def value(self, expr: str) -> float:
        (series,) = self.query(expr)
        return float(series["value"][1])


def _panel_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"] for target in panel["targets"]]


def _substitute(expr: str) -> str:
    """Grafana's variables as a user picking this run would have them: all phases, the simulator's job."""
    for name, value in (("$scenario", "prom"), ("$phase", ".*"), ("$server", "simulator"),
                        ("$__rate_interval", "1m")):
        expr = expr.replace(name, value)
    assert "$" not in expr, expr
    return expr


def _run_dir(reports: Path) -> Path:
    (run_dir,) = reports.iterdir()
    return run_dir


def _counted(prom: Prometheus, summary: dict[str, Any], metric: str) -> bool:
    """Prometheus holds every phase's `metric` samples that summary.json counted. A scrape is not atomic: the
    histograms are collected before the request counter, so a scrape can count the last request and miss its ~15
    ITL samples (CI once saw a batch ITL p99 13% off that way)."""
    for phase in summary["phases"]:
        found = prom.query(f'sum(harness_{metric}_seconds_count{{scenario="prom", phase="{phase["name"]}"}})')
        if not found or float(found[0]["value"][1]) != phase["latency_ms"][metric]["count"]:
            return False
    return True


@pytest.mark.timing
def test_exporter_scraped_by_a_real_prometheus_feeds_every_dashboard_panel(tmp_path: Path, faulty_sim: str) -> None:
    exporter = _free_port()
    sim = urllib.parse.urlsplit(faulty_sim).netloc
    prom = Prometheus(tmp_path, {"harness": f"127.0.0.1:{exporter}", "simulator": sim})
    scenario = tmp_path / "prom.yaml"
    scenario.write_text(SCENARIO)
    reports = tmp_path / "reports"
    run = subprocess.Popen([sys.executable, "-m", "harness", "run", str(scenario), "--endpoint", faulty_sim,
                            "--metrics-port", str(exporter), "--metrics-hold", "60s", "--reports-dir", str(reports)],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while not list(reports.glob("*/summary.json")) and time.monotonic() < deadline:
            assert run.poll() is None, run.communicate()
            time.sleep(0.2)
        summary = json.loads((_run_dir(reports) / "summary.json").read_text())
        sent = sum(p["whole_run"]["requests"] for p in summary["phases"])
        # The exporter holds its final counts; wait for a scrape taken after the run.
        while time.monotonic() < deadline:
            found = prom.query('sum(harness_requests_total{scenario="prom"})')
            if found and float(found[0]["value"][1]) == sent:
                break
            time.sleep(0.3)
        assert prom.value('sum(harness_requests_total{scenario="prom"})') == sent == 60 + 16
        failed = prom.value('sum(harness_requests_total{scenario="prom", status="errored"})')
        assert failed == sum(p["requests"]["failed"] for p in summary["phases"]) > 0
        while not all(_counted(prom, summary, m) for m in ("ttft", "e2e", "itl")) and time.monotonic() < deadline:
            time.sleep(0.3)
        # histogram_quantile from the real Prometheus against the exact percentiles of summary.json: within the
        # buckets' stated 5% for TTFT, ITL and E2E, where the quantile's rank falls among many samples (p99 of 60
        # requests is the interpolation between its two slowest, which no histogram can resolve).
        for phase in summary["phases"]:
            for metric, stats in (("ttft", ("p50", "p90")), ("e2e", ("p50", "p90")), ("itl", ("p50", "p99"))):
                for stat in stats:
                    exact = phase["latency_ms"][metric][stat] / 1000
                    estimate = prom.value(f'histogram_quantile({int(stat[1:]) / 100}, sum by (le) (harness_{metric}'
                                          f'_seconds_bucket{{scenario="prom", phase="{phase["name"]}"}}))')
                    assert estimate == pytest.approx(exact, rel=0.05), (phase["name"], metric, stat)
        # The phases' final verdicts, set as the run ended: the scrape after that carries them.
        verdicts = {p["name"]: float(p["client_limited"]) for p in summary["phases"]}
        settled = time.monotonic() + 15
        while (limited := {s["metric"]["phase"]: float(s["value"][1]) for s in prom.query('harness_client_limited')}
               ) != verdicts and time.monotonic() < settled:
            time.sleep(0.3)
        assert limited == verdicts
        # A rate needs two samples in its window: a Prometheus whose first scrape of the exporter came late
        # (a slow start) has them a scrape later; the exporter holds its figures meanwhile.
        panels_by = time.monotonic() + 30
        while empty := [(title, expr) for title, expr in _panel_queries() if not prom.query(_substitute(expr))]:
            if time.monotonic() > panels_by:
                break
            time.sleep(0.5)
        assert not empty, f"panels with no data: {empty}"
        # The exporter's OpenMetrics carries request ids as exemplars, and they are the run's own.
        text = _get(f"http://127.0.0.1:{exporter}/metrics",
                    {"Accept": "application/openmetrics-text; version=1.0.0"}).decode()
        ids = set(re.findall(r'# \{request_id="([^"]+)"\}', text))
        records = {json.loads(line)["request_id"] for line in
                   (_run_dir(reports) / "requests.jsonl").read_text().splitlines()}
        assert ids and ids <= records
        bucket = r'harness_ttft_seconds_bucket\{le="[^"]+",phase="open",scenario="prom"\} \d+\.0 # \{request_id='
        assert re.search(bucket, text)
    finally:
        _stop(run)
        _stop(prom.proc)


def _pushed(port: int) -> dict[tuple[str, str], float]:
    """(metric with its labels, label set) → value, read back from the gateway's own /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    text = _get(f"http://127.0.0.1:{port}/metrics").decode()
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("harness_"):
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                values[(sample.name, labels)] = sample.value
    return values


@pytest.fixture
def pushgateway(tmp_path: Path) -> Iterator[int]:
    port = _free_port()
    # In memory only: Debian's build persists to /var/lib/prometheus/pushgateway.data by default, which would
    # carry one test's (and one run's) pushes into the next.
    proc = subprocess.Popen([_binary("prometheus-pushgateway"), f"--web.listen-address=127.0.0.1:{port}",
                             "--log.level=warn", "--persistence.file="], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        _wait_ready(f"http://127.0.0.1:{port}/-/ready", proc)
        yield port
    finally:
        _stop(proc)


def test_a_completed_and_a_stopped_run_both_reach_the_pushgateway(tmp_path: Path, sim_url: str,
                                                                   pushgateway: int) -> None:
    gateway = f"http://127.0.0.1:{pushgateway}"
    scenario = tmp_path / "push.yaml"
    scenario.write_text(SCENARIO.replace("name: prom", "name: push"))
    # Proxy variables naming a dead proxy: every request the harness makes goes direct, the push too.
    dead = "http://127.0.0.1:9"
    proxied = {**os.environ, "HTTP_PROXY": dead, "http_proxy": dead, "HTTPS_PROXY": dead, "NO_PROXY": "",
               "no_proxy": ""}
    done = subprocess.run([sys.executable, "-m", "harness", "run", str(scenario), "--endpoint", sim_url,
                           "--pushgateway", gateway, "--pushgateway-job", "nightly", "--pushgateway-label", "run=a",
                           "--reports-dir", str(tmp_path / "a")], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=proxied)
    assert done.returncode == 0, done.stderr
    assert "not pushed" not in done.stderr, done.stderr
    # Stopped: SIGTERM once it has sent a few requests, as a CI system's timeout would.
    long = tmp_path / "long.yaml"
    long.write_text(SCENARIO.replace("name: prom", "name: push").replace("requests: 60", "requests: 2000"))
    stopped = subprocess.Popen([sys.executable, "-m", "harness", "run", str(long), "--endpoint", sim_url,
                                "--pushgateway", gateway, "--pushgateway-job", "nightly",
                                "--pushgateway-label", "run=b", "--reports-dir", str(tmp_path / "b")],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        csvs = list((tmp_path / "b").glob("*/requests.csv"))
        if csvs and len(csvs[0].read_text().splitlines()) > 10:
            break
        time.sleep(0.1)
    os.kill(stopped.pid, signal.SIGTERM)
    _, err = stopped.communicate(timeout=90)
    assert stopped.returncode == 130, err
    pushed = _pushed(pushgateway)
    # Grouped by job, scenario and the given labels: no host name (the pushgateway adds an empty instance).
    group = "instance=,job=nightly,repeat=mean,run={},scenario=push"
    assert pushed[("harness_run_complete", group.format("a"))] == 1
    assert pushed[("harness_run_complete", group.format("b"))] == 0
    summary = json.loads(next((tmp_path / "a").glob("*/summary.json")).read_text())
    open_phase = summary["phases"][0]
    key = ("harness_summary_ttft_seconds",
           "instance=,job=nightly,phase=open,quantile=0.99,repeat=1,run=a,scenario=push")
    assert pushed[key] == pytest.approx(open_phase["latency_ms"]["ttft"]["p99"] / 1000)
    ok_key = ("harness_summary_requests", "instance=,job=nightly,phase=open,repeat=mean,run=a,scenario=push,status=ok")
    assert pushed[ok_key] == open_phase["requests"]["by_status"]["ok"]
    info = ("harness_run_info", f"instance=,job=nightly,repeat=1,run=a,run_id={summary['run']['run_id']},scenario=push")
    assert pushed[info] == 1


def test_shards_by_hand_push_side_by_side_each_under_its_share(tmp_path: Path, sim_url: str,
                                                               pushgateway: int) -> None:
    """Two shards of one run push to one gateway: two groups, `shard` 0/2 and 1/2, neither overwriting the other;
    their request counts add up to the run's."""
    scenario = tmp_path / "push.yaml"
    scenario.write_text(SCENARIO.replace("name: prom", "name: shards"))
    start_at = time.time() + 6
    procs = [subprocess.Popen([sys.executable, "-m", "harness", "run", str(scenario), "--endpoint", sim_url,
                               "--shard", f"{i}/2", "--start-at", repr(start_at), "--progress", "off",
                               "--pushgateway", f"http://127.0.0.1:{pushgateway}", "--pushgateway-job", "nightly",
                               "--reports-dir", str(tmp_path / str(i))], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in (0, 1)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "not pushed" not in err, err
    pushed = _pushed(pushgateway)
    complete = {labels: v for (name, labels), v in pushed.items()
                if name == "harness_run_complete" and "scenario=shards" in labels and "repeat=mean" in labels}
    groups = "instance=,job=nightly,repeat=mean,scenario=shards,shard={}"
    assert complete == {groups.format("0/2"): 1, groups.format("1/2"): 1}
    ok = [v for (name, labels), v in pushed.items()
          if name == "harness_summary_requests" and "scenario=shards" in labels and "phase=open" in labels
          and "status=ok" in labels and "repeat=1" in labels]
    assert sorted(ok) == [30, 30]  # the open phase's 60 requests, half each


def test_a_pushgateway_that_is_down_is_a_warning_not_a_lost_run(tmp_path: Path, sim_url: str) -> None:
    scenario = tmp_path / "push.yaml"
    scenario.write_text(SCENARIO.replace("requests: 60", "requests: 5"))
    down = f"http://127.0.0.1:{_free_port()}"
    proc = subprocess.run([sys.executable, "-m", "harness", "run", str(scenario), "--endpoint", sim_url,
                           "--pushgateway", down, "--reports-dir", str(tmp_path / "r")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"warning: pushgateway {down}: not pushed (URLError" in proc.stderr
    assert (_run_dir(tmp_path / "r") / "summary.json").is_file()
