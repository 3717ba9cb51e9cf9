"""The engine a `SimulatorConfig` describes, and the request rules that follow from it (context length).

Shared by the server and `harness predict`, so the two refuse and shorten the same requests.
"""

from __future__ import annotations

from harness.config.presets import MODELS
from harness.config.simulator import SimulatorConfig
from harness.sim.engine import Engine, EngineConfig
from harness.sim.perfmodel import Budget, PerformanceModel, build_model
from harness.sim.requests import ParsedRequest


def model_context(cfg: SimulatorConfig, engine: Engine) -> int:
    """The longest context the server accepts: the model's, and, as vLLM does, never more than the KV cache
    could hold on its own."""
    return min(cfg.max_model_len or MODELS[cfg.model].max_model_len, engine.pool.total * 16)


def context_problem(max_model_len: int, parsed: ParsedRequest) -> str | None:
    """Why a request cannot fit the model's context (the 400's message), or None. As vLLM 0.33: a prompt that
    leaves no room is refused, and so is a `max_tokens` past the room it leaves; without `max_tokens` the answer's
    default cap is shortened to the room (`answer_cap`)."""
    room = max_model_len - parsed.prompt_tokens
    if room <= 0:
        return (f"this model's maximum context length is {max_model_len} tokens; the request has "
                f"{parsed.prompt_tokens} prompt tokens, which leaves no room for an answer")
    if parsed.max_tokens is not None and parsed.max_tokens > room:
        return (f"'max_tokens' or 'max_completion_tokens' is too large: {parsed.max_tokens}. This model's maximum "
                f"context length is {max_model_len} tokens and your request has {parsed.prompt_tokens} input tokens "
                f"({parsed.max_tokens} > {max_model_len} - {parsed.prompt_tokens})")
    return None


def fit_problem(cfg: SimulatorConfig) -> str | None:
    """Why this accelerator cannot serve this model at all (its weights leave no room for a KV cache), or None."""
    if cfg.timing == "fixed":
        return None  # no memory model in fixed timing
    if perf_model(cfg)[1] >= 16:  # one KV block
        return None
    return (f"{cfg.model} in {cfg.dtype} leaves no memory for a KV cache on {cfg.tp} × {cfg.accelerator} "
            f"(gpu_memory_utilization {cfg.gpu_memory_utilization}): raise tp, use fp8, or a larger accelerator")


def perf_model(cfg: SimulatorConfig) -> tuple[PerformanceModel, int]:
    """The step-time model of the configured device, and the tokens of KV cache it leaves."""
    perf = build_model(cfg.accelerator, cfg.model, cfg.dtype, cfg.tp, cfg.async_scheduling)
    budget = Budget(cfg.max_num_batched_tokens, cfg.max_num_seqs)
    return perf, perf.kv_capacity_tokens(cfg.gpu_memory_utilization, budget)


def build_engine(cfg: SimulatorConfig) -> Engine:
    perf, kv_tokens = perf_model(cfg)
    return Engine(perf, EngineConfig(max_num_seqs=cfg.max_num_seqs, max_num_batched_tokens=cfg.max_num_batched_tokens,
                                     kv_blocks=kv_tokens // 16, prefix_caching=cfg.prefix_caching,
                                     noise_sigma=cfg.noise_sigma, seed=cfg.seed, compat=cfg.scheduler_compat,
                                     async_scheduling=cfg.async_scheduling))
