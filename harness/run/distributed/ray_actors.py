"""`harness run --ray auto|ADDRESS --workers N`: one shard a Ray actor, spread across the cluster's nodes.

Each actor runs the same worker a local `--workers` run starts (`harness run --shard i/N --start-at T --relay`,
on the actor's node, with the Python the actor runs), keeps its output lines until the driver takes them, and
passes the driver's barrier answers to its stdin. The driver places every actor first and only then sets the
common start, so a slow placement never eats into the schedule. Records come back as they end: the driver
keeps a call to each actor's `take` open, which returns the moment its worker writes a line (a barrier is
answered within a call's round trip, not a polling interval); each shard's summary, server series and log are
fetched when it has finished (the log kept as `workers/i.log` in the run folder, as a local worker's). An actor
lost mid-run (its node gone, killed) is named; what it had sent back is kept, the rest counted as lost.

Ray is optional (`pip install 'harness[ray]'`) and imported only here, only when `--ray` is given. Every
node needs harness installed in the same environment, and must reach the endpoint (the bundled simulator
listens on loopback: with it, use a one-host cluster).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from harness.client.backend import Endpoint
from harness.config.presets import loaded_files
from harness.config.scenario import Scenario
from harness.errors import UsageError
from harness.run.distributed.workers import (
    WHOLE_EXITS,
    Link,
    child_setup,
    common_start,
    key_env,
    worker_args,
    worker_scenario,
)
from harness.workload.shards import Shard

TAKE_WAIT_S = 1.0  # an actor's `take` returns at once with lines, or after this with none (the driver asks again)
LOG_BYTES = 1 << 20  # the end of a worker's log fetched into the run folder
PLACE_S = 60.0  # for Ray to place every actor (each asks for one CPU)
SHARD_FILES = ("summary.json", "scenario.yaml", "server_metrics.csv")


class ShardProcess:
    """Inside a Ray actor: one worker process on the actor's node, its output kept until taken."""

    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="harness-shard-"))
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: collections.deque[bytes] = collections.deque()
        self._eof = threading.Event()
        self._said = threading.Condition()  # a line written, or the end: wakes a waiting `take`

    def ready(self) -> tuple[str, int, str]:
        """Where it runs: host, process id, and the worker's log there."""
        return socket.gethostname(), os.getpid(), str(self._dir / "worker.log")

    def start(self, scenario_text: str, args: list[str], env: dict[str, str], presets: list[str]) -> None:
        """`presets`: the texts of the preset files the driver loaded (the scenario may name their devices)."""
        scenario = self._dir / "scenario.yaml"
        scenario.write_text(scenario_text, encoding="utf-8")
        for k, text in enumerate(presets):
            (self._dir / f"presets-{k}.yaml").write_text(text, encoding="utf-8")
            args = [*args, "--presets", str(self._dir / f"presets-{k}.yaml")]
        with (self._dir / "worker.log").open("wb") as log:
            self._proc = subprocess.Popen([sys.executable, "-m", "harness", "run", str(scenario), *args,
                                           "--reports-dir", str(self._dir / "reports")],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                          env={**os.environ, **env}, preexec_fn=child_setup(set()))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            with self._said:
                self._lines.append(line)
                self._said.notify_all()
        with self._said:
            self._eof.set()
            self._said.notify_all()

    def take(self, wait_s: float = 0.0) -> tuple[list[bytes], int | None]:
        """The lines written since the last take — waiting up to `wait_s` for one when there are none — and the
        exit code once the worker has ended."""
        with self._said:
            if not self._lines and not self._eof.is_set():
                self._said.wait(wait_s)
            ended = self._eof.is_set()  # every line was queued before the end was marked
            lines = list(self._lines)
            self._lines.clear()
        assert self._proc is not None
        return lines, (self._proc.wait() if ended else None)

    def log(self) -> bytes:
        """The end of the worker's log (its stderr), to keep beside the run once this actor is gone."""
        path = self._dir / "worker.log"
        if not path.is_file():
            return b""
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - LOG_BYTES))
            return f.read()

    def send(self, line: bytes) -> None:
        if self._proc is not None and self._proc.stdin is not None and self._proc.poll() is None:
            self._proc.stdin.write(line)
            self._proc.stdin.flush()

    def files(self) -> tuple[str, dict[str, bytes]]:
        """The shard's run directory's name and the files the merge needs (its records came as they ended)."""
        runs = [d for d in (self._dir / "reports").iterdir() if d.is_dir()]
        if not runs:
            return "", {}
        return runs[0].name, {n: (runs[0] / n).read_bytes() for n in SHARD_FILES if (runs[0] / n).is_file()}

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()

    def kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)


