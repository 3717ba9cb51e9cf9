"""`harness run` as a user runs it: a real process, real files, the bundled simulator."""

from __future__ import annotations

import html
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from harness.config.scenario import Hardware, load_scenario
from harness.stats.schema import PhaseSummary
from harness.stats.stress import estimate
from harness.tools.predict import predict
from tests.helpers import harness

# The default run against its prediction; Ctrl-C at a moment of the run.
pytestmark = [pytest.mark.timing, pytest.mark.pairs]

ROOT = Path(__file__).resolve().parents[2]

SMALL = """
name: small
seed: 1
workload: {prompt_tokens: 64, output_tokens: 16}
slo: {ttft_ms: 2000}
phases:
  - name: open
    load: {type: constant, rate: 20, requests: 10}
  - name: closed
    load: {type: concurrency, concurrency: 3, requests: 6}
"""


def sentence_in_page(page: str, summary: dict) -> bool:
    """The report page carries the table and the conclusion."""
    return "latency p50 / p90 / p99 ms" in page and html.escape(summary["comparison"]["conclusion"][0]) in page


def only_run_dir(reports: Path) -> Path:
    (run_dir,) = list(reports.iterdir())
    return run_dir


def test_default_run_is_the_quickstart_and_shows_the_thesis(tmp_path: Path) -> None:
    proc = harness("run", "--reports-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    for label in ("interactive", "training-batch", "latency p50 / p90 / p99 ms", "TTFT", "ITL", "TPOT", "E2E",
                  "output tokens/s", "goodput", "schedule lag p99"):
        assert label in proc.stdout
    run_dir = only_run_dir(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["schema"] == "harness.summary/2"
    interactive, batch = summary["phases"]
    # Training-style batches win on throughput; interactive arrivals win on time to first token.
    assert batch["throughput"]["output_tokens_per_s"] > 2 * interactive["throughput"]["output_tokens_per_s"]
    assert interactive["latency_ms"]["ttft"]["p50"] * 5 < batch["latency_ms"]["ttft"]["p50"]
    # Virtual time predicts the same run: the real one adds only HTTP and the simulator's noise.
    predicted = predict(load_scenario(ROOT / "scenarios" / "quickstart.yaml")).to_json()["phases"]
    for real, virtual in zip(summary["phases"], predicted, strict=True):
        for metric in ("output_tokens_per_s", "requests_per_s"):
            assert real["throughput"][metric] == pytest.approx(virtual["throughput"][metric], rel=0.1)
        # Batches: the mean, not the median: a batch's TTFTs fall on four prefill-chunk levels, and which level
        # holds the median flips with microseconds of send jitter. Interactive: the median, which one stalled
        # second of a shared machine cannot move (a clean-clone CI run once saw a 198 ms mean against 21).
        stat = "mean" if real["batches"] else "p50"
        assert real["latency_ms"]["ttft"][stat] == pytest.approx(virtual["latency_ms"]["ttft"][stat], rel=0.15)
        assert real["latency_ms"]["tpot"]["mean"] == pytest.approx(virtual["latency_ms"]["tpot"]["mean"], rel=0.1)
    rows = pd.read_csv(run_dir / "requests.csv")
    assert len(rows) == 60 + 128 and set(rows["status"]) == {"ok"}
    page = (run_dir / "report.html").read_text()
    assert sentence_in_page(page, summary)
    # The workload's lengths and the CDFs; then per phase its charts, the server's side included.
    assert page.count("title='TTFT: share of requests at or below'") == 1
    assert page.count("'server: requests running and waiting, KV cache usage'") == 2
    assert page.count("'each request: TTFT and mean ITL by send time'") == 2
    assert "http://" not in page.replace(summary["run"]["endpoint"]["base_url"], "")  # nothing to fetch
    table = pd.read_parquet(run_dir / "requests.parquet")
    assert list(table["request_id"]) == list(rows["request_id"])
    assert [len(c) for c in table["chunk_ns"]] == list(rows["num_chunks"]) == [128] * 188
    # The conclusion restates ratios of the table's own numbers.
    (comp,) = summary["comparison"]["phases"]
    tput = batch["throughput"]["output_tokens_per_s"] / interactive["throughput"]["output_tokens_per_s"]
    ttft = batch["latency_ms"]["ttft"]["p99"] / interactive["latency_ms"]["ttft"]["p99"]
    assert comp["throughput_ratio"] == pytest.approx(tput) and comp["ttft_p99_ratio"] == pytest.approx(ttft)
    (sentence,) = summary["comparison"]["conclusion"]
    assert f"Batches of 64 deliver {tput:.1f}× the output tokens/s" in sentence
    assert f"{ttft:.1f}× its p99 TTFT" in sentence
    assert sentence in proc.stdout
    # Offline, from the saved records alone, the same statistics come back.
    rebuilt = harness("report", str(run_dir), "--no-write")
    assert rebuilt.returncode == 0 and sentence in rebuilt.stdout
    saved = (run_dir / "summary.json").read_bytes()
    kept = harness("report", str(run_dir))  # by default the run's own summary is kept
    assert kept.returncode == 0 and "written:" not in kept.stdout and (run_dir / "summary.json").read_bytes() == saved
    (run_dir / "report.html").unlink()  # a missing page alone is drawn again, the summary kept
    redrawn = harness("report", str(run_dir))
    assert redrawn.returncode == 0 and "report.html (it was missing)" in redrawn.stdout
    assert (run_dir / "report.html").is_file() and (run_dir / "summary.json").read_bytes() == saved
    from harness.report.offline import rebuild

    again = rebuild(run_dir).summary.to_json()
    for saved_phase, rebuilt_phase in zip(summary["phases"], again["phases"], strict=True):
        for key in ("requests", "latency_ms", "latency_by_status_ms", "throughput", "goodput", "tokens", "batches",
                    "server"):
            assert rebuilt_phase[key] == saved_phase[key], key
    assert (yaml.safe_load((run_dir / "scenario.yaml").read_text())["name"]) == "quickstart"
    check_server_side(run_dir, summary)


def check_server_side(run_dir: Path, summary: dict) -> None:
    """The simulator's /metrics was scraped through the run, and its account agrees with the client's."""
    scraped = summary["server_metrics"]
    assert scraped["unavailable"] is None and scraped["failures"] == {}
    duration_s = sum(p["whole_run"]["window"]["duration_s"] for p in summary["phases"])
    assert scraped["scrapes"] >= duration_s * 0.8  # once a second
    frame = pd.read_csv(run_dir / "server_metrics.csv")
    assert len(frame) == scraped["scrapes"] and frame["t_ns"].is_monotonic_increasing
    # Every token the clients received, the server counted as generated (the last scrape follows the run).
    assert frame["generation_tokens_total"].iloc[-1] == sum(p["tokens"]["output"] for p in summary["phases"])
    interactive, batch = (p["server"] for p in summary["phases"])
    # Poisson at 4 req/s keeps a few requests running; a batch of 64 keeps dozens, with a queue for prefill.
    assert 1 <= interactive["running_mean"] <= 10 and batch["running_max"] >= 32
    client = summary["phases"][0]["throughput"]["output_tokens_per_s"]
    assert interactive["generation_tokens_per_s"] == pytest.approx(client, rel=0.25)
    # Where the stress lands, from the scraped sim: series: decoding a few streams is memory-bound; the batch's
    # prefills and its 64-wide decodes do more arithmetic per byte read.
    calm, busy = (p["stress"] for p in summary["phases"])
    assert calm["source"] == busy["source"] == "simulator"
    assert calm["memory_bound_share"] > 0.8 and busy["mfu"] > 3 * calm["mfu"]
    assert 0.3 < calm["mbu"] < 0.8
    # What --hardware would estimate for an endpoint without this account agrees with it on the decode-bound phase.
    phase = PhaseSummary.model_validate(summary["phases"][0])
    guess = estimate(Hardware(accelerator="h100-sxm"), "llama-3.1-8b", phase, interactive["running_mean"])
    assert guess is not None and guess.source == "estimate" and guess.memory_bound_share == 1.0
    assert guess.mbu == pytest.approx(calm["mbu"], rel=0.1)


def test_run_against_an_endpoint_keeps_the_key_secret(tmp_path: Path, sim_url: str) -> None:
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    secret = "sk-do-not-leak-1234567890"
    proc = harness("run", str(scenario), "--endpoint", sim_url, "--api-key-env", "TEST_KEY", "--reports-dir",
                   str(tmp_path / "reports"), env={"TEST_KEY": secret})
    assert proc.returncode == 0, proc.stderr
    run_dir = only_run_dir(tmp_path / "reports")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [p["requests"]["ok"] for p in summary["phases"]] == [10, 6]
    assert summary["run"]["endpoint"]["model"] == "llama-3.1-8b"  # discovered from /v1/models
    for path in run_dir.iterdir():
        assert secret.encode() not in path.read_bytes(), path.name
    assert secret not in proc.stdout + proc.stderr


def test_a_model_the_endpoint_does_not_serve_stops_before_any_load(tmp_path: Path, sim_url: str) -> None:
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    proc = harness("run", str(scenario), "--endpoint", sim_url, "--model", "no-such-model",
                   "--reports-dir", str(tmp_path / "reports"))
    assert proc.returncode == 2  # bad input: the flag names a model the endpoint does not serve
    assert proc.stderr.strip().startswith("error: --model: 'no-such-model' is not served by")
    assert "llama-3.1-8b" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not any((tmp_path / "reports").iterdir())  # nothing was sent, no run directory written


def test_completions_api_and_failures_are_counted_by_cause(tmp_path: Path) -> None:
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL + "simulator: {faults: {error_rate: 1.0, error_status: 503}}\n")
    proc = harness("run", str(scenario), "--api", "completions", "--reports-dir", str(tmp_path / "reports"))
    assert proc.returncode == 4, proc.stderr  # the run went through; not one request succeeded
    assert "error: no request succeeded (HTTP 503 server_error ×16)" in proc.stderr
    summary = json.loads((only_run_dir(tmp_path / "reports") / "summary.json").read_text())
    for phase in summary["phases"]:
        assert phase["requests"]["ok"] == 0
        assert phase["requests"]["failure_reasons"] == {"HTTP 503 server_error": phase["requests"]["total"]}
    assert "0 / 10" in proc.stdout


