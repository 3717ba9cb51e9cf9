"""docs/recipes.md, every block pasted as a user would: in a fresh folder beside the project's .venv, `bash -e`,
the placeholder endpoint swapped for a bundled simulator on loopback shaped like the recipe's server (a gateway
that wants a header, a reasoning model), the alarm recipe's fixed ports for free ones. Every other character is
the page's, read at test time; a block with no test here fails the suite."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import PLACEHOLDER, ROOT, paste, serving

PAGE = ROOT / "docs" / "recipes.md"
SIM = ("sim", "serve", "--port", "0", "--seed", "4")  # a bundled simulator of its own, on a free port


def blocks() -> dict[str, str]:
    """Each `## heading` of the page and its one sh block."""
    found = re.findall(r"^## (.+?)\n.*?```sh\n(.*?)```", PAGE.read_text(), flags=re.S | re.M)
    return dict(found)


def _block(start: str) -> str:
    (text,) = [text for heading, text in blocks().items() if heading.startswith(start)]
    return text


def _summary(folder: Path) -> dict:
    (run_dir,) = [p for p in folder.iterdir() if (p / "summary.json").is_file()]
    return json.loads((run_dir / "summary.json").read_text())


TESTED = ("A gateway", "A reasoning model", "Capacity", "Nightly A/B", "Testing your own alarm",
          "Exporting to a dashboard")


def test_every_block_of_the_page_has_its_test() -> None:
    headings = list(blocks())
    assert len(headings) == len(TESTED) and all(any(h.startswith(t) for h in headings) for t in TESTED), headings


def test_the_gateway_recipe(tmp_path: Path) -> None:
    with serving(*SIM, "--require-header", "X-Tenant: t-123", "--served-model-name", "my-model") as url:
        done = paste(_block("A gateway").replace(PLACEHOLDER, url), url, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _summary(tmp_path / "gateway")["phases"][0]["requests"]["ok"] == 20
    written = [p.read_bytes() for p in (tmp_path / "gateway").rglob("*") if p.is_file()]
    assert not any(b"t-123" in text for text in [*written, done.stdout.encode(), done.stderr.encode()])


def test_the_reasoning_recipe(tmp_path: Path) -> None:
    with serving(*SIM, "--reasoning-tokens", "200") as url:
        done = paste(_block("A reasoning model"), url, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    phase = _summary(tmp_path / "reasoning")["phases"][0]
    assert phase["tokens"]["reasoning_reported"] == 12 and phase["goodput"]["slo"]["ttft_answer_ms"] == 2000
    assert "TTFT (answer) p99 ≤ 2000 ms" in done.stdout


def test_the_capacity_recipe(tmp_path: Path) -> None:
    """Its own simulator: one shared with other tests' load would move the capacity it finds."""
    with serving(*SIM) as url:
        done = paste(_block("Capacity"), url, tmp_path)
    # Exit 5 on a busy machine: the trials it rests on were mostly client-limited, and it says so (its files too).
    unclaimed = done.returncode == 5 and "no capacity claimed" in done.stderr
    assert done.returncode == 0 or unclaimed, done.stderr[-3000:]
    assert json.loads((tmp_path / "estimate.json").read_text())["capacity_rps"] > 0
    (folder,) = (tmp_path / "capacity").iterdir()
    found = json.loads((folder / "search.json").read_text())
    assert found["capacity_rps"] is not None or found["note"], found  # a capacity, or why there is none
    assert (found["untrusted"] is not None) == unclaimed and found["client_limited_trials"] >= unclaimed
    assert len(list(folder.glob("trial-*"))) == len(found["trials"]) >= 1 and (folder / "search.html").is_file()
    assert "search.json" in done.stdout


def test_the_nightly_ab_recipe(sim_url: str, tmp_path: Path) -> None:
    done = paste(_block("Nightly A/B"), sim_url, tmp_path)
    assert done.returncode in (0, 5), done.stderr[-3000:]  # the same server twice: never a regression
    assert "ab/after" in (tmp_path / "ab" / "compare.md").read_text()
    assert "<testsuite" in (tmp_path / "ab" / "compare.xml").read_text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_alarm_recipe_catches_the_slowed_server_and_not_the_same_one(tmp_path: Path) -> None:
    text = _block("Testing your own alarm")
    for port in ("8101", "8102"):
        text = text.replace(port, str(_free_port()))
    done = paste(text, "http://unused.invalid/v1", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    aa, slow = (int(re.search(rf"{side}: exit (\d+)", done.stdout)[1]) for side in ("A/A", "slow"))  # type: ignore[index]
    assert aa in (0, 5), (tmp_path / "alarm" / "aa.txt").read_text()  # never a regression
    if slow == 5:  # no verdict: every figure untrusted, which only a busy machine does
        limited = [p["client_limited"] for side in ("base", "slow") for p in _summary(tmp_path / "alarm" / side)
                   ["phases"]]
        assert any(limited), (tmp_path / "alarm" / "slow.txt").read_text()
        pytest.skip("the machine was too busy to judge the slowed server (its runs were client-limited)")
    assert slow == 99, (tmp_path / "alarm" / "slow.txt").read_text()
    assert "itl_p50" in (tmp_path / "alarm" / "slow.txt").read_text()


def test_the_dashboard_recipe(tmp_path: Path) -> None:
    done = paste(_block("Exporting to a dashboard"), "http://unused.invalid/v1", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    header = (tmp_path / "runs.csv").read_text().splitlines()[0].split(",")
    assert {"label.engine", "label.branch", "ttft_p99", "output_tokens_per_s"} <= set(header)
    assert len(list((tmp_path / "vllm-results").glob("vllm-*.json"))) == 1


def test_each_recipe_names_only_flags_the_harness_takes() -> None:
    """A flag renamed or dropped fails here, before its recipe's slower test says why."""
    helps = "".join(subprocess.run([sys.executable, "-m", "harness", *cmd, "--help"], capture_output=True,
                                   text=True, cwd=ROOT).stdout
                    for cmd in (["run"], ["search"], ["compare"], ["export"], ["sim", "serve"]))
    for heading, text in blocks().items():
        for flag in set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", text)):
            assert re.search(rf"{flag}(?![a-z0-9-])", helps), f"{heading}: {flag}"
