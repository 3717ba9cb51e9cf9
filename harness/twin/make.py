"""`harness sim twin URL`: a twin from one command. Ask the endpoint what it says of its engine, send one
probe request, design the runs (`twin_design`) within the budget, make them, fit on the fitting ones
(`twin.fit_runs`), check the fit's shape (`twin_checks`) and validate on the held-out ones chosen before any
was sent.

The twin holds where every held-out figure lies within the bounds `sim fit` judges its own runs by (±15% on
TTFT and ITL p50 and output tokens/s, ±30% on TTFT p99) or the engine's own difference between two runs of
that load where wider (`twin_heldout`), and the fit's shape is one an engine can have."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from harness.client.aio import open_session
from harness.client.backend import Endpoint
from harness.config.metric_registry import Latency, of
from harness.config.scenario import parse_scenario
from harness.errors import EndpointError
from harness.records_read import read_records
from harness.report.files import write_run
from harness.run.display import Display
from harness.run.runner import run_scenario
from harness.stats.schema import read_summary
from harness.stats.thresholds import observed
from harness.twin.admission import admission
from harness.twin.checks import Finding, confirmed, decode_findings, prompt_findings
from harness.twin.design import RUN_PROMPT, Design, PlannedRun, Probe, minutes, refined, within
from harness.twin.discover import EngineInfo, discover
from harness.twin.fit import Fit, fit_runs, load_twin
from harness.twin.heldout import HeldFigure, held_figures
from harness.twin.samples import step_samples
from harness.twin.validate import ValidationRow, misses, outside_fitted, validate_run, validated
from harness.twin.wake import wake_finding
from harness.voice import Voice

TTFT_P50, TTFT_P99, ITL_P50 = (of(latency, q).name for latency, q in (
    (Latency.TTFT, "p50"), (Latency.TTFT, "p99"), (Latency.ITL, "p50")))
DRIFT = 0.10  # the lone probe's TTFT or ITL moving this much between the first and the last: `engine-drift`
# Findings that make a twin untrustworthy whatever its held-out errors. The others explain: decode-spread,
# engine-drift, and prompt-cost-by-load — on a twin of the bundled simulator that held every held-out figure
# it fired in 3 of 5 runs (bench/twin_verdict.py: a GPU's prompt beside decoding streams overlaps their weight
# reads, which a decode table's additive price does not follow), so it names a cause, not a verdict.
FATAL = ("decode-superlinear", "decode-nonmonotonic", "own-runs-missed")


@dataclass
class TwinResult:
    preset: Path
    fit: Fit
    info: EngineInfo
    plan: Design
    held: list[ValidationRow]
    own: list[ValidationRow]
    findings: list[Finding] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    limited: dict[str, str] = field(default_factory=dict)  # runs the client limited: why

    @property
    def figures(self) -> list[HeldFigure]:
        return held_figures(self.held)

    @property
    def missed(self) -> list[HeldFigure]:
        return [f for f in self.figures if not f.holds]

    @property
    def holds(self) -> bool:
        return self.verdict == "holds"

    @property
    def verdict(self) -> str:
        return verdict(self.missed, self.findings, self.limited)


def verdict(missed: list[HeldFigure], findings: list[Finding], limited: dict[str, str]) -> str:
    """`holds` when no held-out figure missed and no finding condemns the fit; else `no verdict` where the
    client limited some run (a starved client's timings fitted or judged it: the misses may be its own, as
    `harness compare` says of such runs), `does not hold` where none."""
    if not missed and not any(f.code in FATAL for f in findings):
        return "holds"
    return "no verdict" if limited else "does not hold"


async def make_run(spec: PlannedRun, endpoint: Endpoint, where: Path, tokenizer: str | None, log: Display
                   ) -> Path:
    scenario = parse_scenario(spec.scenario(tokenizer), f"sim twin: {spec.name}")
    write_run(await run_scenario(scenario, endpoint, where, display=log), log)
    return where


def probe_of(run_dir: Path) -> Probe:
    """TTFT and ITL of requests sent one at a time: the p50s, as every run's summary gives them."""
    ttft, itl = p50(run_dir, TTFT_P50), p50(run_dir, ITL_P50)
    if ttft is None or itl is None:
        raise EndpointError(f"{run_dir}: the probe requests did not succeed (see its summary.json): nothing to "
                            "design a twin on")
    return Probe(ttft, itl, RUN_PROMPT)


def p50(run_dir: Path, name: str) -> float | None:
    (phase,) = read_summary(run_dir / "summary.json").phases
    return observed(name, phase)


