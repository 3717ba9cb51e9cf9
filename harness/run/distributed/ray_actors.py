"""`harness run --ray auto|ADDRESS --workers N`: one shard a Ray actor, spread across the cluster's nodes.

Each actor runs the same worker a local `--workers` run starts (`harness run --shard i/N --start-at T --relay`,
on the actor's node, with the Python the actor runs), keeps its output lines until the driver takes them, and
bridges its stdin and stdout to one TCP connection back to the driver: each line the worker writes reaches the
driver, and each barrier answer reaches the worker, in a socket hop, not a Ray call (a call's round trip is
2.0 ms p50 and 5–6 ms p99 on one 2-core host, `bench/ray_hop.py`, and a barrier needs two). The driver places
every actor first and only then sets the common start, so a slow placement never eats into the schedule. Each
shard's summary, server series and log are fetched when it has finished (the log kept as `workers/i.log` in the
run folder, as a local worker's). An actor lost mid-run (its node gone, killed) is named; what it had sent back
is kept, the rest counted as lost.

Ray is optional (`pip install 'harness[ray]'`) and imported only here, only when `--ray` is given. Every
node needs harness installed in the same environment, must reach the endpoint (the bundled simulator listens
on loopback: with it, use a one-host cluster), and must reach the driver's node on one TCP port it picks (on
loopback when every actor is on the driver's host); a connection must first say the run's secret token.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
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
from harness.config.scenario import Scenario
from harness.devices.catalogue import catalogue
from harness.errors import UsageError
from harness.limits import WORKER_LINE_BYTES
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

CONNECT_S = 30.0  # for an actor to reach the driver's line, and say the token
LOG_BYTES = 1 << 20  # the end of a worker's log fetched into the run folder
PLACE_S = 60.0  # for Ray to place every actor (each asks for one CPU)
SHARD_FILES = ("summary.json", "scenario.yaml", "server_metrics.csv")
Line = tuple[asyncio.StreamReader, asyncio.StreamWriter]  # the driver's end of one actor's line


class ShardProcess:
    """Inside a Ray actor: one worker process on the actor's node, its stdin and stdout bridged to the
    driver."""

    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="harness-shard-"))
        self._proc: subprocess.Popen[bytes] | None = None
        self._line: socket.socket | None = None

    def ready(self) -> tuple[str, int, str]:
        """Where it runs: host, process id, and the worker's log there."""
        return socket.gethostname(), os.getpid(), str(self._dir / "worker.log")

    def start(self, scenario_text: str, args: list[str], env: dict[str, str], presets: list[str],
              driver: tuple[str, int, str]) -> None:
        """`presets`: the texts of the preset files the driver loaded (the scenario may name their devices);
        `driver`: where its line listens, and what to say first."""
        host, port, hello = driver
        self._line = socket.create_connection((host, port), timeout=CONNECT_S)
        self._line.settimeout(None)
        self._line.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._line.sendall(hello.encode() + b"\n")
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
        threading.Thread(target=self._up, daemon=True).start()
        threading.Thread(target=self._down, daemon=True).start()

    def _up(self) -> None:
        """The worker's lines to the driver as it writes them; its end, as the line's end."""
        assert self._proc is not None and self._proc.stdout is not None and self._line is not None
        with contextlib.suppress(OSError):  # the driver is gone: the worker keeps its records on this node
            for line in self._proc.stdout:
                self._line.sendall(line)
            self._line.shutdown(socket.SHUT_WR)

    def _down(self) -> None:
        """The driver's lines (barrier answers, clock answers) to the worker's stdin."""
        assert self._proc is not None and self._proc.stdin is not None and self._line is not None
        with contextlib.suppress(OSError, ValueError):  # either end gone
            for line in self._line.makefile("rb"):
                self._proc.stdin.write(line)
                self._proc.stdin.flush()

    def exit_code(self) -> int:
        """Once the worker has ended (its line closed), its exit code."""
        assert self._proc is not None
        return self._proc.wait()

    def log(self) -> bytes:
        """The end of the worker's log (its stderr), to keep beside the run once this actor is gone."""
        path = self._dir / "worker.log"
        if not path.is_file():
            return b""
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - LOG_BYTES))
            return f.read()

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
        if self._line is not None:
            self._line.close()
        shutil.rmtree(self._dir, ignore_errors=True)


async def _get(ref: Any) -> Any:
    return await asyncio.wrap_future(ref.future())


