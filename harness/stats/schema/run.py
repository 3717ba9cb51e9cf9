"""The run header of summary.json: who ran what, when, against which endpoint, how it ended, how its shards
lined up; and what the endpoint's /metrics scrape found."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harness.config.labels import Scalar
from harness.config.simulator import SimulatorConfig
from harness.stats.schema.base import ClientHealth, Section


class Anchor(Section):
    """One instant on both clocks: turns any monotonic timestamp of the run into wall time."""

    monotonic_ns: int
    wall_ns: int


class EndpointInfo(Section):
    """The endpoint the run measured."""

    base_url: str
    model: str
    api: str
    bundled_simulator: bool
    accelerator: str | None = Field(None, description="what the endpoint runs on, as the scenario declared it")
    insecure: bool = Field(False, description="https certificates were not checked (--insecure)")


class ServerTokenizer(Section):
    """Prompts counted by the endpoint's /tokenize: how its tokenizer counted the harness's vocabulary."""

    kind: Literal["server"]
    words: int = Field(description="words of the harness's vocabulary that are one token at the server")
    template_overhead: int = Field(description="tokens the server adds around a one-turn prompt, taken off each")
    chosen: Literal["flag", "default"] = Field("flag", description="flag: --tokenizer server; default: no tokenizer "
                                               "was given and the endpoint's /tokenize counted the harness's words "
                                               "otherwise than one token each")


class ShardInfo(Section):
    """This process's share of a sharded run, and how its start and phases lined up with the others'."""

    index: int
    count: int
    start_at: float | None = None  # the common start, Unix seconds
    late_ms: float | None = Field(None, description="by hand: how long after the common start the shard began (0: on "
                                  "time); None with a parent, whose phase-0 barrier releases the shards together")
    clock_offset_ms: float | None = Field(None, description="the coordinator's wall clock − this shard's, measured "
                                          "NTP-style at its start (--workers/--ray; by hand, against --clock-ref; "
                                          "else null)")
    clock_uncertainty_ms: float | None = Field(None, description="± of that: half the shortest round trip")
    phase_slack_s: float | None = Field(None, description="by hand (--shard without a parent): the pause planned "
                                        "after each phase's schedule before the next phase starts on every shard")
    phase_late_ms: dict[str, float] | None = Field(None, description="by hand: phase -> how long after its planned "
                                                   "start it began on this shard (late: the phase before ran over)")
    ready_s: float | None = Field(None, description="seconds from this shard's launch to its being ready to start "
                                  "(Python and the harness loaded, requests built, connections open): the least "
                                  "lead --start-at needs; null where the launch time cannot be read")


class ShardLoss(Section):
    """What a shard that died had done: counted by the parent of a worker from what it streamed back; for a
    shard by hand killed before its summary, by `harness merge` from its records against its plan (in flight
    and never sent are then one count, `never_sent`: no one saw which)."""

    phase: str | None = Field(description="the phase it died in: that phase and the ones after are incomplete")
    sent: int = Field(description="requests it had sent")
    ended: int = Field(description="of those, ended with a record (ok or not), kept")
    in_flight: int = Field(description="sent and not ended when it died: lost, their answers never seen")
    never_sent: int | None = Field(description="its share it never sent (null: a phase bound by time)")


class MergedShard(ShardInfo):
    """One shard of a merged run: where its records were and how it ended."""

    run_dir: str
    records: int
    complete: bool | None
    stopped: str | None
    loss: ShardLoss | None = Field(None, description="a worker of --workers/--ray that died: what was lost")
    silent_max_s: float | None = Field(None, description="a worker that said nothing for over 2 s (frozen, "
                                       "stuck): its longest silence")
    silences: dict[str, float] | None = Field(None, description="… per phase it was in: phase -> its longest "
                                              "silence there, seconds (the phase's lateness is then its own)")
    records_at: str | None = Field(None, description="where the worker wrote its own records (host:path for a Ray "
                                   "actor: they stay on that node if the driver dies)")


class RecordsFile(Section):
    """Whether every record reached requests.jsonl."""

    unwritten: int = Field(description="records the run's folder did not take (a full disk, a deleted folder): "
                           "counted in the phases all the same, and written to `rescued_to`")
    replaced: int = Field(description="records with text no file can hold (a lone surrogate a server sent), "
                          "written with it replaced")
    failure: str | None = Field(description="the first failed write, in one line; the run stopped sending there")
    rescued_to: str | None = Field(description="the folder that took every record and the reports instead")


class RunHeader(Section):
    """Who ran what, when, against which endpoint; how the run ended."""

    run_id: str
    scenario: str
    harness_version: str
    seed: int
    mode: Literal["run", "predict"] = "run"
    started_at: str | None = None
    anchor: Anchor | None = Field(None, description="monotonic_ns + (wall_ns − monotonic_ns) = wall time")
    endpoint: EndpointInfo | None = None
    simulator: SimulatorConfig | None = Field(None, description="the bundled or predicted simulator")
    stopped: str | None = Field(None, description="the signal that stopped the run")
    stopped_after_s: float | None = Field(None, description="seconds from the start to that signal")
    not_run: list[str] = Field(default_factory=list, description="phases the run never started (it was stopped, "
                               "or a phase before them did not end)")
    complete: bool = True
    tokenizer: ServerTokenizer | None = Field(None, description="prompts counted by the endpoint's /tokenize: what "
                                              "it said")
    shard: ShardInfo | None = Field(None, description="with --shard i/N: this process's share of the run")
    shards: list[MergedShard] | None = Field(None, description="after `harness merge`: the shards it joined")
    records_file: RecordsFile | None = Field(None, description="null: a run written before this was kept")
    read_window_us: float | None = Field(None, description="client.read_window_us, when on: the client slept this "
                                         "long after each pass of reads, so every stamp may be up to this (plus a "
                                         "pass) late")
    coordinator: ClientHealth | None = Field(None, description="--workers/--ray: the parent's own self-check (a "
                                             "late parent delays barriers and the live view, not latencies)")
    @property
    def model(self) -> str:
        """The model the run asked for: the endpoint's, else the simulator's ('' when neither says)."""
        return (self.endpoint.model if self.endpoint else "") or (self.simulator.model if self.simulator else "")

    labels: dict[str, str] = Field(default_factory=dict, description="--label k=v (scenario `labels`): the run's "
                                   "tags, carried to exports, the history and the metrics")
    metadata: dict[str, Scalar] = Field(default_factory=dict, description="--metadata FILE (scenario `metadata`): "
                                        "facts about the run, flat")


class ScrapeInfo(Section):
    """The endpoint's /metrics scraped during the run: where, how often, what failed, which series."""

    url: str
    interval_s: float
    scrapes: int
    failures: dict[str, int]
    unavailable: str | None
    series: list[str]
