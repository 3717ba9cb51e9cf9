"""A run on each typed-event API, end to end: `harness run` against the simulator serving a thinking model, its
request URL pasted or `--api` given; an API the harness does not speak refused in one line before any load."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import harness, only_run_dir, serving

THINKING = 20


@pytest.fixture(scope="module")
def thinking_sim() -> Iterator[str]:
    with serving("sim", "serve", "--host", "127.0.0.1", "--port", "0", "--reasoning-tokens", str(THINKING)) as url:
        yield url


@pytest.mark.parametrize(("api", "how"), [("responses", "pasted"), ("messages", "flag")])
def test_a_run_on_each_api_times_the_thinking_and_the_answer(thinking_sim: str, tmp_path: Path, api: str,
                                                              how: str) -> None:
    where = ["--endpoint", f"{thinking_sim}/{api}"] if how == "pasted" else ["--endpoint", thinking_sim, "--api", api]
    done = harness("run", *where, "--rate", "8", "--requests", "8", "--output-tokens", "40", "--progress", "off",
                   "--reports-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert f"{api} API" in done.stderr
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    assert summary["run"]["endpoint"]["api"] == api
    phase = summary["phases"][0]
    assert phase["requests"]["ok"] == 8
    assert phase["tokens"]["reasoning"] == 8 * THINKING and phase["tokens"]["output"] == 8 * 40
    latency = phase["latency_ms"]
    gaps = (latency["ttft_answer"]["p50"] - latency["ttft"]["p50"]) / latency["itl"]["p50"]
    assert THINKING - 8 < gaps < THINKING + 8, gaps  # the answer begins ~19 gaps after the first thinking token


def test_an_api_the_harness_does_not_speak_is_refused_before_any_load(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\nendpoint: {api: rerank}\n"
                        "phases: [{name: p, load: {type: constant, rate: 1, requests: 1}}]\n")
    refused = harness("run", str(scenario), "--reports-dir", str(tmp_path / "r"))
    assert refused.returncode == 2
    assert "endpoint.api: 'rerank' is not an API the harness speaks (chat, completions, responses, messages" \
        in refused.stderr
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").rglob("requests.jsonl"))
    flag = harness("run", "--api", "rerank", "--rate", "1", "--requests", "1")
    assert flag.returncode == 2 and "'rerank' is not one of 'chat', 'completions', 'responses', 'messages'" \
        in flag.stderr


def test_an_embeddings_run_compares_a_batch_in_one_request_with_single_texts(tmp_path: Path) -> None:
    done = harness("run", "--api", "embeddings", "--rate", "16", "--requests", "24", "--batch", "32",
                   "--prompt-tokens", "64", "--slo", "e2e=2s,ttft=1s", "--progress", "off",
                   "--reports-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    interactive, batch = summary["phases"]
    assert interactive["requests"]["ok"] == 24 and batch["requests"]["ok"] == 2  # two batches, one request each
    assert batch["tokens"]["input"] == 2 * 32 * 64 and batch["tokens"]["output"] == 0
    assert interactive["latency_ms"]["ttft"]["p99"] is None and interactive["latency_ms"]["e2e"]["p99"] > 0
    assert any(w.startswith("the SLO on TTFT judged no request") for w in interactive["warnings"])
    ratio = batch["throughput"]["inputs_per_s"] / interactive["throughput"]["inputs_per_s"]
    assert ratio > 1.5  # one request of 32 texts embeds faster than 16 single texts a second arrive
    (sentence,) = summary["comparison"]["conclusion"]
    assert sentence.startswith(f"Batches of 32 texts embed {ratio:.1f}× the texts/s of the interactive run, at ")
    assert "texts/s" in done.stdout and sentence in " ".join(done.stdout.split())
    scenario = tmp_path / "e.yaml"
    scenario.write_text("name: e\nendpoint: {api: embeddings}\n"
                        "phases: [{name: p, load: {type: constant, rate: 1, requests: 1}}]\n")
    refused = harness("predict", str(scenario))
    assert refused.returncode == 2 and "predict models APIs that generate tokens" in refused.stderr
    exported = harness("export", str(only_run_dir(tmp_path)), "--format", "vllm", "--output", str(tmp_path / "v"))
    assert exported.returncode == 0, exported.stderr
    kinds = {json.loads(f.read_text())["endpoint_type"] for f in (tmp_path / "v").glob("*.json")}
    assert kinds == {"openai-embeddings"}


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_an_images_run_reconciles_the_servers_prompt_count_with_the_images_sent(tmp_path: Path, api: str) -> None:
    scenario = tmp_path / "v.yaml"
    scenario.write_text("name: v\nworkload: {prompt_tokens: 64, output_tokens: 8, images: {count: 2, width: 280, "
                        "height: 140, format: jpeg}}\n"
                        "phases: [{name: p, load: {type: poisson, rate: 8, requests: 8}}]\n")
    done = harness("run", str(scenario), "--api", api, "--progress", "off", "--reports-dir", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    tokens = json.loads((only_run_dir(tmp_path / "r") / "summary.json").read_text())["phases"][0]["tokens"]
    # 280 × 140 at 28 pixels a token: 10 × 5 = 50 tokens an image, as the simulator counts them.
    assert (tokens["images"], tokens["image_tokens"], tokens["prompt_mismatched"]) == (16, 50, 0)
    kb = tokens["image_bytes"] / tokens["images"] / 1024
    assert 1 < kb < 280 * 140 * 3 / 1024  # a JPEG: smaller than its pixels
    assert "images a request (size), prompt tokens each" in done.stdout and f"2.0 ({kb:,.0f} KB) / 50" in done.stdout


def test_an_api_that_takes_no_images_is_refused_before_any_load(tmp_path: Path) -> None:
    scenario = tmp_path / "v.yaml"
    scenario.write_text("name: v\nworkload: {images: {count: 1}}\n"
                        "phases: [{name: p, load: {type: poisson, rate: 8, requests: 8}}]\n")
    refused = harness("run", str(scenario), "--api", "completions", "--reports-dir", str(tmp_path / "r"))
    assert refused.returncode == 2
    assert "workload.images: the completions API takes no images (chat, responses, messages do)" in refused.stderr

def test_predict_prices_images_as_the_simulator_does(tmp_path: Path) -> None:
    scenario = tmp_path / "v.yaml"
    scenario.write_text("name: v\nworkload: {prompt_tokens: 64, output_tokens: 8, images: {count: 2, width: 280, "
                        "height: 140}}\nphases: [{name: p, load: {type: poisson, rate: 8, requests: 8}}]\n")
    predicted = harness("predict", str(scenario), "--json")
    assert predicted.returncode == 0, predicted.stderr
    tokens = json.loads(predicted.stdout)["phases"][0]["tokens"]
    assert (tokens["images"], tokens["image_tokens"]) == (16, 50)
    assert tokens["input"] == 8 * (64 + 2 * 50)


def test_answers_asked_for_whole_are_timed_end_to_end_with_their_tokens(tmp_path: Path) -> None:
    done = harness("run", "--api", "responses", "--no-stream", "--rate", "8", "--requests", "8", "--output-tokens",
                   "16", "--progress", "off", "--reports-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    phase = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())["phases"][0]
    assert phase["requests"]["ok"] == 8 and phase["tokens"]["output"] == 8 * 16 and phase["tokens"]["mismatched"] == 0
    assert phase["latency_ms"]["ttft"]["p99"] is None and phase["latency_ms"]["e2e"]["p99"] > 0
    assert phase["throughput"]["output_tokens_per_s"] > 0 and not phase["warnings"]
    assert "(answers unstreamed)" in done.stdout
    completions = harness("run", "--api", "completions", "--no-stream", "--rate", "8", "--requests", "2",
                          "--output-tokens", "8", "--progress", "off", "--reports-dir", str(tmp_path / "c"))
    assert completions.returncode == 0, completions.stderr
    whole = json.loads((only_run_dir(tmp_path / "c") / "summary.json").read_text())["phases"][0]
    assert whole["requests"]["ok"] == 2 and whole["tokens"]["output"] == 16
