"""`harness run`'s scenario from its command line: every flag group's changes put over the file at once, the
scenario validated once, and a problem only the whole scenario shows named by the flag that made it."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from harness.cli import scenario_flags
from harness.cli.output_flags import ExportFlags
from harness.cli.peer_flags import PeerFlags
from harness.cli.quick_flags import QuickFlags
from harness.cli.request_flags import RequestFlags
from harness.cli.scenario_flags import ScenarioFlags, run_scenario_of
from harness.config.scenario import Scenario
from harness.voice import Heard

SCENARIO = """name: flagged
workload: {prompt_tokens: 64, output_tokens: 8}
thresholds: {error_rate: "<1%"}
phases:
  - {name: open, load: {type: poisson, rate: 2, requests: 4}}
  - {name: replay, load: {type: trace, file: t.jsonl, format: generic}}
"""


def _file(tmp_path: Path) -> Path:
    (tmp_path / "t.jsonl").write_text('{"timestamp": 0, "input_length": 8, "output_length": 4}\n')
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    return path


def _of(path: Path, flags: ScenarioFlags, export: ExportFlags | None = None,
        request: RequestFlags | None = None) -> Scenario:
    scenario, _ = run_scenario_of(path, QuickFlags(), PeerFlags(), None, flags, export or ExportFlags(),
                                  request or RequestFlags(), Heard())
    return scenario


def test_every_group_lands_in_one_validation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _file(tmp_path)
    checks: list[str] = []
    real = Scenario.model_validate.__func__  # type: ignore[attr-defined]

    def counted(cls: type[Scenario], data: object, **kw: object) -> Scenario:
        checks.append("scenario")
        return real(cls, data, **kw)  # type: ignore[no-any-return]

    base = scenario_flags.flag_scenario(path, QuickFlags(), PeerFlags(), None)
    monkeypatch.setattr(scenario_flags, "flag_scenario", lambda *_: base)
    monkeypatch.setattr(Scenario, "model_validate", classmethod(counted))
    got = _of(path, ScenarioFlags(wait=5.0, accelerator="8xH100", hardware="h100-sxm", tokenizer="words",
                                  skip_bad_rows=True, thresholds=("ttft_p99<500ms",)),
              ExportFlags(metrics_port=9500, labels=("team=infra",)), RequestFlags(no_stream=True))
    assert checks == ["scenario"]
    assert got.endpoint.wait_s == 5.0 and got.endpoint.accelerator == "8xH100" and not got.endpoint.stream
    assert got.endpoint.hardware is not None and got.workload.tokenizer == "words"
    assert got.thresholds == {"error_rate": "<1%", "ttft_p99": "<500ms"}
    assert got.metrics_port == 9500 and got.labels == {"team": "infra"}
    assert [getattr(p.load, "skip_bad_rows", None) for p in got.phases] == [None, True]


def test_no_flag_leaves_the_file_as_it_reads(tmp_path: Path) -> None:
    path = _file(tmp_path)
    assert _of(path, ScenarioFlags()) == scenario_flags.flag_scenario(path, QuickFlags(), PeerFlags(), None)


@pytest.mark.parametrize(("flags", "hint", "says"), [
    (ScenarioFlags(thresholds=("ttft_p98<5ms",)), "--threshold", "ttft_p98"),
    (ScenarioFlags(thresholds=("ttft_p99<5",)), "--threshold", "a latency needs a unit"),
    (ScenarioFlags(hardware="nosuchchip"), "--hardware", "nosuchchip"),
    (ScenarioFlags(tokenizer="/no/such/dir"), "--tokenizer", "no such file"),
])
def test_a_bad_flag_is_named(tmp_path: Path, flags: ScenarioFlags, hint: str, says: str) -> None:
    with pytest.raises(click.BadParameter) as caught:
        _of(_file(tmp_path), flags)
    assert caught.value.param_hint == hint and says in caught.value.format_message()
    assert "\n" not in caught.value.format_message()
