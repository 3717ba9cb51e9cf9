"""Every bound on outside input, named once: what a file, a flag, a server or a child process may hand the
harness before it is refused or cut (issue 64). Each is far past anything real and far short of what would
exhaust the machine; docs/failures.md's "Limits" table is this module's (`python -m harness.limits` prints it,
a test holds the two equal).

Names end in their unit: _BYTES, _DEPTH, _DIGITS, _CHARS, _S, or the thing counted.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

# Files a user gives
SCENARIO_BYTES = 16 << 20  # a scenario or presets file is kilobytes; a trace goes in its own file
JSON_BYTES = 64 << 20  # a summary of many phases is a few MB; a flag's JSON, bytes
JSON_DEPTH = 200  # request bodies and summaries nest a dozen deep; json's parser recursed past ~60,000
JSON_INT_DIGITS = 40  # past any count, id or size a harness file holds; int() of 10^6 digits takes seconds
DATASET_BYTES = 4 << 30  # ShareGPT's own file is 0.7 GB
TRACE_LINE_CHARS = 1 << 20  # one row of a trace: a Mooncake row's prefix ids for a 128k prompt are ~2 KB
SCRAPE_LINE_CHARS = 64 << 10  # one row of a run's server_metrics.csv: a few dozen numbers
HISTORY_CELL_BYTES = 64 << 20  # one run's blocks in a history DB, inflated; a zlib bomb took 5.3 GB

# What a scenario may plan: arrivals are planned up front (requests: 1e26 was a 745 GiB allocation)
PLANNED_REQUESTS = 10_000_000  # a phase's requests, size × batches or rate × duration_s
TOKENS = 10_000_000  # a prompt or an answer: no context is longer
RATE = 1_000_000  # req/s
SPAN_S = 30 * 86_400  # the furthest arrival a phase plans (rate 1e-300 or a trace row at 1e308 s overflowed)
IMAGE_BYTES = 48 << 20  # raw pixels of a request's images: 4 images of 2,048 × 2,048 RGB
LABELS = 16  # run labels (`--label k=v`) …
LABEL_VALUE_CHARS = 64  # … and each one's value, which becomes a Prometheus label
METADATA = 32  # run metadata (`--metadata k=v`) …
METADATA_VALUE_CHARS = 256

# What a server sends
SSE_LINE_BYTES = 8 << 20  # one stream line: longer is not a chunk, the stream is bad, not our memory
RESPONSE_HEADER_BYTES = 64 << 10  # a real server's response headers are well under a kilobyte (lean client)
ERROR_BODY_BYTES = 8 << 10  # an error answer's body read for its error type; the rest is not read
INFLATED_BYTES = 64 << 20  # a compressed answer inflates to no more (a stream of 100k tokens is ~20 MiB)
WHOLE_ANSWER_BYTES = 64 << 20  # an answer read whole: 64 texts' embeddings of 4,096 floats are ~6 MiB
MODELS_BODY_BYTES = 8 << 20  # a /v1/models answer is kilobytes (a 200 MB one was read whole)
METRICS_BODY_BYTES = 8 << 20  # an engine's /metrics is kilobytes; vLLM's with many LoRAs a few hundred
USAGE_TOKENS = 100_000_000  # a usage count: 100× the longest context served today
SERVER_MESSAGE_CHARS = 500  # the server's error sentence kept per record: enough to read, not a whole page
REASON_CHARS = 200  # a record's reason is a short cause, not a server's whole error page

# What a child process writes
WORKER_LINE_BYTES = 64 << 20  # one record a line from a --workers worker: a long answer's times run to 100s of kB
WORKER_OUT_BYTES = 16 << 20  # a worker's stray output kept in workers/N.out (one that flooded wrote 213 MB)


class Limit(NamedTuple):
    name: str
    bounds: str  # what it bounds
    past: str  # what happens past it


TABLE = [
    Limit("SCENARIO_BYTES", "a scenario or presets YAML file", "exit 2, the file named"),
    Limit("JSON_BYTES", "outside JSON: `--extra-body`, summary.json, a history cell, a JSON-lines trace row",
          "exit 2 naming the flag or file (a trace row: a bad row)"),
    Limit("JSON_DEPTH", "how deep that JSON nests (and a YAML file, as deep as its parser reads)", "the same"),
    Limit("JSON_INT_DIGITS", "an integer in that JSON", "the same"),
    Limit("DATASET_BYTES", "a ShareGPT-style dataset (`--dataset-path`)", "exit 2"),
    Limit("TRACE_LINE_CHARS", "one line of a trace file, after gunzip",
          "a bad row, named (skipped with `--skip-bad-rows`)"),
    Limit("SCRAPE_LINE_CHARS", "one row of a run's server_metrics.csv (read back by `report`, `merge`, `twin`)",
          "the row is left out, as is one that does not read"),
    Limit("HISTORY_CELL_BYTES", "a history DB's stored blocks, inflated", "exit 2 naming the DB and the run"),
    Limit("PLANNED_REQUESTS", "a phase's requests (`requests`, `size × batches`, `rate × duration_s`)",
          "exit 2 naming the field"),
    Limit("TOKENS", "a prompt's or an answer's tokens", "exit 2 naming the field"),
    Limit("RATE", "a phase's arrival rate", "exit 2 naming the field"),
    Limit("SPAN_S", "the furthest arrival a phase plans (rate, duration, trace timestamps)",
          "exit 2 naming the field or trace row"),
    Limit("IMAGE_BYTES", "raw pixels of one request's images (`workload.images`)", "exit 2"),
    Limit("LABELS", "run labels (`--label`)", "exit 2"),
    Limit("LABEL_VALUE_CHARS", "a label's value", "exit 2"),
    Limit("METADATA", "run metadata entries (`--metadata`)", "exit 2"),
    Limit("METADATA_VALUE_CHARS", "a metadata value", "exit 2"),
    Limit("SSE_LINE_BYTES", "one line of a server's stream", "the request is `bad_stream`"),
    Limit("RESPONSE_HEADER_BYTES", "an answer's headers (lean client; aiohttp has its own 8 KiB a line)",
          "the request is `transport_error`"),
    Limit("ERROR_BODY_BYTES", "an error answer's body, read for its error type", "the rest is not read"),
    Limit("INFLATED_BYTES", "a gzip or deflate answer, inflated (both clients)",
          "`transport_error`, \"inflates past 64 MiB\""),
    Limit("WHOLE_ANSWER_BYTES", "an answer read whole (`--no-stream`, embeddings)", "the request is `bad_stream`"),
    Limit("MODELS_BODY_BYTES", "a `/v1/models` answer", "endpoint error, exit 3"),
    Limit("METRICS_BODY_BYTES", "the endpoint's `/metrics`", "scraping stops; the run goes on, said in the summary"),
    Limit("USAGE_TOKENS", "a token count in a server's usage", "the request is `bad_stream`"),
    Limit("SERVER_MESSAGE_CHARS", "a server's error sentence kept in a record", "cut, marked …"),
    Limit("REASON_CHARS", "a record's reason (the cause, with the server's words)", "cut, marked …"),
    Limit("WORKER_LINE_BYTES", "one line from a `--workers` worker", "dropped, a note in workers/N.out"),
    Limit("WORKER_OUT_BYTES", "a worker's stray output kept in workers/N.out", "cut, with a note of how much"),
]


def shown(name: str) -> str:
    """A limit's value as a person reads it, in its unit: 64 MiB, 200 levels, 30 days, 1,000,000 req/s."""
    value: int = globals()[name]
    if name.endswith("_BYTES"):
        for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
            if value >= 1 << shift and value % (1 << shift) == 0:
                return f"{value >> shift:,} {unit}"
        return f"{value:,} bytes"
    if name.endswith("_S"):
        return f"{value // 86_400:,} days" if value % 86_400 == 0 else f"{value:,} s"
    units = {"_DEPTH": "levels", "_DIGITS": "digits", "_CHARS": "characters", "RATE": "req/s", "TOKENS": "tokens",
             "REQUESTS": "requests", "LABELS": "labels",
             "METADATA": "entries"}
    return f"{value:,} {next((u for end, u in units.items() if name.endswith(end)), '')}".rstrip()


def markdown() -> str:
    lines = ["| limit | value | bounds | past it |", "|---|---|---|---|"]
    lines += [f"| `{row.name}` | {shown(row.name)} | {row.bounds} | {row.past} |" for row in TABLE]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
