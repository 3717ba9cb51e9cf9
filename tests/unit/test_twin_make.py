"""`harness sim twin`'s verdict logic without a network: the engine's own drift named, bounds applied."""

from __future__ import annotations

from pathlib import Path

from harness.tools.twin_design import Probe, design
from harness.tools.twin_discover import EngineInfo
from harness.tools.twin_make import Measured, misses
from harness.tools.twin_validate import ValidationRow


def measured(first: Probe, last: Probe) -> Measured:
    return Measured(EngineInfo(8, "", None), 8, design(8, first), {}, (first, last))


def test_an_engine_whose_own_speed_moved_is_named() -> None:
    """llama-server on a shared 2-core machine: one stream's ITL 17.6 ms at the start, 14.6 five minutes on."""
    found = measured(Probe(375.0, 17.6, 128), Probe(300.0, 14.6, 128)).drift()
    assert found is not None and found.code == "engine-drift"
    assert "TTFT 375 → 300 ms, ITL 17.6 → 14.6 ms" in found.text and "(TTFT -20%)" in found.text
    assert measured(Probe(375.0, 17.6, 128), Probe(390.0, 18.5, 128)).drift() is None  # within 10%
    assert Measured(EngineInfo(8, "", None), 8, design(8, Probe(1, 1, 128)), {}).drift() is None


def row(figure: str, error: float | None) -> ValidationRow:
    return {"run": str(Path("r")), "phase": "p", "figure": figure, "measured": 1.0, "predicted": 1.0, "error": error}


def test_held_out_figures_are_held_to_15_percent_and_p99_to_30() -> None:
    rows = [row("TTFT p50 ms", 0.149), row("ITL p50 ms", -0.16), row("TTFT p99 ms", 0.29), row("TTFT p99 ms", -0.31),
            row("output tokens/s", None)]
    assert [(r["figure"], r["error"]) for r in misses(rows)] == [("ITL p50 ms", -0.16), ("TTFT p99 ms", -0.31)]