async def _get(ref: Any) -> Any:
    return await asyncio.wrap_future(ref.future())


class RayWorker:
    """A `Link` to a worker on a Ray actor."""

    def __init__(self, index: int, reports: Path, actor: Any, log: str) -> None:
        self.index, self.reports, self.actor, self.log = index, reports, actor, log
        host, _, path = log.partition(":")
        self.where = f"{host}:{Path(path).parent / 'reports'}"  # its node's copy: kept there whatever happens here
        self.lost: str | None = None
        self._code: int | None = None
        self._done = False

    @property
    def returncode(self) -> int | None:
        return None if self.lost else self._code

    async def lines(self) -> AsyncIterator[bytes]:
        while True:
            try:
                lines, code = await _get(self.actor.take.remote(TAKE_WAIT_S))
            except Exception as exc:  # Ray's errors for a dead actor or node vary by version
                self.lost = f"Ray actor lost: {type(exc).__name__}"
                return
            for line in lines:
                yield line
            if code is not None:
                self._code = code
                return

    def send(self, line: bytes) -> None:
        if self.lost is None:
            self.actor.send.remote(line)

    async def finish(self) -> None:
        if self._done:
            return
        self._done = True
        import ray

        if self.lost is None and self._code in WHOLE_EXITS:
            try:
                name, files = await _get(self.actor.files.remote())
            except Exception as exc:
                self.lost = f"Ray actor lost before its files were fetched: {type(exc).__name__}"
            else:
                for file, data in files.items():
                    (self.reports / name).mkdir(parents=True, exist_ok=True)
                    (self.reports / name / file).write_bytes(data)
        if self.lost is None:
            with contextlib.suppress(Exception):  # gone already: its log stays on its node, where it said
                self.reports.parent.joinpath(f"{self.index}.log").write_bytes(await _get(self.actor.log.remote()))
                self.log = str(self.reports.parent / f"{self.index}.log")
            with contextlib.suppress(Exception):  # gone already: nothing of it left to clean
                await _get(self.actor.cleanup.remote())
        ray.kill(self.actor)  # its CPU back to the cluster

    def stop(self) -> None:
        if self.lost is None and self._code is None:
            self.actor.stop.remote()

    def abandon(self, why: str) -> None:
        if self.lost is None and self._code is None:
            self.lost = f"{why}: killed"
            self.actor.kill.remote()

    def death(self) -> str:
        return self.lost or f"exit {self._code}"


def connect(address: str) -> Any:
    if "RAY_AUTH_MODE" not in os.environ and (os.environ.get("RAY_AUTH_TOKEN")
                                              or (Path.home() / ".ray" / "auth_token").is_file()):
        # `ray start` turns token authentication on by default (Ray ≥ 2.59) and leaves its token there; a
        # driver sends it only when told to (read when Ray is imported).
        os.environ["RAY_AUTH_MODE"] = "token"
    try:
        import ray
    except ImportError:
        raise UsageError("--ray: Ray is not installed; pip install 'harness[ray]'") from None
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise UsageError(f"--ray {address}: cannot connect to a Ray cluster ({exc})") from None
    return ray


async def start_ray_workers(scenario: Scenario, endpoint: Endpoint, work: Path, n: int,
                            address: str) -> list[Link]:
    ray = connect(address)
    # Threaded (max_concurrency): a `take` waiting for a line must not hold up the barrier answer sent meanwhile.
    actor_class = ray.remote(num_cpus=1, max_restarts=0, max_concurrency=4)(ShardProcess)
    actors = [actor_class.options(scheduling_strategy="SPREAD").remote() for _ in range(n)]
    try:
        placed = await asyncio.wait_for(asyncio.gather(*(_get(a.ready.remote()) for a in actors)), PLACE_S)
    except TimeoutError:
        for actor in actors:
            ray.kill(actor)
        raise UsageError(f"--ray {address}: Ray could not place {n} actors of one CPU each within "
                         f"{PLACE_S:.0f} s; lower --workers or add nodes") from None
    work.mkdir(parents=True, exist_ok=True)
    (work / "pids").write_text("".join(f"{i} {pid} {host}\n" for i, (host, pid, _) in enumerate(placed)),
                               encoding="utf-8")
    presets = [path.read_text(encoding="utf-8") for path in loaded_files()]
    text, start_at = worker_scenario(scenario).to_yaml(), common_start(n)  # every actor is up: start together
    for i, actor in enumerate(actors):
        actor.start.remote(text, worker_args(endpoint, Shard(i, n), start_at), key_env(endpoint), presets)
    return [RayWorker(i, work / str(i), actor, f"{host}:{log}") for i, (actor, (host, _, log)) in
            enumerate(zip(actors, placed, strict=True))]
