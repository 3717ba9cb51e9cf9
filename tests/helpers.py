"""Shared test helpers: the harness CLI as a user runs it, in a real process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiohttp import web

from harness.clock import NS_PER_MS
from harness.config.workload import Workload
from harness.records import RequestRecord
from harness.stats.schema import Summary
from harness.workload.requests import RequestSource, RequestSpec

ROOT = Path(__file__).resolve().parent.parent


def harness(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=ROOT)

TRACES = ROOT / "scenarios" / "traces"  # the public traces shipped with the project, gzipped
AZURE_TRACE = TRACES / "AzureLLMInferenceTrace_conv.csv.gz"
MOONCAKE_TRACE = TRACES / "mooncake_conversation_trace.jsonl.gz"


def phase_json(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """A phase's statistics as they appear in summary.json."""
    from harness.stats.phase import phase_stats

    return phase_stats(*args, **kwargs).to_json()


def build_requests(workload: Workload, phase: str, phase_index: int, count: int, seed: int, run_id: str,
                   batch_size: int | None = None) -> list[RequestSpec]:
    """The first `count` requests of a phase, as the plan would send them."""
    return RequestSource(workload, phase, phase_index, seed, run_id, batch_size).take(count)


MS = NS_PER_MS


def summary_of(phases: list[dict[str, Any]], conclusion: tuple[str, ...] | list[str] = (), scenario: str = "tiny",
               **run: Any) -> Summary:
    """A whole typed summary around phases given as summary.json has them (each with its name), for the
    readers of summaries (the table, the report, the notes)."""
    header = {"run_id": "test", "scenario": scenario, "harness_version": "test", "seed": 0, **run}
    return Summary.from_json({"run": header, "phases": [{"config": {}, **p} for p in phases],
                              "comparison": {"phases": [], "conclusion": list(conclusion)}})


def rec(intended: int, sent: int, chunks: list[int], completion: int | None = None, status: str = "ok",
        batch: int | None = None, idx: int = 0) -> RequestRecord:
    """A finished record from times in ms: intended, sent, and each chunk's arrival."""
    r = RequestRecord(f"r{idx}", "p", idx, 100, 10, intended * MS, sent_ns=sent * MS, batch=batch)
    r.chunk_ns = [c * MS for c in chunks]
    r.first_token_ns = r.chunk_ns[0] if chunks else None
    r.first_content_ns = r.first_token_ns  # no thinking: the answer's first token is the first
    r.last_token_ns = r.chunk_ns[-1] if chunks else None
    r.end_ns = (chunks[-1] if chunks else sent) * MS
    r.completion_tokens = completion
    r.status = status  # type: ignore[assignment]
    return r


def chunk(content: str) -> bytes:
    """One SSE event carrying `content` as a chat delta."""
    import json

    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": content}}]}).encode() + b"\n\n"


USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":3,"total_tokens":11}}\n\n'


async def streaming(request: Any, frames: list[bytes], pause_s: float = 0.0) -> Any:
    """An aiohttp handler's answer: `frames` as an event stream, `pause_s` between them."""
    import asyncio

    from aiohttp import web

    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for frame in frames:
        await resp.write(frame)
        if pause_s:
            await asyncio.sleep(pause_s)
    return resp


GOLDEN = ROOT / "tests" / "unit" / "golden"


def check_golden(name: str, text: str) -> None:
    """`text` equals the golden file `name` (rewritten with UPDATE_GOLDEN=1)."""
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.is_file(), f"missing golden file {path}: run with UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} changed; if intended, regenerate with UPDATE_GOLDEN=1"


WORKER_QUICK = ["--rate", "10", "--requests", "20", "--batch", "4", "--output-tokens", "uniform:4:64",
                "--progress", "lines"]


def worker_pid(reports: Path, index: int, tries: int) -> int:
    """The process id of worker `index` of the `--workers` run writing under `reports`, once it wrote a record."""
    for _ in range(tries):
        found = list(reports.glob("*/workers/pids"))
        if found and (records := list(reports.glob(f"*/workers/{index}/*/requests.jsonl"))) and \
                records[0].stat().st_size > 0:
            return int(dict(line.split() for line in found[0].read_text().splitlines())[str(index)])
        time.sleep(0.1)
    raise AssertionError(f"worker {index} never wrote a record")


