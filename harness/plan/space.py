"""The deployments a plan considers: colocated replicas, or a prefill pool and a decode pool, of the devices
given, within a budget of devices or of money an hour. Pure: whether a model starts on a device is asked of
the caller (`starts`), so the enumeration is tested without the simulator."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from harness.config.fleet import KvLink, Pool, Router
from harness.config.simulator import SimulatorConfig
from harness.devices.catalogue import catalogue

Starts = Callable[[str, int], bool]  # (accelerator, tp) → whether the model starts on that server


@dataclass(frozen=True, slots=True)
class Deployment:
    decode: Pool  # every server, when there is no prefill pool
    prefill: Pool | None = None
    router: Router = "least_outstanding"
    link: KvLink = "infiniband"

    @property
    def pools(self) -> tuple[Pool, ...]:
        return (self.decode,) if self.prefill is None else (self.prefill, self.decode)

    @property
    def devices(self) -> int:
        return sum(p.devices for p in self.pools)

    def cost_per_h(self, prices: Mapping[str, float]) -> float | None:
        """Dollars an hour, every device at its price; None when a device has none."""
        if any(p.accelerator not in prices for p in self.pools):
            return None
        return sum(p.devices * prices[p.accelerator] for p in self.pools)

    def watts(self) -> float | None:
        """Every device at its rated power (an upper bound: a device serving below its limit draws less)."""
        boards = [catalogue().devices[p.accelerator].board_w for p in self.pools]
        if any(b is None for b in boards):
            return None
        return sum(p.devices * (b or 0.0) for p, b in zip(self.pools, boards, strict=True))

    def config(self, base: SimulatorConfig) -> SimulatorConfig:
        """The scenario's simulator serving this deployment: its model and settings, these devices, with each
        accelerator's vLLM batch defaults unless the scenario set its own."""
        fields = {"accelerator": self.decode.accelerator, "tp": self.decode.tp, "replicas": self.decode.replicas,
                  "prefill": self.prefill, "router": self.router, "kv_link": self.link}
        if (base.max_num_seqs, base.max_num_batched_tokens) == catalogue().devices[base.accelerator].batch_defaults():
            seqs, tokens = catalogue().devices[self.decode.accelerator].batch_defaults()
            fields |= {"max_num_seqs": seqs, "max_num_batched_tokens": tokens}
        return base.changed(**fields)

    def text(self) -> str:
        """`2 × h100-sxm (tp 4)`; disaggregated, the prefill pool first: `1 × h100-sxm (tp 4) → 2 × h200, roce`."""
        if self.prefill is None:
            return self.decode.text() + (f", {self.router}" if self.decode.replicas > 1 else "")
        return f"{self.prefill.text()} → {self.decode.text()}, {self.link}"


def servers(devices: Sequence[str], budget: int, starts: Starts) -> Iterator[Pool]:
    """Every pool of at most `budget` devices whose servers start the model."""
    for accelerator in devices:
        for tp in catalogue().devices[accelerator].device_counts():
            if tp <= budget and starts(accelerator, tp):
                for replicas in range(1, budget // tp + 1):
                    yield Pool(accelerator=accelerator, tp=tp, replicas=replicas)


def deployments(devices: Sequence[str], budget: int, starts: Starts, *, disaggregated: bool = True,
                links: Sequence[KvLink] = ("infiniband",), routers: Sequence[Router] = ("least_outstanding",),
                prices: Mapping[str, float] | None = None, money: float | None = None) -> list[Deployment]:
    """Every deployment of at most `budget` devices (and `money` dollars an hour, priced by `prices`):
    colocated pools, and with `disaggregated` every prefill pool before every decode pool over each link."""
    pools = list(servers(devices, budget, starts))
    found: list[Deployment] = []
    for pool in pools:
        found += [Deployment(pool, None, r) for r in (routers if pool.replicas > 1 else routers[:1])]
    if disaggregated:
        for first, then in itertools.product(pools, pools):
            if first.devices + then.devices <= budget:
                several = first.replicas > 1 or then.replicas > 1
                found += [Deployment(then, first, r, link)
                          for link in links for r in (routers if several else routers[:1])]
    if money is not None and prices is not None:
        found = [d for d in found if (cost := d.cost_per_h(prices)) is not None and cost <= money]
    return found
