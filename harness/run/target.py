"""What a run drives: a given endpoint, asked for its models first, or a bundled simulator started for it."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from harness.client.aio import list_models, open_session
from harness.client.backend import Api, Endpoint
from harness.config.scenario import Scenario
from harness.errors import EndpointError, UsageError
from harness.redact import redactor
from harness.run.simulator import Log, bundled_simulator

_RETRY_S = 0.5
_STARTING = re.compile(r"^cannot reach|answered HTTP 5\d\d")


async def _models(scenario: Scenario, url: str, api_key: str | None, log: Log | None) -> list[str]:
    """The served models; while the endpoint does not answer, asked again until `endpoint.wait_s` has passed."""
    deadline = time.monotonic() + scenario.endpoint.wait_s
    said = False
    async with open_session(1, scenario.client.connect_timeout_s, 30) as session:
        while True:
            try:
                return await list_models(session, url, api_key)
            except EndpointError as exc:
                # Only "not up yet" is waited for: no answer, or a 5xx (503 while loading); a 401 or 404 is final.
                if time.monotonic() + _RETRY_S > deadline or not _STARTING.search(str(exc)):
                    raise
                if not said and log is not None:
                    log(f"waiting up to {scenario.endpoint.wait_s:g} s for {url}: {exc}")
                    said = True
            await asyncio.sleep(_RETRY_S)


@asynccontextmanager
async def target(scenario: Scenario, *, url: str | None, model: str | None, api: Api | None, api_key: str | None,
                 pin: bool = False, log: Log | None = None) -> AsyncIterator[tuple[Endpoint, bool]]:
    """The endpoint to drive and whether it is a bundled simulator, started here when `url` is None and
    stopped on exit; a given URL is asked for its models first, so a wrong one fails before any load.
    `log` takes what the bundled simulator says on its stderr (a live display prints it above itself)."""
    api = api or scenario.endpoint.api
    url = url or scenario.endpoint.url
    model = model or scenario.endpoint.model
    if url is None:
        async with bundled_simulator(scenario.simulator, pin=pin, log=log) as (sim_url, sim_model):
            yield Endpoint(sim_url, model or sim_model, api, None), True
        return
    served = await _models(scenario, url, api_key, log)
    if api_key and any(api_key in m for m in served):  # a server echoing the Authorization header as a model id
        raise EndpointError(f"{url} lists the API key among its model ids: refusing to take or save it; pass --model")
    if model is None:
        if not served:
            raise EndpointError(f"{url} serves no models; pass --model")
        model = served[0]
    elif served and model not in served:
        # Every request would be a 404: say so before sending any.
        message = f"--model: {model!r} is not served by {url}; served: {', '.join(served[:5])}"
        raise UsageError(redactor(api_key)(message))
    yield Endpoint(url, model, api, api_key), False
