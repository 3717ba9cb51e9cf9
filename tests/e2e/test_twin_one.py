"""`harness sim twin URL` against the bundled simulator over real HTTP: it measures the slots with a burst where
the endpoint does not say them (and asks for --slots where a burst cannot tell), refuses a budget too short, and
otherwise designs its runs, fits, validates on held-out loads and exits by its verdict — the twin recovering the
simulator's hidden device within 5% (issue 44).

The hidden device (as tests/e2e/test_twin.py's): 400 TFLOP/s, 3.2 TB/s, 24 GB, Llama-3.1-8B, 3% step noise;
a decode step of a few sequences costs its weights' read, launches and fixed time, 8.30 ms, and a prompt's
compute 60.5 ms per 1,000 tokens (a lone prompt: `prompt_alone_ms`)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from harness.devices.fitted import FittedAccelerator, FittedModel
from harness.devices.step import StepLoad
from harness.twin.checks import decode_ms
from harness.twin.make import FATAL
from tests.helpers import harness
from tests.hidden_gpu import DECODE_FIXED_MS, HIDDEN, prompt_alone_ms

pytestmark = pytest.mark.timing  # a twin fitted to measured latencies

SLOTS = 4


def serve(tmp: Path, slots: int) -> subprocess.Popen[str]:
    (tmp / "hidden.yaml").write_text(HIDDEN)
    return subprocess.Popen([sys.executable, "-m", "harness", "sim", "serve", "--port", "0", "--presets",
                             str(tmp / "hidden.yaml"), "--accelerator", "hidden-gpu", "--max-num-seqs", str(slots),
                             "--max-model-len", "16384"], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc = serve(tmp_path_factory.mktemp("twin-one"), SLOTS)
    assert proc.stdout is not None
    try:
        yield json.loads(proc.stdout.readline())["url"]
    finally:
        proc.terminate()
        proc.communicate(timeout=15)


def test_an_endpoint_that_does_not_say_its_slots_has_them_measured_by_a_burst(sim: str, tmp_path: Path) -> None:
    """vLLM says no max_num_seqs: 64 requests at once, and the most running while others waited is the limit.
    (The budget here is too short for any design: the command stops after the burst.)"""
    done = harness("sim", "twin", sim, "--budget", "3s", "--out", str(tmp_path / "t.yaml"))
    assert f"at most {SLOTS} running while others waited" in done.stderr, done.stderr
    assert done.returncode == 2 and "--budget: 3 s is too short" in done.stderr


def test_an_engine_that_runs_the_whole_burst_at_once_needs_the_flag(tmp_path: Path) -> None:
    proc = serve(tmp_path, 128)
    assert proc.stdout is not None
    try:
        done = harness("sim", "twin", json.loads(proc.stdout.readline())["url"], "--out", str(tmp_path / "t.yaml"))
    finally:
        proc.terminate()
        proc.communicate(timeout=15)
    assert done.returncode == 2, done.stderr
    assert "all 64 ran at once" in done.stderr
    assert "--slots: the endpoint does not say how many requests it decodes at once" in done.stderr
    assert not (tmp_path / "t.yaml").exists()


def test_a_budget_shorter_than_the_shortest_design_is_refused(sim: str, tmp_path: Path) -> None:
    done = harness("sim", "twin", sim, "--slots", str(SLOTS), "--budget", "3s", "--out", str(tmp_path / "t.yaml"))
    assert done.returncode == 2, done.stderr
    assert "--budget: 3 s is too short for this endpoint: the shortest design takes ~" in done.stderr


def test_one_command_fits_recovers_the_device_and_validates_on_loads_it_held_out(sim: str, tmp_path: Path) -> None:
    out = tmp_path / "twin.yaml"
    # A budget of 50 s takes the design's shortest open-loop runs (16 requests a Poisson load, not 48): 30 s
    # where the fullest took 50, the device recovered within 2% either way (issue 65, measured on this machine).
    done = harness("sim", "twin", sim, "--slots", str(SLOTS), "--budget", "50s", "--out", str(out), "--json")
    result = json.loads(done.stdout)
    runs = {Path(r["run"]).name.split("-", 1)[1] for r in result["errors"]}
    assert runs == {"poisson-held", f"closed-{SLOTS}", f"batch-{SLOTS}", f"closed-{SLOTS}-again",
                    f"batch-{SLOTS}-again"}
    held = {(f["load"], f["figure"]): f for f in result["held_out"]}  # figures the client could have moved: not
    assert {load for load, _ in held} <= {"poisson-held", f"closed-{SLOTS}", f"batch-{SLOTS}"}
    assert all(len(f["measured"]) <= (1 if load == "poisson-held" else 2) for (load, _), f in held.items())
    # The verdict is the figures' and the findings': exit 0 exactly when every held-out figure is within its bound
    # (or the engine's own difference between its two runs, where wider) and no finding condemns the fit; where
    # something misses beside a run the client limited (a busy machine), no verdict (5); else 99
    within = all(abs(f["error"]) <= max(0.30 if "p99" in f["figure"] else 0.15, f["spread"] or 0.0)
                 and not f["unsteady"] for f in held.values())
    assert result["holds"] is (within and not {f["code"] for f in result["findings"]} & set(FATAL)), result
    assert result["verdict"] == ("holds" if result["holds"] else "no verdict" if result["client_limited"]
                                 else "does not hold")
    assert done.returncode == {"holds": 0, "no verdict": 5, "does not hold": 99}[result["verdict"]], done.stderr
    # What steps decide holds on every held-out load; a closed loop's or batch's TTFT here (25–40 ms) is a third
    # HTTP and parsing that a burst of requests stretches, which the step model holds to a median (docs)
    steps_decide = [f for (load, figure), f in held.items() if figure in ("ITL p50 ms", "output tokens/s")
                    or (load == "poisson-held" and figure == "TTFT p50 ms")]
    assert all(abs(f["error"]) <= 0.15 for f in steps_decide), held
    # It says how far it has come and how long it expects to take, before the first run
    assert "runs to fit on, 5 held out; about" in done.stderr and f"[1/{SLOTS + 3 + 1 + 1 + 5}]" in done.stderr
    assert "capacity from the ramp" in done.stderr
    a = FittedAccelerator(**{k: v for k, v in result["accelerator"].items()})
    # The hidden device recovered: a decode step of 1–4 sequences within 5%, and a lone prompt of 512 and 1,024 tokens
    # (the lengths its price rests on) within 10% (bench/twin_verdict.py, quiet: within 2% in five runs; a clean-clone
    # CI run on this 2-core machine read 512 tokens 8.3% low, a fit without the attention term is ~20% off)
    steps = decode_ms(a, np.arange(1, SLOTS + 1, dtype=np.float64), np.full(SLOTS, 0.1))
    assert np.all(np.abs(steps / DECODE_FIXED_MS - 1) < 0.05), steps
    for n in (512, 1024):
        load = StepLoad(tokens=n, seqs=1, decodes=0, prefill_attn=n * n / 2)
        assert FittedModel(a).step_seconds(load) * 1e3 == pytest.approx(prompt_alone_ms(n), rel=0.10), n
    assert a.slots == SLOTS and a.fitted_batch == [1, SLOTS] and a.fitted_prompt_tokens == [32, 1024]
    # predict on the twin warns where a scenario leaves the envelope it was fitted on
    scenario = tmp_path / "wide.yaml"
    scenario.write_text("name: wide\nsimulator: {accelerator: twin}\nworkload: {prompt_tokens: 4000, "
                        "output_tokens: 16}\nphases:\n  - {name: crowd, load: {type: concurrency, concurrency: 32, "
                        "requests: 64}}\n")
    said = harness("predict", str(scenario), "--presets", str(out))
    assert said.returncode == 0, said.stderr
    assert "crowd: 32 requests at once; the fit timed decode steps of up to 4 sequences" in said.stderr
    assert "prompts of 4,000 tokens; the fit saw 32–1,024: outside what 'twin' was fitted on" in said.stderr
