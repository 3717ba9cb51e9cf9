// Draws one chart of the report from its spec (built by harness/report/charts.py) with uPlot:
// drag across to zoom into a burst, double-click to zoom out; hovering a request's point names it.
// Made to be read off a screenshot: every axis sized to its widest tick label, a log scale only where the
// values span a decade (within one, a log axis has one tick or none), the x range the data's own (so a line
// drawn at every x spans the plot), filled legend swatches, a series' name beside its point when it asks.
function harnessChart(el, spec) {
  const colors = ["#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#d62728", "#8c564b", "#17becf", "#7f7f7f"];
  const plain = v => v == null ? "-" : Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1)
    : v.toFixed(2);
  const tick = (u, vals) => vals.map(v => v == null ? "" : Math.abs(v) >= 1000 ? v.toLocaleString("en")
    : String(+v.toPrecision(3)));
  const decade = vals => {
    const seen = vals.filter(v => v != null && v > 0);
    return seen.length > 1 && Math.max(...seen) / Math.min(...seen) >= 10;
  };
  // Wide enough for the widest label at this axis's font, its ticks and the gap between.
  const size = (u, values, i) => {
    const axis = u.axes[i];
    u.ctx.font = axis.font[0];
    const widest = Math.max(0, ...(values || []).map(v => u.ctx.measureText(v || "").width)) / uPlot.pxRatio;
    return Math.ceil(widest + axis.ticks.size + axis.gap + 8);
  };
  // A log axis's ticks at 1, 2 and 5 of each decade in range (uPlot's own are the decades alone: one, or none,
  // across a range like 300 to 3,000).
  const splits125 = (u, i, min, max) => {
    const out = [];
    for (let d = Math.pow(10, Math.floor(Math.log10(min))); d <= max; d *= 10) {
      for (const m of [1, 2, 5]) { if (m * d >= min && m * d <= max) out.push(+(m * d).toPrecision(3)); }
    }
    return out;
  };
  const xs = spec.x.filter(v => v != null);
  const xlog = !!spec.xlog && decade(xs);
  const scales = {x: {time: false, distr: xlog ? 3 : 1, range: (u, min, max) => min === max
    ? [min - 1, max + 1] : [min, max]}};
  const logAxis = {splits: splits125, filter: (u, splits) => splits};  // every 1-2-5 tick labelled
  const axes = [{label: spec.xlabel + (xlog ? " (log)" : ""), values: tick, space: 60, ...(xlog ? logAxis : {})}];
  for (const s of spec.series) {
    if (scales[s.unit]) continue;
    const same = spec.series.filter(t => t.unit === s.unit).flatMap(t => t.values);
    const log = s.log && decade(same);
    scales[s.unit] = {distr: log ? 3 : 1};
    const first = axes.length === 1;
    axes.push({scale: s.unit, label: s.unit, side: first ? 3 : 1, grid: {show: first}, values: tick, size,
               ...(log ? logAxis : {})});
  }
  const xValue = (u, v, si, i) => v == null ? "" :
    (spec.ids && i != null ? spec.ids[i] + " at " : "") + plain(v) + " s";
  const series = [{label: spec.ids ? "request" : spec.xlabel, value: xValue}];
  spec.series.forEach((s, i) => {
    const color = s.color || colors[i % colors.length];
    series.push({
      label: s.label, scale: s.unit, stroke: color, width: s.points && !s.line ? 0 : 1.5,
      dash: s.dash ? [6, 4] : undefined,
      paths: s.points && !s.line ? () => null : s.step ? uPlot.paths.stepped({align: 1}) : undefined,
      points: s.points ? {show: true, size: s.size || 4, stroke: color, fill: color} : {show: false},
      spanGaps: !!s.span,
      // Off the chart the legend names the series (a screenshot or a print shows what each colour is).
      value: (u, v) => v == null ? "" : plain(v) + " " + s.unit,
    });
  });
  const tags = u => {  // a series' name beside its first point, for series that ask (one phase, one point)
    const ctx = u.ctx;
    ctx.save();
    ctx.font = `${12 * uPlot.pxRatio}px system-ui, sans-serif`;
    ctx.fillStyle = "#222";
    spec.series.forEach((s, k) => {
      const i = s.tag ? s.values.findIndex(v => v != null) : -1;
      if (i < 0) return;
      const x = u.valToPos(spec.x[i], "x", true), y = u.valToPos(s.values[i], s.unit, true);
      const w = ctx.measureText(s.label).width;
      const left = x + w + 10 * uPlot.pxRatio > u.bbox.left + u.bbox.width;  // near the right edge: text to its left
      ctx.fillText(s.label, left ? x - w - 8 * uPlot.pxRatio : x + 8 * uPlot.pxRatio, y - 6 * uPlot.pxRatio);
    });
    ctx.restore();
  };
  const opts = {
    title: spec.title, width: Math.max(el.clientWidth, 300), height: spec.height || 260, scales, axes, series,
    padding: [12, 28, 0, 0],  // room on the right for the last x label, above for the top y label
    cursor: {drag: {x: true, y: false}}, legend: {live: true},
    hooks: {draw: [tags, u => { el.dataset.check = JSON.stringify(harnessCheck(u)); }]},
  };
  el.uplot = new uPlot(opts, [spec.x, ...spec.series.map(s => s.values)], el);  // kept for tests and the console
  el.querySelectorAll(".u-legend .u-marker").forEach(m => { m.style.background = m.style.borderColor; });
  return el.uplot;
}

// What a screenshot would show wrong, read off the drawn chart (tests/e2e/test_report_screens.py reads it from
// the page): each axis's tick labels, how many, and those clipped — a y label wider than its axis, an x label
// past the chart's edge or over its neighbour.
function harnessCheck(u) {
  const out = [];
  u.axes.forEach((axis, i) => {
    if (axis.show === false) return;
    const labels = (axis._values || []).map(String);
    const at = (axis._splits || []).map(v => u.valToPos(v, axis.scale || "x"));
    u.ctx.font = axis.font[0];
    const widths = labels.map(v => u.ctx.measureText(v).width / uPlot.pxRatio);
    const clipped = [];
    if (axis.side === 2 || axis.side === 0) {
      const left = u.bbox.left / uPlot.pxRatio;
      labels.forEach((v, k) => {
        const mid = left + at[k], half = widths[k] / 2;
        if (v && (mid - half < 0 || mid + half > u.width)) clipped.push(v);
        if (v && k > 0 && labels[k - 1] && mid - half < left + at[k - 1] + widths[k - 1] / 2) clipped.push(v);
      });
    } else {
      labels.forEach((v, k) => { if (v && widths[k] + axis.ticks.size + axis.gap > axis._size) clipped.push(v); });
    }
    out.push({axis: i, label: axis.label || "", ticks: labels.filter(v => v).length, labels, clipped});
  });
  return out;
}
