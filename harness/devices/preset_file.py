"""A presets file read: its accelerators (`kind: gpu`, `asic` or `fitted`) and models, each field checked, one
line naming the file, the entry and the field for anything wrong. The format, with examples a test loads:
docs/simulator.md ("Custom accelerators and models")."""

from __future__ import annotations

import math
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from harness.devices.device import Device
from harness.devices.fitted import FittedAccelerator
from harness.devices.formats import WEIGHTS
from harness.devices.gpu import Accelerator
from harness.devices.models import ModelSpec
from harness.devices.wafer import AsicAccelerator
from harness.errors import PresetError
from harness.yamlfile import read_yaml

KINDS: dict[str, type[Any]] = {"gpu": Accelerator, "asic": AsicAccelerator, "fitted": FittedAccelerator}


def read_presets(path: Path) -> tuple[dict[str, Device], dict[str, ModelSpec]]:
    """The accelerators and models of a YAML presets file; PresetError naming what is wrong."""
    try:
        data = read_yaml(path) or {}
    except ValueError as exc:
        raise PresetError(f"{path}: cannot read presets: {exc}") from None
    if not isinstance(data, dict) or set(data) - {"accelerators", "models"}:
        raise PresetError(f"{path}: top level must hold only 'accelerators' and 'models'")
    for section in ("accelerators", "models"):
        if not isinstance(data.get(section) or {}, dict):  # a text or a list here was an AttributeError traceback
            raise PresetError(f"{path}: {section}: must map names to entries")
    devices: dict[str, Device] = {}
    for name, entry in (data.get("accelerators") or {}).items():
        entry = dict(entry) if isinstance(entry, dict) else entry
        kind = entry.pop("kind", "gpu") if isinstance(entry, dict) else "gpu"
        if not isinstance(kind, str) or kind not in KINDS:
            raise PresetError(f"{path}: {name}.kind: {kind!r} is not one of {', '.join(KINDS)}")
        devices[str(name)] = build(KINDS[kind], str(name), entry, str(path))
    models = {str(name): build(ModelSpec, str(name), entry, str(path))
              for name, entry in (data.get("models") or {}).items()}
    return devices, models


def build(cls: type[Any], name: str, entry: object, source: str) -> Any:
    if not isinstance(entry, dict):
        raise PresetError(f"{source}: {name}: must be a mapping")
    allowed = {f.name for f in fields(cls)} - {"name"}
    unknown = set(entry) - allowed
    if unknown:
        field = sorted(map(str, unknown))[0]  # YAML keys may be numbers: `1: 5` beside `tflops: 5`
        raise PresetError(f"{source}: {name}.{field}: unknown field (allowed: {', '.join(sorted(allowed))})")
    missing = [f for f in _required(cls) if f not in entry]
    if missing:
        raise PresetError(f"{source}: {name}: missing field{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                          f"(required: {', '.join(_required(cls))})")
    texts = {f.name for f in fields(cls) if str(f.type).split(" |")[0] == "str"}
    entry = dict(entry)
    for field_name, value in entry.items():
        # A fitted twin's decode_ms is a table by batch size; an ASIC's, one number.
        table = field_name == "decode_ms" and cls is FittedAccelerator
        problem = (_text_problem(field_name, value) if field_name in texts else _table_problem(value) if table
                   else _number_problem(field_name, value))
        if problem is not None:
            raise PresetError(f"{source}: {name}.{field_name}: {problem}")
    if isinstance(entry.get("vllm_defaults"), list):
        entry["vllm_defaults"] = tuple(entry["vllm_defaults"])
    return cls(name=name, **entry)


def _required(cls: type[Any]) -> list[str]:
    return [f.name for f in fields(cls) if f.name != "name" and f.default is MISSING and f.default_factory is MISSING]


LINKS = ("nvlink", "xgmi", "pcie", "none")
_CHOICES = {"link": LINKS, "weights": WEIGHTS, "quantised": ("linear", "experts")}


def _text_problem(name: str, value: object) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return f"{str(value)[:30]!r} is not a text"
    if name in _CHOICES and value not in _CHOICES[name]:
        return f"{value!r} is not one of {', '.join(_CHOICES[name])}"
    return None


# Fields that may be zero (no growth, no time outside the steps); every other number must be above it.
_MAY_BE_ZERO = {"growth_per_seq", "request_ms", "per_seq_ms", "per_context_ktoken_ms", "weights_ms", "step_ms",
                "per_ktoken_ms", "first_token_step", "prompt_step_ms", "prompt_beside",
                "prompt_together", "prompt_attn_ms", "kv_latent", "latent_rank", "qk_rope", "sliding_layers"}
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
    if name == "vllm_defaults":
        ok = isinstance(value, list) and len(value) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) and 0 < v < _ABSURD for v in value)
        return None if ok else f"{str(value)[:40]!r} is not [max_num_seqs, max_num_batched_tokens]"
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
