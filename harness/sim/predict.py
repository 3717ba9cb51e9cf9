"""`harness predict`: a scenario through the virtual-time engine, no network, same summary as a run.

Each phase's plan (the same seeded plan `harness run` sends) is replayed against the engine of the
scenario's `simulator:` section: open-loop arrivals at their offsets, fixed batches back to back,
closed-loop users sending again when their last request finishes. The records it makes are the
ones a perfect client would have measured.
"""

from __future__ import annotations

from typing import Any

from harness import __version__
from harness.plan import BatchPlan, ClosedLoopPlan, PhasePlan, plan_phase, text_maker
from harness.records import RequestRecord
from harness.scenario import Scenario
from harness.sim.engine import SimRequest
from harness.sim.requests import make_request, output_length, parse_body
from harness.sim.server import SimConfig, build_engine
from harness.sim.virtual import VirtualRun
from harness.summary import SUMMARY_SCHEMA, finish_summary, phase_summary
from harness.workload import RequestSpec


def _sim_request(spec: RequestSpec, arrival_ns: int, seed: int) -> SimRequest:
    # The request body the client would send, parsed the way the server parses it.
    body = {"model": "", "prompt": spec.prompt, "max_tokens": spec.max_tokens, "ignore_eos": spec.ignore_eos}
    parsed = parse_body(body, chat=False)
    out = output_length(parsed, 1 << 30, seed, spec.max_tokens)
    return make_request(spec.request_id, parsed.prompt_words, out, arrival_ns)


def _record(spec: RequestSpec, req: SimRequest) -> RequestRecord:
    return RequestRecord(
        spec.request_id, spec.phase, spec.index, spec.prompt_tokens, spec.max_tokens, req.arrival_ns,
        sent_ns=req.arrival_ns, first_token_ns=req.token_ns[0], first_content_ns=req.token_ns[0],
        last_token_ns=req.token_ns[-1], end_ns=req.token_ns[-1], chunk_ns=list(req.token_ns),
        prompt_tokens=req.prompt_tokens, completion_tokens=len(req.token_ns), batch=spec.batch,
    )


def _replay(run: VirtualRun, plan: PhasePlan, seed: int) -> list[tuple[RequestSpec, SimRequest]]:
    done: list[tuple[RequestSpec, SimRequest]] = []
    start = run.now

    def send(spec: RequestSpec, at_ns: int) -> None:
        req = _sim_request(spec, at_ns, seed)
        done.append((spec, req))
        run.submit(req)

    if isinstance(plan, BatchPlan):
        batches = iter(plan.batches)
        left = 0

        def start_batch() -> None:
            nonlocal left
            batch = next(batches, [])
            left = len(batch)
            for spec in batch:
                send(spec, run.now)

        def batch_member_done(_: SimRequest) -> None:
            nonlocal left
            left -= 1
            if left == 0:
                start_batch()

        start_batch()
        run.run(batch_member_done)
    elif isinstance(plan, ClosedLoopPlan):
        queue = plan.source.stream(plan.requests)
        end = None if plan.duration_ns is None else start + plan.duration_ns

        def send_next(at_ns: int) -> None:
            if end is not None and at_ns >= end:
                return
            spec = next(queue, None)
            if spec is not None:
                send(spec, at_ns)

        for i in range(plan.concurrency):
            send_next(start + plan.stagger_ns * i // plan.concurrency)
        run.run(lambda _: send_next(run.now + plan.think_ns))
    else:
        for spec, offset in zip(plan.specs, plan.offsets_ns.tolist(), strict=True):
            send(spec, start + offset)
        run.run()
    return done


def predict(scenario: Scenario) -> dict[str, Any]:
    s = scenario.simulator
    cfg = SimConfig(accelerator=s.accelerator, model=s.model, dtype=s.dtype, tp=s.tp, max_num_seqs=s.max_num_seqs,
                    max_num_batched_tokens=s.max_num_batched_tokens, seed=s.seed)
    run = VirtualRun(build_engine(cfg))
    phases = []
    text = text_maker(scenario)
    for i, phase in enumerate(scenario.phases):
        pairs = _replay(run, plan_phase(scenario, i, "predict", text), s.seed)
        records = [_record(spec, req) for spec, req in pairs]
        records.sort(key=lambda r: r.index)
        phases.append(phase_summary(scenario, phase, records))
    header = {"run_id": "predict", "scenario": scenario.name, "harness_version": __version__, "seed": scenario.seed,
              "mode": "predict", "simulator": s.model_dump(), "complete": True}
    summary = {"schema": SUMMARY_SCHEMA, "run": header, "phases": phases}
    finish_summary(summary)
    return summary
