"""Embeddings: texts in, one vector each, whole — a request's body, its answer read, a batch packed into one
request, and the record and the sentence a run of it gets."""

from __future__ import annotations

import json

import pytest

from harness.client.backend import request_body
from harness.client.dialects import embeddings
from harness.client.typed_events import WholeReader
from harness.config.scenario import parse_scenario
from harness.errors import BadChunk
from harness.limits import WHOLE_ANSWER_BYTES
from harness.records import RequestRecord
from harness.run.worker import RecordStamper, close
from harness.workload.plan import BatchPlan, plan_phase


def _answer(n: int, tokens: int = 12) -> bytes:
    return json.dumps({"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [0.1, 0.2]}
                                                  for i in range(n)],
                       "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}).encode()


def _scenario(pack: str) -> object:
    return parse_scenario({"name": "e", "workload": {"prompt_tokens": 16}, "phases": [
        {"name": "b", "load": {"type": "batch", "size": 8, "batches": 3, "pack": pack}}]}, "e")


def test_a_batch_packed_as_inputs_is_one_request_of_its_texts_each_its_own() -> None:
    plan = plan_phase(_scenario("inputs"), 0, "run")  # type: ignore[arg-type]
    assert isinstance(plan, BatchPlan) and [len(b) for b in plan.batches] == [1, 1, 1]
    spec = plan.batches[0][0]
    assert spec.inputs == 8 and len(set(spec.texts)) == 8 and spec.prompt_tokens == 8 * 16
    assert all(len(t.split()) == 16 for t in spec.texts) and spec.batch == 0 and plan.batches[2][0].batch == 2
    body = request_body(spec, "m", "embeddings")
    assert body == {"model": "m", "input": list(spec.texts), "encoding_format": "float"}
    unpacked = plan_phase(_scenario("requests"), 0, "run")  # type: ignore[arg-type]
    assert isinstance(unpacked, BatchPlan) and [len(b) for b in unpacked.batches] == [8, 8, 8]
    assert request_body(unpacked.batches[0][0], "m", "embeddings")["input"] == unpacked.batches[0][0].prompt


def test_an_answer_is_read_whole_however_it_arrives() -> None:
    reader = embeddings.reader(False)
    wire = _answer(3)
    for i in range(0, len(wire), 7):
        assert reader.read(wire[i:i + 7]) == ()
    (chunk,) = reader.finish()
    assert (chunk.whole, chunk.inputs, chunk.prompt_tokens, chunk.completion_tokens) == (True, 3, 12, 0)
    assert reader.first is not None and reader.first.startswith(b'{"object": "list"') and not reader.streams


@pytest.mark.parametrize(("wire", "why"), [
    (b'{"object": "list", "data": [{"embedding": [0.1', "invalid JSON in embeddings answer"),
    (b'{"object": "list", "data": {"embedding": []}}', "without a list of embeddings"),
    (b'[1, 2]', "embeddings answer is not an object"),
    (b'{"data": [{"embedding": [1]}], "usage": {"prompt_tokens": -3}}', "usage.prompt_tokens is not a count"),
])
def test_an_answer_that_is_not_embeddings_is_a_bad_stream(wire: bytes, why: str) -> None:
    reader = embeddings.reader(False)
    reader.read(wire)
    with pytest.raises(BadChunk, match=why):
        reader.finish()


def test_an_error_in_a_200_answer_keeps_the_servers_words_and_a_huge_one_is_refused() -> None:
    (chunk,) = embeddings.answer(b'{"error": {"message": "model is loading"}}'),
    assert chunk.error == "model is loading"
    reader = WholeReader(embeddings.answer)
    reader.read(b"x" * WHOLE_ANSWER_BYTES)
    with pytest.raises(BadChunk, match="answer longer than 64 MiB"):
        reader.read(b"x")


class _Ticks:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 0

    def now_ns(self) -> int:
        return self.now


def _stamped(inputs: int, answer: bytes) -> RequestRecord:
    clock = _Ticks()
    rec = RequestRecord("r", "p", 0, 16, 128, 0, inputs=inputs)
    events = RecordStamper(rec, clock)  # type: ignore[arg-type]
    events.sent()
    clock.now += 40_000_000
    reader = embeddings.reader(False)
    reader.read(answer)
    assert events.chunks(reader.finish()) is True
    close(rec, clock.now_ns())
    return rec


def test_a_whole_answer_is_timed_end_to_end_and_asked_for_no_tokens() -> None:
    rec = _stamped(3, _answer(3))
    assert rec.status == "ok" and rec.max_tokens == 0 and rec.first_token_ns is None
    assert rec.last_token_ns is not None and rec.sent_ns is not None and rec.last_token_ns - rec.sent_ns == 40_000_000
    assert rec.prompt_tokens == 12 and rec.completion_tokens == 0 and rec.prompt_taken_ns == rec.end_ns


def test_fewer_embeddings_than_texts_sent_is_a_bad_answer() -> None:
    rec = _stamped(4, _answer(3))
    assert (rec.status, rec.reason) == ("bad_stream", "3 results for the 4 inputs sent")
