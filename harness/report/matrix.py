"""The accelerator matrix as text (a table per phase, and which to choose) and as one HTML page with bars."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

from rich import box
from rich.table import Table

from harness.report.table import plain_lines
from harness.stats.schema.matrix import Matrix, MatrixColumn, MatrixRow

Column = tuple[str, Callable[[MatrixColumn, MatrixRow], str]]
_BY = {"cost": "the cheapest million output tokens",
       "tokens/s": "the most output tokens/s",
       "capacity": "the highest request rate still within the SLOs (searched)",
       "TTFT p99": "the lowest TTFT p99 among those meeting the SLOs"}


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _stress(row: MatrixRow) -> str:
    if row["memory_bound_share"] is None:
        return "-"
    return f"{row['memory_bound_share']:.0%} · {_num(row['mbu'], '.0%')} / {_num(row['mfu'], '.1%')}"


def _capacity(column: MatrixColumn, _: MatrixRow | None = None) -> str:
    found = column.get("capacity")
    return _num(None if found is None else found["rps"], ".2f")


COLUMNS: list[Column] = [
    ("devices", lambda c, r: f"{c['tp']}{'*' if c.get('needs') else ''}"),
    ("output tok/s", lambda c, r: f"{r['output_tokens_per_s']:,.0f}"),
    ("TTFT p99 ms", lambda c, r: _num(r["ttft_p99_ms"], ",.1f")),
    ("ITL p50 ms", lambda c, r: _num(r["itl_p50_ms"], ".1f")),
    ("goodput", lambda c, r: f"{r['goodput_share']:.0%}"),
    ("$ / M tok", lambda c, r: "unpriced" if c.get("price_per_hour") is None else _num(r["cost_per_m_tokens"], ",.2f")),
    ("mem-bound · MBU / MFU", lambda c, r: _stress(r)),
]


def phase_table(result: Matrix, phase: str) -> Table:
    cols = [c for c in COLUMNS if c[0] != "$ / M tok" or _priced(result)]
    if any((found := c.get("capacity")) is not None and found["phase"] == phase for c in result["columns"]):
        cols.append(("capacity req/s", _capacity))
    kind = result["phase_kinds"][phase]
    table = Table(title=f"{phase} ({kind})", box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("accelerator")
    for name, _ in cols:
        table.add_column(name, justify="right")
    for column in result["columns"]:
        if not column["fits"]:
            table.add_row(column["accelerator"], "does not fit on up to 8", *("" for _ in cols[1:]))
            continue
        row = column["phases"].get(phase)
        if row is not None:
            table.add_row(column["accelerator"], *(cell(column, row) for _, cell in cols))
    return table


def _priced(result: Matrix) -> bool:
    return any(c.get("price_per_hour") is not None for c in result["columns"])


def sentences(result: Matrix) -> list[str]:
    """One per phase: the accelerator to choose, by what, and what came next."""
    lines = []
    for phase, choice in result["best"].items():
        if choice["accelerator"] is None:
            lines.append(f"For {phase} ({result['phase_kinds'][phase]}), no accelerator met the SLOs for 95% of "
                         "its requests.")
            continue
        column = next(c for c in result["columns"] if c["accelerator"] == choice["accelerator"])
        row = column["phases"][phase]
        within = " within the SLOs" if result["phase_kinds"][phase] == "interactive" else ""
        figure = {"cost": f"${_num(row['cost_per_m_tokens'], ',.2f')} per million{within}",
                  "tokens/s": f"{row['good_tokens_per_s']:,.0f} output tokens/s",
                  "capacity": f"{_capacity(column, row)} req/s",
                  "TTFT p99": f"{_num(row['ttft_p99_ms'], ',.0f')} ms"}[choice["by"] or "TTFT p99"]
        after = f"; next: {choice['runner_up']}" if choice["runner_up"] else ""
        if choice.get("unpriced"):
            after += f" (unpriced, so not ranked by cost: {', '.join(choice.get('unpriced', []))})"
        stress = "" if row["memory_bound_share"] is None else (
            f" Its steps there are {row['memory_bound_share']:.0%} memory-bound (MBU {_num(row['mbu'], '.0%')})"
            + (f"; {row['binding']} binds it." if row.get("binding") else "."))
        lines.append(f"For {phase} ({result['phase_kinds'][phase]}), choose {choice['accelerator']} "
                     f"({_devices(column)}): {_BY[choice['by'] or 'TTFT p99']}, {figure}{after}.{stress}")
    unfit = [c["accelerator"] for c in result["columns"] if not c["fits"]]
    if unfit:
        lines.append(f"Cannot hold the model (weights, and a KV cache for one request of its max_model_len, as "
                     f"vLLM requires to start) on up to 8 devices: {', '.join(unfit)}.")
    return lines + _footnotes(result)


def _devices(column: MatrixColumn) -> str:
    n, device = column["tp"], column.get("device", "GPU")
    return f"{n} × {device}" + (f", tp {n}" if device == "GPU" and n > 1 else "")


def _footnotes(result: Matrix) -> list[str]:
    """What a row's devices are when not GPUs, what a price is per, and what a starred row depends on."""
    out = [f"{c['accelerator']}: one device is a {c['device']}; a row prices {c['tp']} of them."
           for c in result["columns"] if c.get("fits") and c.get("device", "GPU") != "GPU"]
    out += [f"* {c['accelerator']} fits on {c['tp']} only with the scenario's {c['needs']} (vLLM's defaults would "
            "refuse to start it there)." for c in result["columns"] if c.get("fits") and c.get("needs")]
    return out