def measured_probe(guess: Probe, plan: Design, dirs: dict[str, Path]) -> Probe:
    """The probe with what the runs so far measured: each ramp step's ITL p50, the TTFT p50 of a prompt of the
    open-loop runs' length sent alone."""
    itl: list[float] = []
    for spec in plan.role("fit"):
        if spec.name.startswith("ramp-") and spec.name in dirs:
            if (value := p50(dirs[spec.name], ITL_P50)) is None:
                break
            itl.append(value)
    alone = dirs.get(f"prompt-{RUN_PROMPT}")
    ttft = (p50(alone, TTFT_P50) if alone is not None else None) or guess.ttft_ms
    return replace(guess, ttft_ms=ttft, prompt_tokens=RUN_PROMPT, itl_by_seqs=tuple(itl))


async def engine_info(endpoint: Endpoint) -> EngineInfo:
    async with open_session(1, 10.0, 30.0, endpoint.tls()) as session:
        return await discover(session, endpoint.base_url, endpoint.request_headers)


@dataclass(frozen=True)
class Measured:
    """The runs made: the design, and each run's folder by its name."""

    info: EngineInfo
    slots: int
    plan: Design
    dirs: dict[str, Path]
    probes: tuple[Probe, Probe] | None = None  # the same requests sent alone first and last

    def drift(self) -> Finding | None:
        """The engine's own speed moving between the first probe and the last beyond `DRIFT` (a shared
        machine's CPU: llama-server's lone-stream ITL went 17.6 → 14.6 ms within five minutes): figures within
        that no twin can hold, named."""
        if self.probes is None:
            return None
        first, last = self.probes
        moved = {"TTFT": last.ttft_ms / first.ttft_ms - 1, "ITL": last.itl_ms / first.itl_ms - 1}
        worst = max(moved, key=lambda k: abs(moved[k]))
        if abs(moved[worst]) <= DRIFT:
            return None
        return Finding("engine-drift", f"one request alone took TTFT {first.ttft_ms:,.0f} → {last.ttft_ms:,.0f} ms, "
                       f"ITL {first.itl_ms:,.1f} → {last.itl_ms:,.1f} ms between the first probe and the last "
                       f"({worst} {moved[worst]:+.0%}): the engine's own speed moved during the runs, and errors "
                       "of that size are its, not the twin's")

    def of(self, role: str) -> list[Path]:
        return [self.dirs[r.name] for r in self.plan.role(role)]


async def measure(endpoint: Endpoint, info: EngineInfo, slots: int, budget_s: float, workdir: Path,
                  tokenizer: str | None, voice: Voice) -> Measured:
    """Probe, design within the budget, and make every run of the design, saying how far it has come."""
    workdir.mkdir(parents=True, exist_ok=True)
    with (workdir / "runs.log").open("a", encoding="utf-8") as log_file:
        log = Display(log_file)
        started = time.monotonic()
        voice.say(f"probing {endpoint.base_url} with 3 requests one at a time …")
        probe_spec = PlannedRun("probe", "probe", {"type": "concurrency", "concurrency": 1, "requests": 3},
                                RUN_PROMPT, 32, 0.0)
        first = await make_run(probe_spec, endpoint, workdir / "00-probe", tokenizer, log)
        probe = probe_of(first)
        plan = within(slots, probe, budget_s, info.context_tokens, time.monotonic() - started)
        voice.say(f"one request alone: TTFT {probe.ttft_ms:,.0f} ms, ITL {probe.itl_ms:,.1f} ms; {slots} slots "
                  f"({info.source or '--slots'}); capacity ~{plan.capacity_rps:.2f} req/s")
        voice.say(f"{len(plan.role('fit'))} runs to fit on, {len(plan.role('held'))} held out; about "
                  f"{minutes(plan.estimate_s)} in all (budget {minutes(budget_s)}); runs in {workdir}")
        dirs: dict[str, Path] = {"probe": first}  # (not a planned run: read for what the engine did, not fitted)
        taken = estimated = 0.0
        for i in range(1, len(plan.runs) + 1):
            spec = plan.runs[i - 1]
            if spec.load["type"] == "poisson" and spec.role == "fit":
                left = budget_s - (time.monotonic() - started)
                plan = refined(plan, slots, measured_probe(probe, plan, dirs), i - 1, info.context_tokens, left)
                spec = plan.runs[i - 1]
                rates = [f"{r.load['rate']:g}" for r in plan.runs if r.load["type"] == "poisson"]
                voice.say(f"capacity from the ramp: ~{plan.capacity_rps:.2f} req/s; Poisson loads at "
                          f"{', '.join(rates)} req/s (fitted, held out), {spec.load['requests']} requests each")
                if (rest := sum(r.estimate_s for r in plan.runs[i - 1:])) > left:
                    voice.say(f"the engine is slower than its probe: the rest takes ~{minutes(rest)}, past the "
                              f"budget by ~{minutes(rest - left)} even with the fewest requests")
            ratio = taken / estimated if estimated else 1.0
            left = sum(r.estimate_s for r in plan.runs[i - 1:]) * ratio
            voice.say(f"[{i}/{len(plan.runs)}] {spec.role} {spec.name}: ~{minutes(spec.estimate_s * ratio)} "
                      f"({minutes(time.monotonic() - started)} so far, ~{minutes(left)} to go)")
            t0 = time.monotonic()
            dirs[spec.name] = await make_run(spec, endpoint, workdir / f"{i:02d}-{spec.name}", tokenizer, log)
            taken += time.monotonic() - t0
            estimated += spec.estimate_s
        voice.say("probing once more, to see whether the engine itself kept its speed …")
        last = workdir / f"{len(plan.runs) + 1:02d}-probe-end"
        dirs["probe-end"] = await make_run(probe_spec, endpoint, last, tokenizer, log)
        again = probe_of(dirs["probe-end"])
    return Measured(info, slots, plan, dirs, (probe, again))


