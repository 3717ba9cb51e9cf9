"""The harness's own secret kept out of everything it writes or prints, wherever a server echoes it back."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

MARK = "[REDACTED]"
_REASON_LIMIT = 200  # a record's reason is a short cause, not a server's whole error page
MESSAGE_LIMIT = 500  # the server's own error sentence, kept per record: enough to read, not a whole page


def redactor(*secrets: str | None) -> Callable[[str], str]:
    """A function that blanks every secret (the API key, a gateway's header values) out of a text (the identity
    when there is none). Longest first, so a secret holding another is blanked whole."""
    kept = sorted({s for s in secrets if s}, key=len, reverse=True)
    if not kept:
        return _same

    def redact(text: str) -> str:
        for secret in kept:
            if secret in text:
                text = text.replace(secret, MARK)
        return text

    return redact


def without_userinfo(url: str) -> str:
    """`url` without the `user:password@` of its authority: credentials there are never sent (the key goes as a
    bearer token), printed or saved."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _same(text: str) -> str:
    return text


def short_reason(text: str, redact: Callable[[str], str], limit: int = _REASON_LIMIT) -> str:
    """Redact first, then shorten: cutting first could leave half a key behind."""
    text = redact(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"
