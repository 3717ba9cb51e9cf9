"""The catalogue of devices and models is a value (issue 63): built once from the built-ins and preset files, never
changed after — reading another run's summary or scenario leaves the one in hand as it was, and a name defined
twice with other figures is refused rather than the last load winning."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.scenario import parse_scenario
from harness.devices.catalogue import BUILTIN, catalogue, save_used, use
from harness.errors import PresetError
from harness.stats.schema import read_summary
from harness.tools.predict import predict

GPU = "accelerators:\n  {name}: {{tflops: {tflops}, hbm_tbps: 2.0, memory_gb: 96}}\n"


def presets(tmp: Path, file: str, name: str, tflops: int = 500) -> Path:
    path = tmp / file
    path.write_text(GPU.format(name=name, tflops=tflops))
    return path


def test_reading_a_summary_made_with_other_presets_leaves_the_catalogue_in_hand_unchanged(tmp_path: Path) -> None:
    # A run made on a device of its own presets, its folder holding them (as every run's does)
    other = use(BUILTIN.with_file(presets(tmp_path, "other.yaml", "other-gpu")))
    scenario = parse_scenario({"name": "other", "simulator": {"accelerator": "other-gpu"},
                               "workload": {"prompt_tokens": 64, "output_tokens": 8},
                               "phases": [{"name": "p", "load": {"type": "poisson", "rate": 2, "requests": 4}}]},
                              "test")
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(predict(scenario).model_dump_json(by_alias=True), encoding="utf-8")
    save_used(run, other)
    assert (run / "presets.yaml").is_file()
    # Another process's catalogue: the built-ins and a file of its own
    first = use(BUILTIN.with_file(presets(tmp_path, "mine.yaml", "my-gpu")))
    names = dict(first.devices)
    summary = read_summary(run / "summary.json")
    assert summary.phases and catalogue() is first and dict(first.devices) == names
    assert "other-gpu" not in first.devices
    # What that summary needs is a catalogue of its own, the first one still as it was
    needed = first.beside(run / "summary.json")
    assert "other-gpu" in needed.devices and "my-gpu" in needed.devices and "other-gpu" not in first.devices
    with pytest.raises(TypeError):
        first.devices["x"] = first.devices["my-gpu"]  # type: ignore[index]


def test_a_name_defined_again_with_other_figures_is_refused_naming_the_file(tmp_path: Path) -> None:
    first = BUILTIN.with_file(presets(tmp_path, "a.yaml", "gpu-a", 500))
    assert first.with_file(presets(tmp_path, "same.yaml", "gpu-a", 500)).devices["gpu-a"] == first.devices["gpu-a"]
    with pytest.raises(PresetError, match=r"b\.yaml: gpu-a: already defined with other figures"):
        first.with_file(presets(tmp_path, "b.yaml", "gpu-a", 900))
    with pytest.raises(PresetError, match=r"h100\.yaml: h100-sxm: already defined"):
        BUILTIN.with_file(presets(tmp_path, "h100.yaml", "h100-sxm", 1))