def render_matrix(result: Matrix, advice: bool = True) -> str:
    slo = ", ".join(f"{k.removesuffix('_ms')} ≤ {v:g} ms" for k, v in result["slo"].items()) or "none"
    out = [f"{result['scenario']} on each accelerator (predicted in virtual time; SLOs: {slo}; $ / M tok: "
           "per million output tokens, of an interactive phase those within the SLOs)"]
    for phase in result["phase_kinds"]:
        out += ["", *plain_lines(phase_table(result, phase))]
    return "\n".join([*out, "", *sentences(result)] if advice else out)


def _bars(title: str, labels: Sequence[str], values: Sequence[float | None], unit: str,
          chosen: str | None = None) -> str:
    """A horizontal bar chart as inline SVG: one bar per accelerator, its value printed beside it; the chosen
    accelerator's bar in its own colour and its label marked."""
    top = max((v for v in values if v is not None), default=0.0) or 1.0
    rows = []
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = 28 + i * 26
        width = 0 if value is None else 360 * value / top
        number = f"{value:,.2f}" if value is not None and value < 100 else f"{value or 0:,.0f}"
        text = "-" if value is None else f"${number}" if unit == "$" else f"{number} {unit}"
        mine = label == chosen
        shown, weight, colour = (f"★ {label}", "bold", "#e45756") if mine else (label, "normal", "#4c78a8")
        rows.append(f"<text x='0' y='{y + 14}' font-weight='{weight}'>{html.escape(shown)}</text>"
                    f"<rect x='110' y='{y}' width='{width:.1f}' height='18' fill='{colour}'/>"
                    f"<text x='{116 + width:.1f}' y='{y + 14}'>{html.escape(text)}</text>")
    height = 36 + 26 * len(labels)
    return (f"<svg width='620' height='{height}' font-family='system-ui,sans-serif' font-size='12'>"
            f"<text x='0' y='14' font-weight='bold'>{html.escape(title)}</text>{''.join(rows)}</svg>")


def matrix_html(result: Matrix) -> str:
    """One page: the text, and per phase bars of SLO-meeting tokens/s (and cost, with prices)."""
    fitting = [c for c in result["columns"] if c["fits"]]
    charts = []
    for phase in result["phase_kinds"]:
        shown = [c for c in fitting if phase in c["phases"]]
        labels = [c["accelerator"] for c in shown]
        within = " within the SLOs" if result["phase_kinds"][phase] == "interactive" else ""
        choice = result["best"].get(phase)
        chosen = None if choice is None else choice["accelerator"]
        charts.append(_bars(f"{phase}: output tokens/s{within}", labels,
                            [c["phases"][phase]["good_tokens_per_s"] for c in shown], "tok/s", chosen))
        if _priced(result):
            charts.append(_bars(f"{phase}: $ per million output tokens{within}", labels,
                                [c["phases"][phase]["cost_per_m_tokens"] for c in shown], "$", chosen))
    title = html.escape(f"{result['scenario']}: which accelerator")
    # The answer first, in full and wrapped (in the table's <pre> it was cut at the page's edge), then the
    # figures.
    advice = "".join(f"<p class='advice'>{html.escape(line)}</p>" for line in sentences(result))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
            "<style>body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1240px;padding:0 1em}"
            ".advice{font-size:16px;background:#eef5ee;padding:.5em 1em;border-left:4px solid #e45756}"
            "pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:11.5px}</style></head><body>"
            f"<h1>{title}</h1>{advice}{''.join(charts)}"
            f"<pre>{html.escape(render_matrix(result, advice=False))}</pre></body></html>")
