"""Interconnects (issue 45): each preset's link kind and bandwidth, and the all-reduce vLLM would use on it —
its custom kernel for 2, 4, 6 or 8 fully connected GPUs (a pair over PCIe), NCCL's ring otherwise."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from harness.devices.catalogue import catalogue
from harness.devices.gpu import Accelerator
from harness.devices.roofline import RooflineModel, custom_allreduce
from harness.devices.step import StepLoad
from harness.sim.cli import sim


@pytest.mark.parametrize(("link", "tp", "custom"), [
    ("nvlink", 2, True), ("nvlink", 8, True), ("nvlink", 3, False), ("nvlink", 16, False), ("xgmi", 8, True),
    ("pcie", 2, True), ("pcie", 4, False), ("none", 2, False),
])
def test_the_custom_all_reduce_serves_where_vllm_enables_it(link: str, tp: int, custom: bool) -> None:
    assert custom_allreduce(link, tp) is custom


def test_presets_carry_their_own_link() -> None:
    links = {name: (a.link, a.link_gbps) for name, a in catalogue().devices.items() if isinstance(a, Accelerator)}
    assert links == {"a100-80g": ("nvlink", 300), "h100-sxm": ("nvlink", 450), "h200": ("nvlink", 450),
                     "b200": ("nvlink", 900), "mi300x": ("xgmi", 448)}


def test_a_pcie_card_at_tp_4_pays_nccls_ring_on_every_decode_step() -> None:
    """An L40S-like card at tp 4: before issue 45 it got the 8 µs custom kernel; vLLM falls back to NCCL."""
    card = Accelerator("l40s-like", tflops=362, hbm_tbps=0.864, memory_gb=48, link_gbps=32, link="pcie")
    nvlinked = Accelerator("l40s-nvlinked", tflops=362, hbm_tbps=0.864, memory_gb=48, link_gbps=32)
    decode = StepLoad(tokens=1, seqs=1, decodes=1, decode_context=1024)
    llama = catalogue().models["llama-3.1-8b"]
    pcie, nvl = (RooflineModel(a, llama, tp=4).step_seconds(decode) for a in (card, nvlinked))
    # 2 all-reduces a layer, 32 layers: the ring's 25 µs and the full link against the kernel's 8 µs and 12% of it
    moved = 2 * 3 / 4 * 4096 * 2 / 32e9
    assert pcie - nvl == pytest.approx(2 * 32 * ((25e-6 + moved) - (8e-6 + moved / 0.12)), rel=0.01)


def test_sim_presets_lists_the_link_and_the_all_reduce() -> None:
    out = CliRunner().invoke(sim, ["presets"]).output
    header = out.splitlines()[0].split()
    assert header[:5] == ["accelerator", "model", "tp", "link", "all-reduce"]
    h100_70b = next(line for line in out.splitlines() if line.startswith("h100-sxm") and "llama-3.1-70b" in line)
    assert "nvlink 450 GB/s" in h100_70b and " custom " in h100_70b
    assert all(" - " in line for line in out.splitlines() if line.startswith("cerebras-cs3"))
