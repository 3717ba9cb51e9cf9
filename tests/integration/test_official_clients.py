"""The official SDKs read what the bundled simulator answers on each API, streamed and whole: the simulator's
shapes are checked by someone else's parser, not only the harness's own (which could share its mistakes)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import anthropic
import openai
import pytest

from tests.helpers import serving

MODEL = "llama-3.1-8b"


@pytest.fixture(scope="module")
def thinking_sim() -> Iterator[str]:
    """A simulator whose model thinks for 3 tokens before it answers."""
    with serving("sim", "serve", "--host", "127.0.0.1", "--port", "0", "--reasoning-tokens", "3",
                 "--api-key-env", "SIM_KEY", env={"SIM_KEY": "sk-sim-0123", "PATH": "/usr/bin:/bin"}) as url:
        yield url


def test_the_openai_sdk_streams_and_reads_a_response(sim_url: str) -> None:
    client = openai.OpenAI(base_url=sim_url, api_key="unused", max_retries=0)
    with client.responses.stream(model=MODEL, input="one two three", max_output_tokens=5,
                                 extra_body={"ignore_eos": True}) as stream:
        kinds = Counter(event.type for event in stream)
    assert kinds["response.output_text.delta"] == 5 and kinds["response.created"] == 1
    # Stopped at max_output_tokens: incomplete, as OpenAI's API says it, not completed.
    assert kinds["response.incomplete"] == 1 and "response.completed" not in kinds
    whole = client.responses.create(model=MODEL, input=[{"role": "user", "content": "a b c d"}], max_output_tokens=4,
                                    extra_body={"ignore_eos": True})
    assert whole.usage is not None and (whole.usage.input_tokens, whole.usage.output_tokens) == (4, 4)
    assert len(whole.output_text.split()) == 4


def test_a_response_that_ends_by_itself_completes_for_the_sdk(sim_url: str) -> None:
    client = openai.OpenAI(base_url=sim_url, api_key="unused", max_retries=0)
    with client.responses.stream(model=MODEL, input="a short one", max_output_tokens=4000) as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    assert final.status == "completed" and final.usage is not None
    assert len(final.output_text.split()) == final.usage.output_tokens > 0


def test_the_openai_sdk_reads_reasoning_before_the_answer(thinking_sim: str) -> None:
    client = openai.OpenAI(base_url=thinking_sim, api_key="sk-sim-0123", max_retries=0)
    with client.responses.stream(model=MODEL, input="why", max_output_tokens=6,
                                 extra_body={"ignore_eos": True}) as stream:
        kinds = [event.type for event in stream]
    deltas = [k for k in kinds if k.endswith(".delta")]
    assert deltas == ["response.reasoning_text.delta"] * 3 + ["response.output_text.delta"] * 3


def test_the_anthropic_sdk_streams_and_reads_a_message(sim_url: str) -> None:
    client = anthropic.Anthropic(base_url=sim_url.removesuffix("/v1"), api_key="unused", max_retries=0)
    with client.messages.stream(model=MODEL, max_tokens=5, system="be brief",
                                messages=[{"role": "user", "content": "one two three"}],
                                extra_body={"ignore_eos": True}) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert len(text.split()) == 5 and final.stop_reason == "max_tokens"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (5, 5)  # the system prompt counts
    whole = client.messages.create(model=MODEL, max_tokens=3, messages=[{"role": "user", "content": "hi"}],
                                   extra_body={"ignore_eos": True})
    assert whole.usage.output_tokens == 3 and len(whole.content[0].text.split()) == 3  # type: ignore[union-attr]


def test_the_anthropic_sdk_reads_thinking_then_text_with_its_key(thinking_sim: str) -> None:
    client = anthropic.Anthropic(base_url=thinking_sim.removesuffix("/v1"), api_key="sk-sim-0123", max_retries=0)
    with client.messages.stream(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "why"}],
                                extra_body={"ignore_eos": True}) as stream:
        final = stream.get_final_message()
    assert [block.type for block in final.content] == ["thinking", "text"]
    assert len(final.content[1].text.split()) == 2  # type: ignore[union-attr]
    refused = anthropic.Anthropic(base_url=thinking_sim.removesuffix("/v1"), api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        refused.messages.create(model=MODEL, max_tokens=2, messages=[{"role": "user", "content": "x"}])
