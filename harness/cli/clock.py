"""`harness clock`: serve this host's wall clock for shards by hand to measure theirs against
(`--clock-ref`)."""

from __future__ import annotations

import click

from harness.run.distributed.clockref import clock_server


@click.command("clock", epilog="\b\nExamples:\n  harness clock --port 9700\n  harness clock --host 10.0.0.5 "
               "--port 0")
@click.option("--host", default="0.0.0.0", show_default=True, help="The address to listen on.")
@click.option("--port", default=9700, show_default=True, type=click.IntRange(0, 65535),
              help="0 picks a free port; the URL is printed as JSON on the first line of stdout.")
def clock(host: str, port: int) -> None:
    """Serve this host's wall clock for shards by hand (--clock-ref)."""
    try:
        server = clock_server(host, port)
    except OSError as exc:
        raise click.BadParameter(f"cannot listen on {host}:{port}: {exc.strerror}", param_hint="--port") from None
    bound = server.server_address[1]
    click.echo(f'{{"url": "http://{"127.0.0.1" if host == "0.0.0.0" else host}:{bound}/"}}', nl=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
