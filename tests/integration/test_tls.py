"""https endpoints as staging gateways serve them: a certificate from the gateway's own CA is refused with TLS
named, trusted with --ca-bundle, skipped (warned) with --insecure; and a scheme that does not match the server
is named as TLS, not left as a bare disconnect. The simulator behind TLS on loopback; the CLI as users run it."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.config.simulator import SimulatorConfig
from harness.sim.server import SimServer
from tests.helpers import ROOT, served_on_a_thread

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command for a cert")


def _certificate(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.fixture(scope="module")
def tls_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The simulator on https://127.0.0.1:PORT/v1 with a self-signed certificate, and that certificate."""
    cert, key = _certificate(tmp_path_factory.mktemp("tls"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    with served_on_a_thread(SimServer(SimulatorConfig(timing="fixed", fixed_ttft_ms=5, fixed_itl_ms=2)).app(),
                            context) as port:
        yield f"https://127.0.0.1:{port}/v1", cert


def _run(url: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "run", "--endpoint", url, "--rate", "20", "--requests",
                           "4", "--output-tokens", "4", "--progress", "off", "--reports-dir", str(tmp), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_an_untrusted_certificate_is_named_and_a_ca_bundle_trusts_it(tls_sim: tuple[str, Path],
                                                                      tmp_path: Path) -> None:
    url, cert = tls_sim
    refused = _run(url, tmp_path / "refused")
    assert refused.returncode == 3, refused.stderr
    assert "TLS" in refused.stderr and "--ca-bundle" in refused.stderr
    trusted = _run(url, tmp_path / "trusted", "--ca-bundle", str(cert))
    assert trusted.returncode == 0, trusted.stderr
    assert " 4 / 0 / 0" in trusted.stdout


def test_insecure_skips_the_check_and_says_so(tls_sim: tuple[str, Path], tmp_path: Path) -> None:
    done = _run(tls_sim[0], tmp_path, "--insecure")
    assert done.returncode == 0, done.stderr
    assert "TLS certificates are not checked" in done.stderr and " 4 / 0 / 0" in done.stdout
    # Issue 64: and the run keeps it — summary.json, the table's notes, the report's header
    (run,) = [p for p in tmp_path.iterdir() if (p / "summary.json").is_file()]
    assert json.loads((run / "summary.json").read_text())["run"]["endpoint"]["insecure"] is True
    assert "TLS certificates were not checked (--insecure)" in (run / "table.txt").read_text()
    assert "TLS not checked (--insecure)" in (run / "report.html").read_text()
    checked = _run(tls_sim[0], tmp_path / "checked", "--ca-bundle", str(tls_sim[1]))
    (kept,) = [p for p in (tmp_path / "checked").iterdir() if (p / "summary.json").is_file()]
    assert checked.returncode == 0 and json.loads((kept / "summary.json").read_text())["run"]["endpoint"][
        "insecure"] is False


def test_plain_http_to_a_tls_server_is_named_as_tls(tls_sim: tuple[str, Path], tmp_path: Path) -> None:
    done = _run(tls_sim[0].replace("https://", "http://"), tmp_path)
    assert done.returncode == 3, done.stderr
    assert "TLS" in done.stderr and "try https://" in done.stderr


def test_https_to_a_plain_server_is_named_as_tls(sim_url: str, tmp_path: Path) -> None:
    """Round four's partial case: `https://` to a server that speaks plain HTTP says so, exit 3."""
    done = _run(sim_url.replace("http://", "https://"), tmp_path)
    assert done.returncode == 3, done.stderr
    assert "TLS" in done.stderr and "try http://" in done.stderr and "Traceback" not in done.stderr
