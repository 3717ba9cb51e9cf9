"""How many concurrent streams and tokens/s the simulator sustains on one core, on time.

The simulator runs the full step engine pinned to core 1; this load generator, pinned to core 0,
keeps N streams open (closed loop: a finished stream is replaced at once, answer lengths spread
±50% so streams end at scattered times) with a minimal asyncio protocol that counts SSE frames
without parsing JSON, so the client is never what limits the measurement.

What a simulator can deliver depends on the hardware it models: an H100 at 2,048 streams takes
~90 ms a step. To measure the simulator rather than the modelled chip, each level uses an
SRAM-ASIC-style preset whose decode step at N streams takes `--step-ms`, so the demanded rate is
N / step tokens/s. A level passes when the simulator's step lateness (from its
`sim:step_lateness_seconds` histogram over the measurement window) has p99 < 2 ms.
Traffic goes to 127.0.0.1 only; every level is bounded in time.

    .venv/bin/python bench/sim_capacity.py [--streams 2048] [--step-ms 60,40,30] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

PROMPT = " ".join(["tok"] * 32)
SCRAPE_TIMEOUT_S = 30.0  # an overloaded simulator answers late; past this the level says so instead of a traceback


class Stream(asyncio.Protocol):
    """One streaming completion on its own connection; counts token frames as they arrive."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.frames = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.write(self.bench.next_request())  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        n = data.count(b"data: ")
        self.frames += n
        self.bench.frames += n

    def connection_lost(self, exc: Exception | None) -> None:
        self.bench.finished += 1
        self.bench.replace()


class Bench:
    def __init__(self, port: int, out_tokens: int) -> None:
        # Answer lengths spread over ±50% of the mean, so streams end (and are replaced) at
        # scattered times, as real traffic does, rather than in lockstep bursts.
        self.requests = [self._request(n) for n in range(out_tokens // 2, out_tokens * 3 // 2 + 1, 7)]
        self.port = port
        self.frames = 0
        self.finished = 0
        self.sent = 0
        self.running = True

    @staticmethod
    def _request(out_tokens: int) -> bytes:
        body = json.dumps({"model": "llama-3.1-8b", "prompt": PROMPT, "max_tokens": out_tokens,
                           "ignore_eos": True, "stream": True}).encode()
        return (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body

    def next_request(self) -> bytes:
        self.sent += 1
        return self.requests[(self.sent * 7919) % len(self.requests)]

    def replace(self) -> None:
        if self.running:
            asyncio.get_running_loop().create_task(self.open())

    async def open(self) -> None:
        await asyncio.get_running_loop().create_connection(lambda: Stream(self), "127.0.0.1", self.port)


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=SCRAPE_TIMEOUT_S) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.startswith("sim:step_lateness_seconds"):
                key = s.name + (f"|{s.labels['le']}" if "le" in s.labels else "")
                out[key] = s.value
    return out


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def lateness_share_under(before: dict[str, float], after: dict[str, float], le: str) -> tuple[float, int]:
    steps = after["sim:step_lateness_seconds_count"] - before.get("sim:step_lateness_seconds_count", 0)
    key = f"sim:step_lateness_seconds_bucket|{le}"
    under = after[key] - before.get(key, 0)
    return (under / steps if steps else 0.0), int(steps)


async def level(port: int, pid: int, streams: int, seconds: float, out_tokens: int) -> dict[str, float]:
    bench = Bench(port, out_tokens)
    for i in range(streams):
        await bench.open()
        if i % 64 == 63:
            await asyncio.sleep(0.01)  # stagger so the streams do not finish in lockstep
    await asyncio.sleep(3.0)  # warm up: every stream past its prefill
    # Scraped from a thread: a blocking read on this loop would stop the bench's own streams while it waits.
    before = await asyncio.to_thread(scrape, port)
    cpu0, frames0, done0, t0 = cpu_seconds(pid), bench.frames, bench.finished, time.monotonic()
    await asyncio.sleep(seconds)
    cpu1, frames1, done1, t1 = cpu_seconds(pid), bench.frames, bench.finished, time.monotonic()
    after = await asyncio.to_thread(scrape, port)
    bench.running = False
    elapsed = t1 - t0
    tokens = (frames1 - frames0) - 2 * (done1 - done0)  # each completion also sends finish and [DONE] frames
    share_2ms, steps = lateness_share_under(before, after, "0.002")
    return {"streams": streams, "tokens_per_s": tokens / elapsed, "sim_cpu": (cpu1 - cpu0) / elapsed,
            "steps": steps, "lateness_p99_under_2ms": share_2ms >= 0.99, "share_under_2ms": share_2ms}


def write_preset(directory: Path, streams: int, step_ms: float) -> Path:
    # decode step = 0.25 ms/B × 8 B × (1 + g·(N − 1)) = step_ms at N streams.
    growth = (step_ms / 2.0 - 1) / max(streams - 1, 1)
    path = directory / f"bench-{streams}-{step_ms}.yaml"
    path.write_text(f"accelerators:\n  bench-asic: {{kind: asic, decode_ms_per_b_params: 0.25, growth_per_seq: "
                    f"{growth}, prefill_tokens_per_s_8b: 200000, memory_gb: 1000}}\n")
    return path


def start_sim(preset: Path) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "harness", "sim", "serve", "--port", "0", "--max-num-seqs", "4096",
           "--max-num-batched-tokens", "16384", "--presets", str(preset), "--accelerator", "bench-asic",
           "--noise", "0"]
    if shutil.which("taskset") and os.cpu_count() and os.cpu_count() >= 2:  # type: ignore[operator]
        cmd = ["taskset", "-c", "1", *cmd]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", default="2048")
    parser.add_argument("--step-ms", default="60,40,30")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--out-tokens", type=int, default=256)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {0})
    levels = [(int(n), float(ms)) for n in args.streams.split(",") for ms in args.step_ms.split(",")]
    for n, step_ms in levels:
        with tempfile.TemporaryDirectory() as tmp:
            proc = start_sim(write_preset(Path(tmp), n, step_ms))
            try:
                assert proc.stdout is not None
                port = int(json.loads(proc.stdout.readline())["url"].rsplit(":", 1)[1].split("/")[0])
                result = await asyncio.wait_for(level(port, proc.pid, n, args.seconds, args.out_tokens),
                                                timeout=args.seconds + 2 * SCRAPE_TIMEOUT_S + 30)
            except (TimeoutError, OSError) as exc:  # urllib's URLError is an OSError
                print(f"streams {n:>5}  step {step_ms:>4.0f} ms  demanded {n / step_ms * 1e3:>8,.0f} tok/s  FAIL: "
                      f"the simulator did not answer /metrics in time ({exc})", flush=True)
                continue
            finally:
                proc.terminate()
                proc.wait(timeout=10)
        print(f"streams {n:>5}  step {step_ms:>4.0f} ms  demanded {n / step_ms * 1e3:>8,.0f} tok/s  "
              f"delivered {result['tokens_per_s']:>8,.0f} tok/s  sim CPU {result['sim_cpu']:.2f} cores  "
              f"steps on time (< 2 ms late) {result['share_under_2ms']:.1%}  "
              f"{'PASS' if result['lateness_p99_under_2ms'] else 'FAIL'}", flush=True)



if __name__ == "__main__":
    asyncio.run(main())
