"""The backend a scenario's `client:` section asks for."""

from __future__ import annotations

from harness.client.aio import OpenAIBackend, open_session
from harness.client.backend import Endpoint, PooledBackend
from harness.client.h1 import H1Backend
from harness.config.scenario import ClientConfig


def make_backend(endpoint: Endpoint, cfg: ClientConfig, max_connections: int) -> PooledBackend:
    if cfg.http == "h1":
        return H1Backend(endpoint, max_connections, cfg.connect_timeout_s, cfg.request_timeout_s,
                         cfg.first_token_timeout_s, cfg.continuous_usage, cfg.read_window_us / 1e6)
    session = open_session(max_connections, cfg.connect_timeout_s, cfg.request_timeout_s, endpoint.tls())
    return OpenAIBackend(endpoint, session, cfg.first_token_timeout_s, cfg.continuous_usage)
