"""SLO search: bisection on a fake server with a known capacity, and on the simulated accelerator."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.cli.search import trial_line
from harness.config.scenario import SLO, Scenario, load_scenario
from harness.stats.capacity import SearchTrial
from harness.stats.schema import Summary
from harness.tools.search import MIN_REQUESTS, SETTLE_E2E, parse_slo, search, trial_scenario
from harness.voice import Heard
from tests.helpers import phase_json, rec, summary_of

ROOT = Path(__file__).resolve().parents[2]


def trial_summary(goodput: float, requests: int, tokens_per_s: float) -> Summary:
    """A trial's summary as a fake server would make it: one phase with the figures the search reads."""
    phase = phase_json([rec(0, 0, [5, 6], completion=2)], SLO()) | {"name": "trial"}
    phase["goodput"] |= {"fraction": goodput}
    phase["requests"] |= {"total": requests}
    phase["throughput"] |= {"output_tokens_per_s": tokens_per_s}
    return summary_of([phase])


def test_slo_text_parses_with_units() -> None:
    assert parse_slo("ttft_p99=500ms, tpot_p99=0.05s") == SLO(ttft_ms=500.0, tpot_ms=50.0)
    assert parse_slo("ttft=500ms,e2e=2s") == SLO(ttft_ms=500.0, e2e_ms=2000.0)  # per request, as goodput counts
    for bad in ("ttfb=5ms", "ttft_p99=fast", "ttft", ""):
        with pytest.raises(ValueError):
            parse_slo(bad)


async def test_bisection_finds_a_known_capacity_and_an_interval_around_it() -> None:
    calls: list[tuple[float, int]] = []

    async def fake(s: Scenario) -> Summary:
        rate = s.phases[0].load.rate  # type: ignore[union-attr]
        capacity = 10.0 + (s.seed - 1) * 0.5  # each seed's capacity differs a little, as real runs do
        calls.append((rate, s.seed))
        return trial_summary(1.0 if rate <= capacity else 0.5, s.phases[0].load.requests,  # type: ignore[union-attr]
                             rate * 100)

    base = load_scenario(ROOT / "scenarios" / "quickstart.yaml").model_copy(update={"seed": 1})
    found = await search(base, fake, SLO(ttft_ms=100), 0.95, 1.0, 64.0, 10.0, steps=8, repeats=3)
    assert found.per_seed_rps == pytest.approx([10.0, 10.5, 11.0], abs=0.3)
    assert found.interval_rps is not None and found.capacity_rps is not None
    lo, hi = found.interval_rps
    assert lo < found.capacity_rps < hi and lo < 10.5 < hi
    assert {seed for _, seed in calls} == {1, 2, 3}


def test_every_trial_sends_enough_requests_to_decide() -> None:
    base = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    slow = trial_scenario(base, 0.5, 10.0, 1, SLO(ttft_ms=100))
    assert slow.phases[0].load.requests == MIN_REQUESTS  # type: ignore[union-attr]  # 0.5 req/s × 10 s is 5
    fast = trial_scenario(base, 20.0, 10.0, 1, SLO(ttft_ms=100))
    assert fast.phases[0].load.requests == 200  # type: ignore[union-attr]


async def test_a_trial_with_too_few_requests_decides_nothing() -> None:
    async def cut_short(s: Scenario) -> Summary:  # every run stopped after 12 requests, all good
        return trial_summary(1.0, 12, 1.0)

    base = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    found = await search(base, cut_short, SLO(ttft_ms=100), 0.95, 1.0, 8.0, 10.0, steps=2, repeats=1)
    assert found.capacity_rps is None
    (only,) = found.trials
    assert (only.rate, only.goodput, only.requests, only.too_small, only.met, only.index) == (1.0, 1.0, 12, True,
                                                                                               False, 1)


def test_search_command_in_virtual_time() -> None:
    result = CliRunner().invoke(main, ["search", "--predict", "--slo", "ttft_p99=200ms,tpot_p99=30ms", "--duration",
                                       "5", "--repeats", "2", str(ROOT / "scenarios" / "sweep.yaml")])
    assert result.exit_code == 0, result.output
    assert "capacity:" in result.output
    rate = float(result.output.split("capacity: ")[1].split(" req/s")[0])
    assert 25 < rate < 55  # the sweep's knee sits at 40 req/s on the same simulated H100


