"""What a capacity search found, as data: each trial as the search saw it, and the capacity with its interval,
the estimate it started from and the trials it rests on — for `harness search`'s lines, its `search.json`, and
its page (harness.report.search_page)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from harness.config.metric_registry import SLO_LATENCIES
from harness.stats.conclusion import decided_by
from harness.stats.schema import Summary


@dataclass(frozen=True, slots=True)
class SearchTrial:
    """One trial as the search saw it: its rate and seed, and what its one phase delivered."""

    rate: float
    seed: int
    goodput: float
    requests: int
    too_small: bool  # fewer requests in its window than the search asks to decide on
    output_tokens_per_s: float
    index: int = 0  # 1 for the first trial
    met: bool = False  # goodput at least the share asked, on enough requests
    failed_on: str = ""  # the SLO limit most of its requests missed (TTFT, TPOT, E2E), or errors
    e2e_p99_ms: float | None = None
    seconds: float = 0.0  # the arrivals' planned length
    client_limited: bool = False  # the harness was late in this trial: its latencies may be the client's
    p99_ms: dict[str, float | None] = field(default_factory=dict)  # SLO field (ttft_ms, …) → its latency's p99
    window_s: float = 0.0  # from its first send to its last answer: what the trial took beyond its start and files

    @classmethod
    def of(cls, summary: Summary, rate: float, seed: int, min_requests: int, *, index: int = 0,
           goodput: float = 0.95, seconds: float = 0.0) -> SearchTrial:
        (phase,) = summary.phases
        measured = phase.requests.total
        small = measured < min_requests
        p99 = {key: getattr(phase.latency_ms, latency).p99 for key, latency in SLO_LATENCIES}
        return cls(rate, seed, phase.goodput.fraction, measured, small, phase.throughput.output_tokens_per_s, index,
                   phase.goodput.fraction >= goodput and not small, decided_by(phase), phase.latency_ms.e2e.p99,
                   seconds, phase.client_limited, p99, phase.window.duration_s)


@dataclass(frozen=True, slots=True)
class Capacity:
    """What the search found: the capacity with its interval over seeds, or why it found none."""

    capacity_rps: float | None
    interval_rps: tuple[float, float] | None
    trials: list[SearchTrial] = field(default_factory=list)
    per_seed_rps: list[float] | None = None
    at_least_rps: float | None = None  # the highest rate tried still met the SLOs
    note: str | None = None
    trial_s: float | None = None  # how long the last trials' arrivals lasted (raised past --duration, see SETTLE_E2E)
    start_rps: float | None = None  # the estimate the search started from (None: from its bounds)

    @property
    def boundary(self) -> list[SearchTrial]:
        """The trials the capacity rests on: per seed, its fastest passing trial and the slowest failing one
        above."""
        out = []
        for seed in dict.fromkeys(t.seed for t in self.trials):
            mine = [t for t in self.trials if t.seed == seed]
            passed = max((t for t in mine if t.met), key=lambda t: t.rate, default=None)
            above = [t for t in mine if not t.met and (passed is None or t.rate > passed.rate)]
            out += [t for t in (passed, min(above, key=lambda t: t.rate, default=None)) if t is not None]
        return out

    @property
    def untrusted(self) -> str | None:
        """Why the capacity is not claimed: most trials it rests on were client-limited (None: it is
        claimed)."""
        resting = self.boundary
        late = sum(t.client_limited for t in resting)
        if self.capacity_rps is None or not resting or 2 * late <= len(resting):
            return None
        return (f"{late} of the {len(resting)} trials it rests on were client-limited: the harness was late, so "
                "their latencies may be its own (a quieter machine, or --workers)")

    def to_json(self) -> dict[str, object]:
        """As `harness search --json` prints it: the optional parts only when they say something."""
        out = {k: v for k, v in asdict(self).items() if v is not None or k in ("capacity_rps", "interval_rps")}
        limited = sum(t.client_limited for t in self.trials)
        return {**out, "interval_rps": None if self.interval_rps is None else list(self.interval_rps),
                "client_limited_trials": limited, "untrusted": self.untrusted}
