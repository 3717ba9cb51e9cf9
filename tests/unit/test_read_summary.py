"""Every saved summary.json is read back through `read_summary`: typed, its schema version checked, a bad file
named in one line (exit 2 from any command that reads one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.config.scenario import parse_scenario
from harness.errors import ScenarioError
from harness.stats.schema import SUMMARY_SCHEMA, read_summary
from harness.tools.predict import predict

SCENARIO = {"name": "r", "workload": {"prompt_tokens": 16, "output_tokens": 4},
            "phases": [{"name": "p", "load": {"type": "poisson", "rate": 5, "requests": 5}}]}


def test_a_summary_reads_back_equal_to_what_was_written(tmp_path: Path) -> None:
    summary = predict(parse_scenario(SCENARIO, "test"))
    (tmp_path / "summary.json").write_text(json.dumps(summary.to_json()))
    assert read_summary(tmp_path / "summary.json") == summary


@pytest.mark.parametrize(("change", "said"), [
    (lambda d: {**d, "schema": "harness.summary/1"}, "schema 'harness.summary/1'; this harness reads"),
    (lambda d: {k: v for k, v in d.items() if k != "schema"}, "schema None"),
    (lambda d: {**d, "run": {**d["run"], "run_idd": "x"}}, "run.run_idd: unknown field"),
    (lambda d: {**d, "phases": [{**d["phases"][0], "requests": {"total": "many"}}]}, "phases.0.requests"),
])
def test_a_bad_summary_is_named_in_one_line(tmp_path: Path, change: object, said: str) -> None:
    data = predict(parse_scenario(SCENARIO, "test")).to_json()
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(change(data)))  # type: ignore[operator]
    with pytest.raises(ScenarioError) as caught:
        read_summary(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and said in message and "\n" not in message
    assert SUMMARY_SCHEMA == "harness.summary/2"


def test_a_file_that_is_not_json_is_named(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text('{"schema": "harness.summary/2", "run": ')  # cut short: a disk that filled
    with pytest.raises(ScenarioError, match=r"summary\.json: cannot read a summary"):
        read_summary(path)
