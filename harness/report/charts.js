// Draws one chart of the report from its spec (built by harness/report/charts.py) with uPlot:
// drag across to zoom into a burst, double-click to zoom out; hovering a request's point names it.
function harnessChart(el, spec) {
  const colors = ["#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#d62728", "#8c564b", "#17becf", "#7f7f7f"];
  const plain = v => v == null ? "-" : Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1)
    : v.toFixed(2);
  const tick = (u, vals) => vals.map(v => v == null ? "" : Math.abs(v) >= 1000 ? v.toLocaleString("en")
    : String(+v.toPrecision(3)));
  const scales = {x: {time: false, distr: spec.xlog ? 3 : 1}};
  const axes = [{label: spec.xlabel, values: tick}];
  for (const s of spec.series) {
    if (scales[s.unit]) continue;
    scales[s.unit] = {distr: s.log ? 3 : 1};
    const first = axes.length === 1;
    axes.push({scale: s.unit, label: s.unit, side: first ? 3 : 1, grid: {show: first}, values: tick});
  }
  const xValue = (u, v, si, i) => v == null ? "" :
    (spec.ids && i != null ? spec.ids[i] + " at " : "") + plain(v) + " s";
  const series = [{label: spec.ids ? "request" : spec.xlabel, value: xValue}];
  spec.series.forEach((s, i) => {
    const color = colors[i % colors.length];
    series.push({
      label: s.label, scale: s.unit, stroke: s.color || color, width: s.points && !s.line ? 0 : 1.5,
      dash: s.dash ? [6, 4] : undefined,
      paths: s.points && !s.line ? () => null : s.step ? uPlot.paths.stepped({align: 1}) : undefined,
      points: s.points ? {show: true, size: s.size || 4, stroke: s.color || color, fill: s.color || color}
        : {show: false},
      spanGaps: !!s.span,
      // Off the chart the legend names the series (a screenshot or a print shows what each colour is).
      value: (u, v) => v == null ? "" : plain(v) + " " + s.unit,
    });
  });
  const opts = {
    title: spec.title, width: Math.max(el.clientWidth, 300), height: spec.height || 260, scales, axes, series,
    cursor: {drag: {x: true, y: false}}, legend: {live: true},
  };
  el.uplot = new uPlot(opts, [spec.x, ...spec.series.map(s => s.values)], el);  // kept for tests and the console
  return el.uplot;
}
