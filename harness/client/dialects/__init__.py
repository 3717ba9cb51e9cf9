"""The APIs the harness speaks, one module each, registered here and nowhere else: the clients, the URLs, the
foreign-answer check, the scenario's `endpoint.api` and the CLI's `--api` all read `DIALECTS`."""

from __future__ import annotations

from harness.client.dialects import chat, completions, embeddings, messages, responses
from harness.client.dialects.base import Dialect
from harness.errors import ScenarioError

DIALECTS: dict[str, Dialect] = {d.name: d for d in (
    chat.DIALECT,
    completions.DIALECT,
    responses.DIALECT,
    messages.DIALECT,
    embeddings.DIALECT,
)}


def dialect(name: str, where: str = "endpoint.api") -> Dialect:
    """The dialect called `name`; a ScenarioError naming `where` (the field or flag that gave it)
    otherwise."""
    found = DIALECTS.get(name)
    if found is None:
        raise ScenarioError(f"{where}: {name[:40]!r} is not an API the harness speaks ({', '.join(DIALECTS)})")
    return found
