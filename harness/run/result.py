"""What a run leaves its caller: its folder, its summary, its records and the server's series. Apart from
`runner.py` so that the scale-out side (`run/distributed/`), which `runner.py` uses, can return one without
importing the runner back."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.records import RequestRecord
from harness.stats.schema import Summary
from harness.stats.server import Row


@dataclass(frozen=True, slots=True)
class RunResult:
    run_dir: Path
    summary: Summary
    records: list[RequestRecord]
    server_rows: list[Row]
    every: int = 1  # `records` holds 1 record in `every`: the run ended more than client.records_in_memory
