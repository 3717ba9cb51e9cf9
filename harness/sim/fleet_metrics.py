"""A fleet's /metrics per pool and server, beside vLLM's series of the endpoint as a whole.

vLLM's names keep meaning what one server behind the endpoint would say (the harness and dashboards sum
them over labels), so a prefill server's one sampled token and a prompt counted on both sides never reach
them; each server's own figures are `sim:pool_*`, labelled `pool` and `server` (docs/fleets.md).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from harness.sim.fleet import FleetDriver

_GAUGES = (("running", "sim:pool_requests_running", "Requests in the server's running batch"),
           ("waiting", "sim:pool_requests_waiting", "Requests waiting at the server"),
           ("kv_usage", "sim:pool_kv_cache_usage_perc", "The server's KV cache usage (1 = full)"))
_COUNTERS = (("preemptions", "sim:pool_preemptions", "The server's preemptions"),
             ("prompt_tokens", "sim:pool_prompt_tokens", "Prompt tokens the server processed"),
             ("generation_tokens", "sim:pool_generation_tokens", "Tokens the server sampled (a prefill "
                                                                  "server: one a request)"))


class FleetSeries(Collector):
    def __init__(self, fleet: FleetDriver) -> None:
        self.fleet = fleet

    def collect(self) -> Iterator[Metric]:
        servers = self.fleet.servers()
        labels = ["pool", "server"]
        for key, name, doc in _GAUGES:
            gauge = GaugeMetricFamily(name, doc, labels=labels)
            for label, snap in servers:
                gauge.add_metric([label.rsplit("-", 1)[0], label], float(getattr(snap, key)))
            yield gauge
        for key, name, doc in _COUNTERS:
            counter = CounterMetricFamily(name, doc, labels=labels)
            for label, snap in servers:
                counter.add_metric([label.rsplit("-", 1)[0], label], float(getattr(snap, key)))
            yield counter
        yield GaugeMetricFamily("sim:kv_in_transfer", "Prompts whose KV is on its way to a decode server",
                                value=self.fleet.in_transfer)
        yield CounterMetricFamily("sim:kv_transfers", "Prompts' KV moved from prefill to decode",
                                  value=self.fleet.transfers)
        yield CounterMetricFamily("sim:kv_transfer_seconds", "Seconds the KV transfers added to first tokens",
                                  value=self.fleet.transfer_s)
