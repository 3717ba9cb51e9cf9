"""What carries a prompt's KV cache from a prefill server to a decode server, and how long it takes.

Bandwidth is per device and per direction: a tensor-parallel server's ranks each send their share of the KV
over their own link at once (a DGX has one NIC per GPU), so a transfer between tp p and tp d servers runs on
min(p, d) links. Latency is one transfer's fixed cost. Sources in docs/fleets.md; latencies are stated
assumptions (a datasheet gives a switch's port-to-port time, not a transfer's).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Interconnect:
    name: str
    bytes_per_s: float  # per device, per direction
    latency_s: float
    source: str


GB = 1e9

LINKS = {link.name: link for link in (
    Interconnect("nvlink", 450 * GB, 2e-6, "NVLink 4 (H100 SXM): 900 GB/s a GPU, both directions together"),
    Interconnect("infiniband", 50 * GB, 5e-6, "NDR InfiniBand, 400 Gb/s a port, one ConnectX-7 a GPU (DGX H100)"),
    Interconnect("infiniband-hdr", 25 * GB, 5e-6, "HDR InfiniBand, 200 Gb/s a port, one ConnectX-6 a GPU (DGX A100)"),
    Interconnect("roce", 50 * GB, 8e-6, "400 GbE RoCE v2 (ConnectX-7), one a GPU"),
    Interconnect("pcie", 63 * GB, 10e-6, "PCIe 5.0 x16: 32 GT/s × 16 lanes, 128b/130b, through the host"),
)}


def transfer_s(kv_bytes: float, link: Interconnect, lanes: int, layerwise: bool, prefill_s: float,
               layers: int) -> float:
    """Seconds a prompt's KV adds to its time to first token. Whole (vLLM's connectors): all of it after the
    prefill. Layer by layer (Splitwise): each layer's KV leaves as the next is computed, so only the last
    layer's share waits — and whatever the link could not keep up with while the prefill ran."""
    moving = kv_bytes / (link.bytes_per_s * max(1, lanes))
    if not layerwise:
        return link.latency_s + moving
    return link.latency_s + moving / max(1, layers) + max(0.0, moving - prefill_s)