LONG = """
name: long
workload: {prompt_tokens: 32, output_tokens: 200}
client: {stop_grace_s: GRACE}
phases:
  - name: open
    load: {type: constant, rate: 20, duration_s: 60}
  - name: never
    load: {type: batch, size: 2}
"""


def _interrupt(tmp_path: Path, sim_url: str | None, grace: float, signals: int, sent: tuple[int, ...] = ()
               ) -> tuple[subprocess.CompletedProcess[str], dict, pd.DataFrame]:
    """Ctrl-C as a terminal sends it: SIGINT to the whole foreground process group of the harness (and, with
    no `sim_url`, of the simulator it started), `signals` times; or the signals `sent`, in turn."""
    import os
    import signal
    import time

    scenario = tmp_path / "long.yaml"
    scenario.write_text(LONG.replace("GRACE", str(grace)))
    endpoint = ["--endpoint", sim_url] if sim_url else []
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", str(scenario), *endpoint,
                             "--reports-dir", str(tmp_path / "reports")], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    # Interrupt once the run is well under way (a slow machine takes longer to start the process).
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        csvs = list((tmp_path / "reports").glob("*/requests.csv"))
        if csvs and len(csvs[0].read_text().splitlines()) > 20:
            break
        time.sleep(0.1)
    for sig in sent or (signal.SIGINT,) * signals:
        os.killpg(proc.pid, sig)
        time.sleep(0.3)
    out, err = proc.communicate(timeout=60)
    run_dir = only_run_dir(tmp_path / "reports")
    summary = json.loads((run_dir / "summary.json").read_text())
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), summary, pd.read_csv(
        run_dir / "requests.csv")


