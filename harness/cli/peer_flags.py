"""The load and data flags people bring from vLLM's bench, GuideLLM and AIPerf, taken by `harness run` as what
they stand for here: each becomes a field of the quick run's scenario (saved with the run, so it reruns as a
file) and is said on a line before the plan, so nobody has to guess what a peer's word meant here."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import click

from harness.cli.common import REPO_SCENARIOS
from harness.cli.flag_groups import with_group
from harness.config.quick import QuickRun

F = TypeVar("F", bound=Callable[..., Any])
# The shipped samples a dataset name stands for without --dataset-path (small, hand-written, in each format).
SAMPLES = {"sharegpt": REPO_SCENARIOS / "data" / "sharegpt-sample.json",
           "burstgpt": REPO_SCENARIOS / "data" / "burstgpt-sample.csv"}
SWEEP_POINTS = 5  # --profile sweep: the rate given and four halvings below it


def peer_options(command: F) -> F:
    """Peers' load and data flags, handed to the command as `peers: PeerFlags`."""
    options = [
        click.option("--dataset-name", type=click.Choice(["random", "sharegpt", "burstgpt"]),
                     help="As vLLM's bench: random (synthetic prompts of --prompt-tokens), sharegpt (conversations' "
                          "human turns), burstgpt (its request and response lengths); the shipped sample unless "
                          "--dataset-path."),
        click.option("--dataset-path", type=click.Path(path_type=Path, dir_okay=False, exists=True), metavar="FILE",
                     help="With --dataset-name sharegpt or burstgpt: your file in that format."),
        click.option("--burstiness", type=click.FloatRange(min=0, min_open=True), metavar="K",
                     help="As vLLM's bench, with --rate: gamma arrivals of shape K (1: Poisson; below 1 burstier; "
                          "the gaps' coefficient of variation is 1/sqrt(K))."),
        click.option("--profile", type=click.Choice(["synchronous", "concurrent", "constant", "poisson", "sweep"]),
                     help="As GuideLLM: synchronous (one request at a time), concurrent (--rate N streams, closed "
                          "loop), constant or poisson (at --rate), sweep (Poisson at --rate and four halvings "
                          "below it, one phase each)."),
        click.option("--sweep", metavar="RATES", help="A rate sweep from flags: Poisson at each rate, e.g. 1,2,4,8 "
                     "(one phase each; the table and report find the knee under --slo)."),
    ]
    return with_group(command, "peers", PeerFlags, options)


@dataclass(frozen=True, slots=True)
class PeerFlags:
    dataset_name: str | None = None
    dataset_path: Path | None = None
    burstiness: float | None = None
    profile: str | None = None
    sweep: str | None = None


def peer_quick(peers: PeerFlags, quick: QuickRun) -> tuple[QuickRun, list[str]]:
    """The quick run with what each peer flag stands for in its place, and a line per flag saying so; a flag
    that cannot apply is a BadParameter naming it."""
    said: list[str] = []
    for step in (_profile, _sweep, _burstiness, _dataset):
        quick, line = step(peers, quick)
        said += [line] if line else []
    return quick, said


def _profile(peers: PeerFlags, q: QuickRun) -> tuple[QuickRun, str]:
    profile, rate = peers.profile, q.rate
    if profile is None:
        return q, ""
    if profile == "synchronous":
        return replace(q, rate=None, concurrency=1), "--profile synchronous → --concurrency 1 (one request at a time)"
    if rate is None:
        raise click.BadParameter(f"{profile} needs --rate", param_hint="--profile")
    if profile == "concurrent":
        streams = max(1, round(rate))
        return (replace(q, rate=None, concurrency=streams),
                f"--profile concurrent --rate {rate:g} → --concurrency {streams} (closed loop)")
    if profile == "sweep":
        rates = tuple(rate / 2 ** k for k in reversed(range(SWEEP_POINTS)))
        return (replace(q, sweep_rates=rates), f"--profile sweep --rate {rate:g} → Poisson at "
                f"{', '.join(f'{r:g}' for r in rates)} req/s, one phase each")
    return replace(q, arrivals=profile), f"--profile {profile} → {profile} arrivals at {rate:g} req/s"


def _sweep(peers: PeerFlags, q: QuickRun) -> tuple[QuickRun, str]:
    text = peers.sweep
    if text is None:
        return q, ""
    try:
        rates = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise click.BadParameter(f"{text!r}: rates as numbers, e.g. 1,2,4,8", param_hint="--sweep") from None
    if len(rates) < 2 or min(rates) <= 0 or not all(map(math.isfinite, rates)):
        raise click.BadParameter(f"{text!r}: two or more positive rates", param_hint="--sweep")
    return (replace(q, sweep_rates=rates, rate=q.rate or rates[0]),
            f"--sweep {text} → Poisson at each rate, one phase each (interactive@rate=…)")


def _burstiness(peers: PeerFlags, q: QuickRun) -> tuple[QuickRun, str]:
    k = peers.burstiness
    if k is None:
        return q, ""
    if q.rate is None:
        raise click.BadParameter("shapes the arrivals of a --rate run: give --rate", param_hint="--burstiness")
    if k == 1:
        return q, "--burstiness 1 → Poisson arrivals"
    cv = 1 / math.sqrt(k)
    return (replace(q, arrivals="gamma", cv=cv),
            f"--burstiness {k:g} → gamma arrivals, coefficient of variation {cv:.3g} (1/sqrt({k:g}))")


def _dataset(peers: PeerFlags, q: QuickRun) -> tuple[QuickRun, str]:
    name, path = peers.dataset_name, peers.dataset_path
    if name is None:
        if path is not None:
            raise click.BadParameter("needs --dataset-name sharegpt or burstgpt", param_hint="--dataset-path")
        return q, ""
    if name == "random":
        if path is not None:
            raise click.BadParameter("random prompts take no file", param_hint="--dataset-path")
        return q, f"--dataset-name random → synthetic prompts of --prompt-tokens {q.prompt_tokens}"
    file = (path or SAMPLES[name]).resolve()
    whose = "" if path is not None else " (the shipped sample; --dataset-path for yours)"
    what = ("workload.dataset: sharegpt, each human turn a request with its history" if name == "sharegpt" else
            "prompt and answer lengths drawn from its rows (workload.prompt_tokens/output_tokens: empirical)")
    return replace(q, dataset=(name, str(file))), f"--dataset-name {name} → {what}: {file}{whose}"
