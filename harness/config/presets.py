"""Accelerator and model presets for the performance model (design brief §5), and custom ones from YAML."""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any, TypeVar, cast

import yaml

from harness.config.fitted import FittedAccelerator
from harness.config.yamlfile import read_yaml
from harness.errors import PresetError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Accelerator:
    name: str
    tflops: float  # dense bf16
    hbm_tbps: float
    memory_gb: float
    fp8_tflops: float | None = None  # dense fp8; None: no fp8 tensor cores (fp8 weights, bf16 maths)
    link_gbps: float = 300.0  # tensor-parallel interconnect, GB/s per direction
    link: str = "nvlink"  # its kind: nvlink, xgmi (both fully connected within a node), pcie, none
    reported_gib: float | None = None  # memory the driver reports, as vLLM's log shows it; None: memory_gb
    # Share of the memory's peak today's vLLM decode reads reach, fitted per device on vLLM's own latency benchmark
    # (docs/simulator.md, "Published points"); None: an unfitted device, DEFAULT_ETA_MEM.
    eta_mem: float | None = None
    # Boost clock: the per-layer and all-reduce kernel latencies, fitted on Hopper, scale with it.
    clock_mhz: float = 1980.0
    # Share of the memory's peak MoE expert reads reach; None: the era's ratio to eta_mem (docs/simulator.md).
    expert_eta_mem: float | None = None

    @property
    def reported_bytes(self) -> float:
        return self.reported_gib * 2**30 if self.reported_gib is not None else self.memory_gb * 1e9

    def flops(self, fp8: bool) -> float:
        return (self.fp8_tflops if fp8 and self.fp8_tflops else self.tflops) * 1e12

    @property
    def bandwidth(self) -> float:
        return self.hbm_tbps * 1e12


@dataclass(frozen=True, slots=True)
class AsicAccelerator:
    """An SRAM-based inference system, described by what its maker reports rather than by a roofline.

    One *device* is what is bought and priced as one (a system: `chips` chips and `memory_gb` of on-chip memory
    between them); a model takes as many devices as its weights fill, and what they leave holds the KV cache.
    Weights stay on chip, so a decode step costs about the same whatever the batch: a per-token latency
    (`decode_ms` plus `decode_ms_per_b_params` per billion active parameters) growing slightly per sequence.
    """

    name: str
    decode_ms_per_b_params: float  # decode step latency at batch 1, per billion active parameters …
    growth_per_seq: float  # relative step-time growth per extra running sequence
    prefill_tokens_per_s_8b: float  # prefill throughput for an 8B-active-parameter model
    memory_gb: float  # on-chip memory of one device, weights and KV cache together
    decode_ms: float = 0.0  # … plus this, whatever the model
    chips: int = 1  # chips in one device
    device: str = "system"  # what one device is, for the tables


Device = Accelerator | AsicAccelerator | FittedAccelerator
_KINDS: dict[str, type[Any]] = {"gpu": Accelerator, "asic": AsicAccelerator, "fitted": FittedAccelerator}


@dataclass(frozen=True, slots=True)
class ModelSpec:
    name: str
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    params_b: float  # all parameters, embedding included
    vocab: int
    active_params_b: float | None = None  # mixture-of-experts: parameters one token touches
    experts: int = 1
    top_k: int = 1
    max_model_len: int = 131072
    intermediate: int | None = None  # MLP width (of one expert); None: 3.5 × hidden, as Llama's

    @property
    def mlp_width(self) -> int:
        return self.intermediate if self.intermediate is not None else round(3.5 * self.hidden)

    @property
    def embedding_params(self) -> float:
        return float(self.vocab * self.hidden)

    @property
    def active_params(self) -> float:
        """Parameters one token multiplies with: LM head included, embedding table not."""
        active = self.active_params_b if self.active_params_b is not None else self.params_b
        return active * 1e9 - self.embedding_params

    @property
    def expert_params(self) -> float:
        """Parameters of one expert summed over layers (0 for dense models)."""
        if self.experts <= 1 or self.active_params_b is None:
            return 0.0
        return (self.params_b - self.active_params_b) * 1e9 / (self.experts - self.top_k)

    def weight_params_read(self, tokens: int) -> float:
        """Parameters read in a step of `tokens` tokens.

        Dense: all of them. Mixture of experts: the shared part plus each expert that at least one
        token routes to; with uniform top-k routing, E·(1 − (1 − k/E)^T) experts per layer are touched.
        """
        return self.active_params - self.top_k * self.expert_params + self.expert_params_read(tokens)

    def expert_params_read(self, tokens: int) -> float:
        """The experts' share of `weight_params_read` (0 for dense models)."""
        e, k = self.experts, self.top_k
        return e * (1 - (1 - k / e) ** max(tokens, 1)) * self.expert_params if self.expert_params else 0.0

    def kv_bytes_per_token(self, dtype_bytes: float) -> float:
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


