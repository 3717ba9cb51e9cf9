"""Presets as data (issue 45): every field of a device loads from YAML — texts as texts, numbers as numbers —
and a wrong or missing field is one line naming it; the examples in docs/simulator.md load as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.devices.catalogue import BUILTIN, catalogue, load_presets, use
from harness.devices.wafer import AsicAccelerator
from harness.errors import PresetError

DOCS = Path(__file__).resolve().parents[2] / "docs" / "simulator.md"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "presets.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("block", re.findall(r"```yaml\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S))
def test_every_yaml_example_in_the_simulator_docs_loads(block: str, tmp_path: Path) -> None:
    names = load_presets(write(tmp_path, block))
    assert names and all(name in catalogue().devices for name in names)


def test_a_text_field_is_a_text_and_a_number_field_a_number(tmp_path: Path) -> None:
    load_presets(write(tmp_path, "accelerators:\n  node: {kind: asic, decode_ms_per_b_params: 0.03, growth_per_seq: "
                                 "0.001, prefill_tokens_per_s_8b: 30000, memory_gb: 40, chips: 4, "
                                 "device: '4-chip node'}\n"))
    node = catalogue().devices["node"]
    assert isinstance(node, AsicAccelerator) and node.device == "4-chip node" and node.chips == 4
    use(BUILTIN)  # the entry redefined below is refused by its own field, not as a second definition
    with pytest.raises(PresetError, match=r"presets\.yaml: node\.device: '4' is not a text$"):
        load_presets(write(tmp_path, "accelerators:\n  node: {kind: asic, decode_ms_per_b_params: 0.03, "
                                     "growth_per_seq: 0.001, prefill_tokens_per_s_8b: 30000, memory_gb: 40, "
                                     "device: 4}\n"))
    with pytest.raises(PresetError, match=r"presets\.yaml: g\.memory_gb: 'lots' is not a number"):
        load_presets(write(tmp_path, "accelerators:\n  g: {tflops: 500, hbm_tbps: 2.5, memory_gb: lots}\n"))


def test_missing_fields_are_named_as_the_yaml_spells_them(tmp_path: Path) -> None:
    with pytest.raises(PresetError, match=r"presets\.yaml: g: missing fields hbm_tbps, memory_gb \(required: "
                                          r"tflops, hbm_tbps, memory_gb\)$"):
        load_presets(write(tmp_path, "accelerators:\n  g: {tflops: 500}\n"))
    with pytest.raises(PresetError, match=r"presets\.yaml: m: missing field vocab \(required: layers, "):
        load_presets(write(tmp_path, "models:\n  m: {layers: 40, hidden: 5120, q_heads: 40, kv_heads: 8, "
                                     "head_dim: 128, params_b: 14}\n"))
