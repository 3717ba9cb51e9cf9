"""Where each request of an OpenAI-compatible API goes, from the base URL a user gives (pure string work).

A gateway's query (Azure's `?api-version=…`) belongs to every path under the base, so paths are joined before
it, never glued after it.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from harness.client.dialects import DIALECTS


def _request_paths() -> dict[str, str]:
    """The paths a pasted request URL ends in, and the API each one is: the longest first
    (`…/chat/completions` also ends in `/completions`)."""
    return {f"/{d.path}": d.name for d in sorted(DIALECTS.values(), key=lambda d: -len(d.path))}


def under(base_url: str, path: str) -> str:
    """`path` (e.g. `chat/completions`, `models`) under `base_url`, the base's query kept after it."""
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/" + path.lstrip("/")))


def path_and_query(url: str) -> str:
    """What an HTTP/1.1 request line names: the path and its query."""
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def split_request_url(url: str) -> tuple[str, str] | None:
    """A pasted request URL (`…/v1/chat/completions`, `…/v1/responses`, …) as (base URL, api); None for a
    base."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    for tail, api in _request_paths().items():
        if path.endswith(tail):
            return urlunsplit(parts._replace(path=path.removesuffix(tail))), api
    return None


def join_base_and_path(base_url: str, path: str) -> tuple[str, str]:
    """vLLM's pair, `--base-url http://host:8000 --endpoint /v1/chat/completions`, as (base URL, api);
    ValueError when the path is not one an API of the harness takes requests at."""
    joined = urlsplit(base_url)
    full = urlunsplit(joined._replace(path=joined.path.rstrip("/") + "/" + path.lstrip("/")))
    split = split_request_url(full)
    if split is None:
        raise ValueError(f"{path!r} is not a path the harness sends requests to ({', '.join(_request_paths())})")
    return split
