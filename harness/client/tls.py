"""TLS for https endpoints: the system's trust, a given CA bundle (a staging gateway's own CA), or none at all
when asked (`--insecure`, warned), the same for every request the harness makes; and a TLS failure named as
one."""

from __future__ import annotations

import functools
import ssl

# What the far end of a plain-HTTP connection says when it speaks TLS, and the reverse: the usual signs of a
# scheme that does not match the server.
_MISMATCH = ("WRONG_VERSION_NUMBER", "wrong version number", "ServerDisconnected", "BadStatusLine",
             "record layer failure", "packet length too long", "http request")


@functools.lru_cache(maxsize=4)
def client_tls(ca_bundle: str | None = None, insecure: bool = False) -> ssl.SSLContext:
    """The context every https connection of a run uses, made once (a bundle is read once, not per client);
    OSError/ssl.SSLError for an unreadable bundle."""
    context = ssl.create_default_context(cafile=ca_bundle)
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def tls_hint(url: str, error: str) -> str:
    """A clause naming TLS when a connection error looks like one ('' when it does not)."""
    https = url.startswith("https://")
    if "CERTIFICATE_VERIFY_FAILED" in error or "certificate verify failed" in error:
        if "has expired" in error or "not yet valid" in error:
            return ("; TLS: the server's certificate has expired, or is not valid yet (renew it, or check this "
                    "machine's clock; --insecure skips the check)")
        if "mismatch" in error:  # OpenSSL: "Hostname mismatch" / "IP address mismatch"
            return ("; TLS: the server's certificate is not for the host in the URL (use the name it was issued to; "
                    "--insecure skips the check)")
        return ("; TLS: the server's certificate is not trusted (--ca-bundle FILE with its CA, or --insecure to "
                "skip the check)")
    if any(sign in error for sign in _MISMATCH) or (https and "SSL" in error):
        other = "http://" if https else "https://"
        return f"; TLS: the server may not speak {'TLS' if https else 'plain HTTP'} here (try {other})"
    return ""
