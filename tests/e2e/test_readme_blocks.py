"""README's first-run blocks, run as a newcomer pastes them: the quick run against one's own endpoint, and
fitting a twin of it. Only the placeholder endpoint is swapped for the bundled simulator on loopback; every
other character of the block is README's, read from README.md at test time."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.helpers import PLACEHOLDER, ROOT, paste


def block(containing: str) -> str:
    blocks = re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    (found,) = [b for b in blocks if containing in b]
    assert PLACEHOLDER in found
    return found


def test_the_quick_run_block_runs_as_pasted(sim_url: str, tmp_path: Path) -> None:
    done = paste(block("--batch 64"), sim_url, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (run_dir,) = (tmp_path / "reports").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [p["config"]["load"]["type"] for p in summary["phases"]] == ["poisson", "batch"]
    assert summary["run"]["endpoint"]["base_url"] == sim_url


def test_the_sim_fit_block_runs_as_pasted(sim_url: str, tmp_path: Path) -> None:
    done = paste(block("for rate in 4 16 10"), sim_url, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "twin:" in (tmp_path / "staging.yaml").read_text()
    assert all(len(list((tmp_path / "runs" / f"rate-{r}").iterdir())) == 1 for r in (4, 16, 10))
    assert "twin" in done.stdout and "predicted" in done.stdout.lower()