class RayWorker:
    """A `Link` to a worker on a Ray actor: its lines over the actor's connection, its exit from the actor."""

    def __init__(self, index: int, reports: Path, actor: Any, log: str,
                 line: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        self.index, self.reports, self.actor, self.log = index, reports, actor, log
        host, _, path = log.partition(":")
        self.where = f"{host}:{Path(path).parent / 'reports'}"  # its node's copy: kept there whatever happens here
        self._reader, self._writer = line
        self.lost: str | None = None
        self._code: int | None = None
        self._done = False

    @property
    def returncode(self) -> int | None:
        return None if self.lost else self._code

    async def lines(self) -> AsyncIterator[bytes]:
        with contextlib.suppress(OSError):  # a line cut off (its node gone): asked below how it ended
            while line := await self._reader.readline():
                yield line
        try:
            self._code = await _get(self.actor.exit_code.remote())
        except Exception as exc:  # Ray's errors for a dead actor or node vary by version
            self.lost = f"Ray actor lost: {type(exc).__name__}"

    def send(self, line: bytes) -> None:
        if self.lost is None and not self._writer.is_closing():
            self._writer.write(line)

    async def finish(self) -> None:
        if self._done:
            return
        self._done = True
        import ray

        self._writer.close()
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


class Switchboard:
    """The driver's end of the actors' lines: one TCP listener; each connection is matched to its actor by its
    first line (the run's secret token and the actor's index), any other closed at once."""

    def __init__(self, n: int) -> None:
        self.token = secrets.token_hex(16)
        loop = asyncio.get_running_loop()
        self._came: list[asyncio.Future[Line]] = [loop.create_future() for _ in range(n)]
        self._server: asyncio.Server | None = None
        self.address = ("", 0)

    async def open(self, host: str) -> None:
        self._server = await asyncio.start_server(self._accept, host, 0, limit=WORKER_LINE_BYTES)
        self.address = (host, int(self._server.sockets[0].getsockname()[1]))

    def driver(self, index: int) -> tuple[str, int, str]:
        """What actor `index` is told: where to connect, and what to say first."""
        return (*self.address, f"{self.token} {index}")

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            hello = (await asyncio.wait_for(reader.readline(), CONNECT_S)).decode(errors="replace").split()
        except (TimeoutError, OSError, ValueError):
            hello = []
        index = int(hello[1]) if len(hello) == 2 and hello[1].isdigit() else -1
        if (0 <= index < len(self._came) and secrets.compare_digest(hello[0], self.token)
                and not self._came[index].done()):
            self._came[index].set_result((reader, writer))
        else:
            writer.close()

    async def lines(self) -> list[Line]:
        """Every actor's line, once each has connected (the listener then closes)."""
        try:
            return list(await asyncio.wait_for(asyncio.gather(*self._came), CONNECT_S))
        finally:
            if self._server is not None:
                self._server.close()


async def start_ray_workers(scenario: Scenario, endpoint: Endpoint, work: Path, n: int,
                            address: str) -> list[Link]:
    ray = connect(address)
    # Threaded (max_concurrency): the calls for files, the log and the exit code run beside the bridge's
    # threads.
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
    board = Switchboard(n)
    # Every actor on this host: the lines stay on loopback; otherwise on the address Ray knows this node by.
    here = all(host == socket.gethostname() for host, _, _ in placed)
    await board.open("127.0.0.1" if here else ray.util.get_node_ip_address())
    presets = [path.read_text(encoding="utf-8") for path in catalogue().files_here()]
    text, start_at = worker_scenario(scenario).to_yaml(), common_start(n)  # every actor is up: start together
    started = [_get(actor.start.remote(text, worker_args(endpoint, Shard(i, n), start_at), key_env(endpoint),
                                       presets, board.driver(i))) for i, actor in enumerate(actors)]
    try:
        await asyncio.gather(*started)
        lines = await board.lines()
    except Exception as exc:  # an actor that cannot reach the driver's line: a firewall between the nodes
        for actor in actors:
            ray.kill(actor)
        raise UsageError(f"--ray {address}: an actor could not reach this driver's line at "
                         f"{board.address[0]}:{board.address[1]} ({type(exc).__name__}: {str(exc)[:200]}); every "
                         "node must reach the driver's node") from None
    return [RayWorker(i, work / str(i), actor, f"{host}:{log}", line) for i, (actor, (host, _, log), line) in
            enumerate(zip(actors, placed, lines, strict=True))]
