"""Whose answer is this? The checks that tell a request's own answer from one left on its connection.

A server (or a proxy before it) that writes an answer nobody asked for on a kept-alive connection — a replay,
a retried upstream, the tail of an earlier exchange — has it read as the next request's answer on that
connection: a TTFT of the gap between them and an `ok` for an answer the request never got. The signs that
give such an answer away are used only where an honest server cannot show them:

- the server echoed X-Request-Id, and it is the previous request's on the connection (a server that writes its own
  request ids, as OpenAI's API does, never echoes ours by chance);
- the stream's id is the previous answer's on the connection, the id is long enough to be unique (Ollama's are a
  few digits) and this server has not been seen giving one id to answers on two connections (a server with one
  fixed id gives itself away on the second connection and the rule is off for the rest of the run);
- the answer is another API's: its `object` is one another dialect's answers carry (`text_completion` to a chat
  request, `chat.completion` to a completions or Responses request, `response` to a chat request), never its
  own's (`harness.client.dialects`).

Pure: the clients hand it the first payload of a stream and the echoed header; it keeps the ids it has seen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.client.dialects import DIALECTS, dialect
from harness.redact import printable

MIN_UNIQUE_ID = 16  # shorter ids may repeat by chance (Ollama: chatcmpl-123)
REMEMBERED = 4096  # answers' ids kept to tell a server that reuses one id
_ID = re.compile(rb'"id"\s*:\s*"([^"\\]{%d,256})"' % MIN_UNIQUE_ID)
_OBJECT = re.compile(rb'"object"\s*:\s*"([^"\\]{1,64})"')


@dataclass(frozen=True, slots=True)
class Answered:
    """The last answer a connection carried: whose it was, and the id its stream gave."""

    request_id: str
    stream_id: bytes | None


def stream_id(payload: bytes) -> bytes | None:
    """The payload's id, when it is long enough to be unique."""
    found = _ID.search(payload)
    return found.group(1) if found else None


def wrong_api(api: str, payload: bytes) -> str | None:
    """Why the payload answers another API, or None."""
    found = _OBJECT.search(payload)
    if found is None or found.group(1).startswith(dialect(api).objects or (b"\x00",)):
        return None
    other = next((d.name for d in DIALECTS.values() if d.objects and found.group(1).startswith(d.objects)), None)
    if other is None:
        return None
    return f"a {other} answer (object {found.group(1).decode('latin-1')}) to a {api} request"


class Provenance:
    """One client's memory of the answers its connections carried (`connection`: any number naming one)."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.ids_repeat = False  # the server gave one id to answers on two connections: the id rule is off
        self._where: dict[bytes, int] = {}

    def stale_echo(self, request_id: str, last: Answered | None, echoed: str | None) -> str | None:
        """Why the answer's echoed X-Request-Id shows it is the previous request's, or None."""
        if last is None or not echoed or echoed == request_id or echoed != last.request_id:
            return None
        said = printable(echoed, one_line=True)[:80]
        return f"stale answer: it echoes X-Request-Id {said}, the previous request's on this kept-alive connection"

    def foreign(self, request_id: str, last: Answered | None, first: bytes, echoed: str | None) -> str | None:
        """Why the stream whose first payload is `first` is not this request's answer, or None."""
        if (wrong := wrong_api(self.api, first)) is not None:
            return f"foreign answer: {wrong}"
        if echoed == request_id or last is None or last.stream_id is None or self.ids_repeat:
            return None
        if stream_id(first) != last.stream_id:
            return None
        said = printable(last.stream_id.decode("latin-1"), one_line=True)[:80]
        return f"stale answer: its id {said} is the previous answer's on this kept-alive connection"

    def answered(self, connection: int, request_id: str, first: bytes | None) -> Answered:
        """Note a request's own answer on `connection`; returns what the connection's next answer is checked
        against."""
        sid = stream_id(first) if first is not None else None
        if sid is not None:
            seen = self._where.pop(sid, None)
            if seen is not None and seen != connection:
                self.ids_repeat = True
            self._where[sid] = connection
            if len(self._where) > REMEMBERED:
                del self._where[next(iter(self._where))]
        return Answered(request_id, sid)
