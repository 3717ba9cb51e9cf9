"""What a gateway in front of an engine asks and keeps, for testing clients against one: headers every request
must carry (a tenant, Azure's `api-key`), and a log of the body fields each request was sent beyond its prompt
(sampling, an engine's own options), so a test can see what reached the server."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# The prompt is the workload's, and large: the log keeps everything else.
_NOT_LOGGED = ("messages", "prompt")


class Gate:
    def __init__(self, required: Mapping[str, str] | None = None, fields_log: Path | None = None) -> None:
        self.required = {name.lower(): value for name, value in (required or {}).items()}
        self.fields_log = fields_log

    def admits(self, headers: Mapping[str, str]) -> bool:
        """Every required header present with its value (names compared without case, as HTTP does)."""
        return all(headers.get(name) == value for name, value in self.required.items())

    def note(self, body: Any) -> None:
        """One JSON line of the request's fields beyond its prompt, when a log was asked for."""
        if self.fields_log is None or not isinstance(body, dict):
            return
        kept = {k: v for k, v in body.items() if k not in _NOT_LOGGED}
        with self.fields_log.open("a", encoding="utf-8") as log:
            log.write(json.dumps(kept, sort_keys=True) + "\n")
