"""The run header of summary.json, built here and nowhere else: for a live run, a prediction, a run rebuilt
offline without its summary, and (from its shards' headers) a merged run. Later facts — how the run ended,
a shard's measured lateness — are added with `changed(…)` (validated), never by mutating a dict."""

from __future__ import annotations

import datetime as dt
import time
from typing import Literal

from harness import __version__
from harness.client.backend import Endpoint
from harness.clock import Clock
from harness.config.scenario import Scenario
from harness.stats.schema import Anchor, EndpointInfo, RunHeader, ServerTokenizer, ShardInfo


def run_header(scenario: Scenario, run_id: str, *, mode: Literal["run", "predict"] = "run",
               clock: Clock | None = None, endpoint: Endpoint | None = None, bundled: bool = False,
               tokenizer: ServerTokenizer | None = None, shard: ShardInfo | None = None,
               complete: bool = True) -> RunHeader:
    """Who runs what, when, against which endpoint. With a clock, the run's one wall-clock anchor
    (monotonic_ns of the records + (wall_ns − monotonic_ns) = wall time) and its start; the simulator's
    configuration when the run measures the bundled one, or predicts on it."""
    anchor = None if clock is None else Anchor(monotonic_ns=clock.now_ns(), wall_ns=time.time_ns())
    info = None if endpoint is None else EndpointInfo(base_url=endpoint.base_url, model=endpoint.model,
                                                      api=endpoint.api, bundled_simulator=bundled,
                                                      accelerator=scenario.endpoint.accelerator,
                                                      insecure=scenario.endpoint.insecure)
    simulated = bundled or mode == "predict"
    return RunHeader(run_id=run_id, scenario=scenario.name, harness_version=__version__, seed=scenario.seed,
                     mode=mode, started_at=None if clock is None else dt.datetime.now(dt.UTC).isoformat(),
                     anchor=anchor, endpoint=info, simulator=scenario.simulator if simulated else None,
                     tokenizer=tokenizer, shard=shard, complete=complete,
                     read_window_us=(scenario.client.read_window_us or None) if mode == "run" else None,
                     labels=scenario.labels, metadata=scenario.metadata)


def unknown_header(scenario: Scenario) -> RunHeader:
    """A run rebuilt from its records alone (killed before its summary): said incomplete, not left blank."""
    return run_header(scenario, "unknown", complete=False)
