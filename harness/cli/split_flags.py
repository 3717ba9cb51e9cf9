"""How a `harness run` is split and started: shards by hand (`--shard i/N --start-at`, `--clock-ref`), local
workers or Ray actors (`--workers`, `--ray`), and what may go with what (`--repeat` runs once per repeat)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from harness.cli.common import Duration
from harness.cli.flag_groups import with_group
from harness.run.distributed.relay import Relay
from harness.run.distributed.sharding import LEAD_S, Sharding, since_launch_s
from harness.voice import Voice
from harness.workload.shards import LATE_MS, Shard

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class SplitFlags:
    """How the run is split and when it starts."""

    shard_text: str | None = None
    workers: int | None = None
    ray_address: str | None = None
    relay: bool = False
    start_at: float | None = None
    late_ok: bool = False
    phase_slack_s: float = 5.0
    clock_ref: str | None = None


def split_options(command: F) -> F:
    """`--shard`, `--workers`, `--ray`, `--start-at` and their company, handed over as `split: SplitFlags`."""
    options = [
        click.option("--shard", "shard_text", metavar="i/N",
                     help="Send only shard i (0-based) of N of every phase: every N-th request from the i-th, as "
                          "one process would send it. Needs --start-at; `harness merge` joins the shards' run "
                          "directories."),
        click.option("--workers", type=click.IntRange(min=2), metavar="N",
                     help="Send the load from N local processes, one shard each, on their own cores where there "
                          "are enough, merged into one run directory."),
        click.option("--ray", "ray_address", metavar="auto|ADDRESS",
                     help="With --workers: run each shard on a Ray actor of this cluster (auto: the one "
                          "RAY_ADDRESS or a local `ray start` names), spread across its nodes. Needs `pip install "
                          "'harness[ray]'`."),
        click.option("--relay", is_flag=True, hidden=True,
                     help="A worker of --workers or --ray: tell the parent on stdout, keep its batch barrier on "
                          "stdin."),
        click.option("--start-at", type=float, metavar="UNIX_S",
                     help="Start the first phase at this Unix time (seconds), so shards on several hosts start "
                          "together."),
        click.option("--late-ok", is_flag=True,
                     help="With --start-at: start even when that time has passed (the shard says how late it "
                          "began)."),
        click.option("--phase-slack", "phase_slack_s", type=Duration(), default="5s", show_default=True,
                     metavar="DURATION",
                     help="With --shard (by hand): each phase after the first starts on every shard at a planned "
                          "time, the previous phase's schedule plus this, for its last answers to end."),
        click.option("--clock-ref", metavar="URL",
                     help="With --shard (by hand): measure this host's clock against a `harness clock` at URL "
                          "before the start, so `harness merge` puts every shard on one clock and names a shard "
                          "whose clock is off."),
    ]
    return with_group(command, "split", SplitFlags, options)


def sharding_of(split: SplitFlags, repeat: int, voice: Voice) -> Sharding | None:
    """The shard this process sends and its start, checked against the other flags; None for a whole run."""
    sharding = _sharding(split.shard_text, _start(split.start_at, split.late_ok), repeat,
                         Relay(voice=voice) if split.relay else None, split.phase_slack_s, split.clock_ref)
    _check_workers(split.workers, split.ray_address, sharding, repeat)
    return sharding


def _check_workers(workers: int | None, ray_address: str | None, sharding: Sharding | None, repeat: int) -> None:
    if workers is not None and (sharding is not None or repeat > 1):
        raise click.BadParameter("runs the whole schedule itself: drop --shard, --start-at and --repeat",
                                 param_hint="--workers")
    if ray_address is not None and workers is None:
        raise click.BadParameter("needs --workers N: how many shards, one a Ray actor", param_hint="--ray")


def _start(start_at: float | None, late_ok: bool) -> float | None:
    """A common start already past would start this shard late against the others: refused unless asked
    for."""
    past_s = None if start_at is None else time.time() - start_at
    if past_s is not None and past_s * 1000 > LATE_MS and not late_ok:
        launched = since_launch_s()
        took = "" if launched is None else f"; this process was launched {launched:,.1f} s ago"
        raise click.BadParameter(f"{start_at!r} is {past_s:,.1f} s in the past: this shard would begin that late "
                                 f"against the others{took}, and a shard still builds its requests and opens its "
                                 f"connections before the start: give a lead of at least {LEAD_S:g} s (--late-ok "
                                 "to start now anyway)", param_hint="--start-at")
    return start_at


def _sharding(shard_text: str | None, start_at: float | None, repeat: int, relay: Relay | None,
              slack_s: float, clock_ref: str | None = None) -> Sharding | None:
    if relay is not None and shard_text is None:
        raise click.BadParameter("is for the workers of --workers and --ray, which run with --shard",
                                 param_hint="--relay")
    if shard_text is None:
        if clock_ref is not None:
            raise click.BadParameter("is for shards by hand: give --shard i/N and --start-at", param_hint="--clock-ref")
        return None if start_at is None else Sharding(Shard(0, 1), start_at)
    try:
        shard = Shard.parse(shard_text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--shard") from None
    if start_at is None:
        raise click.BadParameter("needs --start-at, the Unix time every shard starts at (and derives the run's "
                                 "request ids from)", param_hint="--shard")
    if repeat > 1:
        raise click.BadParameter("a shard runs once; repeat the whole sharded run instead", param_hint="--repeat")
    if clock_ref is not None and relay is not None:
        raise click.BadParameter("is for shards by hand: a worker measures its clock against its parent",
                                 param_hint="--clock-ref")
    return Sharding(shard, start_at, relay, slack_s, clock_ref)