ACCELERATORS: dict[str, Device] = {
    a.name: a
    for a in (
        # reported_gib: the total the driver reports (nvidia-smi's less what it keeps), as vLLM logs it.
        # link_gbps, per direction: NVIDIA's datasheets give NVLink both ways (A100 SXM: NVLink 3, 600 GB/s;
        # H100 SXM and H200: NVLink 4, 900 GB/s; B200: NVLink 5, 1.8 TB/s); AMD's MI300X datasheet, 7 Infinity
        # Fabric links of 64 GB/s each way to the other GPUs of a node (448 GB/s, the peak of a one-shot
        # all-reduce reading every peer at once).
        # clock_mhz: boost clocks from the datasheets (A100 1,410, H100 SXM and H200 1,980, MI300X 2,100); B200's
        # is not published: Hopper's assumed.
        Accelerator("a100-80g", 312, 2.039, 80, reported_gib=79.15, link_gbps=300, link="nvlink", clock_mhz=1410,
                    eta_mem=0.696),
        Accelerator("h100-sxm", 989, 3.35, 80, fp8_tflops=1979, reported_gib=79.19, link_gbps=450, link="nvlink",
                    eta_mem=0.692),
        Accelerator("h200", 989, 4.8, 141, fp8_tflops=1979, reported_gib=139.8, link_gbps=450, link="nvlink",
                    eta_mem=0.601),
        Accelerator("b200", 2250, 8.0, 180, fp8_tflops=4500, reported_gib=178.4, link_gbps=900, link="nvlink"),
        Accelerator("mi300x", 1307, 5.3, 192, fp8_tflops=2615, reported_gib=191.98, link_gbps=448, link="xgmi",
                    clock_mhz=2100),
        # Cerebras CS-3: one WSE-3 wafer with 44 GB of SRAM (Cerebras' WSE-3 specifications, March 2024);
        # per-stream decode fitted to the speeds Cerebras Inference reported at launch (2024-08-27): 1,800
        # tokens/s for Llama-3.1-8B and 450 for Llama-3.1-70B, which it served on four CS-3 systems (as the
        # weights require here). growth_per_seq and the prefill rate are not published: assumptions.
        AsicAccelerator("cerebras-cs3", decode_ms_per_b_params=0.0269, decode_ms=0.354, growth_per_seq=0.002,
                        prefill_tokens_per_s_8b=40_000, memory_gb=44, chips=1, device="CS-3 system (one wafer)"),
    )
}

MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec("llama-3.1-8b", 32, 4096, 32, 8, 128, 8.03, 128256),
        ModelSpec("llama-3.1-70b", 80, 8192, 64, 8, 128, 70.6, 128256),
        ModelSpec("qwen2.5-7b", 28, 3584, 28, 4, 128, 7.62, 152064, max_model_len=32768, intermediate=18944),
        ModelSpec("mixtral-8x7b", 32, 4096, 32, 8, 128, 46.7, 32000, active_params_b=12.9, experts=8, top_k=2,
                  max_model_len=32768),
    )
}



