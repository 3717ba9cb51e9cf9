"""What a run drives: a given endpoint, asked for its models first, or a bundled simulator started for it."""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from harness.client.aio import list_models, open_session
from harness.client.backend import Endpoint
from harness.client.dialects import DIALECTS, dialect
from harness.config.scenario import Scenario
from harness.config.workload import Length, LengthDist, Workload
from harness.errors import EndpointError, ScenarioError, UsageError
from harness.redact import redactor
from harness.run.simulator import bundled_simulator
from harness.voice import Voice

_RETRY_S = 0.5
_STARTING = re.compile(r"^cannot reach|answered HTTP 5\d\d")


async def _models(scenario: Scenario, reach: Endpoint, voice: Voice | None, contexts: dict[str, int]) -> list[str]:
    """The served models (their context lengths into `contexts`, where said); while the endpoint does not
    answer, asked again until `endpoint.wait_s` has passed."""
    deadline = time.monotonic() + scenario.endpoint.wait_s
    said = False
    url = reach.base_url
    async with open_session(1, scenario.client.connect_timeout_s, 30, reach.tls()) as session:
        while True:
            try:
                return await list_models(session, url, reach.request_headers, reach.secrets, contexts)
            except EndpointError as exc:
                # Only "not up yet" is waited for: no answer, or a 5xx (503 while loading); a 401 or 404 is
                # final.
                if time.monotonic() + _RETRY_S > deadline or not _STARTING.search(str(exc)):
                    raise
                if not said and voice is not None:
                    voice.warn(f"waiting up to {scenario.endpoint.wait_s:g} s for {url}: {exc}")
                    said = True
            await asyncio.sleep(_RETRY_S)


@asynccontextmanager
async def target(scenario: Scenario, *, url: str | None, model: str | None, api: str | None, api_key: str | None,
                 headers: tuple[tuple[str, str], ...] = (), pin: bool = False, voice: Voice | None = None
                 ) -> AsyncIterator[tuple[Endpoint, bool]]:
    """The endpoint to drive and whether it is a bundled simulator, started here when `url` is None and
    stopped on exit; a given URL is asked for its models first, so a wrong one fails before any load.
    `headers`: the gateway's, resolved (`harness.config.request_shape.resolve`); the scenario's endpoint
    section gives the rest of every request's shape (key header, sampling and extra body, TLS). `voice` warns
    of a slow start and an over-long workload and takes what the bundled simulator says on its stderr (a live
    display prints it above itself); without one, the simulator writes to the terminal itself."""
    cfg = scenario.endpoint
    spoken_for(scenario, api)
    api = api or cfg.api
    url = url or cfg.url
    model = model or cfg.model

    def endpoint(base_url: str, served_model: str, key: str | None) -> Endpoint:
        return Endpoint(base_url, served_model, api, key, headers, cfg.api_key_header, cfg.body_fields,
                        cfg.ca_bundle, cfg.insecure, cfg.stream)

    if url is None:
        async with bundled_simulator(scenario.simulator, pin=pin, voice=voice) as (sim_url, sim_model):
            yield endpoint(sim_url, model or sim_model, None), True
        return
    try:
        reach = endpoint(url, model or "", api_key)
        reach.tls()  # an unreadable CA bundle, said before anything is sent
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"endpoint.ca_bundle {cfg.ca_bundle}: cannot use it: {exc}") from None
    contexts: dict[str, int] = {}
    served = await _models(scenario, reach, voice, contexts)
    if any(secret in m for secret in reach.secrets for m in served):  # a server echoing a header as a model id
        raise EndpointError(f"{url} lists the API key or a header's value among its model ids: refusing to take or "
                            "save it; pass --model")
    if model is None:
        if not served:
            raise EndpointError(f"{url} serves no models; pass --model")
        model = served[0]
    elif served and model not in served:
        # Every request would be a 404: say so before sending any.
        message = f"--model: {model!r} is not served by {url}; served: {', '.join(served[:5])}"
        raise UsageError(redactor(*reach.secrets)(message))
    if model in contexts:
        fits(scenario.workload, model, contexts[model], voice)
    yield endpoint(url, model, api_key), False


def spoken_for(scenario: Scenario, api: str | None) -> None:
    """Refuse, before anything starts, an API the harness does not speak (`api`: the flag's, else the
    scenario's), images to an API that takes none, and a whole answer from one read streamed only."""
    spoken = dialect(api or scenario.endpoint.api, "--api" if api else "endpoint.api")
    if scenario.workload.images is not None and not spoken.takes_images:
        takers = ", ".join(d.name for d in DIALECTS.values() if d.takes_images)
        raise ScenarioError(f"workload.images: the {spoken.name} API takes no images ({takers} do)")
    if not scenario.endpoint.stream and spoken.whole is None and spoken.generates:
        raise ScenarioError(f"endpoint.stream: false: the {spoken.name} API is read streamed only")


def fits(workload: Workload, model: str, context: int, voice: Voice | None) -> None:
    """A workload whose every request passes the model's context is refused before any is sent (each would be
    an error, or cut short); one whose longest requests may, is warned of."""
    if workload.dataset is not None:  # a dataset's prompts are its own
        return
    prompt, answer = workload.prompt_tokens, workload.output_tokens
    if low(prompt) + low(answer) > context:
        raise UsageError(f"workload: every request asks for at least {low(answer):,} tokens after a prompt of at "
                         f"least {low(prompt):,}, past {model}'s context of {context:,} (its model list says): lower "
                         "workload.output_tokens or prompt_tokens")
    most = [high(prompt), high(answer)]
    if voice is not None and None not in most and sum(n for n in most if n is not None) > context:
        voice.warn(f"workload: requests of up to {most[0]:,} prompt and {most[1]:,} answer tokens pass {model}'s "
                   f"context of {context:,}: the server refuses or cuts the longest (HTTP 400, or truncated 'context "
                   "full')")


def low(length: Length) -> int:
    """The fewest tokens a length can draw."""
    return length if isinstance(length, int) else _fixed(length) or length.min


def high(length: Length) -> int | None:
    """The most tokens a length can draw (None: unbounded, or a file's)."""
    return length if isinstance(length, int) else _fixed(length) or length.max


def _fixed(length: LengthDist) -> int | None:
    if length.dist != "fixed" or length.value is None:
        return None
    return min(max(length.value, length.min), length.max or length.value)
