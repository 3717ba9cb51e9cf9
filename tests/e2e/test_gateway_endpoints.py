"""Endpoints as users reach them: behind a gateway that wants a header and is sent sampling fields, named the
ways peers' tools name them, and serving a reasoning model — each against the bundled simulator in its own
process, on loopback, through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT, only_run_dir

TENANT = "tenant-7c1d-secret"  # the header's value: it must reach the server and nothing the harness writes


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.wait(timeout=10)
    if proc.stdout is not None:
        proc.stdout.close()


def _serve(*args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "harness", "sim", "serve", "--port", "0", "--seed", "5", *args],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, "simulator did not start"
    return proc, json.loads(line)["url"]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A simulator that answers 401 without `X-Tenant: TENANT` and logs the body fields it was sent."""
    fields = tmp_path_factory.mktemp("gateway") / "fields.jsonl"
    proc, url = _serve("--require-header", f"X-Tenant: {TENANT}", "--record-fields", str(fields),
                       "--timing", "fixed", "--fixed-ttft-ms", "5", "--fixed-itl-ms", "2")
    try:
        yield url, fields
    finally:
        _stop(proc)


def _run(*args: str, reports: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "run", "--rate", "20", "--requests", "6",
                           "--output-tokens", "8", "--progress", "off", "--reports-dir", str(reports), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})


def _everything(reports: Path, proc: subprocess.CompletedProcess[str]) -> str:
    texts = [proc.stdout, proc.stderr]
    texts += [p.read_bytes().decode("utf-8", "replace") for p in reports.rglob("*") if p.is_file()]
    return "\n".join(texts)


def test_a_header_and_extra_body_reach_the_gateway_and_the_value_is_never_written(
        gateway: tuple[str, Path], tmp_path: Path) -> None:
    url, fields = gateway
    before = len(fields.read_text().splitlines()) if fields.exists() else 0
    body = '{"temperature": 0.25, "chat_template_kwargs": {"enable_thinking": false}, "priority": 3}'
    for how, env in ((f"X-Tenant: {TENANT}", None), ("X-Tenant: env:TENANT_VALUE", {"TENANT_VALUE": TENANT})):
        reports = tmp_path / how.split(":")[1].strip()[:3]
        done = _run("--endpoint", url, "--header", how, "--extra-body", body, reports=reports, env=env)
        assert done.returncode == 0, done.stderr
        summary = json.loads((only_run_dir(reports) / "summary.json").read_text())
        assert summary["phases"][0]["requests"]["ok"] == 6
        assert TENANT not in _everything(reports, done)
        saved = (only_run_dir(reports) / "scenario.yaml").read_text()
        assert "X-Tenant" in saved and ("env:TENANT_VALUE" in saved if env else "[REDACTED]" in saved)
    run_requests = [json.loads(line) for line in fields.read_text().splitlines()[before:]]
    assert len(run_requests) == 12
    assert all(f["temperature"] == 0.25 and f["priority"] == 3 and f["chat_template_kwargs"] == {
        "enable_thinking": False} and f["stream_options"]["include_usage"] for f in run_requests)


def test_without_the_header_the_gateway_refuses_before_any_load_and_says_what_to_check(
        gateway: tuple[str, Path], tmp_path: Path) -> None:
    done = _run("--endpoint", gateway[0], reports=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "401" in done.stderr and "--header" in done.stderr


def test_a_saved_run_with_a_literal_header_asks_for_it_again(gateway: tuple[str, Path], tmp_path: Path) -> None:
    done = _run("--endpoint", gateway[0], "--header", f"X-Tenant: {TENANT}", reports=tmp_path / "first")
    assert done.returncode == 0, done.stderr
    again = subprocess.run([sys.executable, "-m", "harness", "run", str(only_run_dir(tmp_path / "first") /
                            "scenario.yaml"), "--progress", "off", "--reports-dir", str(tmp_path / "again")],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "X-Tenant" in again.stderr and "not saved" in again.stderr


def test_vllms_base_url_and_path_pair_and_a_pasted_request_url_both_run(sim_url: str, tmp_path: Path) -> None:
    origin = sim_url.removesuffix("/v1")
    pair = _run("--base-url", origin, "--endpoint", "/v1/chat/completions", reports=tmp_path / "pair")
    assert pair.returncode == 0, pair.stderr
    assert f"endpoint: {sim_url} (chat API" in pair.stderr
    pasted = _run("--endpoint", f"{sim_url}/completions", reports=tmp_path / "pasted")
    assert pasted.returncode == 0, pasted.stderr
    assert "completions API" in pasted.stderr
    summary = json.loads((only_run_dir(tmp_path / "pasted") / "summary.json").read_text())
    assert summary["run"]["endpoint"]["base_url"] == sim_url and summary["run"]["endpoint"]["api"] == "completions"


def test_a_reasoning_model_gets_both_first_token_times_and_is_judged_on_the_answers(tmp_path: Path) -> None:
    proc, url = _serve("--reasoning-tokens", "200")
    try:
        done = _run("--endpoint", url, "--rate", "4", "--output-tokens", "250", "--slo", "ttft=500ms",
                    reports=tmp_path / "first")
        answer = _run("--endpoint", url, "--rate", "4", "--output-tokens", "250", "--slo", "ttft_answer=500ms",
                      reports=tmp_path / "answer")
    finally:
        _stop(proc)
    assert done.returncode == 0, done.stderr
    phase = json.loads((only_run_dir(tmp_path / "first") / "summary.json").read_text())["phases"][0]
    assert phase["tokens"]["reasoning_reported"] == 6 and phase["tokens"]["reasoning"] == 6 * 200
    latency = phase["latency_ms"]
    # The answer's first token comes ~199 inter-token gaps after the first thinking token.
    gaps = (latency["ttft_answer"]["p50"] - latency["ttft"]["p50"]) / latency["itl"]["p50"]
    assert 150 < gaps < 250, gaps
    assert "TTFT (answer)" in done.stdout and "200 / 50" in done.stdout
    # A TTFT SLO passes on the thinking token, and says so, naming the answer's.
    assert phase["goodput"]["fraction"] == 1 and "TTFT (thinking) p99 ≤ 500 ms" in done.stdout
    assert "judged the first thinking token" in done.stdout + done.stderr and "ttft_answer" in done.stderr
    # The same SLO on the answer's first token fails the row, the goodput, the sentence and the card.
    assert answer.returncode == 0, answer.stderr
    judged = json.loads((only_run_dir(tmp_path / "answer") / "summary.json").read_text())["phases"][0]
    assert judged["goodput"]["fraction"] == 0 and judged["goodput"]["missed"] == {"ttft_answer_ms": 6}
    assert "TTFT (answer) p99 ≤ 500 ms" in answer.stdout and "✗" in answer.stdout
    assert "0% of requests within the SLOs (TTFT (answer))" in answer.stdout
    page = (only_run_dir(tmp_path / "answer") / "report.html").read_text()
    assert "card missed" in page and "TTFT (answer) p99" in page


def test_worker_processes_carry_the_header_and_write_it_nowhere(gateway: tuple[str, Path],
                                                                 tmp_path: Path) -> None:
    done = _run("--endpoint", gateway[0], "--workers", "2", "--header", f"X-Tenant: {TENANT}", reports=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    assert summary["phases"][0]["requests"]["ok"] == 6
    assert TENANT not in _everything(tmp_path, done)  # the workers' folders and logs included
