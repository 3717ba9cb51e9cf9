"""What the server counted of each phase's tokens, as cells of the summary table (`harness.report.table`):
prompts counted other than asked, the share served from its cache, thinking beside answer, and what each image
cost."""

from __future__ import annotations

from harness.stats.schema import PhaseSummary


def prompt_off(phase: PhaseSummary) -> str:
    t = phase.tokens
    if not t.prompt_mismatched:
        return "0"
    return f"{t.prompt_diff_mean or 0:+.1f} ({t.prompt_mismatched}/{t.prompt_reported})"


def cached(phase: PhaseSummary) -> str:
    share = phase.tokens.cached_share
    return "-" if share is None else f"{share:.0%}"


def thinking(phase: PhaseSummary) -> str:
    """Mean thinking / answer tokens of the requests that streamed thinking (a reasoning model)."""
    tokens = phase.tokens
    n = tokens.reasoning_reported
    if not n:
        return "-"
    return f"{tokens.reasoning / n:,.0f} / {(tokens.reasoning_output - tokens.reasoning) / n:,.0f}"


def images_cell(p: PhaseSummary) -> str:
    """Images a request, their mean size, and what each cost in the server's prompt count (its count beyond
    the text asked)."""
    t = p.tokens
    each = "-" if t.image_tokens is None else f"{t.image_tokens:,.0f}"
    size = f" ({t.image_bytes / t.images / 1024:,.0f} KB)" if t.images else ""
    return f"{t.images / max(p.requests.ok, 1):.1f}{size} / {each}" if t.images else "-"
