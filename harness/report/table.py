"""The side-by-side summary table: one column per phase, rows grouped by what they measure.

Built with rich; `render_table` gives the plain text (goldens, the HTML report, pipes) at the table's
natural width, so a long comparison never wraps; `print_table` colours it on a terminal.
"""

from __future__ import annotations

import io
from collections.abc import Callable

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness.config.metric_registry import (
    GOODPUT,
    LATENCIES,
    REGISTRY,
    SLO_LATENCIES,
    TEXTS_PER_S,
    Latency,
    Metric,
    having,
    of,
)
from harness.report.threshold_lines import threshold_lines
from harness.report.token_cells import cached, images_cell, prompt_off, thinking
from harness.stats.conclusion import decided_by, phase_sentence, pooled, thought
from harness.stats.schema import PhaseSummary, ServerPhase, Stress, Summary
from harness.stats.schema.sweeps import KNEE_GOODPUT, SweepResult
from harness.stats.thresholds import observed

Cell = Callable[[PhaseSummary], str | Text]
TableRow = tuple[str, Cell | None]  # no cell: a heading over the rows below it


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


UNTRUSTED = "*"  # beside a figure the harness's own lateness could have moved by more than client.max_shift


def _mark(phase: PhaseSummary, metric: str, text: str) -> str:
    return text + UNTRUSTED if phase.client_limited_metrics and phase.untrusted(metric) else text


def _latency_row(latency: Latency) -> TableRow:
    shown = [of(latency, q).name for q in ("p50", "p90", "p99")]

    def cell(phase: PhaseSummary) -> str:
        return " / ".join(_mark(phase, name, _ms(observed(name, phase))) for name in shown)
    return (f"  {LATENCIES[latency].label}", cell)


def _rate_row(entry: Metric) -> TableRow:
    return (entry.label, lambda p: _mark(p, entry.name, format(observed(entry.name, p) or 0.0, entry.fmt)))


def _outcomes(phase: PhaseSummary) -> Text:
    split = phase.latency_by_status_ms
    errored, cancelled = split.errored.count, split.cancelled.count
    return Text(f"{split.ok.count} / {errored} / {cancelled}", style="bold red" if errored else "")


def _load(phase: PhaseSummary) -> str:
    load = phase.load
    return " / ".join("-" if v is None else f"{v:.2f}" for v in (load.target_rps, load.sent_rps, load.completed_rps))


def _batch_time(phase: PhaseSummary) -> str:
    batches = phase.batches
    if not batches:
        return "-"
    d = batches.batch_time_ms
    return f"{_ms(d.p50)} / {_ms(d.max)} ({batches.count})"


def _goodput(phase: PhaseSummary) -> str:
    g = phase.goodput
    return _mark(phase, GOODPUT[0], f"{g.requests_per_s:.2f} ({g.fraction:.0%})")


TURNS_SHOWN = 5


def _by_turn(phase: PhaseSummary) -> str:
    """TTFT p50 of each turn of a multi-turn phase: later turns carry the history, so their prompts are
    longer."""
    sessions = phase.sessions
    if sessions is None:
        return "-"
    cells = [f"{int(k) + 1}: {_ms(d.p50)}" for k, d in sorted(sessions.ttft_by_turn_ms.items(), key=lambda kv:
                                                               int(kv[0]))]
    more = f" … ({len(cells)} turns)" if len(cells) > TURNS_SHOWN else ""
    return " · ".join(cells[:TURNS_SHOWN]) + more


