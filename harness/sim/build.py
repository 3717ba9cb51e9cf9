"""The engine a `SimulatorConfig` describes, and the request rules that follow from it (context length).

Shared by the server and `harness predict`, so the two refuse and shorten the same requests.
"""

from __future__ import annotations

from harness.config.simulator import SimulatorConfig
from harness.devices.catalogue import catalogue
from harness.devices.device import Device
from harness.devices.step import Budget, PerformanceModel, Serving
from harness.sim.engine import Engine, EngineConfig
from harness.sim.requests import ParsedRequest


def model_context(cfg: SimulatorConfig) -> int:
    """The longest context the server accepts: `max_model_len`, or the model's (`fit_problem` has refused a
    configuration whose KV cache could not hold it, as vLLM refuses to start). A fitted twin's endpoint did
    start, with a context it did not say: no more than the KV cache it was measured to have."""
    context = cfg.max_model_len or catalogue().models[cfg.model].max_model_len
    limit = catalogue().devices[cfg.accelerator].kv_limit
    return min(context, limit) if limit is not None else context


def context_problem(max_model_len: int, parsed: ParsedRequest) -> str | None:
    """Why a request cannot fit the model's context (the 400's message), or None. As vLLM 0.33: a prompt that
    leaves no room is refused, and so is a `max_tokens` past the room it leaves; without `max_tokens` the
    answer's default cap is shortened to the room (`answer_cap`)."""
    room = max_model_len - parsed.prompt_tokens
    if room <= 0:
        return (f"this model's maximum context length is {max_model_len} tokens; the request has "
                f"{parsed.prompt_tokens} prompt tokens, which leaves no room for an answer")
    if parsed.max_tokens is not None and parsed.max_tokens > room:
        return (f"'max_tokens' or 'max_completion_tokens' is too large: {parsed.max_tokens}. This model's maximum "
                f"context length is {max_model_len} tokens and your request has {parsed.prompt_tokens} input tokens "
                f"({parsed.max_tokens} > {max_model_len} - {parsed.prompt_tokens})")
    return None


TP_LIMIT = 64  # SimulatorConfig's most


def fit_problem(cfg: SimulatorConfig) -> str | None:
    """Why vLLM would not start this model on this accelerator, or None — the weights do not fit, they leave
    no room for a KV cache, or the KV cache cannot hold one request of the model's context (vLLM's
    `check_enough_kv_cache_memory`, whose advice on max_model_len this repeats) — with the fewest devices that
    do start it, or that none within the limit does."""
    if cfg.timing == "fixed":
        return None  # no memory model in fixed timing
    problem = start_problem(cfg)
    if problem is None:
        return None
    device = catalogue().devices[cfg.accelerator]
    # vLLM splits the attention heads between the GPUs: a tp that does not divide them does not start
    heads = catalogue().models[cfg.model].q_heads
    fewest = next((n for n in range(cfg.tp + 1, TP_LIMIT + 1)
                   if (not device.splits_heads or heads % n == 0) and start_problem(cfg.changed(tp=n)) is None), None)
    unit = device.unit
    return problem + (f"; the fewest that start it: tp {fewest} ({fewest} × {unit})" if fewest is not None else
                      f"; no tp up to {TP_LIMIT} starts it (a smaller model, fewer bits a weight, or a larger "
                      "accelerator)")


def start_problem(cfg: SimulatorConfig) -> str | None:
    """Why vLLM would not start this exact configuration, or None."""
    perf, kv = perf_model(cfg)
    where = f"{cfg.tp} × {cfg.accelerator} (gpu_memory_utilization {cfg.gpu_memory_utilization})"
    if kv < 16:  # one KV block
        weights, room = perf.memory(cfg.gpu_memory_utilization, Budget(cfg.max_num_batched_tokens, cfg.max_num_seqs))
        if weights >= room:
            return (f"{cfg.model}'s weights ({weights / 1e9:,.0f} GB in {weights_name(cfg)}) do not fit {where}: "
                    f"{room / 1e9:,.0f} GB for them and the KV cache")
        return f"{cfg.model} in {weights_name(cfg)} leaves no memory for a KV cache on {where}"
    context = model_context(cfg)
    if kv < context:  # (never for a fitted twin: its context is its KV's at most)
        return (f"the model's max seq len ({context:,}) is larger than the maximum number of tokens that can be stored "
                f"in KV cache ({kv:,}) on {where}, so vLLM refuses to start; based on the available memory, the "
                f"estimated maximum model length is {kv:,}: set simulator.max_model_len (vLLM's --max-model-len) "
                "to at most that")
    return None


def perf_model(cfg: SimulatorConfig) -> tuple[PerformanceModel, int]:
    """The step-time model of the configured device, and the tokens of KV cache it leaves."""
    device = catalogue().devices[cfg.accelerator]
    graphs = 0 if cfg.enforce_eager else device.graph_largest(cfg.max_num_seqs)
    perf = device.law(catalogue().models[cfg.model], Serving(cfg.weights, cfg.tp, cfg.async_scheduling,
                                                             cfg.kv_cache_dtype, graphs, cfg.enable_expert_parallel))
    budget = Budget(cfg.max_num_batched_tokens, cfg.max_num_seqs)
    return perf, perf.kv_capacity_tokens(cfg.gpu_memory_utilization, budget)


def weights_name(cfg: SimulatorConfig) -> str:
    """The weights' format the configuration runs: `auto` as the model's checkpoint's."""
    return catalogue().models[cfg.model].format(cfg.weights).name


def lookahead(cfg: SimulatorConfig, device: Device) -> bool:
    """Whether an arrival during a busy step waits a step more: a fitted twin's own finding where it has
    one."""
    said = device.twin.async_scheduling if device.twin is not None else None
    return cfg.async_scheduling if said is None else said


def build_engine(cfg: SimulatorConfig) -> Engine:
    perf, kv_tokens = perf_model(cfg)
    device = catalogue().devices[cfg.accelerator]
    return Engine(perf, EngineConfig(max_num_seqs=cfg.max_num_seqs, max_num_batched_tokens=cfg.max_num_batched_tokens,
                                     kv_blocks=kv_tokens // 16, prefix_caching=cfg.prefix_caching,
                                     noise_sigma=cfg.noise_sigma, slowdown=cfg.slowdown, seed=cfg.seed,
                                     compat=cfg.scheduler_compat,
                                     async_scheduling=lookahead(cfg, device),
                                     first_token_delay=device.twin is not None
                                     and device.twin.first_token_step > 0))
