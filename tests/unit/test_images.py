"""Images in prompts: seeded and each request's own, bounded, sent in each API's shape, read back by the
simulator's vision pricing, and reconciled in the phase's token counts."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image
from pydantic import ValidationError

from harness.client.backend import request_body
from harness.config.workload import Images
from harness.records import RequestRecord
from harness.sim.requests import BadRequest
from harness.sim.vision import encoder_seconds, image_sizes, image_tokens
from harness.stats.fold import Prompts
from harness.workload.images import data_urls
from harness.workload.requests import RequestSpec


def _decoded(url: str) -> Image.Image:
    head, _, data = url.partition(",")
    assert head in ("data:image/png;base64", "data:image/jpeg;base64")
    return Image.open(io.BytesIO(base64.b64decode(data)))


def test_each_request_gets_its_own_seeded_images_of_the_size_and_format_asked() -> None:
    asked = Images(count=2, width=320, height=200, format="jpeg")
    first, again, other = data_urls(asked, 7), data_urls(asked, 7), data_urls(asked, 8)
    assert first == again and len(set(first + other)) == 4  # the same seed the same images, no two alike
    image = _decoded(first[1])
    assert (image.format, image.size) == ("JPEG", (320, 200))
    assert _decoded(data_urls(Images(), 1)[0]).format == "PNG"


def test_images_past_the_bound_are_refused_naming_it() -> None:
    with pytest.raises(ValidationError, match="192 MiB of pixels a request, over 48"):
        Images(count=4, width=4096, height=4096)


SPEC = RequestSpec("r", "p", 0, "what is this", 3, 8, False, images=data_urls(Images(count=2, width=64, height=96), 3))


def test_each_api_carries_the_images_after_the_text_in_its_own_shape() -> None:
    chat = request_body(SPEC, "m", "chat")["messages"][-1]["content"]
    assert chat[0] == {"type": "text", "text": "what is this"}
    assert [p["type"] for p in chat[1:]] == ["image_url", "image_url"] and chat[1]["image_url"]["url"] == SPEC.images[0]
    responses = request_body(SPEC, "m", "responses")["input"][-1]["content"]
    assert responses[0] == {"type": "input_text", "text": "what is this"}
    assert responses[2] == {"type": "input_image", "image_url": SPEC.images[1]}
    messages = request_body(SPEC, "m", "messages")["messages"][-1]["content"]
    assert messages[1]["source"]["media_type"] == "image/png"
    assert messages[1]["source"]["data"] == SPEC.images[0].partition(",")[2]


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_the_simulator_reads_each_apis_images_and_prices_them_in_tokens(api: str) -> None:
    assert image_sizes(request_body(SPEC, "m", api)) == [(64, 96), (64, 96)]
    assert image_tokens(64, 96, 28) == 3 * 4 and image_tokens(512, 512, 28) == 361


def test_the_encoder_costs_two_flops_a_parameter_a_patch_at_half_the_peak() -> None:
    # 512 × 512: 361 tokens, 1,444 patches; 0.675 B parameters on 1,000 TFLOP/s at 50%.
    assert encoder_seconds([(512, 512)], 28, 0.675, 1e15) == pytest.approx(2 * 0.675e9 * 1444 / 0.5e15)


@pytest.mark.parametrize(("part", "why"), [
    ({"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}, "must be a base64 data: URL"),
    ({"type": "image_url", "image_url": {"url": "data:image/png;base64,bm90IGFuIGltYWdl"}}, "not a PNG, JPEG"),
    ({"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}, "must be base64"),
])
def test_an_image_the_simulator_cannot_read_is_a_400_naming_why(part: dict[str, object], why: str) -> None:
    with pytest.raises(BadRequest, match=why):
        image_sizes({"messages": [{"role": "user", "content": [part]}]})


def test_the_servers_count_beyond_the_text_is_what_each_image_cost_not_a_mismatch() -> None:
    prompts = Prompts()
    for server_count in (3 + 2 * 361, 3 + 2 * 363):
        prompts.add(RequestRecord("r", "p", 0, 3, 8, 0, prompt_tokens=server_count, completion_tokens=8,
                                  chunk_ns=list(range(8)), images=2))
    prompts.add(RequestRecord("t", "p", 1, 3, 8, 0, prompt_tokens=4, completion_tokens=8, chunk_ns=list(range(8))))
    tokens = prompts.tokens()
    assert tokens.images == 4 and tokens.image_tokens == 362
    assert tokens.prompt_reported == 1 and tokens.prompt_mismatched == 1  # only the text-only request's off-by-one


def test_a_requests_image_bytes_are_the_encoded_images_not_their_base64() -> None:
    assert SPEC.image_bytes == sum(len(base64.b64decode(url.partition(",")[2])) for url in SPEC.images)