def test_search_says_its_plan_each_trial_and_a_bound_that_still_passes() -> None:
    """The plan before the first trial (how many, how long at least), a line per trial as it ends, and when the
    top of the range still meets the SLOs, "capacity ≥" that bound, never the bound as the capacity."""
    result = CliRunner().invoke(main, ["search", "--predict", "--slo", "ttft=5s", "--low", "0.5", "--high", "2",
                                       "--duration", "5", "--repeats", "2", "--prompt-tokens", "64",
                                       "--output-tokens", "16"])
    assert result.exit_code == 0, result.output
    assert "search: Poisson rates 0.5–2 req/s, up to 12 trials" in result.output
    assert "the first at 0.5 req/s, lasting ≥ 100 s" in result.output
    # Numbered, with ✓/✗: the low bound, then the high one, which passed.
    assert "  trial 1 of ≤12 ✓" in result.output and "  trial 2 of ≤12 ✓" in result.output
    assert "trial 3 " not in result.output
    assert "still meets the SLOs: capacity ≥ 2 req/s (raise --high" in result.output
    assert "capacity:" not in result.output


def test_search_lengths_come_from_the_flags() -> None:
    result = CliRunner().invoke(main, ["search", "--predict", "--slo", "ttft=5s", "--high", "1", "--duration", "5",
                                       "--repeats", "2", "--prompt-tokens", "uniform:10:20", "--json"])
    assert result.exit_code == 0, result.output
    bad = CliRunner().invoke(main, ["search", "--predict", "--slo", "ttft=5s", "--output-tokens", "lots"])
    assert bad.exit_code == 2 and "--output-tokens" in bad.output


def test_search_rejects_a_bad_slo() -> None:
    result = CliRunner().invoke(main, ["search", "--predict", "--slo", "latency=5"])
    assert result.exit_code == 2 and "--slo" in result.output


SMALL_SERVER = """
name: narrow
seed: 5
workload: {prompt_tokens: 256, output_tokens: 32}
simulator: {max_num_seqs: 4}
phases:
  - name: p
    load: {type: poisson, rate: 1, requests: 10}
"""


