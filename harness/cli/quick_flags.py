"""What the quick-run and workload flags of `harness run` make of a scenario: the scenario they describe, and
what the flags that change a given one (thresholds, tokenizer, trace rows) change in it."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from harness.cli.common import Duration, scenario_or_default
from harness.cli.flag_groups import with_group
from harness.cli.peer_flags import PeerFlags, peer_quick
from harness.client.dialects import dialect
from harness.config.load import TraceLoad
from harness.config.quick import QuickRun, length_spec, quick_scenario
from harness.config.scenario import Scenario
from harness.tools.search import parse_slo

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class QuickFlags:
    """A quick run's flags as given (None: not given)."""

    rate: float | None = None
    max_concurrency: int | None = None
    concurrency: int | None = None
    batch: int | None = None
    requests: int | None = None
    batches: int | None = None
    warmup_s: float | None = None
    duration_s: float | None = None
    prompt_tokens: str = "256"
    output_tokens: str = "128"
    seed: int = 0
    slo_text: str | None = None


def quick_options(command: F) -> F:
    """`harness run`'s quick-run flags, handed to it as `quick: QuickFlags`."""
    options = [
        click.option("--rate", "--request-rate", "rate", type=click.FloatRange(min=0, min_open=True),
                     help="Quick run: Poisson arrivals per second."),
        click.option("--max-concurrency", type=click.IntRange(min=1), metavar="N",
                     help="Quick run, with --rate: at most N requests in flight (one phase; arrivals wait beyond it "
                          "and the wait shows as schedule lag), as vLLM's bench serve. N users in a closed loop: "
                          "--concurrency."),
        click.option("--concurrency", type=click.IntRange(min=1), help="Quick run: this many users, closed loop."),
        click.option("--batch", type=click.IntRange(min=1),
                     help="Quick run: then two training-style batches of this size (send all, wait for all)."),
        click.option("--requests", "--num-prompts", "requests", type=click.IntRange(min=1),
                     help="Quick run: requests per phase (default 100)."),
        click.option("--batches", type=click.IntRange(min=1), metavar="N",
                     help="Quick run, with --batch: how many batches (default 2)."),
        click.option("--warmup", "warmup_s", type=Duration(), metavar="DURATION",
                     help="Quick run: leave the first DURATION of each --rate/--concurrency phase out of its "
                          "statistics."),
        click.option("--duration", "duration_s", type=Duration(),
                     help="Quick run: length of a --rate or --concurrency phase (30s, 5m)."),
        click.option("--prompt-tokens", "--random-input-len", "prompt_tokens", default="256", show_default=True,
                     metavar="N|DIST", help="Quick run: prompt length, or a distribution: uniform:128:2048, "
                                            "normal:1000:300, lognormal:512:0.5."),
        click.option("--output-tokens", "--random-output-len", "output_tokens", default="128", show_default=True,
                     metavar="N|DIST", help="Quick run: answer length."),
        click.option("--seed", type=int, default=0, show_default=True, help="Quick run: seed of arrivals and prompts."),
        click.option("--slo", "slo_text", metavar="LIMITS", help="Quick run: e.g. ttft=500ms,tpot=50ms (per request; "
                     "ttft_answer=…: the answer's first token, after any thinking)."),
    ]
    return with_group(command, "quick", QuickFlags, options)


def flag_scenario(path: Path | None, flags: QuickFlags, peers: PeerFlags, api: str | None) -> Scenario:
    """The scenario file, or the one the quick-run flags describe (never both); the peers' flags among them
    said, a line each, as what they stand for."""
    if flags.max_concurrency is not None and flags.rate is None:
        raise click.BadParameter("caps the requests in flight of a --rate run; for N users in a closed loop give "
                                 "--concurrency N", param_hint="--max-concurrency")
    packs = api is not None and dialect(api, "--api").packs_batches
    asked = QuickRun(rate=flags.rate, concurrency=flags.concurrency, batch=flags.batch, requests=flags.requests,
                     duration_s=flags.duration_s, prompt_tokens=flags.prompt_tokens, output_tokens=flags.output_tokens,
                     seed=flags.seed, slo=slo_limits(flags.slo_text), api=api, max_concurrency=flags.max_concurrency,
                     batches=flags.batches or 2, warmup_s=flags.warmup_s, pack_batches=packs)
    quick, said = peer_quick(peers, asked)
    if not quick.given:
        stray = [flag for flag, k in (("--requests", "requests"), ("--duration", "duration_s"),
                                      ("--warmup", "warmup_s"),
                                      ("--batches", "batches")) if getattr(flags, k) is not None]
        stray += ["--slo"] if flags.slo_text is not None else []
        stray += [line.split(" ", 1)[0] for line in said]
        if stray:
            raise click.BadParameter(f"{stray[0]} sets a quick run: give --rate, --concurrency or --batch with it",
                                     param_hint=stray[0])
        return scenario_or_default(path)
    if path is not None:
        raise click.BadParameter("give a scenario file or quick-run flags (--rate, --concurrency, --batch), "
                                 "not both", param_hint="SCENARIO")
    for name in ("prompt_tokens", "output_tokens"):
        try:
            length_spec(getattr(flags, name))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint=f"--{name.replace('_', '-')}") from None
    scenario = quick_scenario(quick)
    for line in said:
        click.echo(line, err=True)
    return scenario


def threshold_changes(scenario: Scenario, expressions: tuple[str, ...]) -> dict[str, object]:
    """The scenario's thresholds with `--threshold` expressions (`ttft_p99<500ms`) added (each checked when the
    scenario is)."""
    if not expressions:
        return {}
    added = dict(scenario.thresholds)
    for text in expressions:
        match = re.fullmatch(r"\s*([a-z0-9_]+)\s*((?:<|>)=?.*)", text)
        if match is None:
            raise click.BadParameter(f"{text!r}: expected METRIC<LIMIT or METRIC>LIMIT, e.g. 'ttft_p99<500ms'",
                                     param_hint="--threshold")
        added[match[1]] = match[2].strip()
    return {"thresholds": added}


def slo_limits(text: str | None) -> dict[str, float] | None:
    if text is None:
        return None
    try:
        return parse_slo(text).model_dump(exclude_none=True)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--slo") from None


def workload_changes(scenario: Scenario, tokenizer: str | None, skip_bad_rows: bool) -> dict[str, object]:
    """The scenario's workload on --tokenizer's counting, and its trace phases told to skip bad rows."""
    update: dict[str, object] = {}
    if tokenizer is not None:
        named = tokenizer in ("server", "words")
        if not named and not Path(tokenizer).exists():
            raise click.BadParameter(f"no such file or directory {tokenizer} (or give 'server' or 'words')",
                                     param_hint="--tokenizer")
        resolved = tokenizer if named else str(Path(tokenizer).resolve())
        update["workload"] = scenario.workload.changed(tokenizer=resolved)
    if skip_bad_rows:
        update["phases"] = [p.changed(load=p.load.changed(skip_bad_rows=True))
                            if isinstance(p.load, TraceLoad) else p for p in scenario.phases]
    return update
