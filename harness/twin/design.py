"""The runs `harness sim twin` makes, chosen before any is sent: runs to fit on (a closed-loop ramp that holds
each batch size long enough to time pure decode steps, prompts alone at two or three lengths and together at
another, one Poisson load)
and held-out loads to validate on (a Poisson load at another rate, a closed loop and a fixed batch at the slot
count, these two twice), each with its estimated time, from one probe request's TTFT and ITL. Pure: tested
without a network.

Why these: fitted on Poisson loads alone, a twin of llama-server saw its highest batch sizes in a handful of
steps, most of them mixed with prompt work, and its decode table rose faster than any engine's (issue 44); a
closed loop of b users decodes b sequences in nearly every step, and a prompt sent alone shows its cost whole.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from harness.errors import UsageError
from harness.twin.heldout import AGAIN

# The workload of the Poisson and held-out runs: a chat-like request the fit sees prompts and decodes of
RUN_PROMPT, RUN_OUTPUT = 128, 64
RAMP_PROMPT, RAMP_OUTPUT = 32, 64  # decode-heavy: a short prompt, then ~2 × 63 steps at the batch size
PROBE_OUTPUT = 8
PROBE_LENGTHS = (128, 512, 1024)
TOGETHER_LENGTH = 256
TOGETHER_BATCHES = 4  # each a step of prompts the server times whole: 3 to price them together
EVERY_SIZE_UP_TO = 16  # beyond it the ramp steps geometrically (a 256-seat engine is not ramped seat by seat)
FIT_LOAD, HELD_LOAD = 0.6, 0.35  # of the estimated capacity: two rates apart, neither near overload
# Planning guesses, corrected by what the runs take: a decode step of b sequences at most this much slower per
# extra sequence than a step of one (a CPU engine: ~0.3 a sequence; a GPU: ~0), prompts processed one at a
# time.
ITL_GROWTH = 0.35


Load = dict[str, int | float | str]  # a scenario phase's `load:` section


@dataclass(frozen=True)
class Probe:
    """One request sent alone: its TTFT (prompt of `prompt_tokens`), its median inter-token gap."""

    ttft_ms: float
    itl_ms: float
    prompt_tokens: int
    itl_by_seqs: tuple[float, ...] = ()  # measured (the ramp's ITL p50 at 1, 2, … users), else the guess

    def itl(self, seqs: int) -> float:
        if 0 < seqs <= len(self.itl_by_seqs):
            return self.itl_by_seqs[seqs - 1]
        return self.itl_ms * (1 + ITL_GROWTH * (seqs - 1))

    def prompt_ms(self, tokens: int) -> float:
        return self.ttft_ms * max(tokens, 1) / max(self.prompt_tokens, 1)

    def request_s(self, seqs: int, prompt: int, output: int) -> float:
        """One round of `seqs` requests sent together: their prompts one after another, then their decode."""
        return (seqs * self.prompt_ms(prompt) + output * self.itl(seqs)) / 1e3


@dataclass(frozen=True)
class PlannedRun:
    """One run: `fit` (fitted on) or `held` (validated on); its load and workload as a scenario phase says
    them."""

    name: str
    role: str
    load: Load
    prompt_tokens: int
    output_tokens: int
    estimate_s: float

    def scenario(self, tokenizer: str | None) -> dict[str, object]:
        workload: dict[str, int | str] = {"prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens}
        if tokenizer:
            workload["tokenizer"] = tokenizer
        return {"name": f"twin-{self.name}", "workload": workload, "endpoint": {"scrape_interval_s": 1.0},
                "phases": [{"name": self.name, "load": self.load}]}


@dataclass(frozen=True)
class Design:
    runs: tuple[PlannedRun, ...]
    capacity_rps: float  # the estimate the rates are fractions of
    rounds: int = 2
    scale: float = 1.0

    @property
    def estimate_s(self) -> float:
        return sum(r.estimate_s for r in self.runs)

    def role(self, role: str) -> list[PlannedRun]:
        return [r for r in self.runs if r.role == role]


def batch_sizes(slots: int) -> list[int]:
    """Every batch size up to 16; beyond, a geometric ladder (×1.5) ending at the slot count."""
    sizes = list(range(1, min(slots, EVERY_SIZE_UP_TO) + 1))
    while sizes[-1] < slots:
        sizes.append(min(slots, max(sizes[-1] + 1, round(sizes[-1] * 1.5))))
    return sizes


def design(slots: int, probe: Probe, context_tokens: int | None = None, rounds: int = 2,
           scale: float = 1.0) -> Design:
    """The runs for an engine of `slots` concurrent requests. `rounds`: closed-loop rounds per ramp step;
    `scale` (≤ 1) shortens the open-loop and held-out runs (fewer requests) to fit a budget."""
    runs: list[PlannedRun] = []
    ramp = batch_sizes(slots)
    for b in ramp:
        runs.append(PlannedRun(f"ramp-{b}", "fit", {"type": "concurrency", "concurrency": b,
                                                     "requests": rounds * b},
                               RAMP_PROMPT, RAMP_OUTPUT, rounds * probe.request_s(b, RAMP_PROMPT, RAMP_OUTPUT)))
    room = (context_tokens or 4096) // 2 - PROBE_OUTPUT
    lengths = sorted({min(n, room) for n in PROBE_LENGTHS if min(n, room) >= 16})
    for n in lengths:
        runs.append(PlannedRun(f"prompt-{n}", "fit", {"type": "concurrency", "concurrency": 1, "requests": 3},
                               n, PROBE_OUTPUT, 3 * probe.request_s(1, n, PROBE_OUTPUT)))
    # Prompts together, of a length no held-out run has: what a step of many prompts costs beyond one of their
    # summed length (llama-server: 8 × 128 tokens took 2.7 s where 1,024 alone took 2.3).
    if slots > 1:
        n = min(TOGETHER_LENGTH, room)
        runs.append(PlannedRun(f"prompts-{slots}x{n}", "fit", {"type": "batch", "size": slots,
                                                                "batches": TOGETHER_BATCHES},
                               n, PROBE_OUTPUT, TOGETHER_BATCHES * probe.request_s(slots, n, PROBE_OUTPUT)))
    # Capacity: `slots` requests in flight, each taking its prompt and its decode at the full batch
    capacity = slots / ((probe.prompt_ms(RUN_PROMPT) * slots + RUN_OUTPUT * probe.itl(slots)) / 1e3)
    count = max(16, round(48 * scale))
    for name, role, share in (("poisson-fit", "fit", FIT_LOAD), ("poisson-held", "held", HELD_LOAD)):
        rate = round(share * capacity, 4)
        runs.append(PlannedRun(name, role, {"type": "poisson", "rate": rate, "requests": count},
                               RUN_PROMPT, RUN_OUTPUT, count / rate + probe.request_s(slots, RUN_PROMPT, RUN_OUTPUT)))
    runs = runs[:len(ramp)] + at_slots(slots, probe, scale) + runs[len(ramp):] + at_slots(slots, probe, scale, AGAIN)
    return Design(tuple(runs), capacity, rounds, scale)


def at_slots(slots: int, probe: Probe, scale: float, suffix: str = "") -> list[PlannedRun]:
    """The held-out loads at the slot count: a closed loop and a fixed batch. Run twice, once after the ramp
    and again last, they measure the engine's own difference on exactly these figures (`twin_heldout`)."""
    closed_rounds = max(2, round(3 * scale))
    return [PlannedRun(f"closed-{slots}{suffix}", "held", {"type": "concurrency", "concurrency": slots,
                                                           "requests": closed_rounds * slots},
                       RUN_PROMPT, RUN_OUTPUT, closed_rounds * probe.request_s(slots, RUN_PROMPT, RUN_OUTPUT)),
            PlannedRun(f"batch-{slots}{suffix}", "held", {"type": "batch", "size": slots, "batches": 2},
                       RUN_PROMPT, RUN_OUTPUT, 2 * probe.request_s(slots, RUN_PROMPT, RUN_OUTPUT))]