def _build(cls: type[Any], name: str, entry: object, source: str) -> Any:
    if not isinstance(entry, dict):
        raise PresetError(f"{source}: {name}: must be a mapping")
    allowed = {f.name for f in fields(cls)} - {"name"}
    unknown = set(entry) - allowed
    if unknown:
        field = sorted(unknown)[0]
        raise PresetError(f"{source}: {name}.{field}: unknown field (allowed: {', '.join(sorted(allowed))})")
    missing = [f for f in _required(cls) if f not in entry]
    if missing:
        raise PresetError(f"{source}: {name}: missing field{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                          f"(required: {', '.join(_required(cls))})")
    texts = {f.name for f in fields(cls) if str(f.type).split(" |")[0] == "str"}
    for field_name, value in entry.items():
        # A fitted twin's decode_ms is a table by batch size; an ASIC's, one number.
        table = field_name == "decode_ms" and cls is FittedAccelerator
        problem = (_text_problem(field_name, value) if field_name in texts else _table_problem(value) if table
                   else _number_problem(field_name, value))
        if problem is not None:
            raise PresetError(f"{source}: {name}.{field_name}: {problem}")
    return cls(name=name, **entry)


def _required(cls: type[Any]) -> list[str]:
    return [f.name for f in fields(cls) if f.name != "name" and f.default is MISSING and f.default_factory is MISSING]


LINKS = ("nvlink", "xgmi", "pcie", "none")


def _text_problem(name: str, value: object) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return f"{str(value)[:30]!r} is not a text"
    if name == "link" and value not in LINKS:
        return f"{value!r} is not one of {', '.join(LINKS)}"
    return None


# Fields that may be zero (no growth, no time outside the steps); every other number must be above it.
_MAY_BE_ZERO = {"growth_per_seq", "request_ms", "per_seq_ms", "per_context_ktoken_ms", "weights_ms", "step_ms",
                "per_ktoken_ms", "first_token_step", "prompt_step_ms", "prompt_beside",
                "prompt_together", "prompt_attn_ms"}
_ABSURD = 1e15  # past any device or model: a typo, or a unit mistaken
_SPANS = {"fitted_rps": "requests/s", "fitted_batch": "sequences", "fitted_prompt_tokens": "prompt tokens"}


def _table_problem(value: object) -> str | None:
    """Why a decode table (a step's ms with 1, 2, … sequences) is not one, or None."""
    fine = value is None or (isinstance(value, list) and len(value) > 0 and all(
        isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < _ABSURD for v in value))
    return None if fine else f"{str(value)[:40]!r} is not a list of step times in ms, above zero"


def _number_problem(name: str, value: object) -> str | None:
    """Why a preset's numeric field is not a usable number, or None (a string like `1e30`, which YAML does not
    read as a number, a zero, a negative, an infinity)."""
    if value is None or name in ("kind",):
        return None
    if name in _SPANS:  # the fitted envelope: [lowest, highest]
        ok = isinstance(value, list) and len(value) == 2 and all(
            isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < _ABSURD for v in value)
        return None if ok and value[0] <= value[1] else (  # type: ignore[index]
            f"{str(value)[:40]!r} is not [lowest, highest] {_SPANS[name]}")
    if name in ("async_scheduling", "prompt_step_shared"):
        return None if isinstance(value, bool) else f"{str(value)[:30]!r}: true or false (or leave it out)"
    if name == "first_token_step" and value not in (0, 1):
        return f"{value!r}: 0 (the first token leaves with its prompt's step) or 1 (with the step after)"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{str(value)[:30]!r} is not a number (YAML reads 1e30 as text: write 1.0e+30)"
    if name == "prompt_together" and math.isfinite(value) and -0.1 <= value < _ABSURD:
        return None  # prompts together may cost less than one of their summed length, down to 10% a prompt
    if not math.isfinite(value) or value < 0 or (value == 0 and name not in _MAY_BE_ZERO) or value > _ABSURD:
        return f"{value:g} is not a usable value (it must be above 0 and below {_ABSURD:g})"
    return None


def resolve_accelerator(value: str | dict[str, Any]) -> Device:
    """A preset's name, or a custom accelerator's fields (`kind: asic` for an SRAM chip); ValueError if neither."""
    if isinstance(value, str):
        return _preset(ACCELERATORS, value, "accelerator")
    kind = value.get("kind", "gpu")
    if kind not in _KINDS:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(_KINDS)}")
    return _custom(_KINDS[kind], {k: v for k, v in value.items() if k != "kind"})  # type: ignore[no-any-return]


def resolve_model(value: str | dict[str, Any]) -> ModelSpec:
    """A preset's name, or a custom model's fields; ValueError if neither."""
    return _preset(MODELS, value, "model") if isinstance(value, str) else _custom(ModelSpec, value)


