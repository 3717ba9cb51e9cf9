"""Secrets the harness holds — the API key, credentials in a URL — appear in no output file, stdout or stderr,
however they were given and whatever the server echoes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from aiohttp import web

from tests.helpers import ROOT

PASSWORD = "hunter2-pass-0451"
KEY = "sk-live-secret-9f8e7d"


def _everything(reports: Path, proc: subprocess.CompletedProcess[str]) -> str:
    texts = [proc.stdout, proc.stderr]
    for path in reports.rglob("*"):
        if path.is_file():
            texts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(texts)


def test_credentials_in_the_endpoint_url_are_dropped_and_never_written(sim_url: str, tmp_path: Path) -> None:
    with_creds = sim_url.replace("http://", f"http://admin:{PASSWORD}@")
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "--endpoint", with_creds, "--rate", "20",
                           "--requests", "5", "--output-tokens", "4", "--progress", "off",
                           "--reports-dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "user:password@ in the URL is dropped" in proc.stderr
    everything = _everything(tmp_path, proc)
    assert PASSWORD not in everything and "admin:" not in everything
    (run_dir,) = (d for d in tmp_path.iterdir() if d.is_dir())
    assert json.loads((run_dir / "summary.json").read_text())["run"]["endpoint"]["base_url"] == sim_url


def test_credentials_in_a_scenario_file_are_not_saved_with_the_run(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"name: s\nendpoint: {{url: 'http://admin:{PASSWORD}@127.0.0.1:9/v1'}}\n"
                        "phases: [{name: p, load: {type: batch, size: 1, batches: 1}}]\n")
    from harness.config.scenario import load_scenario

    loaded = load_scenario(scenario)
    assert loaded.endpoint.url == "http://127.0.0.1:9/v1" and PASSWORD not in loaded.to_yaml()


def test_a_key_given_where_its_variables_name_belongs_is_refused_without_printing_it(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "--api-key-env", KEY, "--rate", "1",
                           "--requests", "1", "--reports-dir", str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "--api-key-env" in proc.stderr and "not a variable name" in proc.stderr
    assert KEY not in proc.stdout + proc.stderr


async def test_a_server_that_lists_the_key_as_a_model_id_gets_nothing_saved(tmp_path: Path) -> None:
    async def models(request: web.Request) -> web.Response:
        echoed = request.headers.get("Authorization", "").removeprefix("Bearer ")
        return web.json_response({"object": "list", "data": [{"id": echoed}]})

    app = web.Application()
    app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        proc = await asyncio.to_thread(  # the server answers on this test's event loop: the run waits elsewhere
            subprocess.run, [sys.executable, "-m", "harness", "run", "--endpoint", f"http://127.0.0.1:{port}/v1",
                             "--rate", "1", "--requests", "1", "--progress", "off", "--reports-dir", str(tmp_path)],
            cwd=ROOT, capture_output=True, text=True, timeout=60, env={**os.environ, "OPENAI_API_KEY": KEY})
    finally:
        await runner.cleanup()
    assert proc.returncode == 3 and "lists the API key or a header's value among its model ids" in proc.stderr
    assert KEY not in _everything(tmp_path, proc)