def within(slots: int, probe: Probe, budget_s: float, context_tokens: int | None = None, spent_s: float = 0.0
           ) -> Design:
    """The fullest design whose estimate fits what is left of `budget_s` (`spent_s` gone on the probe): shorter
    open-loop runs first, then one ramp round; a budget even the shortest design passes is a UsageError naming
    --budget."""
    for rounds, scale in [(2, s) for s in SCALES] + [(1, SCALES[-1])]:
        plan = design(slots, probe, context_tokens, rounds, scale)
        if plan.estimate_s <= budget_s - spent_s:
            return plan
    raise UsageError(f"--budget: {minutes(budget_s)} is too short for this endpoint: the shortest design takes "
                     f"~{minutes(plan.estimate_s + spent_s)} (one request alone: TTFT {probe.ttft_ms:,.0f} ms, ITL "
                     f"{probe.itl_ms:,.1f} ms, {slots} slots)")


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


SCALES = (1.0, 0.66, 0.33)  # of the open-loop and held-out runs' requests, the fullest that fits a budget first


def refined(plan: Design, slots: int, probe: Probe, done: int, context_tokens: int | None = None,
            left_s: float | None = None) -> Design:
    """The plan with its runs after the first `done` redesigned on a better probe (the ramp's measured ITL by
    batch size, a prompt's measured TTFT): the open-loop rates follow the engine's measured capacity, not the
    guess. An engine slower than its probe makes those runs longer: with `left_s`, the fullest rest that fits
    it (fewer requests), else the shortest."""
    for scale in [s for s in SCALES if s <= plan.scale] or [plan.scale]:
        again = design(slots, probe, context_tokens, plan.rounds, scale)
        if left_s is None or sum(r.estimate_s for r in again.runs[done:]) <= left_s:
            break
    return replace(again, runs=plan.runs[:done] + again.runs[done:])
