"""The flags that shape every request as a gateway wants it — where it goes (`--endpoint`, vLLM's `--base-url`
+ `--endpoint PATH` pair, a pasted request URL), its headers, its extra body and its TLS — onto the scenario's
endpoint section, so a saved run says what it sent (header values excepted)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import click
from pydantic import ValidationError

from harness.cli.flag_groups import with_group
from harness.client.urls import join_base_and_path, split_request_url
from harness.config.base import first_error
from harness.config.request_shape import Body, check_body, merged, parse_header, resolve
from harness.config.scenario import EndpointConfig, Scenario
from harness.doors import json_value
from harness.redact import without_userinfo
from harness.voice import Voice

F = TypeVar("F", bound=Callable[..., Any])
Headers = tuple[tuple[str, str], ...]
@dataclass(frozen=True)
class RequestFlags:
    """What every request carries beyond the scenario: its headers, extra body, key header, TLS and streaming."""

    headers: tuple[str, ...] = ()
    extra_body: str | None = None
    api_key_header: str | None = None
    ca_bundle: Path | None = None
    insecure: bool = False
    no_stream: bool = False


def request_options(command: F) -> F:
    """`--header`, `--extra-body`, `--api-key-header`, `--ca-bundle`, `--insecure`, `--no-stream`, handed to
    the command as `request: RequestFlags` (for `with_request_flags`)."""
    options = [
        click.option("--header", "headers", multiple=True, metavar="'NAME: VALUE'",
                     help="A header on every request (repeatable), e.g. 'X-Org: acme'; 'NAME: env:VAR' reads the "
                          "value from the environment. Values are never printed or saved."),
        click.option("--extra-body", metavar="JSON",
                     help="JSON object merged into every request's body, e.g. '{\"temperature\": 0, "
                          "\"chat_template_kwargs\": {\"enable_thinking\": false}}'."),
        click.option("--api-key-header", metavar="NAME",
                     help="Send the API key in this header, as the key alone (Azure: api-key). Default: "
                          "Authorization: Bearer KEY."),
        click.option("--ca-bundle", type=click.Path(path_type=Path, dir_okay=False, exists=True),
                     help="https: trust the CAs in this PEM file too (a staging gateway's own CA)."),
        click.option("--insecure", is_flag=True, help="https: check no certificate (warned)."),
        click.option("--no-stream", is_flag=True, help="Ask for each answer whole (stream: false): end-to-end "
                     "latency only, as a client that does not stream sees it."),
    ]
    return with_group(command, "request", RequestFlags, options)


def with_request_flags(scenario: Scenario, flags: RequestFlags, voice: Voice,
                       api: str | None = None) -> tuple[Scenario, Headers]:
    """The scenario with `endpoint_of`'s section."""
    cfg, headers = endpoint_of(scenario, flags, voice, api)
    return scenario.changed(endpoint=cfg), headers


def endpoint_of(scenario: Scenario, flags: RequestFlags, voice: Voice, api: str | None = None,
                given_fields: Mapping[str, object] | None = None) -> tuple[EndpointConfig, Headers]:
    """The scenario's endpoint section with the flags over it (and `api`, when the URL given said which, and
    `given_fields`, what other flags set in it), validated once; and the headers' values to send (resolved
    from the environment where they say `env:`)."""
    try:
        given = [parse_header(text) for text in flags.headers]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--header") from None
    cfg = scenario.endpoint
    update: Body = {"headers": merged(cfg.headers, given), **({"api": api} if api else {}), **(given_fields or {})}
    if flags.extra_body is not None:
        update["extra_body"] = {**cfg.extra_body, **_json_object(flags.extra_body)}
    if flags.api_key_header is not None:
        update["api_key_header"] = flags.api_key_header
    if flags.ca_bundle is not None:
        update["ca_bundle"] = str(flags.ca_bundle.resolve())
    if flags.insecure:
        update["insecure"] = True
    if flags.no_stream:
        update["stream"] = False
    try:
        cfg = cfg.model_validate({**cfg.model_dump(), **update})
    except ValidationError as exc:  # a header name the HTTP framing owns, one given twice: one line, exit 2
        raise click.UsageError(first_error(exc)) from None
    try:
        headers = resolve(cfg.headers, os.environ, "--header" if given else "endpoint.headers")
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if cfg.insecure:
        voice.warn("TLS certificates are not checked (--insecure / endpoint.insecure): use it only against a "
                   "server you trust")
    replaced = sorted({"ignore_eos", "min_tokens"} & set(cfg.extra_body)) if scenario.workload.ignore_eos else []
    if replaced:
        voice.warn(f"the extra body's {' and '.join(replaced)} replace the harness's own, which ask for exactly the "
                   "workload's output tokens: answers may end sooner, and the run measures them as they come")
    return cfg, headers


def _json_object(text: str) -> Body:
    try:
        value = json_value(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--extra-body") from None
    if not isinstance(value, dict):
        raise click.BadParameter("must be a JSON object, e.g. '{\"temperature\": 0}'", param_hint="--extra-body")
    try:
        check_body(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--extra-body") from None
    return value


def endpoint_url(url: str | None, base_url: str | None = None, api: str | None = None
                 ) -> tuple[str | None, str | None]:
    """The OpenAI base URL and the API to drive, from `--endpoint` and `--base-url` as users type them: a base
    URL (`http://host:8000` alone means its `/v1`), vLLM's pair (`--base-url URL --endpoint
    /v1/chat/completions`) or a pasted request URL (`…/v1/chat/completions`: its base taken, said on one
    line)."""
    path = url if url is not None and url.startswith("/") else None
    if path is not None:
        if base_url is None:
            raise click.BadParameter(f"{url} is a path: give the server with --base-url http://host:port too, or "
                                     "the whole URL", param_hint="--endpoint")
        base, from_path = _pair(_checked(base_url, "--base-url"), path)
        click.echo(f"endpoint: {base} ({from_path} API, from --base-url and --endpoint)", err=True)
        return base, _one_api(api, from_path)
    if url is not None and base_url is not None:
        raise click.BadParameter("give the server once: --endpoint URL, or --base-url URL with --endpoint PATH",
                                 param_hint="--base-url")
    url = url if url is not None else base_url
    if url is None:
        return None, api
    url = _checked(url, "--endpoint")
    split = split_request_url(url)
    if split is not None:
        base, from_path = split
        click.echo(f"endpoint: {base} (the base URL of the request URL given; {from_path} API)", err=True)
        return base, _one_api(api, from_path)
    parts = urlsplit(url)
    if parts.path in ("", "/"):
        url = parts._replace(path="/v1").geturl()
        click.echo(f"endpoint: {url} (the OpenAI API lives under /v1)", err=True)
    return url, api


def _pair(base_url: str, path: str) -> tuple[str, str]:
    try:
        return join_base_and_path(base_url, path)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--endpoint") from None


def _one_api(flag: str | None, from_url: str) -> str:
    if flag is not None and flag != from_url:
        raise click.BadParameter(f"{flag}, but the URL given is the {from_url} API's", param_hint="--api")
    return from_url


def _checked(url: str, flag: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise click.BadParameter("must start with http:// or https://", param_hint=flag)
    if (clean := without_userinfo(url)) != url:
        click.echo(f"{flag}: the user:password@ in the URL is dropped (never sent, printed or saved): give the key "
                   "with --api-key-env", err=True)
        url = clean
    return url
