"""The relay's messages as types: what a worker (`relay.py`) and its parent (`hub.py`) say to each
other, encoded and decoded here alone.

On the wire each is one JSON object a line behind an ASCII record separator (the worker's other output has
none), its kind under "k" — the same bytes as before these were classes, so a worker and a parent of either
side of the change still understand each other:

    worker → parent                                          parent → worker
    PhaseBegun   {"k": "phase", "name", "anchor", "sent"}    ClockAnswer {"k": "clock", "n", "t1"}
    RecordEnded  {"k": "rec", "rec", "sent"}                 Go          {"k": "go", "name", "batch"}
    AtBarrier    {"k": "at", "name", "batch", "sent"}
    Beat         {"k": "beat", "sent"}
    ClockAsk     {"k": "clock", "n", "sent"}

`sent` is the shard's count of requests sent in its current phase; `batch` −1 is the barrier before a phase's
first send; an anchor is the worker's clock against wall time; `t1` the parent's wall clock, ns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

MARK = b"\x1e"  # ASCII record separator: a relay line, not the worker's own output


@dataclass(frozen=True, slots=True)
class PhaseBegun:
    name: str
    anchor: dict[str, int] | None = None  # {"monotonic_ns", "wall_ns"}: lets a dead shard still be merged
    sent: int = 0


@dataclass(frozen=True, slots=True)
class RecordEnded:
    rec: dict[str, Any]  # the record, as requests.jsonl has it
    sent: int = 0


@dataclass(frozen=True, slots=True)
class AtBarrier:
    name: str
    batch: int  # the shard's share of batches 0…batch−1 has ended (−1: ready to begin the phase)
    sent: int = 0


@dataclass(frozen=True, slots=True)
class Beat:
    sent: int = 0


@dataclass(frozen=True, slots=True)
class ClockAsk:
    n: int  # the round
    sent: int = 0


@dataclass(frozen=True, slots=True)
class ClockAnswer:
    n: int
    t1: int  # the parent's wall clock when it answered, ns


@dataclass(frozen=True, slots=True)
class Go:
    name: str
    batch: int


Message = PhaseBegun | RecordEnded | AtBarrier | Beat | ClockAsk | ClockAnswer | Go


def _fields(message: Message) -> dict[str, Any]:
    match message:
        case PhaseBegun(name, anchor, sent):
            return {"k": "phase", "name": name, **({"anchor": anchor} if anchor is not None else {}), "sent": sent}
        case RecordEnded(rec, sent):
            return {"k": "rec", "rec": rec, "sent": sent}
        case AtBarrier(name, batch, sent):
            return {"k": "at", "name": name, "batch": batch, "sent": sent}
        case Beat(sent):
            return {"k": "beat", "sent": sent}
        case ClockAsk(n, sent):
            return {"k": "clock", "n": n, "sent": sent}
        case ClockAnswer(n, t1):
            return {"k": "clock", "n": n, "t1": t1}
        case Go(name, batch):
            return {"k": "go", "name": name, "batch": batch}


def encode(message: Message) -> bytes:
    return MARK + orjson.dumps(_fields(message)) + b"\n"


def decode(line: bytes) -> Message | None:
    """The message on a relay line; None for any other output of the worker, or a kind this side does not
    know. A relay line cut or garbled (a worker killed mid-write) is a ValueError, never another exception."""
    if not line.startswith(MARK):
        return None
    try:
        return _message(orjson.loads(line[len(MARK):]))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # orjson's JSONDecodeError is a ValueError
        raise ValueError(f"a relay line cut or garbled ({type(exc).__name__})") from None


def _message(m: dict[str, Any]) -> Message | None:
    sent = int(m.get("sent", 0))
    match m.get("k"):
        case "phase":
            return PhaseBegun(str(m["name"]), m.get("anchor"), sent)
        case "rec":
            return RecordEnded(m["rec"], sent)
        case "at":
            return AtBarrier(str(m["name"]), int(m["batch"]), sent)
        case "beat":
            return Beat(sent)
        case "clock":
            return ClockAnswer(int(m["n"]), int(m["t1"])) if "t1" in m else ClockAsk(int(m["n"]), sent)
        case "go":
            return Go(str(m["name"]), int(m["batch"]))
    return None