@pytest.mark.timing
@pytest.mark.pairs
def test_search_over_real_http_agrees_with_virtual_time(tmp_path: Path) -> None:
    """Trials over loopback HTTP against one bundled simulator (four sequences at a time, so the
    capacity is low and trials short) find the capacity that virtual time predicts."""

    from tests.helpers import harness

    scenario = tmp_path / "narrow.yaml"
    scenario.write_text(SMALL_SERVER)
    args = [str(scenario), "--slo", "ttft_p99=150ms", "--goodput", "0.9", "--low", "4", "--high", "24",
            "--duration", "2", "--steps", "3", "--repeats", "1", "--min-requests", "8", "--json"]
    virtual = json.loads(harness("search", *args, "--predict").stdout)
    proc = harness("search", *args, "--reports-dir", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    real = json.loads(proc.stdout)
    assert real["capacity_rps"] == pytest.approx(virtual["capacity_rps"], rel=0.35)
    # One search folder: its result and its page, and every trial's run directory inside it, all against the one
    # simulator started for the search.
    (folder,) = (tmp_path / "r").iterdir()
    assert json.loads((folder / "search.json").read_text())["capacity_rps"] == real["capacity_rps"]
    assert "goodput against the trial's rate" in (folder / "search.html").read_text()
    runs = sorted(folder.glob("trial-*"))
    assert [r.name for r in runs] == [f"trial-{t['index']:02d}" for t in real["trials"]]
    urls = {json.loads((run / "summary.json").read_text())["run"]["endpoint"]["base_url"] for run in runs}
    assert len(urls) == 1


def test_search_takes_the_scenarios_own_slo(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nslo: {ttft_ms: 200ms}\nphases:\n  - name: p\n    load: {type: poisson, rate: 1, "
                    "requests: 5}\n")
    result = CliRunner().invoke(main, ["search", "--predict", str(path), "--duration", "2s", "--steps", "2",
                                       "--repeats", "1", "--min-requests", "5", "--json"])
    assert result.exit_code == 0, result.output
    assert "capacity_rps" in result.output
    bare = tmp_path / "bare.yaml"
    bare.write_text("name: b\nphases:\n  - name: p\n    load: {type: poisson, rate: 1, requests: 5}\n")
    result = CliRunner().invoke(main, ["search", "--predict", str(bare)])
    assert result.exit_code == 2 and "--slo" in result.output and "sets none" in result.output


def _slow_summary(goodput: float, requests: int, e2e_p99_ms: float) -> Summary:
    summary = trial_summary(goodput, requests, 100.0).to_json()
    phase = summary["phases"][0]
    phase["latency_ms"]["e2e"] |= {"p99": e2e_p99_ms}
    if goodput < 1:
        phase["goodput"] |= {"missed": {"tpot_ms": requests - int(goodput * requests)}}
    return Summary.from_json(summary)


async def test_trials_grow_to_a_few_e2e_times_and_say_so() -> None:
    """Trials shorter than a few E2E times end before the queue builds (6 s trials found 61 req/s where 20 s
    ones found 48.6): after a passing trial whose E2E p99 is 2.5 s, every trial lasts ≥ 8 × 2.5 s."""
    asked: list[float] = []
    notes: list[str] = []

    async def fake(s: Scenario) -> Summary:
        rate, requests = s.phases[0].load.rate, s.phases[0].load.requests  # type: ignore[union-attr]
        asked.append(requests / rate)
        return _slow_summary(1.0 if rate <= 10 else 0.5, requests, 2500.0 if rate <= 10 else 9000.0)

    base = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    found = await search(base, fake, SLO(ttft_ms=100), 0.95, 1.0, 64.0, 6.0, steps=4, repeats=1, min_requests=1,
                         voice=Heard(said=notes))
    assert asked[0] == pytest.approx(6.0, rel=0.2)  # the first trial, before any E2E was seen
    assert all(t >= SETTLE_E2E * 2.5 - 1 for t in asked[1:]), asked  # ≥ 20 s from then on
    assert found.trial_s == SETTLE_E2E * 2.5 and len(notes) == 1 and "trials now last ≥ 20 s" in notes[0]
    # The failing trials' 9 s E2E (their queue's) did not stretch trials further.
    assert max(asked) < SETTLE_E2E * 9


async def test_one_seed_claims_no_interval_and_each_trial_names_what_failed_it() -> None:
    async def fake(s: Scenario) -> Summary:
        rate, requests = s.phases[0].load.rate, s.phases[0].load.requests  # type: ignore[union-attr]
        return _slow_summary(1.0 if rate <= 10 else 0.5, requests, 10.0)

    said: list[SearchTrial] = []
    base = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    found = await search(base, fake, SLO(ttft_ms=100), 0.95, 1.0, 64.0, 10.0, steps=6, repeats=1,
                         said=said.append)
    assert found.capacity_rps is not None and found.interval_rps is None and found.to_json()["interval_rps"] is None
    assert [t.index for t in said] == list(range(1, len(said) + 1))
    assert all(t.failed_on == "TPOT" for t in said if not t.met) and any(not t.met for t in said)
    assert trial_line(said[1], 12).startswith("  trial 2 of ≤12 ✗") and "(TPOT)" in trial_line(said[1], 12)


@pytest.mark.timing
@pytest.mark.pairs
def test_search_says_something_within_10_s_and_every_15_s_after(tmp_path: Path) -> None:
    """Against the bundled simulator with a long first trial (--near 0.5: 0.5 req/s, ≥ 100 s): lines keep
    coming while it runs. Ctrl-C into that trial after ~26 s (bounded): exit 130, "partial", no capacity claimed
    from the cut trial."""
    import signal
    import subprocess
    import sys
    import threading
    import time

    proc = subprocess.Popen([sys.executable, "-m", "harness", "search", "--slo", "ttft=2s", "--prompt-tokens", "32",
                             "--output-tokens", "8", "--near", "0.5", "--reports-dir", str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stamps: list[float] = []
    lines: list[str] = []
    start = time.monotonic()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            stamps.append(time.monotonic() - start)
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(26)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)  # stderr is the reader thread's alone: communicate() would take its last lines
    reader.join(timeout=10)
    assert proc.stdout is not None
    out = proc.stdout.read()
    proc.stdout.close()
    if proc.stderr is not None:
        proc.stderr.close()
    assert proc.returncode == 130, "".join(lines)[-2000:]
    assert "capacity" not in out and any("partial: the search was stopped during a trial" in x for x in lines)
    assert not any("Traceback" in line for line in lines)
    assert stamps and stamps[0] < 10, lines
    during = [t for t in stamps if t < 25]
    gaps = [b - a for a, b in itertools.pairwise(during)] + [25 - during[-1]]
    # Generous beside the 10 s tick: a busy machine delays a line, it does not drop one.
    assert max(gaps) < 15, (gaps, lines)
    assert any("trial 1: rate=0.5 req/s" in line for line in lines)


REASONING = """
name: reasoning
seed: 5
workload: {prompt_tokens: 512, output_tokens: 256}
simulator: {reasoning_tokens: 200}
phases:
  - name: p
    load: {type: poisson, rate: 4, requests: 40}
"""


def test_search_finds_the_answers_ttft_capacity_of_a_reasoning_model(tmp_path: Path) -> None:
    """200 thinking tokens before each answer: the first token meets 2.5 s up to the top of the range, the
    answer's first token only at about half of it (16.4 req/s with these seeds and a wider search)."""
    path = tmp_path / "reasoning.yaml"
    path.write_text(REASONING)
    args = ["search", "--predict", str(path), "--low", "4", "--high", "24", "--duration", "5", "--steps", "4",
            "--repeats", "1", "--json"]
    first = CliRunner().invoke(main, [*args, "--slo", "ttft_p99=2.5s"])
    answer = CliRunner().invoke(main, [*args, "--slo", "ttft_answer_p99=2.5s"])
    assert first.exit_code == 0 and answer.exit_code == 0, first.output + answer.output
    assert "24 req/s, still meets the SLOs" in first.output
    found = json.loads(answer.output[answer.output.index("{"):])
    assert 12 < found["capacity_rps"] < 20
    assert "(TTFT (answer))" in answer.output  # the limit that failed a trial, named


async def test_from_an_estimate_the_first_trials_bracket_it_and_fewer_trials_find_the_same_capacity() -> None:
    """A server whose capacity is 10 req/s: from an estimate of 12, the first trial is at 12 (✗), then 8 (✓);
    the bisection then needs the steps that give the precision the bounds' steps would, no more."""
    async def fake(s: Scenario) -> Summary:
        rate = s.phases[0].load.rate  # type: ignore[union-attr]
        return trial_summary(1.0 if rate <= 10 else 0.5, s.phases[0].load.requests, rate)  # type: ignore[union-attr]

    base = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    bounds = await search(base, fake, SLO(ttft_ms=100), 0.95, 0.5, 64.0, 10.0, steps=7, repeats=1)
    near = await search(base, fake, SLO(ttft_ms=100), 0.95, 0.5, 64.0, 10.0, steps=7, repeats=1, start=12.0)
    assert [t.rate for t in near.trials[:2]] == [12.0, 8.0] and near.start_rps == 12.0
    assert near.capacity_rps == pytest.approx(10.0, abs=(64 - 0.5) / 2 ** 7)
    assert bounds.capacity_rps == pytest.approx(10.0, abs=(64 - 0.5) / 2 ** 7)
    assert len(near.trials) < len(bounds.trials) and bounds.trials[0].rate == 0.5
    up = await search(base, fake, SLO(ttft_ms=100), 0.95, 0.5, 64.0, 10.0, steps=7, repeats=1, start=4.0)
    assert [t.rate for t in up.trials[:3]] == [4.0, 6.0, 9.0] and up.trials[3].rate == 13.5  # up by half again
    top = await search(base, fake, SLO(ttft_ms=100), 0.95, 0.5, 9.0, 10.0, steps=7, repeats=1, start=8.0)
    assert top.capacity_rps is None and top.at_least_rps == 9.0 and "still meets" in (top.note or "")


def _trial(index: int, rate: float, met: bool, late: bool, seed: int = 1) -> SearchTrial:
    return SearchTrial(rate, seed, 1.0 if met else 0.5, 100, False, rate * 10, index, met, "" if met else "TPOT",
                       client_limited=late)


def test_a_capacity_resting_mostly_on_client_limited_trials_is_not_claimed() -> None:
    from harness.stats.capacity import Capacity

    trials = [_trial(1, 5, True, False), _trial(2, 20, False, True), _trial(3, 12, True, True),
              _trial(4, 16, False, True)]
    found = Capacity(12.0, None, trials)
    assert [t.index for t in found.boundary] == [3, 4]  # the fastest pass, the slowest failure above it
    assert found.untrusted is not None and "2 of the 2 trials it rests on" in found.untrusted
    assert found.to_json()["client_limited_trials"] == 3
    calm = Capacity(12.0, None, [*trials[:2], _trial(3, 12, True, False), _trial(4, 16, False, True)])
    assert calm.untrusted is None  # one of two: half, not most
    assert trial_line(trials[1], "~6").startswith("  trial 2 of ~6 ✗") and trial_line(trials[1], 6).endswith(
        "client-limited*")
    assert "client-limited" not in trial_line(trials[0], 6)


async def test_the_plan_against_a_simulated_target_is_the_search_run_once_in_virtual_time() -> None:
    import functools

    from harness.tools.predict import predict_async
    from harness.tools.search_plan import TRIAL_OVERHEAD_S, plan

    base = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    base = base.changed(workload=base.workload.changed(prompt_tokens=2048, output_tokens=16))  # short answers: cheap
    bisect = functools.partial(search, slo=SLO(ttft_ms=300), goodput=0.95, low=0.5, high=64.0,
                               duration_s=3.0, steps=4, repeats=1, min_requests=10)
    given = await plan(base, bisect, 7.0, "the bundled simulator")
    assert (given.start_rps, given.trials, given.seconds) == (7.0, None, None)  # --near: no dry run
    assert (await plan(base, bisect, None, None)).start_rps is None  # a real endpoint, no twin: the bounds
    made = await plan(base, bisect, None, "the bundled simulator")
    assert made.start_rps is not None and "estimate in virtual time" in made.whence and (made.trials or 0) >= 2
    again = await bisect(base, predict_async,
                         start=made.start_rps)
    assert made.trials == len(again.trials)  # virtual time is deterministic: the plan is that search
    assert made.seconds == pytest.approx(sum(t.window_s + TRIAL_OVERHEAD_S for t in again.trials))