def only_run_dir(reports: Path) -> Path:
    (run_dir,) = (d for d in reports.iterdir() if d.is_dir())
    return run_dir


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


SEEN = web.AppKey("seen", list)  # what a recording test server was sent: (headers, body, client port)


@contextlib.contextmanager
def serving(*args: str, **popen: Any) -> Iterator[str]:
    """`harness ARGS` serving until the block ends (a simulator, a clock): the URL it prints as JSON first."""
    proc = subprocess.Popen([sys.executable, "-m", "harness", *args], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            **popen)
    try:
        assert proc.stdout is not None
        yield json.loads(proc.stdout.readline())["url"]
    finally:
        proc.terminate()
        proc.communicate(timeout=15)


def arrived_at_sim(sim_url: str, ids: list[str]) -> list[str]:
    """Which of `ids` the bundled simulator saw arrive (its ground truth, `/sim/truth`): the server's count of what
    a client sent, to check the client's own against."""
    import urllib.request

    body = json.dumps({"ids": ids}).encode()
    request = urllib.request.Request(sim_url.removesuffix("/v1") + "/sim/truth", body,
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        return [r["request_id"] for r in json.load(resp)["requests"]]


def shard_ids(run_id: str, phase_index: int, requests: int, shard: int, shards: int) -> list[str]:
    """The request ids shard `shard` of `shards` was to send in a phase of `requests` (every `shards`-th)."""
    return [f"{run_id}-{phase_index}-{k}" for k in range(shard, requests, shards)]


@contextlib.contextmanager
def served_on_a_thread(app: web.Application, ssl_context: ssl.SSLContext | None = None) -> Iterator[int]:
    """`app` on 127.0.0.1 on its own thread and event loop (what the test's loop does cannot hold it); its port."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, access_log=None)

    async def start() -> int:
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context).start()
        return int(runner.addresses[0][1])

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=30)
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


PLACEHOLDER = "http://staging:8000/v1"  # the endpoint README's and docs/recipes.md's blocks stand for yours with


def paste(text: str, sim_url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """In a fresh folder beside the project's .venv (README's `source .venv/bin/activate` finds it), stopping at
    the first command that fails."""
    if not (ROOT / ".venv" / "bin" / "activate").is_file():
        raise AssertionError("README's blocks need the project's .venv: `make test` and `.ci/run` create it")
    (cwd / ".venv").symlink_to(ROOT / ".venv")
    env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    return subprocess.run(["bash", "-e", "-c", text.replace(PLACEHOLDER, sim_url)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=240)


def chromium() -> str:
    """Debian's chromium (`make test` and `.ci/run` install it), or the test fails saying so."""
    import shutil

    path = shutil.which("chromium")
    if path is None:
        raise AssertionError("Debian's chromium is needed for this test: `make test` and `.ci/run` install it")
    return path


def _ignore(rec: RequestRecord) -> None:
    pass


async def execute(url: str, spec: RequestSpec | None = None, api: str = "chat", key: str | None = None,
                  timeout_s: float = 10, kind: str = "aiohttp", first_token_timeout_s: float | None = None
                  ) -> RequestRecord:
    """One request (by default of 8 prompt tokens, exactly 3 answer tokens) through one of the two HTTP clients
    (`kind`: h1 or aiohttp) and the worker, as a run sends it; its closed record."""
    from harness.client.aio import OpenAIBackend, open_session
    from harness.client.backend import Endpoint
    from harness.client.h1 import H1Backend
    from harness.clock import MonotonicClock
    from harness.run.worker import run_request

    spec = spec or build_requests(Workload(prompt_tokens=8, output_tokens=3), "p", 0, 1, seed=0, run_id="t")[0]
    clock = MonotonicClock()
    endpoint = Endpoint(url, "m", api, key)
    if kind == "h1":
        h1 = H1Backend(endpoint, 4, 5, timeout_s, first_token_timeout_s)
        rec = await run_request(h1, clock, spec, clock.now_ns(), _ignore)
        await h1.close()
        return rec
    async with open_session(4, 5, timeout_s) as session:
        return await run_request(OpenAIBackend(endpoint, session, first_token_timeout_s), clock, spec,
                                 clock.now_ns(), _ignore)
