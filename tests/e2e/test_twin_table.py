"""`harness sim fit` against an engine whose decode step is not linear in its batch — llama.cpp on a CPU
(issue 34: 24 ms a step with one stream, 31 with two, 52 with three, 51 with four) — recovers the table, and
the twin holds a held-out closed loop of six streams.

The "endpoint" is the bundled simulator serving a fitted preset with a decode table the fit is not told
about (6 slots, the first token one step after its prompt's, as llama-server), over real HTTP. Its times are
half of llama.cpp's and its Poisson rates twice those the engine took (issue 65: the same load against its
capacity, the same requests, in half the time); the bounds are relative, so the claim is the same."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import harness

pytestmark = pytest.mark.timing  # a twin fitted to measured latencies

TABLE = [10.0, 12.0, 20.0, 19.0, 26.0, 24.0]
PER_KTOKEN_MS = 200
HIDDEN = ("accelerators:\n  hidden-cpu: {kind: fitted, step_ms: 0, weights_ms: 0, "
          f"per_ktoken_ms: {PER_KTOKEN_MS}, per_seq_ms: 4, per_context_ktoken_ms: 0, kv_tokens: 1000000, slots: 6, "
          f"first_token_step: 1, prompt_step_ms: 7.5, decode_ms: {TABLE}}}\n")
LOAD = ["--prompt-tokens", "uniform:64:512", "--output-tokens", "24", "--seed", "1", "--progress", "off"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    tmp = tmp_path_factory.mktemp("table")
    (tmp / "hidden.yaml").write_text(HIDDEN)
    proc = subprocess.Popen([sys.executable, "-m", "harness", "sim", "serve", "--port", "0", "--presets",
                             str(tmp / "hidden.yaml"), "--accelerator", "hidden-cpu"],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    url = json.loads(proc.stdout.readline())["url"]
    try:
        dirs = {}
        for name, load in (("rate-4", ["--rate", "4", "--requests", "40"]),
                           ("rate-8", ["--rate", "8", "--requests", "60"]),
                           ("closed-6", ["--concurrency", "6", "--requests", "24"])):
            done = harness("run", "--endpoint", url, *load, *LOAD, "--reports-dir", str(tmp / name))
            assert done.returncode == 0, done.stdout + done.stderr
            (dirs[name],) = (tmp / name).iterdir()
        yield dirs
    finally:
        proc.terminate()
        proc.communicate(timeout=15)


def test_the_fit_recovers_a_decode_table_and_holds_on_a_closed_loop(runs: dict[str, Path], tmp_path: Path) -> None:
    preset = tmp_path / "twin.yaml"
    fitted = harness("sim", "fit", str(runs["rate-4"]), str(runs["rate-8"]), "--out", str(preset), "--slots", "6",
                     "--json")
    assert fitted.returncode == 0, fitted.stdout + fitted.stderr
    twin = json.loads(fitted.stdout)["accelerator"]
    print("fitted:", twin)
    assert twin["decode_ms"] is not None, "the linear model was kept for a step that is not linear"
    assert twin["decode_ms"][:4] == pytest.approx(TABLE[:4], rel=0.15)
    # prompts of 64–512 tokens tell it from the step's
    assert twin["per_ktoken_ms"] == pytest.approx(PER_KTOKEN_MS, rel=0.15)
    assert twin["first_token_step"] == 1
    assert "decode_ms" in preset.read_text()
    checked = harness("sim", "validate", str(preset), str(runs["closed-6"]), "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    errors = {r["figure"]: r["error"] for r in json.loads(checked.stdout)["errors"]}
    print("held-out closed loop:", errors)
    for figure in ("ITL p50 ms", "output tokens/s"):
        assert abs(errors[figure]) < 0.15, (figure, errors)
    # Not its TTFT p50: six users' 24 requests come in waves whose first tokens cluster (measured once: 460 ×4,
    # 536 ×4, 555 ×4, 794, 795, 855 ×4 … ms), and the median falls between two clusters — one request earlier or
    # later moves it by 40% (+27% in one run of three, −1% to −3% in the others, the fit the same each time).
    assert abs(errors["TTFT p99 ms"]) < 0.30, errors
