"""Hostile input, round five: URLs that are not, secrets that look like names, numbers no machine can plan,
YAML nested past the parser, a server's escape sequences, a rescue folder planted by someone else."""

from __future__ import annotations

import os
from pathlib import Path

import click
import pytest

from harness.cli.common import api_key
from harness.config.base import web_url
from harness.config.scenario import load_scenario, parse_scenario
from harness.devices.catalogue import load_presets
from harness.errors import PresetError, ScenarioError
from harness.redact import printable
from harness.run.rescue import private_dir, rescue_dirs


@pytest.mark.parametrize("url", ["55289", "ftp://host/x", "http://", "host"])
def test_what_is_not_an_http_url_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="not an http"):
        web_url(url)


def test_host_port_means_http_and_credentials_are_dropped() -> None:
    assert web_url("pushgateway:9091") == "http://pushgateway:9091"
    assert web_url("http://user:PASS@gw:9091/x") == "http://gw:9091/x"
    data = {"name": "s", "pushgateway": "https://ci:s3cret@gw.example", "phases": [
        {"name": "p", "load": {"type": "batch", "size": 1}}]}
    scenario = parse_scenario(data, "s.yaml")
    assert scenario.pushgateway is not None and "s3cret" not in scenario.to_yaml()
    with pytest.raises(ScenarioError, match=r"pushgateway\.url: not an http"):
        parse_scenario({**data, "pushgateway": "55289"}, "s.yaml")


def test_every_flag_that_names_a_variable_hides_a_token_pasted_in_its_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 64: `--header 'X-Key: env:hf_…'` printed the token back; each door now prints `hf_…[hidden]`."""
    from click.testing import CliRunner

    from harness.config.request_shape import resolve
    from harness.sim.cli import sim

    token = "hf_AbCdEfGhIjKlMnOpQrStUv"
    monkeypatch.delenv(token, raising=False)
    with pytest.raises(ValueError) as header:
        resolve({"X-Key": f"env:{token}"}, {}, "--header")
    said = [str(header.value)]
    served = CliRunner().invoke(sim, ["serve", "--port", "0", "--api-key-env", token])
    said.append(served.output)
    assert served.exit_code == 2
    for message in said:
        assert token not in message and "hf_…[hidden]" in message, message
    with pytest.raises(ValueError, match="AZURE_KEY is not set"):  # a conventional name is said as it is
        resolve({"api-key": "env:AZURE_KEY"}, {}, "--header")


def test_a_token_given_as_a_variable_name_is_never_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    token = "hf_AbCdEfGhIjKlMnOpQrStUv"
    monkeypatch.delenv(token, raising=False)
    with pytest.raises(click.BadParameter) as caught:
        api_key(token, None)
    assert token not in str(caught.value) and "hf_…[hidden]" in str(caught.value)
    with pytest.raises(click.BadParameter, match="MY_KEY is not set"):
        api_key("MY_KEY", None)
    monkeypatch.setenv("MY_KEY", "sk-1\r\n")
    with pytest.raises(click.BadParameter, match="line break") as broken:
        api_key("MY_KEY", None)
    assert "sk-1" not in str(broken.value)


@pytest.mark.parametrize(("field", "value", "says"), [
    ("requests", "1e26", "requests"),
    ("requests", "100000000000", "100,000,000,000 requests: must be at most 10,000,000 requests"),
])
def test_numbers_no_machine_can_plan_are_refused_at_load(tmp_path: Path, field: str, value: str, says: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\nphases:\n  - name: p\n    load: {{type: poisson, rate: 1, {field}: {value}}}\n")
    with pytest.raises(ScenarioError, match=says):
        load_scenario(path)


def test_token_counts_and_durations_past_any_context_are_refused(tmp_path: Path) -> None:
    for workload, says in (("{prompt_tokens: 1000000000000}", "workload.prompt_tokens"),
                           ("{output_tokens: 1000000000000}", "workload.output_tokens")):
        path = tmp_path / "s.yaml"
        path.write_text(f"name: s\nworkload: {workload}\nphases:\n  - name: p\n    load: {{type: batch, size: 1}}\n")
        with pytest.raises(ScenarioError, match=says):
            load_scenario(path)
    long = {"name": "s", "phases": [{"name": "p", "load": {"type": "poisson", "rate": 1000, "duration_s": 1e6}}]}
    with pytest.raises(ScenarioError, match="arrivals, over the 10,000,000 a phase may plan"):
        parse_scenario(long, "s.yaml")


def test_yaml_nested_past_the_parser_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("name: x\nphases: " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ScenarioError, match="nested too deep") as caught:
        load_scenario(path)
    assert "\n" not in str(caught.value)
    with pytest.raises(PresetError, match="nested too deep"):
        load_presets(path)


def test_a_servers_escape_sequences_are_escaped() -> None:
    assert printable("model\x1b]0;owned\x07") == "model\\x1b]0;owned\\x07"
    assert printable("a\nwarning: forged", one_line=True) == "a\\x0awarning: forged"
    assert printable("line one\nline two") == "line one\nline two"  # the harness's own lines keep their breaks
    assert printable("\u009b2J") == "\\x9b2J"  # C1 CSI clears a screen too


def test_the_rescue_folder_is_the_users_own_and_never_a_planted_symlink(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    first = rescue_dirs(tmp_path / "run-1")[0]
    assert first.parent.name == f"harness-rescue-{os.getuid()}"
    elsewhere = tmp_path / "attacker"
    elsewhere.mkdir()
    first.parent.symlink_to(elsewhere)
    with pytest.raises(PermissionError, match="symlink"):
        private_dir(first)
    first.parent.unlink()
    private_dir(first)
    assert first.is_dir() and (first.parent.stat().st_mode & 0o777) == 0o700 and (first.stat().st_mode & 0o777) == 0o700
