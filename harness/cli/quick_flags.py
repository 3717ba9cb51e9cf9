"""What the quick-run and workload flags of `harness run` make of a scenario: the scenario they describe, and
the flags that change a given one (thresholds, tokenizer, trace rows, accelerator, endpoint wait)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click

from harness.cli.common import scenario_or_default
from harness.cli.peer_flags import peer_flags, peer_quick
from harness.client.dialects import dialect
from harness.config.load import TraceLoad
from harness.config.quick import QuickRun, length_spec, quick_scenario
from harness.config.scenario import Scenario, parse_scenario
from harness.errors import ScenarioError
from harness.tools.search import parse_slo


def flag_scenario(path: Path | None, flags: dict[str, Any], api: str | None) -> Scenario:
    """The scenario file, or the one the quick-run flags describe (never both); the peers' flags among them
    said, a line each, as what they stand for."""
    peers = peer_flags(flags)
    slo = flags.pop("slo_text")
    if flags["batches"] is None:
        flags.pop("batches")
    if flags.get("max_concurrency") is not None and flags.get("rate") is None:
        raise click.BadParameter("caps the requests in flight of a --rate run; for N users in a closed loop give "
                                 "--concurrency N", param_hint="--max-concurrency")
    packs = api is not None and dialect(api, "--api").packs_batches
    quick, said = peer_quick(peers, QuickRun(**flags, slo=slo_limits(slo), api=api, pack_batches=packs))
    if not quick.given:
        stray = [flag for flag, k in (("--requests", "requests"), ("--duration", "duration_s"),
                                      ("--warmup", "warmup_s"),
                                      ("--batches", "batches")) if flags.get(k) is not None]
        stray += ["--slo"] if slo is not None else []
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
            length_spec(flags[name])
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint=f"--{name.replace('_', '-')}") from None
    scenario = quick_scenario(quick)
    for line in said:
        click.echo(line, err=True)
    return scenario


def with_thresholds(scenario: Scenario, expressions: tuple[str, ...]) -> Scenario:
    """The scenario with `--threshold` expressions (`ttft_p99<500ms`) added to its own thresholds."""
    if not expressions:
        return scenario
    added = dict(scenario.thresholds)
    for text in expressions:
        match = re.fullmatch(r"\s*([a-z0-9_]+)\s*((?:<|>)=?.*)", text)
        if match is None:
            raise click.BadParameter(f"{text!r}: expected METRIC<LIMIT or METRIC>LIMIT, e.g. 'ttft_p99<500ms'",
                                     param_hint="--threshold")
        added[match[1]] = match[2].strip()
    data = scenario.model_dump(mode="json")
    data["thresholds"] = added
    try:
        return parse_scenario(data, "--threshold")
    except ScenarioError as exc:
        raise click.BadParameter(str(exc).removeprefix("--threshold: "), param_hint="--threshold") from None


def slo_limits(text: str | None) -> dict[str, float] | None:
    if text is None:
        return None
    try:
        return parse_slo(text).model_dump(exclude_none=True)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--slo") from None


def with_flags(scenario: Scenario, tokenizer: str | None, skip_bad_rows: bool, accelerator: str | None,
                wait: float | None = None) -> Scenario:
    given = {k: v for k, v in (("accelerator", accelerator), ("wait_s", wait)) if v is not None}
    if given:
        scenario = scenario.changed(endpoint=scenario.endpoint.changed(**given))
    if tokenizer is not None:
        named = tokenizer in ("server", "words")
        if not named and not Path(tokenizer).exists():
            raise click.BadParameter(f"no such file or directory {tokenizer} (or give 'server' or 'words')",
                                     param_hint="--tokenizer")
        resolved = tokenizer if named else str(Path(tokenizer).resolve())
        workload = scenario.workload.changed(tokenizer=resolved)
        scenario = scenario.changed(workload=workload)
    if skip_bad_rows:
        phases = [p.changed(load=p.load.changed(skip_bad_rows=True))
                  if isinstance(p.load, TraceLoad) else p for p in scenario.phases]
        scenario = scenario.changed(phases=phases)
    return scenario
