"""docker/ without Docker (CI has no daemon): the compose file's services, ports and mounts, the Dockerfile's
base and user, Prometheus's targets, and the Grafana provisioning all agree with each other and with the
harness; `docker-compose config` validates the file too where that tool is installed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from harness.config.scenario import load_scenario

DOCKER = Path(__file__).resolve().parents[2] / "docker"


def _compose() -> dict:
    return yaml.safe_load((DOCKER / "docker-compose.yml").read_text())


def test_compose_has_the_stack_and_every_mount_exists() -> None:
    services = _compose()["services"]
    assert set(services) == {"simulator", "harness", "pushgateway", "prometheus", "grafana"}
    for name, service in services.items():
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            if source.startswith("."):
                assert (DOCKER / source).exists(), f"{name} mounts {source}, which is not in docker/"
        image = service.get("image", "")
        assert image == "harness:local" or re.fullmatch(r"[\w./-]+:v?\d+\.\d+\.\d+", image), f"{name}: pin {image}"
    ports = {name: [p.split(":")[1] for p in s.get("ports", [])] for name, s in services.items()}
    assert ports["simulator"] == ["8000"] and ports["harness"] == ["9400"] and ports["grafana"] == ["3000"]
    command = services["harness"]["command"]
    assert command[command.index("--metrics-port") + 1] == "9400"
    assert command[command.index("--pushgateway") + 1] == "http://pushgateway:9091"
    assert "--enable-feature=exemplar-storage" in services["prometheus"]["command"]
    # The harness starts once the simulator answers /health, and waits for its endpoint besides (a real server
    # given by HARNESS_ENDPOINT may still be loading): no failed first start.
    assert services["harness"]["depends_on"]["simulator"] == {"condition": "service_healthy"}
    assert "/health" in " ".join(services["simulator"]["healthcheck"]["test"])
    assert command[command.index("--wait-for-endpoint") + 1] == "5m"
    if shutil.which("docker-compose"):  # Debian's docker-compose validates without a daemon
        done = subprocess.run(["docker-compose", "-f", str(DOCKER / "docker-compose.yml"), "config", "-q"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr


def test_the_demo_scenario_loads() -> None:
    command = _compose()["services"]["harness"]["command"]
    scenario = load_scenario(DOCKER.parent / command[1])
    assert len(scenario.phases) >= 4


def test_prometheus_scrapes_the_services_compose_runs() -> None:
    config = yaml.safe_load((DOCKER / "prometheus.yml").read_text())
    targets = {job["job_name"]: job["static_configs"][0]["targets"][0] for job in config["scrape_configs"]}
    assert targets == {"harness": "harness:9400", "simulator": "simulator:8000", "pushgateway": "pushgateway:9091"}
    assert next(j for j in config["scrape_configs"] if j["job_name"] == "pushgateway")["honor_labels"] is True


def test_dockerfile_is_pinned_and_unprivileged() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    (base,) = re.findall(r"^FROM (\S+)", text, re.M)
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", base)
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1] not in ("root", "0")
    for source in re.findall(r"^COPY (\S+)", text, re.M):
        assert (DOCKER.parent / source).exists(), source


def test_grafana_provisions_the_datasource_the_dashboard_asks_for() -> None:
    prov = DOCKER / "grafana" / "provisioning"
    (source,) = yaml.safe_load((prov / "datasources" / "prometheus.yml").read_text())["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090" and source["isDefault"]
    (provider,) = yaml.safe_load((prov / "dashboards" / "harness.yml").read_text())["providers"]
    mounts = _compose()["services"]["grafana"]["volumes"]
    assert f"./grafana/dashboards:{provider['options']['path']}:ro" in mounts
    dashboard = json.loads((DOCKER / "grafana" / "dashboards" / "harness.json").read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    # Usable alone: the data source is a variable, so an existing Grafana picks its own Prometheus.
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])


def test_the_ci_example_runs_the_nightly_script_and_publishes_its_outputs() -> None:
    workflow = yaml.safe_load((DOCKER / "ci" / "github-nightly.yml").read_text())
    steps = workflow["jobs"]["nightly"]["steps"]
    runs = [s.get("run", "") for s in steps]
    assert "bash docker/ci/nightly.sh" in runs
    script = (DOCKER / "ci" / "nightly.sh").read_text()
    for out in ("compare.junit.xml", "compare.md"):
        assert out in script and any(out in str(s.get("with", "")) + s.get("run", "") for s in steps)
    assert "scenarios/nightly.yaml" in script and (DOCKER.parent / "scenarios" / "nightly.yaml").is_file()
    assert workflow["jobs"]["nightly"]["timeout-minutes"] <= 60
    # The JUnit step creates a check run: it needs checks: write where the default token is read-only.
    assert workflow["permissions"]["checks"] == "write"
    # The cache holds exactly the history file the script keeps (its default path), and nothing else.
    cached = {s["with"]["path"] for s in steps if s.get("uses", "").startswith("actions/cache/")}
    assert cached == {"reports/history.sqlite"} and 'HARNESS_HISTORY:-reports/history.sqlite' in script


def test_the_indexed_job_runs_shards_with_flags_harness_accepts() -> None:
    from harness.cli.run import run

    # The shard count is one placeholder, substituted as the file's comment says.
    text = (DOCKER / "k8s" / "harness-shards.yaml").read_text()
    job = yaml.safe_load(text.replace("__SHARDS__", "4"))
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 4
    assert 0 < spec["activeDeadlineSeconds"] <= 4 * 3600  # a bounded wait
    assert spec["template"]["spec"]["securityContext"]["fsGroup"] == 10001  # the image's user writes the volume
    (container,) = spec["template"]["spec"]["containers"]
    args = [a.replace("$(JOB_COMPLETION_INDEX)", "3").replace("__START_AT__", "1764560000") for a in container["args"]]
    assert args[args.index("--shard") + 1] == "3/4"
    ctx = run.make_context("run", args[1:])  # parses and checks every flag, runs nothing
    assert ctx.params["shard_text"] == "3/4" and ctx.params["start_at"] == 1764560000.0 and ctx.params["late_ok"]
    merge = yaml.safe_load((DOCKER / "k8s" / "harness-merge.yaml").read_text().replace("__SHARDS__", "4"))
    command = merge["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert "harness merge /reports/shard-*/*" in command and '-eq 4 ]' in command
    assert merge["spec"]["activeDeadlineSeconds"] > 0
    assert "--uid 10001" in (DOCKER / "Dockerfile").read_text()


def test_the_merge_job_refuses_a_missing_shard(tmp_path: Path) -> None:
    """The merge Job's shell command, run here on folders laid out as the shards leave them (harness stubbed)."""
    merge = yaml.safe_load((DOCKER / "k8s" / "harness-merge.yaml").read_text().replace("__SHARDS__", "3"))
    command = merge["spec"]["template"]["spec"]["containers"][0]["command"][-1].replace("/reports", str(tmp_path))
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "harness").write_text("#!/bin/sh\necho merged \"$@\"\n")
    (tmp_path / "bin" / "harness").chmod(0o755)
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}
    for i in range(2):
        (tmp_path / f"shard-{i}" / f"20261201T000000Z-s{i}").mkdir(parents=True)
    short = subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env, timeout=30)
    assert short.returncode == 2 and "expected 3 shard run directories, found 2" in short.stderr
    (tmp_path / "shard-2" / "20261201T000000Z-s2").mkdir(parents=True)
    whole = subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env, timeout=30)
    assert whole.returncode == 0 and whole.stdout.startswith("merged merge ") and "--out" in whole.stdout
