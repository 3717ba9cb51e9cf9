"""The registry defines each metric, and every reader goes by its entries: each role's reader shows each entry
holding that role, so a figure added to the registry (TTFT p95 as a compared one, say) reaches the reader with
no other change; and no module of the package spells a metric's name outside the registry."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from harness.config import metric_registry as registry
from harness.config.metric_registry import (
    COMPARED,
    DEFAULT_TOLERANCES,
    LATENCIES,
    REGISTRY,
    TEXTS_PER_S,
    Latency,
    having,
    metric,
    of,
)
from harness.config.scenario import SLO
from harness.report.pushgateway import figures
from harness.report.table import render_table
from harness.stats.compare import ONLY_WHEN_MEASURED, Block, blocks, bootstrap, value
from harness.twin.validate import P50_TOLERANCE, P99_TOLERANCE, bound
from tests.helpers import MS, phase_json, rec, summary_of

PACKAGE = Path(__file__).resolve().parents[2] / "harness"
# TypedDict keys of files the package writes (a calibration, a matrix row), and vLLM bench's own metric names in
# the result JSON exports.py writes: a format's field names, not a metric looked up by name.
FORMATS = {"calibrate.py", "calibration_store.py", "matrix.py", "exports.py"}


def _records(slower: float = 1.0) -> list:
    return [rec(i * 10, i * 10, [int(i * 10 + 50 * slower) + k * 10 for k in range(5)], completion=5, idx=i)
            for i in range(200)]


def _summary():
    return summary_of([{"name": "steady", **phase_json(_records(), SLO(ttft_ms=500, tpot_ms=50, e2e_ms=900))}])


def test_no_module_spells_a_metric_name_outside_the_registry() -> None:
    names = set(REGISTRY) | {latency.value for latency in Latency}
    spelled = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in FORMATS or path.name == "metric_registry.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                spelled.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}")
    assert not spelled, "\n".join(spelled)


def test_the_lint_finds_a_spelled_name() -> None:
    tree = ast.parse('observed("ttft_p99", phase)')
    assert [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)] == ["ttft_p99"]


def test_derived_lists_are_the_entries_holding_each_role_in_the_registry_order() -> None:
    assert tuple(m.name for m in REGISTRY.values() if "compared" in m.roles) == COMPARED
    assert list(DEFAULT_TOLERANCES) == [m.name for m in REGISTRY.values() if m.tolerance is not None]
    assert set(DEFAULT_TOLERANCES) <= set(COMPARED)  # a default tolerance is for a figure compare judges
    assert all(m.absolute == (m.kind == "fraction") for m in REGISTRY.values())


def _thinking(records: list) -> list:
    """The same records as a reasoning model's: each answer begins 30 ms after the first (thinking) token."""
    for r in records:
        r.first_content_ns = r.first_token_ns + 30 * MS
    return records


def test_every_compared_entry_is_computed_from_blocks_of_records() -> None:
    drawn, thought = blocks(_records(), 0, 2000 * MS), blocks(_thinking(_records()), 0, 2000 * MS)
    for name in COMPARED:
        entry = metric(name)
        assert (entry.ratio is None) == (entry.latency is not None), name
        if entry.latency in ONLY_WHEN_MEASURED:  # a figure of its own only where a model thought first
            assert value(name, drawn) is None, name
            assert value(name, thought) == pytest.approx(value(name.replace("_answer", ""), thought) + 30), name
            continue
        assert value(name, drawn) is not None, name
        for count in entry.ratio or ():
            assert isinstance(drawn[0].count(count), float)