def test_ctrl_c_stops_sending_and_waits_for_requests_in_flight(tmp_path: Path, sim_url: str) -> None:
    proc, summary, rows = _interrupt(tmp_path, sim_url, grace=30, signals=1)
    assert proc.returncode == 130, proc.stderr
    assert "SIGINT: stopped sending" in proc.stderr
    assert summary["run"]["stopped"] == "SIGINT" and summary["run"]["complete"] is False
    assert summary["phases"][-1]["incomplete"] == "stopped (SIGINT)"
    assert [p["name"] for p in summary["phases"]] == ["open"]  # the next phase never started
    assert 20 <= len(rows) < 200  # about a second of a 20 req/s schedule, not the planned 1,200
    assert set(rows["status"]) == {"ok"}  # in flight at the stop: all finished within the grace


def test_sigusr1_is_said_and_ignored_and_sigquit_stops_like_sigterm(tmp_path: Path, sim_url: str) -> None:
    """Both ended the process unhandled, with no summary."""
    import signal

    proc, summary, rows = _interrupt(tmp_path, sim_url, grace=30, signals=0, sent=(signal.SIGUSR1, signal.SIGQUIT))
    assert proc.returncode == 130, proc.stderr
    assert "SIGUSR1: ignored, the run goes on" in proc.stderr and "SIGQUIT: stopped sending" in proc.stderr
    assert summary["run"]["stopped"] == "SIGQUIT" and 20 <= len(rows) < 200
    assert set(rows["status"]) == {"ok"}  # the requests in flight finished within the grace


