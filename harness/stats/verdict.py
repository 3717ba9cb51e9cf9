"""Who is to blame when the harness is late: one rule, used for the live warning and the phase's verdict
alike.

A late client inflates every latency it reports, whatever the cause; the cause says what to do about it:
- `saturated`: the harness used (nearly) its whole core: run fewer streams per process, or more processes;
- `not_scheduled`: it used little CPU but waited for one (the kernel's run-queue delay of its main thread, or
  a load above the machine's cores): something else holds its cores, often the server on the same machine;
- `stalled`: late with neither (a blocking call, a long pause).
A server whose queue fills is not the client's fault; `harness.stats.summary` says so apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from harness.stats.schema import ClientHealth, PhaseSummary

Verdict = Literal["ok", "stalled", "not_scheduled", "saturated"]
RANK: dict[Verdict, int] = {"ok": 0, "stalled": 1, "not_scheduled": 2, "saturated": 3}
RUNQ_BOUND = 0.25  # waiting for a CPU a quarter of the time it wanted one is contention, not noise
# Not scheduled, cause not known: with the machine's load above its cores, something else holds them; below,
# the harness waited for its own core (another process pinned there, or a noisy neighbour's burst).
GUESS = "something else holds its cores (the server on the same machine?)"
GUESS_SHARED = "its core is shared (another process running where it does?)"


@dataclass(frozen=True, slots=True)
class ClientCheck:
    """The harness's own health over a stretch of time (from `harness.run.selfcheck`)."""

    loop_lag_p99_ms: float | None = None
    cpu_share: float | None = None  # of one core
    loop_lag_bound_ms: float = 5.0
    cpu_bound: float = 0.9
    cpu_seconds: float | None = None  # the harness process's CPU over the stretch
    runq_share: float | None = None  # of the time the main thread was runnable, the share it waited for a CPU
    load_per_core: float | None = None  # the machine's 1-minute load average over its cores
    live_verdict: Verdict = "ok"  # the worst verdict the live check gave inside the stretch
    live_reason: str = ""
    idle_cores: float | None = None  # the machine's idle CPU over the stretch, in cores: would more workers help
    loop_wait_quantiles_ms: tuple[float, ...] | None = None  # on harness.stats.distortion.LAG_GRID, time-weighted
    loop_tick_quantiles_ms: tuple[float, ...] | None = None  # … and per wake-up
    max_shift: float = 0.05  # a figure the lateness could move by more than this share is untrusted


def lateness(client: ClientCheck, schedule: str | None = None) -> str | None:
    """What was late, in words, or None: `schedule` (the phase's schedule lag, when over its bound), the event
    loop's lag over its bound, or the CPU over its bound when nothing else was (its verdict names the
    share)."""
    late = [schedule] if schedule else []
    if client.loop_lag_p99_ms is not None and client.loop_lag_p99_ms > client.loop_lag_bound_ms:
        late.append(f"event-loop lag p99 {client.loop_lag_p99_ms:.1f} ms > {client.loop_lag_bound_ms:.1f} ms")
    if not late and client.cpu_share is not None and client.cpu_share > client.cpu_bound:
        late.append(f"CPU above {client.cpu_bound:.0%}")
    return "; ".join(late) or None


def verdict(late: str | None, client: ClientCheck) -> tuple[Verdict, str]:
    """`late`: what was late and by how much (None: nothing was). The verdict and its one-line reason."""
    if late is None:
        return "ok", ""
    if client.cpu_share is None and client.runq_share is None and client.load_per_core is None:
        return "stalled", late  # no self-check readings (records alone): late, cause unknown
    cpu = client.cpu_share or 0.0
    if cpu >= client.cpu_bound:
        return "saturated", f"harness saturated: {late} at {cpu:.0%} of a core{spare_cores(client)}"
    runq = client.runq_share
    load = client.load_per_core
    if (runq is not None and runq >= RUNQ_BOUND) or (load is not None and load > 1.0):
        waited = f", waiting for a CPU {runq:.0%} of the time" if runq is not None else ""
        loaded = f", machine load {load:.1f} per core" if load is not None else ""
        guess = GUESS if load is None or load > 1.0 else GUESS_SHARED
        return "not_scheduled", f"harness not scheduled: {late} at only {cpu:.0%} of a core{waited}{loaded}: {guess}"
    return "stalled", f"harness stalled: {late} at {cpu:.0%} of a core without CPU contention"


def blamed(reason: str, cause: str) -> str:
    """A verdict's reason once its cause is known (a worker frozen in the phase): the cause first, and no
    guess."""
    return f"{cause}; {reason.replace(': ' + GUESS, '').replace(': ' + GUESS_SHARED, '')}"


def spare_cores(client: ClientCheck) -> str:
    """What to do about a saturated harness on this machine: split the load over the cores that were idle
    while it ran (a bundled simulator's or another process's are not), or over more hosts when none was."""
    if client.idle_cores is None:
        return ""
    idle = int(client.idle_cores + 0.5)
    if idle == 0:
        return "; no core of this machine was idle meanwhile: more load needs more hosts (--ray, or --shard)"
    return (f"; {client.idle_cores:.1f} cores of this machine were idle meanwhile: `--workers {idle + 1}` sends it "
            f"from {idle + 1} processes")


def worst(*verdicts: tuple[Verdict, str]) -> tuple[Verdict, str]:
    return max(verdicts, key=lambda v: RANK[v[0]])


def health(check: ClientCheck, name: Verdict | None = None) -> ClientHealth:
    """A process's self-check over a stretch, as summary.json keeps it, with its verdict (given, or judged
    from the readings alone)."""
    name = name or verdict(lateness(check), check)[0]
    def kept(q: tuple[float, ...] | None) -> list[float] | None:
        return None if q is None else [round(v, 3) for v in q]

    return ClientHealth(loop_lag_p99_ms=check.loop_lag_p99_ms, cpu_share=check.cpu_share,
                        cpu_seconds=check.cpu_seconds, runq_share=check.runq_share,
                        load_per_core=check.load_per_core, verdict=name,
                        loop_wait_quantiles_ms=kept(check.loop_wait_quantiles_ms),
                        loop_tick_quantiles_ms=kept(check.loop_tick_quantiles_ms))


def saved_check(saved: PhaseSummary | None, loop_lag_bound_ms: float, cpu_bound: float,
                max_shift: float = 0.05) -> ClientCheck:
    """A phase's self-check as its summary.json kept it (the live verdicts are not in the records), for a
    summary rebuilt offline or merged from shards; none saved: a check that saw nothing."""
    if saved is None:
        return ClientCheck(loop_lag_bound_ms=loop_lag_bound_ms, cpu_bound=cpu_bound, max_shift=max_shift)
    c = saved.client
    def read(q: list[float] | None) -> tuple[float, ...] | None:
        return None if q is None else tuple(q)

    return ClientCheck(c.loop_lag_p99_ms, c.cpu_share, loop_lag_bound_ms, cpu_bound, c.cpu_seconds, c.runq_share,
                       c.load_per_core, c.verdict, saved.client_limited_reason or "",
                       loop_wait_quantiles_ms=read(c.loop_wait_quantiles_ms),
                       loop_tick_quantiles_ms=read(c.loop_tick_quantiles_ms), max_shift=max_shift)