def _preset(presets: dict[str, T], name: str, what: str) -> T:
    if name not in presets:
        raise ValueError(f"unknown {what} {name!r}; known: {', '.join(sorted(presets))}")
    return presets[name]


def _custom(cls: type[T], fields: dict[str, Any]) -> T:
    entry = dict(fields)
    name = str(entry.pop("name", "custom"))
    try:
        return cast(T, _build(cls, name, entry, "custom"))
    except PresetError as exc:
        raise ValueError(str(exc).removeprefix("custom: ")) from None


_LOADED: list[Path] = []


def loaded_files() -> list[Path]:
    """The preset files this process loaded that are still there: a simulator or worker it starts loads them too."""
    return [path for path in _LOADED if path.is_file()]


def load_presets(path: Path) -> list[str]:
    """Add the accelerators and models of a YAML file to the presets; returns the accelerators' names. The format,
    with examples a test loads: docs/simulator.md ("Custom accelerators and models")."""
    try:
        data = read_yaml(path) or {}
    except ValueError as exc:
        raise PresetError(f"{path}: cannot read presets: {exc}") from None
    if not isinstance(data, dict) or set(data) - {"accelerators", "models"}:
        raise PresetError(f"{path}: top level must hold only 'accelerators' and 'models'")
    for name, entry in (data.get("accelerators") or {}).items():
        entry = dict(entry) if isinstance(entry, dict) else entry
        kind = entry.pop("kind", "gpu") if isinstance(entry, dict) else "gpu"
        if kind not in _KINDS:
            raise PresetError(f"{path}: {name}.kind: {kind!r} is not one of {', '.join(_KINDS)}")
        ACCELERATORS[str(name)] = _build(_KINDS[kind], str(name), entry, str(path))
    for name, entry in (data.get("models") or {}).items():
        MODELS[str(name)] = _build(ModelSpec, str(name), entry, str(path))
    if path.resolve() not in _LOADED:
        _LOADED.append(path.resolve())
    return [str(name) for name in data.get("accelerators") or {}]


RUN_PRESETS = "presets.yaml"  # in a run's folder: the presets its run used beyond the built-in ones


def save_loaded(folder: Path) -> None:
    """The preset files this process loaded, as one file in a run's folder, so that every command reads the run
    back (its scenario and summary name those accelerators and models) on any machine, the files gone."""
    merged: dict[str, dict[str, object]] = {"accelerators": {}, "models": {}}
    for path in loaded_files():
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for key, entries in merged.items():
            entries.update(data.get(key) or {})
    if any(merged.values()):
        (folder / RUN_PRESETS).write_text(yaml.safe_dump({k: v for k, v in merged.items() if v}, sort_keys=False),
                                          encoding="utf-8")


def load_beside(path: Path) -> None:
    """Before a run's scenario.yaml or summary.json is read: the presets its run used, kept beside them."""
    kept = path.parent / RUN_PRESETS
    if kept.is_file() and kept.resolve() not in _LOADED:
        load_presets(kept)


def device_counts(accelerator: str) -> tuple[int, ...]:
    """How many devices a model may be split over: GPUs split its heads (tensor parallelism of 1, 2, 4 or 8);
    SRAM systems each hold a share of its layers (any number up to 8)."""
    return tuple(range(1, 9)) if isinstance(ACCELERATORS[accelerator], AsicAccelerator) else (1, 2, 4, 8)


def batch_defaults(accelerator: str) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) as vLLM 0.33 picks them for the device when not given
    (`vllm/engine/arg_utils.py`, `get_batch_defaults`, OpenAI server), by the memory the driver reports: under
    70 GiB, and any A100, 256 / 2,048; 160 GiB or more (B200, MI300X) 1,024 / 16,384; between (H100, H200)
    1,024 / 8,192. Custom GPUs follow the same table; a fitted twin or an SRAM system (not vLLM's) the middle."""
    device = ACCELERATORS[accelerator]
    if isinstance(device, FittedAccelerator):
        return device.slots or 1024, device.batch_tokens or 8192
    if not isinstance(device, Accelerator):
        return 1024, 8192
    if "a100" in accelerator.lower() or device.reported_bytes < 70 * 2**30:
        return 256, 2048
    if device.reported_bytes >= 160 * 2**30:
        return 1024, 16384
    return 1024, 8192
