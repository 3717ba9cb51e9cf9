"""A first run without a YAML file: load and workload from flags, saved as a scenario that reruns; `harness
init`; durations with units in flags."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from harness.cli import main
from harness.config.quick import QuickRun, length_spec, quick_scenario
from harness.config.scenario import load_scenario
from tests.helpers import harness


def test_a_quick_run_from_flags_is_saved_and_reruns(tmp_path: Path) -> None:
    proc = harness("run", "--rate", "20", "--duration", "1500ms", "--prompt-tokens", "uniform:32:64",
                   "--output-tokens", "8", "--slo", "ttft=2s", "--batch", "8", "--seed", "7",
                   "--reports-dir", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp_path / "r").iterdir()
    saved = yaml.safe_load((run_dir / "scenario.yaml").read_text())
    assert saved["seed"] == 7 and saved["slo"]["ttft_ms"] == 2000.0
    assert saved["workload"]["prompt_tokens"]["dist"] == "uniform" and saved["workload"]["output_tokens"] == 8
    assert [p["load"]["type"] for p in saved["phases"]] == ["poisson", "batch"]
    assert saved["phases"][0]["load"]["duration_s"] == 1.5
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [p["name"] for p in summary["phases"]] == ["interactive", "training-batch"]
    # The folder says what each file holds, and keeps the table as printed.
    index = (run_dir / "README.txt").read_text()
    assert all(f"{p.name} " in index for p in run_dir.iterdir())
    table = (run_dir / "table.txt").read_text()
    assert "target / sent / done per s" in table and summary["comparison"]["conclusion"][0] in proc.stdout
    assert summary["comparison"]["conclusion"][0] in table
    assert summary["phases"][1]["requests"]["ok"] == 16
    again = harness("run", str(run_dir / "scenario.yaml"), "--reports-dir", str(tmp_path / "again"))
    assert again.returncode == 0, again.stderr
    (rerun,) = (tmp_path / "again").iterdir()
    assert json.loads((rerun / "summary.json").read_text())["phases"][1]["requests"]["ok"] == 16


@pytest.mark.parametrize(("args", "flag", "words"), [
    (["--rate", "5", "--prompt-tokens", "gaussian:5"], "--prompt-tokens", "use a number of tokens"),
    (["--rate", "5", "--duration", "5 parsecs"], "--duration", "is not a duration"),
    (["--requests", "5"], "--requests", "give --rate, --concurrency or --batch"),
    (["--rate", "5", "--slo", "fast"], "--slo", "expected one of ttft=…, ttft_answer=…"),
    (["--rate", "5", "scenarios/quickstart.yaml"], "SCENARIO", "not both"),
])
def test_bad_quick_run_flags_name_the_flag(args: list[str], flag: str, words: str) -> None:
    result = CliRunner().invoke(main, ["run", *args])
    assert result.exit_code == 2, result.output
    assert flag in result.output and words in result.output


def test_quick_scenarios_for_each_load() -> None:
    closed = quick_scenario(QuickRun(concurrency=4, requests=20))
    assert [p.load.type for p in closed.phases] == ["concurrency"] and closed.phases[0].load.requests == 20
    default = quick_scenario(QuickRun(rate=2.0))
    assert default.phases[0].load.requests == 100  # type: ignore[union-attr]
    assert length_spec("lognormal:512:0.5") == {"dist": "lognormal", "median": 512.0, "sigma": 0.5}
    assert length_spec("300") == 300


def test_init_writes_a_scenario_that_loads_and_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    runner = CliRunner()
    result = runner.invoke(main, ["init", str(path), "--endpoint", "http://127.0.0.1:8000/v1", "--model", "m"])
    assert result.exit_code == 0, result.output
    scenario = load_scenario(path)
    assert scenario.endpoint.url == "http://127.0.0.1:8000/v1" and scenario.endpoint.model == "m"
    assert scenario.slo.ttft_ms == 500.0 and [p.load.type for p in scenario.phases] == ["poisson", "batch"]
    assert runner.invoke(main, ["init", str(path)]).exit_code == 2


def test_search_and_calibrate_take_durations_with_units() -> None:
    result = CliRunner().invoke(main, ["search", "--predict", "--slo", "ttft=200ms", "--duration", "2 weeks"])
    assert result.exit_code == 2 and "--duration" in result.output
    assert "--duration" in CliRunner().invoke(main, ["calibrate", "--help"]).output


def test_an_endpoint_without_a_path_means_its_v1(tmp_path: Path, sim_url: str) -> None:
    root = sim_url.removesuffix("/v1")
    proc = harness("run", "--endpoint", root, "--rate", "20", "--requests", "4", "--output-tokens", "4",
                   "--reports-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert f"endpoint: {root}/v1 (the OpenAI API lives under /v1)" in proc.stderr
    # Off a terminal the plan still comes first, in plain lines a log keeps.
    (run_dir,) = tmp_path.iterdir()
    assert proc.stderr.splitlines()[1:6] == [
        f"run quick against {root}/v1", "  model llama-3.1-8b, chat API, 1 phase:",
        "  1/1 interactive  poisson 20 req/s, 4 requests", f"  records → {run_dir}",
        # The simulator's /tokenize counts the harness's words one token each: they stay, and it says so.
        f"  prompts of the harness's words: {root}/tokenize counts them one token each"]


def test_a_quick_run_against_an_endpoint_reruns_against_the_same_endpoint(sim_url: str, tmp_path: Path) -> None:
    """The saved scenario of a run against a given endpoint holds its URL and model (the key never): README's
    rerun recipe drives the same server, not the bundled simulator."""
    proc = harness("run", "--endpoint", sim_url, "--rate", "20", "--requests", "5", "--output-tokens", "4",
                   "--progress", "off", "--reports-dir", str(tmp_path / "r"), env={"OPENAI_API_KEY": "sk-never-saved"})
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp_path / "r").iterdir()
    saved = yaml.safe_load((run_dir / "scenario.yaml").read_text())
    assert saved["endpoint"]["url"] == sim_url and saved["endpoint"]["model"] == "llama-3.1-8b"
    assert "sk-never-saved" not in (run_dir / "scenario.yaml").read_text()
    again = harness("run", str(run_dir / "scenario.yaml"), "--progress", "off", "--reports-dir", str(tmp_path / "a"))
    assert again.returncode == 0, again.stderr
    (rerun,) = (tmp_path / "a").iterdir()
    endpoint = json.loads((rerun / "summary.json").read_text())["run"]["endpoint"]
    assert endpoint["base_url"] == sim_url and not endpoint["bundled_simulator"]


def test_peer_flags_mean_here_what_they_mean_there(sim_url: str, tmp_path: Path) -> None:
    """vLLM bench serve's habits: `--base-url`, `--request-rate`, `--num-prompts`, `--max-concurrency` (one phase,
    a rate with at most N in flight), plus `--warmup`, `--batches` and `--threshold` (exit 99 when broken)."""
    proc = harness("run", "--base-url", sim_url, "--request-rate", "8", "--num-prompts", "16", "--max-concurrency",
                   "2", "--output-tokens", "32", "--warmup", "500ms", "--batch", "2", "--batches", "3",
                   "--threshold", "ttft_p99<1ms", "--threshold", "error_rate<1%", "--progress", "off",
                   "--reports-dir", str(tmp_path))
    assert proc.returncode == 99 and "broken: interactive ttft_p99 <1ms" in proc.stderr, proc.stderr
    (run_dir,) = tmp_path.iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [p["name"] for p in summary["phases"]] == ["interactive", "training-batch"]
    assert summary["phases"][0]["config"]["max_in_flight"] == 2 and summary["phases"][0]["config"]["warmup_s"] == 0.5
    assert summary["phases"][1]["batches"]["count"] == 3
    records = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    rate = [r for r in records if r["phase"] == "interactive"]
    events = sorted([(r["sent_ns"], 1) for r in rate] + [(r["end_ns"], -1) for r in rate])
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    assert len(rate) == 16 and peak <= 2  # never more than 2 in flight
    # The cap's wait is by design: shown in the plan and the table, kept apart in each record, never lateness.
    assert "at most 2 in flight (the cap's wait is not lateness)" in proc.stderr
    assert re.search(r"in-flight cap\s+2\s+-", (run_dir / "table.txt").read_text())
    lags = [r["sent_ns"] - r["intended_ns"] for r in rate]
    assert max(lags) > 200_000_000  # 8/s of ~300 ms answers, 2 at a time: the queue held them back
    assert max(lag - r["held_ns"] for lag, r in zip(lags, rate, strict=True)) < 100_000_000, lags


@pytest.mark.parametrize(("args", "says"), [
    (["--max-concurrency", "2"], "caps the requests in flight of a --rate run; for N users"),
    (["--random-range-ratio", "0.5"], "here it is --prompt-tokens uniform:MIN:MAX"),
    (["--dataset-name", "sharegpt"], "--dataset-name sets a quick run: give --rate"),
    (["--burstiness", "2"], "shapes the arrivals of a --rate run"),
    (["--rate", "2", "--sweep", "4"], "two or more positive rates"),
    (["--profile", "concurrent"], "concurrent needs --rate"),
    (["--vus", "3"], "here it is --concurrency N"),
    (["--temperature", "0"], "--extra-body '{\"temperature\": 0}'"),
    (["--extra-inputs", "x:1"], "--extra-body JSON"),
    (["--header", "no separator"], "expected 'Name: value'"),
    (["--extra-body", "{not json"], "--extra-body"),
    (["--rate", "1", "--threshold", "ttft_p99 about 1s"], "--threshold"),
    (["--rate", "1", "--threshold", "ttft_p42<1s"], "ttft_p42"),
])
def test_peer_flags_that_mean_something_else_here_say_what_to_use(args: list[str], says: str) -> None:
    proc = harness("run", *args)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr


def test_vllm_bench_and_guidellm_flags_run_as_the_scenario_they_stand_for(sim_url: str, tmp_path: Path) -> None:
    """vLLM's --dataset-name burstgpt, --burstiness, --save-result and --result-dir, GuideLLM's --profile sweep
    and --output-path's equivalent: each said as what it stands for, and the run is that scenario."""
    out = tmp_path / "summary.json"
    proc = harness("run", "--base-url", sim_url, "--profile", "sweep", "--rate", "32", "--num-prompts", "6",
                   "--burstiness", "4", "--dataset-name", "burstgpt", "--save-result", "--output-json", str(out),
                   "--progress", "off", "--result-dir", str(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stderr
    assert "--profile sweep --rate 32 → Poisson at 2, 4, 8, 16, 32 req/s" in proc.stderr
    assert "--burstiness 4 → gamma arrivals, coefficient of variation 0.5" in proc.stderr
    assert "--dataset-name burstgpt → prompt and answer lengths drawn from its rows" in proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads(out.read_text())
    assert summary == json.loads((run_dir / "summary.json").read_text())
    assert [p["name"] for p in summary["phases"]] == [f"interactive@rate={r:g}" for r in (2, 4, 8, 16, 32)]
    assert {p["config"]["load"]["type"] for p in summary["phases"]} == {"gamma"}
    assert summary["phases"][0]["config"]["load"]["cv"] == 0.5
    saved = yaml.safe_load((run_dir / "scenario.yaml").read_text())
    assert saved["workload"]["prompt_tokens"]["dist"] == "empirical"
    assert saved["workload"]["prompt_tokens"]["file"].endswith("burstgpt-sample.csv")
    assert len(list(run_dir.glob("vllm-*.json"))) == 5  # --save-result: vLLM's file per phase
