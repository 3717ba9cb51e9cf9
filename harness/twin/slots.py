"""How many requests an engine decodes at once, measured where it does not say (vLLM's `max_num_seqs` is in no
endpoint): a burst of short requests, its `/metrics` scraped every 50 ms; the most it ever ran, seen running
while others waited, is the engine's limit. A burst no larger than the limit never makes one wait: then
nothing is found."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.client.backend import Endpoint
from harness.config.scenario import parse_scenario
from harness.report.files import write_run
from harness.run.display import Display
from harness.run.runner import run_scenario
from harness.stats.server import Row, read_server_metrics
from harness.voice import Voice

BURST = 64  # requests sent at once; an engine that runs them all is said to run "at least" this many
BURST_PROMPT, BURST_OUTPUT = 16, 24  # short prompts, answers long enough for the scrapes to see the plateau
SCRAPE_S = 0.05


def limit_seen(rows: Sequence[Row]) -> int | None:
    """The most requests the burst ever had running, where a scrape saw that many run while others waited;
    None where none waited at the peak. (An engine that admits the burst over a few steps, its token budget
    full, has requests waiting at fewer running than its limit: the simulator ran 32 of 64 with 32 waiting,
    then all 64.)"""
    running = [(int(r.values["running"]), r.values.get("waiting", 0.0)) for r in rows
               if r.values.get("running") is not None]
    peak = max((n for n, _ in running), default=0)
    return peak if any(n == peak and waiting > 0 for n, waiting in running) and peak > 0 else None


async def burst_slots(endpoint: Endpoint, where: Path, tokenizer: str | None, voice: Voice,
                      burst: int = BURST) -> int | None:
    """Send `burst` requests at once and read the limit off the scrapes; None when none waited."""
    workload: dict[str, object] = {"prompt_tokens": BURST_PROMPT, "output_tokens": BURST_OUTPUT}
    if tokenizer:
        workload["tokenizer"] = tokenizer
    scenario = parse_scenario({"name": "twin-slots", "workload": workload,
                               "endpoint": {"scrape_interval_s": SCRAPE_S},
                               "phases": [{"name": "slots", "load": {"type": "batch", "size": burst, "batches": 1}}]},
                              "sim twin: slots")
    voice.say(f"the endpoint does not say how many requests it decodes at once: {burst} short requests at once, its "
              f"/metrics read every {SCRAPE_S * 1000:.0f} ms …")
    with (where.parent / "runs.log").open("a", encoding="utf-8") as log:
        display = Display(log)
        write_run(await run_scenario(scenario, endpoint, where, display=display), display)
    found = limit_seen(read_server_metrics(where))
    voice.say(f"at most {found} running while others waited" if found else
              f"all {burst} ran at once (or no scrape saw one wait): the engine runs at least {burst}; give --slots")
    return found
