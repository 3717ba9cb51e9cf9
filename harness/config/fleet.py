"""A deployment beyond one server, as the scenario's `simulator:` section describes it: replicas behind a
router, and prefill and decode on pools of their own joined by a KV link (docs/fleets.md).

Only the shape lives here (validated input); what a link moves and how fast is the simulator's
(harness/devices/links.py), and how requests are routed is the simulator's too (harness/sim/router.py).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AliasChoices, Field, model_validator

from harness.config.base import Strict

# round_robin: a plain Kubernetes Service; least_outstanding: fewest requests running and waiting (vLLM's
# data-parallel balancer); prefix_aware: llm-d's default profile (prefix-cache score ×3, queue score ×2).
Router = Literal["round_robin", "least_outstanding", "prefix_aware"]
KvLink = Literal["nvlink", "infiniband", "infiniband-hdr", "roce", "pcie"]
# whole: the prompt's KV moves after its prefill, as vLLM's NIXL connector pulls it today; layerwise: each
# layer's as it is computed (Splitwise), only the last layer's share and any excess left on the TTFT path.
KvTransfer = Literal["whole", "layerwise"]
# decode: the decode server streams every token, the prefill server's one discarded (vLLM's disaggregated
# proxy, llm-d); prefill: the prefill server's token is the client's first and decode carries on from it
# (DistServe, Splitwise, Mooncake) — a TTFT without the decode server's queue and step.
FirstToken = Literal["decode", "prefill"]

MAX_REPLICAS = 64


class Pool(Strict):
    """One pool of identical servers: which accelerator, over how many devices each (tp), how many."""

    accelerator: str = Field(validation_alias=AliasChoices("accelerator", "device"),
                             description="see `harness sim presets`")
    tp: Annotated[int, Field(ge=1, le=64)] = Field(1, description="devices each server is split over")
    replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)] = Field(1, description="servers in the pool")

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: object) -> object:
        """`h100-sxm:2:3` (accelerator, tp, replicas; the last two optional) as a flag gives it."""
        if not isinstance(data, str):
            return data
        parts = data.split(":")
        if len(parts) > 3 or not parts[0]:
            raise ValueError(f"{data!r}: give ACCELERATOR[:TP[:REPLICAS]], e.g. h100-sxm:2:3")
        return dict(zip(("accelerator", "tp", "replicas"), parts, strict=False))

    @property
    def devices(self) -> int:
        return self.tp * self.replicas

    def text(self) -> str:
        return f"{self.replicas} × {self.accelerator}" + (f" (tp {self.tp})" if self.tp > 1 else "")
