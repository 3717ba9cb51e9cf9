"""Bad input: one line naming the file, field or flag, exit code 2, and nothing sent first."""

from __future__ import annotations

import socket
from pathlib import Path

from click.testing import CliRunner

from harness.cli import main
from tests.helpers import harness

GOOD = "name: t\nphases:\n  - name: p\n    load: {type: poisson, rate: 1, requests: 2}\n"


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_unwritable_reports_dir_fails_before_the_endpoint_is_contacted(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(GOOD)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    # Port 9 (discard) is closed here: contacting it would be exit 3, not 2.
    code, out = _run("run", str(scenario), "--endpoint", "http://127.0.0.1:9/v1", "--reports-dir", str(blocker / "r"))
    assert code == 2
    assert out.startswith(f"error: --reports-dir {blocker / 'r'}: cannot write there") and out.count("\n") == 1


def test_non_utf8_scenario_is_one_line(tmp_path: Path) -> None:
    scenario = tmp_path / "latin1.yaml"
    scenario.write_bytes(GOOD.encode() + b"description: caf\xe9\n")
    code, out = _run("run", str(scenario))
    assert code == 2 and out.startswith(f"error: {scenario}: not UTF-8 text") and out.count("\n") == 1


def test_every_problem_of_a_scenario_is_listed_one_per_line(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("name: t\ncolour: red\nworkload: {prompt_tokens: -1}\nphases:\n"
                        "  - name: p\n    load: {type: poisson, rate: 0, requests: 2}\n"
                        "  - name: q\n    load: {type: batch, size: 0}\n")
    code, out = _run("predict", str(scenario))
    assert code == 2
    lines = out.strip().splitlines()
    assert lines[0] == f"error: {scenario}: colour: unknown field"
    fields = {line.removeprefix("error: ").split(": ")[1] for line in lines}
    assert {"colour", "workload.prompt_tokens", "phases[0].load.rate", "phases[1].load.size"} <= fields
    assert len(lines) == 4  # one per problem, not one per union member pydantic tried


def test_search_refuses_predict_with_an_endpoint(tmp_path: Path) -> None:
    code, out = _run("search", "--predict", "--endpoint", "http://127.0.0.1:9/v1", "--slo", "ttft=1s")
    assert code == 2 and "--endpoint" in out and "--predict" in out


def test_sim_serve_on_a_port_in_use_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = harness("sim", "serve", "--port", str(port), timeout=60)
    assert proc.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr and "Traceback" not in proc.stderr


def test_negative_trace_lengths_are_bad_rows(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_tokens": 5, "output_tokens": 3}\n'
                     '{"timestamp": 1, "input_tokens": 5, "output_tokens": -3}\n')
    code, out = _run("trace", "inspect", str(trace))
    assert code == 2 and f"{trace}:2: " in out and "negative token count" in out
    code, out = _run("trace", "inspect", str(trace), "--skip-bad-rows")
    assert code == 0 and "skipped {'bad_rows': 1}" in out


def test_a_simulator_that_cannot_hold_its_model_is_bad_input(tmp_path: Path) -> None:
    scenario = tmp_path / "big.yaml"
    scenario.write_text(GOOD + "simulator: {accelerator: a100-80g, model: llama-3.1-70b}\n")
    for command in ("predict", "run"):
        code, out = _run(command, str(scenario), "--reports-dir", str(tmp_path)) if command == "run" else \
            _run(command, str(scenario))
        assert code == 2 and out.count("\n") == 1, (command, out)
        assert "llama-3.1-70b's weights (141 GB in bf16) do not fit 1 × a100-80g" in out
    fp8 = tmp_path / "fp8.yaml"
    fp8.write_text(GOOD + "simulator: {accelerator: a100-80g, model: llama-3.1-70b, dtype: fp8}\n")
    code, out = _run("predict", str(fp8))  # 70 GB of fp8 weights leave room, not for a 128k-token request
    assert code == 2 and "the estimated maximum model length is" in out, out
    short = tmp_path / "short.yaml"
    short.write_text(GOOD + "simulator: {accelerator: a100-80g, model: llama-3.1-70b, dtype: fp8, "
                            "max_model_len: 4096}\n")
    assert _run("predict", str(short))[0] == 0  # as vLLM starts it with --max-model-len 4096


def test_a_key_echoed_by_a_refusing_endpoint_never_reaches_the_terminal(tmp_path: Path) -> None:
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    secret = "sk-echoed-9876543210"

    class Echo(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # a 401 whose error type is the key it was sent
            key = self.headers.get("Authorization", "").removeprefix("Bearer ")
            body = json.dumps({"error": {"message": f"bad key {key}", "type": key}}).encode()
            self.send_response(401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        scenario = tmp_path / "s.yaml"
        scenario.write_text(GOOD)
        proc = harness("run", str(scenario), "--endpoint", f"http://127.0.0.1:{server.server_port}/v1",
                       "--api-key-env", "ECHO_KEY", "--reports-dir", str(tmp_path / "r"), env={"ECHO_KEY": secret})
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 3
    assert "[REDACTED]" in proc.stderr and secret not in proc.stdout + proc.stderr


def test_answers_longer_than_the_served_models_context_are_refused_before_any_is_sent(
        sim_url: str, tmp_path: Path) -> None:
    """The model list says the context (vLLM's max_model_len, as the simulator gives it): a workload no request of
    which can fit is bad input, not a run of HTTP 400s."""
    proc = harness("run", "--endpoint", sim_url, "--rate", "5", "--requests", "2", "--output-tokens", "5000000",
                   "--reports-dir", str(tmp_path))
    assert proc.returncode == 2, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert "at least 5,000,000 tokens" in line and "context of" in line and "workload.output_tokens" in line
    assert not list(tmp_path.glob("*/requests.jsonl"))  # nothing sent