def test_a_new_compared_figure_is_one_entry_away(monkeypatch: pytest.MonkeyPatch) -> None:
    """TTFT p95 made a compared figure with a 15% tolerance: compare reads its percentile from the entry and
    judges a 40% slower first token a regression."""
    p95 = dataclasses.replace(of(Latency.TTFT, "p95"), roles=frozenset({"compared"}), tolerance=0.15)
    monkeypatch.setitem(REGISTRY, p95.name, p95)
    base, slow = blocks(_records(), 0, 2000 * MS), blocks(_records(1.4), 0, 2000 * MS)
    pooled = np.concatenate([b.latencies[Latency.TTFT] for b in base])
    assert value(p95.name, base) == pytest.approx(float(np.percentile(pooled, 95)))
    assert bootstrap(p95.name, base, slow, p95.tolerance or 0.0).verdict == "regression"
    assert bootstrap(p95.name, base, base, p95.tolerance or 0.0).verdict == "within tolerance"


def test_the_table_has_a_row_for_each_entry_and_latency_the_registry_puts_there() -> None:
    summary = _summary()
    rows = [line.strip() for line in render_table(summary).splitlines()]
    for entry in having("row"):
        # texts/s only where a request carried several texts or nothing was generated: here it is requests/s
        shown = entry.name != TEXTS_PER_S
        assert any(line.startswith(entry.label) for line in rows) == shown, entry.label
    measured = [latency for latency in LATENCIES if getattr(summary.phases[0].latency_ms, latency).p50 is not None]
    assert len(measured) >= 5
    # No row without data in any phase; none for the answer's TTFT where nothing thought first (it is TTFT).
    shown = [latency for latency in measured if LATENCIES[latency].row and latency is not Latency.TTFT_ANSWER]
    assert [latency for latency in measured if any(line.startswith(f"{LATENCIES[latency].label} ")
                                                   and line.count(" / ") == 2 for line in rows)] == shown


def test_pushgateway_pushes_each_exported_entry_and_each_pushed_latency() -> None:
    pushed = {name for name, _, _ in figures(_summary())}
    for entry in REGISTRY.values():
        if entry.export is not None:
            assert f"harness_summary_{entry.export}" in pushed
    for latency, info in LATENCIES.items():
        assert (f"harness_summary_{latency}_seconds" in pushed) == info.pushed, latency


def test_twin_validation_holds_tails_wider_than_medians_and_rates() -> None:
    labels = [m.label for m in having("validated")]
    assert len(set(labels)) == len(labels)
    for entry in having("validated"):
        assert bound(entry.label) == (P50_TOLERANCE if entry.central else P99_TOLERANCE)
    assert bound(of(Latency.TTFT, "p99").label) > bound(of(Latency.TTFT, "p50").label)


def test_a_block_count_named_by_the_registry_is_a_count_of_a_block() -> None:
    block = Block({}, 10.0, 2.0, 5, 1)
    counts = registry.BlockCount.__args__  # type: ignore[attr-defined]
    assert {c: block.count(c) for c in counts} == {"failed": 1.0, "total": 5.0, "tokens": 10.0, "done": 4.0,
                                                   "seconds": 2.0}


def test_the_documented_default_tolerances_are_the_registrys() -> None:
    """docs/compare.md's table of default tolerances was copied from the registry by hand: held equal here."""
    import re
    from pathlib import Path

    from harness.config.metric_registry import DEFAULT_TOLERANCES

    text = (Path(__file__).resolve().parents[2] / "docs" / "compare.md").read_text(encoding="utf-8")
    table = text[text.index("| metric | tolerance | why |"):].split("\n\n", 1)[0].splitlines()[2:]
    documented: dict[str, float] = {}
    for row in table:
        names_cell, tolerance_cell = row.split("|")[1:3]
        names = re.findall(r"`(\w+)`", names_cell)
        values = [float(v) / (100 if "%" in tolerance_cell else 1) / (100 if "point" in tolerance_cell else 1)
                  for v in re.findall(r"(\d+(?:\.\d+)?)", tolerance_cell)]
        documented.update(zip(names, values * len(names) if len(values) == 1 else values, strict=True))
    assert documented == DEFAULT_TOLERANCES
