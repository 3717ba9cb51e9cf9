"""One shard's side of a run split across processes or hosts (`--shard i/N --start-at T`, by hand or as a
worker of `--workers`/`--ray`): when it starts, how it lines its phases up with the other shards', and what it
measured of its own lateness and clock, into its header. `shard.json`, written before the first request, is
what lets `harness merge` join a shard killed before its summary."""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from harness.config.load import Phase
from harness.run.distributed.clockref import measure
from harness.run.distributed.relay import Relay
from harness.run.distributed.timeline import PhaseGate, manual_gate
from harness.stats.schema import RunHeader, ShardInfo
from harness.voice import Voice
from harness.workload.plan import PhasePlan
from harness.workload.shards import LATE_MS, PHASE_SLACK_S, SKEW_MS, Shard, skew_ms

SHARD_HEADER = "shard.json"
# The lead `--start-at` needs: a shard's launch to its ready (Python and the harness loaded, the requests
# built, the connections open), `bench/start_lead.py` on this 2-core machine: 2 shards at once 0.7–0.9 s
# quiet, 1.6–2.4 s with a busy loop on each core; 4 at once 1.8–2.1 s and 2.9–3.4 s. A lead of 5 s covers all,
# with room.
LEAD_S = 5.0


def since_launch_s() -> float | None:
    """Seconds since this process was launched (Linux: its start in /proc/self/stat and the time since boot in
    /proc/uptime, both counted from boot); None where that cannot be read."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        up = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    return max(0.0, up - ticks / os.sysconf("SC_CLK_TCK"))


@dataclass(frozen=True, slots=True)
class Sharding:
    """This process runs one shard of a run split across processes or hosts, all starting at `start_at`."""

    shard: Shard
    start_at: float  # Unix time, seconds
    relay: Relay | None = None  # the line to a parent that started this shard (`--workers`, `--ray`)
    slack_s: float = PHASE_SLACK_S  # by hand (no relay): planned after each phase's schedule (run.timeline)
    clock_ref: str | None = None  # by hand: a `harness clock` to measure this host's clock against

    def info(self) -> ShardInfo:
        return ShardInfo(index=self.shard.index, count=self.shard.count, start_at=self.start_at,
                         phase_slack_s=None if self.relay is not None else self.slack_s)

    def gate(self, phases: list[Phase], whole: list[PhasePlan], voice: Voice) -> PhaseGate:
        """When each phase begins: the parent's barrier, or (by hand) the planned timetable."""
        if self.relay is not None:
            return PhaseGate(relay=self.relay)
        if self.shard.count == 1:
            return PhaseGate()
        return manual_gate(phases, whole, self.start_at, self.slack_s, voice)

    async def wait(self, run_dir: Path, header: RunHeader, voice: Voice) -> RunHeader:
        """Until the common start (hosts are assumed NTP-synchronised); at once if it has passed, saying by
        how much for a shard by hand (`shard.late_ms` in the summary; `harness merge` names it). The run's
        header goes to `shard.json` first: a shard killed before its summary can still be merged. The header,
        with what was measured."""
        ready = since_launch_s()
        shard = (header.shard or self.info()).changed(ready_s=None if ready is None else round(ready, 2))
        header = header.changed(shard=shard)
        (run_dir / SHARD_HEADER).write_text(json.dumps({"run": header.to_json()}), encoding="utf-8")
        if self.relay is not None:
            self.relay.start_beats()
            shard = await self._clock(shard, voice)
        elif self.clock_ref is not None:
            shard = await self._reference(shard, self.clock_ref, voice)
        delay = self.start_at - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        if self.relay is not None:
            # The parent's phase-0 barrier comes next and releases every shard together: time spent reaching
            # the common start is waited off there, so a shard with a parent is never late (it has no
            # `late_ms`).
            return header.changed(shard=shard)
        late_ms = max(0.0, (time.time() - self.start_at) * 1000)
        if late_ms > LATE_MS:
            took = "" if ready is None else (f"; it was ready {ready:,.1f} s after its launch: a lead of at least "
                                             f"{max(LEAD_S, 2 * ready):,.0f} s keeps the shards together")
            voice.warn(f"shard {self.shard} started {late_ms:,.0f} ms after the common start (--start-at): its share "
                       f"of the load is late by as much{took}")
        return header.changed(shard=shard.changed(late_ms=round(late_ms, 1)))


    async def _reference(self, shard: ShardInfo, url: str, voice: Voice) -> ShardInfo:
        """By hand: this host's clock against a `harness clock` (--clock-ref), before the start."""
        try:
            offset, uncertainty = await asyncio.to_thread(measure, url)
        except (OSError, ValueError, KeyError) as exc:
            voice.warn(f"shard {self.shard}: --clock-ref {url} could not be read ({type(exc).__name__}): this "
                       "host's clock is trusted as it is (NTP)")
            return shard
        if skew_ms(offset, uncertainty):
            voice.warn(f"shard {self.shard}: this host's clock is {offset:+,.1f} ms (±{uncertainty:.1f}) off the "
                       "reference's (--clock-ref): its start and phases are late or early by as much on the "
                       "reference's clock; `harness merge` moves its records onto it and says so")
        return shard.changed(clock_offset_ms=round(offset, 3), clock_uncertainty_ms=round(uncertainty, 3))

    async def _clock(self, shard: ShardInfo, voice: Voice) -> ShardInfo:
        """This host's clock against the coordinator's (the parent of --workers/--ray)."""
        assert self.relay is not None
        measured = await self.relay.clock_offset()
        if measured is None:
            return shard
        offset, uncertainty = measured
        if abs(offset) - uncertainty > SKEW_MS:
            voice.warn(f"shard {self.shard}: this host's clock is {offset:+,.1f} ms (±{uncertainty:.1f}) off the "
                       "coordinator's: the merge moves its records onto the coordinator's clock; latencies are "
                       "unaffected")
        return shard.changed(clock_offset_ms=round(offset, 3), clock_uncertainty_ms=round(uncertainty, 3))
