"""Every shipped scenario works from a fresh clone with nothing beside it: the traces it replays ship with it."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import AZURE_TRACE, MOONCAKE_TRACE, ROOT, harness

SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))


@pytest.fixture(scope="module")
def lone_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`scenarios/` copied where no `shared/` directory is beside it."""
    target = tmp_path_factory.mktemp("clone") / "scenarios"
    shutil.copytree(ROOT / "scenarios", target)
    return target


@pytest.mark.parametrize("name", [p.name for p in SCENARIOS])
def test_shipped_scenario_predicts_from_a_lone_copy(lone_copy: Path, name: str) -> None:
    result = harness("predict", str(lone_copy / name), "--json")
    assert result.returncode == 0, result.stderr
    phases = json.loads(result.stdout)["phases"]
    assert phases and all(p["requests"]["ok"] > 0 for p in phases)


@pytest.mark.parametrize(("path", "sha256"), [
    (AZURE_TRACE, "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8"),
    (MOONCAKE_TRACE, "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df"),
])
def test_shipped_traces_are_the_upstream_bytes(path: Path, sha256: str) -> None:
    assert hashlib.sha256(gzip.decompress(path.read_bytes())).hexdigest() == sha256
    assert sha256[:8] in (path.parent / "README.md").read_text()