def test_second_ctrl_c_cancels_requests_in_flight_and_keeps_records(tmp_path: Path, sim_url: str) -> None:
    proc, summary, rows = _interrupt(tmp_path, sim_url, grace=30, signals=2)
    assert proc.returncode == 130
    statuses = set(rows["status"])
    assert "cancelled" in statuses and statuses <= {"ok", "cancelled"}
    assert summary["phases"][0]["requests"]["by_status"]["cancelled"] > 0


@pytest.mark.parametrize("signals", [1, 2])
def test_ctrl_c_on_the_bundled_simulator_says_stopped_everywhere_and_prints_no_traceback(
        tmp_path: Path, signals: int) -> None:
    proc, summary, rows = _interrupt(tmp_path, None, grace=30, signals=signals)
    assert proc.returncode == 130, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout and "Aborted" not in proc.stderr + proc.stdout
    banner = "STOPPED after"
    assert f"warning: {banner}" in proc.stderr and "by Ctrl-C (SIGINT); not run: never" in proc.stderr
    run = summary["run"]
    assert run["stopped"] == "SIGINT" and run["not_run"] == ["never"] and 0 < run["stopped_after_s"] < 60
    page = (only_run_dir(tmp_path / "reports") / "report.html").read_text()
    assert banner in page and "not run: never" in page
    assert len(rows) > 0
    if signals == 1:  # `harness report` says it was stopped as the run did
        again = harness("report", str(only_run_dir(tmp_path / "reports")))
        assert again.returncode == 0 and "STOPPED after" in again.stderr and "not run: never" in again.stderr


def test_a_run_says_when_the_server_gave_no_series(tmp_path: Path, sim_url: str) -> None:
    root = sim_url.removesuffix("/v1")
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL + f"endpoint: {{metrics_url: '{root}/no-metrics-here'}}\n")
    proc = harness("run", str(scenario), "--endpoint", sim_url, "--reports-dir", str(tmp_path / "reports"))
    assert proc.returncode == 0, proc.stderr
    assert f"warning: no server-side series: {root}/no-metrics-here gave HTTP 404" in proc.stderr
