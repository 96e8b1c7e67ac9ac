/* Health page charts (DESIGN.md section 6.6): draws the counters' per-slot series with the
   vendored uPlot (static/review/uplot.min.js, MIT, see uplot.LICENSE.txt). The strict CSP forbids
   inline scripts (nor any script element without src), so the data comes from the data-series
   attribute (JSON, escaped by the template); the same numbers are in the table below the charts
   for screen readers. */
(function () {
  "use strict";

  function series(label, stroke, extra) {
    var s = { label: label, stroke: stroke, width: 2, spanGaps: false };
    if (extra) { for (var k in extra) { s[k] = extra[k]; } }
    return s;
  }

  var CHARTS = {
    /* A slot without a decided recovery has no rate or duration: the line spans the gap and
       every real slot is marked, so one recovery in a day is still visible. */
    success_rate: { cols: ["success_rate"], range: [0, 100],
                    series: [series("success %", "#1a7f37", { spanGaps: true, points: { show: true } })] },
    duration: { cols: ["duration_mean", "duration_p95"],
                series: [series("mean s", "#0969da", { spanGaps: true, points: { show: true } }),
                         series("p95 ≤ s", "#9a6700", { dash: [6, 4], spanGaps: true, points: { show: true } })] },
    duplicates: { cols: ["duplicates"], series: [series("duplicates", "#cf222e")] },
    approvals: { cols: ["approvals_requested", "approvals_expired"],
                 series: [series("requested", "#8250df"), series("expired", "#bc4c00")] }
  };

  function draw(holder, data) {
    var spec = CHARTS[holder.getAttribute("data-chart")];
    if (!spec) { return; }
    var columns = [data.t];
    spec.cols.forEach(function (c) { columns.push(data[c]); });
    var width = Math.max(260, Math.min(holder.parentElement.clientWidth || 600, 900));
    var opts = {
      width: width,
      height: 180,
      series: [{}].concat(spec.series),
      scales: { x: { time: true } },
      /* The dashboard's times are UTC (footer); the axis too, whatever the browser's zone. */
      tzDate: function (ts) { return window.uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); },
      axes: [{}, { size: 50 }],
      legend: { live: false }
    };
    if (spec.range) { opts.scales.y = { range: spec.range }; }
    holder.textContent = "";
    return new window.uPlot(opts, columns, holder);
  }

  function init() {
    var root = document.querySelector("[data-charts]");
    if (!root || !window.uPlot) { return; }
    var data = JSON.parse(root.getAttribute("data-series") || "{}");
    if (!data.t) { return; }
    root.querySelectorAll("[data-chart]").forEach(function (holder) { draw(holder, data); });
    root.setAttribute("data-drawn", "1");
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
