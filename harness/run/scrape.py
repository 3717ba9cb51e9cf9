"""Scrapes the endpoint's `/metrics` while a run goes on, into `server_metrics.csv` beside the records.

Scrapes follow absolute deadlines (start + k·interval) and are stamped with the harness's own clock,
so the server's series line up with the requests' timestamps. A scrape that fails is counted by cause
and the next one tried; an endpoint without `/metrics` (or without any series we know) is noted once
and left alone. Nothing here can fail the run.
"""

from __future__ import annotations

import asyncio
import csv
import ssl
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import aiohttp

from harness.clock import NS_PER_S, Clock, cancel_quietly
from harness.limits import METRICS_BODY_BYTES
from harness.stats.schema import ScrapeInfo
from harness.stats.server import COLUMNS, FILENAME, KNOWN, Row, parse_exposition


class ServerScraper:
    def __init__(self, url: str, clock: Clock, interval_s: float, run_dir: Path,
                 headers: Mapping[str, str] | None = None, names: Mapping[str, str] = KNOWN,
                 tls: ssl.SSLContext | None = None) -> None:
        self.url = url
        self.names = names
        self.clock = clock
        self.interval_s = interval_s
        self.path = run_dir / FILENAME
        self.rows: list[Row] = []
        self.failures: Counter[str] = Counter()
        self.unavailable: str | None = None
        self._headers = dict(headers or {})  # the key's and the gateway's: only for the requests' own origin
        self._tls = tls
        self._task: asyncio.Task[None] | None = None
        self._file: IO[str] | None = None
        self._csv: Any = None  # the csv module's writer over _file, once something was scraped

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> ScrapeInfo:
        """Stop scraping (one last scrape first, so the final phase ends with a reading) and say how it
        went."""
        scraping = self._task is not None and not self._task.done() and self.unavailable is None
        await cancel_quietly(self._task)
        if scraping:
            async with self._session() as session:
                await self._scrape(session)
        if self._file is not None:
            self._file.close()
        return ScrapeInfo(url=self.url, interval_s=self.interval_s, scrapes=len(self.rows),
                          failures=dict(self.failures), unavailable=self.unavailable,
                          series=sorted({k for r in self.rows for k in r.values}))

    def _session(self) -> aiohttp.ClientSession:
        timeout = aiohttp.ClientTimeout(total=max(self.interval_s, 1.0))
        return aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(
            limit=1, ssl=self._tls if self._tls is not None else True))

    async def _loop(self) -> None:
        interval_ns = int(self.interval_s * NS_PER_S)
        start = self.clock.now_ns()
        async with self._session() as session:
            k = 0
            while self.unavailable is None:
                await self._scrape(session)
                k += 1
                # Absolute deadlines; a slow scrape skips the slots it overran instead of bunching up after
                # it.
                now = self.clock.now_ns()
                k = max(k, (now - start) // interval_ns + 1)
                await asyncio.sleep((start + k * interval_ns - now) / NS_PER_S)

    async def _scrape(self, session: aiohttp.ClientSession) -> None:
        try:
            async with session.get(self.url, headers=self._headers) as resp:
                raw = await _read_capped(resp, METRICS_BODY_BYTES)
                t_ns = self.clock.now_ns()
                status = resp.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.failures[type(exc).__name__] += 1
            return
        first = not self.rows and not self.failures
        if raw is None:
            # Parsing it would stall the load's event loop for as long as it is big: not ours to read.
            self._fail(f"/metrics over {METRICS_BODY_BYTES >> 20} MiB", give_up=True)
            return
        body = raw.decode("utf-8", errors="replace")
        if status != 200:
            self._fail(f"HTTP {status}", give_up=first or status == 404)
            return
        try:
            values = parse_exposition(body, self.names)
        except ValueError:
            self._fail("unparsable exposition", give_up=first)
            return
        if not values:
            self._fail("no known series", give_up=first)
            return
        self._append(Row(t_ns, values))

    def _fail(self, reason: str, *, give_up: bool) -> None:
        self.failures[reason] += 1
        if give_up:
            self.unavailable = reason

    def _append(self, row: Row) -> None:
        if self._file is None:
            self._file = self.path.open("w", encoding="utf-8", newline="")
            self._csv = csv.writer(self._file)
            self._csv.writerow(["t_ns", *COLUMNS])
        self._csv.writerow([row.t_ns, *(row.values.get(c, "") for c in COLUMNS)])
        self._file.flush()  # a crashed run keeps what was scraped
        self.rows.append(row)


async def _read_capped(resp: aiohttp.ClientResponse, limit: int) -> bytes | None:
    """The body, or None as soon as it passes `limit` (the rest is never read)."""
    body = bytearray()
    async for piece in resp.content.iter_chunked(1 << 16):
        body += piece
        if len(body) > limit:
            return None
    return bytes(body)