def _failures(phase: PhaseSummary) -> str:
    reasons = sorted(phase.requests.failure_reasons.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{cause} ×{n}" for cause, n in reasons[:2]) or "-"




def _slo_rows(phases: list[PhaseSummary]) -> list[TableRow]:
    """One row per SLO the scenario set: each phase's p99 of that metric, ✓ within the limit, ✗ over it."""
    rows: list[TableRow] = []
    for key, latency in SLO_LATENCIES:
        limit = getattr(phases[0].goodput.slo, key) if phases else None
        if limit is None:
            continue

        def cell(phase: PhaseSummary, metric: str = of(latency, "p99").name, limit: float = limit) -> Text:
            p99 = observed(metric, phase)
            if p99 is None:
                return Text("-")
            ok = p99 <= limit
            return Text(f"{_ms(p99)} {'✓' if ok else '✗'}", style="green" if ok else "bold red")

        # On a reasoning stream TTFT's first token is a thinking one: the row says so (ttft_answer judges
        # answers).
        which = " (thinking)" if latency is Latency.TTFT and any(thought(p) for p in phases) else ""
        rows.append((f"  {LATENCIES[latency].label}{which} p99 ≤ {limit:g} ms", cell))
    return rows


def _limited(phase: PhaseSummary) -> Text:
    if not phase.client_limited:
        return Text("no", style="green")
    marked = phase.client_limited_metrics
    return Text(f"YES, rows with {UNTRUSTED}" if marked else "YES, every row", style="bold red")


def _cap(phase: PhaseSummary) -> str:
    cap = phase.config.get("max_in_flight")
    return "-" if cap is None else f"{cap}"


def _held(phase: PhaseSummary) -> bool:
    return phase.config.get("max_in_flight") is not None


SECTIONS: list[list[TableRow]] = [
    [
        ("requests", None),
        ("  ok / errored / cancelled", _outcomes),
        ("  failures, top causes", _failures),
        ("  target / sent / done per s", _load),
    ],
    [
        ("latency p50 / p90 / p99 ms", None),
        *(_latency_row(latency) for latency, info in LATENCIES.items() if info.row),
        ("batch time p50 / max ms (n)", _batch_time),
    ],
    [
        *(_rate_row(entry) for entry in having("row")),
        ("goodput req/s (share)", _goodput),
    ],
    [
        ("in-flight cap", _cap),
        ("schedule lag p99 ms", lambda p: _ms(p.latency_ms.schedule_lag.p99)),
        ("client limited", _limited),
    ],
]


def _server_cell(fmt: Callable[[ServerPhase], str]) -> Cell:
    def cell(phase: PhaseSummary) -> str:
        server = phase.server
        try:
            return fmt(server) if server else "-"
        except TypeError:  # a series the server does not export, or too few scrapes for a rate
            return "-"
    return cell


# Shown only when some phase has something to say: prompts counted other than asked, a prompt cache hit.
PROMPT_ROWS: list[tuple[TableRow, Callable[[PhaseSummary], bool]]] = [
    (("prompt tokens off by, mean (n)", prompt_off), lambda p: bool(p.tokens.prompt_mismatched)),
    (("prompt tokens cached", cached), lambda p: bool(p.tokens.cached_reported)),
    (("thinking / answer tokens, mean", thinking), thought),
    (("images a request (size), prompt tokens each", images_cell), lambda p: bool(p.tokens.images)),
    (("TTFT p50 ms by turn", _by_turn), lambda p: p.sessions is not None),
]


# Shown when the endpoint's /metrics was scraped: the server's own account beside the client's. Each row with
# the scraped series it reads (the notes say why a row shows "-": a series the engine does not export); the
# prefix row needs no one series (hits over queries, or the engine's own share).
SERVER_ROWS: tuple[tuple[str, tuple[str, ...], Cell], ...] = (
    ("running / waiting, mean", ("running", "waiting"),
     _server_cell(lambda s: f"{s.running_mean:.1f} / {s.waiting_mean:.1f}")),
    ("KV cache usage, max", ("kv_cache_usage",), _server_cell(lambda s: f"{s.kv_cache_usage_max:.0%}")),
    ("generated tokens/s", ("generation_tokens_total",),
     _server_cell(lambda s: f"{s.generation_tokens_per_s:,.0f}")),
    ("prefix cache hit share", (), _server_cell(lambda s: f"{s.prefix_cache_hit_share:.0%}")),
)
SERVER_SECTION: list[TableRow] = [("server (scraped /metrics)", None),
                                  *((f"  {label}", cell) for label, _, cell in SERVER_ROWS)]


def _stress_cell(fmt: Callable[[Stress], str]) -> Cell:
    def cell(phase: PhaseSummary) -> str:
        stress = phase.stress
        try:
            text = fmt(stress) if stress else "-"
        except TypeError:  # a figure the source could not give
            return "-"
        return f"~{text}" if stress and stress.source == "estimate" else text
    return cell


# Shown when some phase knows where its stress landed: the simulator's own account, or an estimate (~).
STRESS_SECTION: list[TableRow] = [
    ("where the stress lands", None),
    ("  memory-bound share of step time", _stress_cell(lambda s: f"{s.memory_bound_share:.0%}")),
    ("  MBU / MFU", _stress_cell(lambda s: f"{s.mbu:.0%} / {s.mfu:.1%}")),
]


def _applicable(sections: list[list[TableRow]], phases: list[PhaseSummary]) -> list[list[TableRow]]:
    """Rows left out where they cannot apply: batch time without a batch phase, failures without one."""
    skip = set()
    if not any(p.batches for p in phases):
        skip.add("batch time p50 / max ms (n)")
    if not any(p.requests.failure_reasons for p in phases):
        skip.add("  failures, top causes")
    if not any(_held(p) for p in phases):
        skip.add("in-flight cap")
    if not any(thought(p) for p in phases):  # without thinking, the first answer token is the first token
        skip.add("  TTFT (answer)")
    # One text a request: the same as requests/s. (A packed batch carries two or more a request.)
    if not any(pooled(p) or (p.throughput.inputs_per_s or 0) > 1.5 * p.throughput.requests_per_s for p in phases):
        skip.add(REGISTRY[TEXTS_PER_S].label)
    return [[row for row in rows if row[0] not in skip] for rows in sections]


def swept(summary: Summary) -> frozenset[str]:
    """The phases that are points of a sweep."""
    return frozenset(name for sweep in summary.sweeps for name in sweep.names)


def _sweep_table(sweep: SweepResult) -> tuple[Table, str]:
    """A sweep, one row per point, and the sentence that names its capacity under the SLOs."""
    name, best = sweep.of, sweep.knee
    table = Table(title=f"sweep {name}", box=box.SIMPLE_HEAD, title_justify="left")
    for column in ("point", "target / sent req/s", "TTFT p50 / p99 ms", "TPOT p50 / p99 ms", "ITL p50 / p99 ms",
                   "output tok/s", f"goodput (≥ {KNEE_GOODPUT:.0%}), failing on"):
        table.add_column(column, justify="left" if column == "point" else "right")
    for p in sweep.points:
        lat = p.latency_ms
        fraction = p.goodput.fraction
        good = fraction >= KNEE_GOODPUT
        mark = Text(f"{fraction:.0%} {'✓' if good else '✗ ' + decided_by(p)}".rstrip(),
                    style="green" if good else "bold red")
        table.add_row(p.name.partition("@")[2], _load(p).rsplit(" / ", 1)[0],
                      f"{_ms(lat.ttft.p50)} / {_ms(lat.ttft.p99)}", f"{_ms(lat.tpot.p50)} / {_ms(lat.tpot.p99)}",
                      f"{_ms(lat.itl.p50)} / {_ms(lat.itl.p99)}", f"{p.throughput.output_tokens_per_s:,.0f}", mark)
    sentence = (f"Capacity under the SLOs: {best.name} at {best.throughput.output_tokens_per_s:,.0f} output tokens/s, "
                f"the fastest point with ≥ {KNEE_GOODPUT:.0%} goodput." if best is not None
                else f"No point of sweep {name} met the SLOs for {KNEE_GOODPUT:.0%} of its requests.")
    return table, sentence


def build_table(summary: Summary) -> Table:
    points = swept(summary)
    phases = [p for p in summary.phases if p.name not in points]
    run = summary.run
    title = run.scenario
    if run.mode == "predict":
        sim = run.simulator
        on = f" on {sim.accelerator}, {sim.model}" if sim and sim.accelerator and sim.model else ""
        title += f" (predicted in virtual time{on})"
    table = Table(title=title or None, box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("")
    for phase in phases:
        table.add_column(phase.name, justify="right")
    prompt_rows = [row for row, shown in PROMPT_ROWS if any(shown(p) for p in phases)]
    slo_rows = _slo_rows(phases)
    head, rates, client = _applicable(SECTIONS[:2], phases), *_applicable(SECTIONS[2:4], phases)
    sections = [*head, [*rates, *([("SLOs", None), *slo_rows] if slo_rows else [])], [*client, *prompt_rows],
                *([SERVER_SECTION] if any(p.server for p in phases) else []),
                *([STRESS_SECTION] if any(p.stress for p in phases) else [])]
    for i, rows in enumerate(sections):
        if i:
            table.add_section()
        for label, cell in rows:
            if cell is None:
                table.add_row(Text(label, style="bold"), *("" for _ in phases))
            else:
                table.add_row(label, *(cell(p) for p in phases))
    return table


def _parts(summary: Summary) -> list[Table | str]:
    """What is printed, in order: the phases' table (when some phase is not part of a sweep), each sweep as a
    table of its own with its capacity sentence, and the conclusion."""
    parts: list[Table | str] = []
    points = swept(summary)
    if len(summary.phases) > len(points):
        parts.append(build_table(summary))
    for sweep in summary.sweeps:
        parts += [*_sweep_table(sweep)]
    conclusion = summary.comparison.conclusion
    if not conclusion:  # no batch to compare with: what each phase outside a sweep delivered
        conclusion = [phase_sentence(p) for p in summary.phases if p.name not in points]
    checks = threshold_lines(summary)
    return [*parts, *(["\n".join(conclusion)] if conclusion else []),
            *(["\n".join(["thresholds", *(f"  {line}" for line in checks)])] if checks else [])]


def render_table(summary: Summary) -> str:
    """Plain text, each table at the width it needs, followed by the comparison's conclusion."""
    out: list[str] = []
    for part in _parts(summary):
        if isinstance(part, str):
            out += ["", part]
            continue
        out += [*([""] if out else []), *plain_lines(part)]
    return "\n".join(out)


def plain_lines(table: Table) -> list[str]:
    """A table as plain text at the width it needs, so it never wraps."""
    width = Console(width=10_000).measure(table).maximum
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, force_terminal=False, legacy_windows=False).print(table)
    lines = [line.rstrip() for line in buffer.getvalue().strip("\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def print_table(summary: Summary) -> None:
    """To standard output: coloured on a terminal, plain text when piped."""
    console = Console()
    if not console.is_terminal:
        print(render_table(summary))
        return
    for part in _parts(summary):
        console.print(part)
