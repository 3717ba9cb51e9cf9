"""One hop of `--ray`'s control line, with nothing else in it: the driver keeps a call to an actor's `take` open
(as `harness/run/distributed/ray_actors.py` does), sends the actor a line, and times how long until that call
returns with it — the floor under every phase and batch barrier over Ray (a barrier is a line up and a `Go` down).

Needs a running cluster (`ray start --head --num-cpus 2 --node-ip-address 127.0.0.1`); bounded: `--rounds` hops.

    .venv/bin/python bench/ray_hop.py --ray 127.0.0.1:6399 [--rounds 200]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import statistics
import threading
import time
from typing import Any


class Mailbox:
    """A line box as the shard actor keeps one: `take` waits up to `wait_s` for a line."""

    def __init__(self) -> None:
        self._said = threading.Condition()
        self._lines: collections.deque[int] = collections.deque()

    def take(self, wait_s: float) -> list[int]:
        with self._said:
            if not self._lines:
                self._said.wait(wait_s)
            lines = list(self._lines)
            self._lines.clear()
        return lines

    def put(self, line: int) -> None:
        with self._said:
            self._lines.append(line)
            self._said.notify_all()


async def hops(box: Any, rounds: int) -> list[float]:
    took = []
    for k in range(rounds):
        waiting = asyncio.wrap_future(box.take.remote(1.0).future())
        await asyncio.sleep(0.002)  # the call is open and waiting, as the driver's is
        sent = time.perf_counter()
        box.put.remote(k)
        while k not in await waiting:
            waiting = asyncio.wrap_future(box.take.remote(1.0).future())
        took.append((time.perf_counter() - sent) * 1e3)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ray", required=True, help="the cluster's address")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    import ray

    ray.init(address=args.ray, log_to_driver=False)
    remote: Any = ray.remote  # typed for functions; an actor class takes max_concurrency too
    box = remote(num_cpus=1, max_concurrency=4)(Mailbox).remote()
    ray.get(box.take.remote(0.0))
    took = sorted(asyncio.run(hops(box, args.rounds)))
    q = statistics.quantiles(took, n=100)
    print(f"a line to an actor and back out of its open take, {len(took)} hops: p50 {q[49]:.2f} ms, p90 {q[89]:.2f}, "
          f"p99 {q[98]:.2f}")


if __name__ == "__main__":
    main()
