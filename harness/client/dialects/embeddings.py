"""OpenAI's embeddings (`/v1/embeddings`), as vLLM, TEI and Infinity serve it: texts in, one vector each,
whole.

Nothing streams and nothing is generated: a request's latency is its end to end, its work the prompt tokens it
carries. A request may carry several texts (`load.pack: inputs`: an offline job's batch in one call, the
training-style side of an embeddings comparison); its answer must hold one embedding for each.
"""

from __future__ import annotations

from harness.client.chunk import Chunk, json_object, usage_count
from harness.client.dialects.base import Body, Dialect, StreamReader
from harness.client.typed_events import WholeReader, error_chunk, section
from harness.errors import BadChunk
from harness.workload.requests import RequestSpec


def body(spec: RequestSpec, model: str, continuous_usage: bool) -> Body:
    return {"model": model, "input": list(spec.texts) if spec.texts else spec.prompt, "encoding_format": "float"}


def answer(whole: bytes) -> Chunk:
    obj = json_object(whole, "embeddings answer")
    if "error" in obj:
        return error_chunk(obj["error"])
    data = obj.get("data")
    if not isinstance(data, list) or not all(isinstance(d, dict) and isinstance(d.get("embedding"), list | str)
                                             for d in data):
        raise BadChunk("embeddings answer without a list of embeddings in `data`")
    usage = section(obj, "usage")
    return Chunk(whole=True, inputs=len(data), completion_tokens=0,
                 prompt_tokens=usage_count(usage, "prompt_tokens", whole, "usage"))


def reader(keep_text: bool) -> StreamReader:
    return WholeReader(answer)


DIALECT = Dialect("embeddings", "embeddings", (b"list",), body, reader, end="an answer", packs_batches=True,
                    generates=False, whole=answer)
