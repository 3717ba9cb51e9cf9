"""A tagged run exported as a dashboard would ingest it: `harness run --label --metadata` against the bundled
simulator on loopback, then `harness export --format csv|vllm` and `harness history`, all through the CLI."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.helpers import harness, only_run_dir


@pytest.fixture(scope="module")
def tagged(sim_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("tagged")
    (where / "meta.yaml").write_text("commit: 4f06073\ndriver: 550.54\n")
    done = harness("run", "--endpoint", sim_url, "--rate", "10", "--requests", "12", "--output-tokens", "8",
                   "--progress", "off", "--reports-dir", str(where / "reports"), "--label", "engine=sim",
                   "--label", "branch=main", "--metadata", str(where / "meta.yaml"))
    assert done.returncode == 0, done.stderr
    return only_run_dir(where / "reports")


def test_the_tags_are_kept_and_the_csv_round_trips_summary_json(tagged: Path) -> None:
    summary = json.loads((tagged / "summary.json").read_text())
    assert summary["run"]["labels"] == {"engine": "sim", "branch": "main"}
    assert summary["run"]["metadata"] == {"commit": "4f06073", "driver": 550.54}
    assert "engine=sim, branch=main" in (tagged / "report.html").read_text()
    done = harness("export", str(tagged), "--format", "csv")
    assert done.returncode == 0, done.stderr
    (row,) = list(csv.DictReader(io.StringIO(done.stdout)))
    phase = summary["phases"][0]
    assert row["label.engine"] == "sim" and row["phase"] == phase["name"]
    assert float(row["ttft_p99"]) == pytest.approx(phase["latency_ms"]["ttft"]["p99"], rel=1e-5)
    assert float(row["output_tokens_per_s"]) == pytest.approx(phase["throughput"]["output_tokens_per_s"], rel=1e-5)
    assert int(row["requests_ok"]) == phase["requests"]["ok"] == 12


def test_the_vllm_files_carry_vllms_keys_and_the_tags(tagged: Path, tmp_path: Path) -> None:
    done = harness("export", str(tagged), "--format", "vllm", "--output", str(tmp_path))
    assert done.returncode == 0, done.stderr
    (path,) = tmp_path.glob("vllm-*.json")
    result = json.loads(path.read_text())
    phase = json.loads((tagged / "summary.json").read_text())["phases"][0]
    assert result["completed"] == 12 and result["request_rate"] == 10
    assert result["median_ttft_ms"] == phase["latency_ms"]["ttft"]["p50"]
    assert result["engine"] == "sim" and result["commit"] == "4f06073"


def test_the_history_shows_the_tags(tagged: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "h.db")
    assert harness("history", "add", str(tagged), "--db", db).returncode == 0
    shown = harness("history", "show", "--db", db)
    assert shown.returncode == 0 and "engine=sim branch=main" in shown.stdout


def test_a_secret_looking_label_or_a_nested_metadata_is_refused_naming_the_flag(tmp_path: Path) -> None:
    bad = harness("run", "--rate", "1", "--requests", "1", "--label", "key=sk-proj-abcdef",
                  "--reports-dir", str(tmp_path))
    assert bad.returncode == 2 and "--label" in bad.stderr and "sk-proj-abcdef" not in bad.stderr
    (tmp_path / "m.yaml").write_text("gpus: [0, 1]\n")
    nested = harness("run", "--rate", "1", "--requests", "1", "--metadata", str(tmp_path / "m.yaml"),
                     "--reports-dir", str(tmp_path))
    assert nested.returncode == 2 and "--metadata" in nested.stderr and "gpus" in nested.stderr
    assert not list(tmp_path.glob("*/summary.json"))  # refused before any run
