"""The harness's own secret kept out of everything it writes or prints, wherever a server echoes it back."""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

from harness.limits import REASON_CHARS

MARK = "[REDACTED]"


def redactor(*secrets: str | None) -> Callable[[str], str]:
    """A function that blanks every secret (the API key, a gateway's header values) out of a text (the
    identity when there is none). Longest first, so a secret holding another is blanked whole."""
    kept = sorted({s for s in secrets if s}, key=len, reverse=True)
    if not kept:
        return _same

    def redact(text: str) -> str:
        for secret in kept:
            if secret in text:
                text = text.replace(secret, MARK)
        return text

    return redact


_VARIABLE = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")


def variable_shown(name: str) -> str:
    """An environment variable's name as a message may print it: a conventional name (OPENAI_API_KEY) as it
    is; anything else may be a token pasted where the name belongs (hf_…, ghp_…, sk-…), so only its first
    three characters: `hf_…[hidden]`. The one helper every flag that names a variable goes through."""
    return name if _VARIABLE.fullmatch(name) else f"{name[:3]}…[hidden]"


def without_userinfo(url: str) -> str:
    """`url` without the `user:password@` of its authority: credentials there are never sent (the key goes as
    a bearer token), printed or saved."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_OR_NEWLINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str, one_line: bool = False) -> str:
    """Control characters escaped (`\\x1b`): a server's words (an error message, a model id) cannot retitle,
    clear or overwrite the user's terminal. `one_line`: newlines too, so a server cannot forge a line of the
    harness's."""
    pattern = _CONTROL_OR_NEWLINE if one_line else _CONTROL
    return pattern.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}",
                       text)


def _same(text: str) -> str:
    return text


def short_reason(text: str, redact: Callable[[str], str], limit: int = REASON_CHARS) -> str:
    """Redact first, then shorten: cutting first could leave half a key behind."""
    text = redact(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"