def judge(runs: Measured, out: Path, name: str) -> TwinResult:
    """Fit on the fitting runs, write the preset, check the fit's shape and validate on the held-out runs."""
    fit_dirs, held_dirs = runs.of("fit"), runs.of("held")
    fit = fit_runs(fit_dirs, name, None, runs.slots, kv_said=runs.info.kv_tokens)
    poisson = [runs.dirs[r.name] for r in runs.plan.role("fit") if r.load["type"] == "poisson"]
    fit, admitted = admission(fit, out, name, fit_dirs, poisson)
    accelerator = load_twin(out, name)
    own = [row for d in fit_dirs for row in validate_run(d, accelerator)]
    held = [row for d in held_dirs for row in validate_run(d, accelerator)]
    lead = fit.accelerator.first_token_step
    rows = {d.name: step_samples(list(read_records(d / "requests.jsonl")), lead) for d in fit_dirs}
    clean = {int(spec.load["concurrency"]): step for spec in runs.plan.role("fit") if spec.name.startswith("ramp-")
             and (step := confirmed(rows[runs.dirs[spec.name].name], int(spec.load["concurrency"]))) is not None}
    findings = decode_findings(fit.accelerator, np.concatenate(list(rows.values())), clean)
    findings += [admitted] if admitted is not None else []
    # The ramp's prompts are a few dozen tokens, within a decode step's noise: they price nothing.
    findings += prompt_findings(fit.accelerator, {d: r for d, r in rows.items() if "-ramp-" not in d})
    # A ramp's TTFT is its 32-token prompts and the time around them, which a burst of its users stretches: it
    # times decode steps; and a p99 of fewer than `FEW` requests is their slowest.
    judged = [r for r in own if _judged(r)]
    if own_missed := misses(judged):
        worst = max(own_missed, key=lambda r: abs(r["error"] or 0.0))
        findings.append(Finding("own-runs-missed", f"the twin misses {len(own_missed)} figures of the runs it was "
                                f"fitted on; worst: {worst['figure']} of {Path(worst['run']).name} "
                                f"{worst['error']:+.0%}"))
    if (moved := runs.drift()) is not None:
        findings.append(moved)
    every = [r for d in runs.dirs.values() for r in read_records(d / "requests.jsonl")]
    if (woke := wake_finding(every, RUN_PROMPT)) is not None:
        findings.append(woke)
    outside = [line for d in held_dirs for line in outside_fitted(d, accelerator)]
    limited = client_limited(fit_dirs + held_dirs)
    return TwinResult(out, fit, runs.info, runs.plan, held, own, findings, outside, limited)


def client_limited(run_dirs: list[Path]) -> dict[str, str]:
    """The runs whose medians the client could have moved (TTFT or ITL p50: what the fit rests on and the
    held-out loads are judged by), by folder name: why. A tail it could have moved is only not judged: on a
    2-core machine beside the server the client is "not scheduled" in most runs, by a few ms at the p99."""
    return {d.name: phase.client_limited_reason or "client limited" for d in run_dirs
            for phase in read_summary(d / "summary.json").phases
            if phase.untrusted(TTFT_P50) or phase.untrusted(ITL_P50)}


FEW = 20  # a TTFT p99 of fewer requests is their slowest one: not a figure to hold a fitted run to


def _judged(row: ValidationRow) -> bool:
    """A figure of a fitted run the twin is held to (see `judge`)."""
    entry = validated(row["figure"])
    if entry is None:
        return True
    ramp = "-ramp-" in Path(row["run"]).name
    return not ((entry.latency is Latency.TTFT and ramp) or (entry.name == TTFT_P99 and _few(row["run"])))


def _few(run_dir: str) -> bool:
    return sum(p.requests.ok for p in read_summary(Path(run_dir) / "summary.json").phases) < FEW
