// charts.js - uPlot charts of the dashboard: time series with labelled
// change markers, the staleness histogram with mean and p99 marked, and
// PNG/CSV export of any chart.

const uPlot = window.uPlot;

// Okabe-Ito colours: told apart by people who do not tell red from green
export const C = {
  blue: "#0072B2",
  orange: "#E69F00",
  sky: "#56B4E9",
  vermillion: "#D55E00",
  green: "#009E73",
  purple: "#CC79A7",
  yellow: "#F0E442",
  ink: "#222222",
  grid: "rgba(0,0,0,0.09)",
};
export const RUN_COLOURS = [C.blue, C.orange, C.sky, C.vermillion, C.green, C.purple, C.ink];

// larger type in the projector view (charts are made again when it toggles)
const big = () => document.body.classList.contains("projector");
const px = (n) => Math.round((big() ? 1.4 : 1) * n);
const font = (n, bold = "") => `${bold}${px(n)}px system-ui, "Segoe UI", Roboto, sans-serif`;

function axes(xLabel, yLabel) {
  const f = font(13);
  const common = { stroke: C.ink, grid: { stroke: C.grid }, ticks: { stroke: C.grid }, font: f, labelFont: f };
  return [
    { ...common, label: xLabel, labelSize: px(20), size: px(50) },
    { ...common, label: yLabel, labelSize: px(20), size: px(56) },
  ];
}

// The markers plugin: a dashed vertical line at each change, labelled.
// Labels take the first of LANES rows where they overlap no other label,
// newest first, so the latest changes always read; one that fits nowhere
// keeps its line (its label is in the page's list of changes). markers()
// returns [{x: {t, v}, label, drawn}] and xKey() "t" or "v"; the first time
// a marker is drawn, onDrawn(marker) is called (the page times its
// PATCH-to-marker latency with it).
const LANES = 4;
function markerPlugin(markers, xKey, onDrawn) {
  return {
    hooks: {
      draw: (u) => {
        const list = markers();
        if (!list.length) return;
        const ctx = u.ctx;
        const { left, top, width, height } = u.bbox;
        const dpr = uPlot.pxRatio;
        const pad = 3 * dpr;
        const lineH = px(16) * dpr;
        ctx.save();
        ctx.beginPath();
        ctx.rect(left, top, width, height);
        ctx.clip();
        ctx.font = font(12 * dpr);
        ctx.textBaseline = "top";
        ctx.textAlign = "left";
        const lanes = Array.from({ length: LANES }, () => []); // [x0, x1] taken
        const shown = [];
        ctx.strokeStyle = C.purple;
        ctx.lineWidth = 2 * dpr;
        ctx.setLineDash([6 * dpr, 4 * dpr]);
        for (const m of list) {
          const xv = m.x[xKey()];
          if (xv == null) continue;
          const xp = u.valToPos(xv, "x", true);
          if (xp < left - 1 || xp > left + width + 1) continue;
          ctx.beginPath();
          ctx.moveTo(xp, top);
          ctx.lineTo(xp, top + height);
          ctx.stroke();
          shown.push([m, xp]);
        }
        ctx.setLineDash([]);
        // labels with a white halo (the data stays visible around them)
        ctx.lineWidth = 4 * dpr;
        ctx.lineJoin = "round";
        ctx.strokeStyle = "rgba(255,255,255,0.9)";
        ctx.fillStyle = "#6b2c57";
        for (let i = shown.length - 1; i >= 0; i--) {
          const [m, xp] = shown[i];
          const tw = ctx.measureText(m.label).width;
          // right of the line, or left of it near the right edge
          let x0 = xp + pad;
          if (x0 + tw > left + width) x0 = Math.max(left, xp - pad - tw);
          const x1 = x0 + tw;
          const lane = lanes.findIndex((taken) => taken.every(([a, b]) => x1 + pad < a || x0 > b + pad));
          if (lane < 0) continue;
          lanes[lane].push([x0, x1]);
          const y = top + pad + lane * lineH;
          ctx.strokeText(m.label, x0, y);
          ctx.fillText(m.label, x0, y);
        }
        for (const [m] of shown) {
          if (!m.drawn) {
            m.drawn = Date.now();
            if (onDrawn) onDrawn(m);
          }
        }
        ctx.restore();
      },
    },
  };
}

// A time-series chart (x: run seconds or version).
// spec: {title, yLabel, series: [{label, stroke, dash?}], markers, xKey,
//        onDrawn, yRange?}
export function lineChart(el, spec) {
  const opts = {
    width: el.clientWidth || 400,
    height: chartHeight(),
    scales: {
      x: { time: false, auto: false, min: 0, max: 1 },
      y: spec.yRange ? { range: spec.yRange } : {},
    },
    series: [
      { label: spec.xLabel ? spec.xLabel() : "x" },
      ...spec.series.map((s) => ({
        label: s.label,
        stroke: s.stroke,
        width: 2,
        dash: s.dash,
        spanGaps: true,
        points: { show: false },
      })),
    ],
    axes: axes(spec.xLabel ? spec.xLabel() : "", spec.yLabel),
    cursor: { drag: { x: false, y: false }, points: { size: 6 } },
    legend: { live: true },
    plugins: [markerPlugin(spec.markers, spec.xKey, spec.onDrawn)],
  };
  const data = [[], ...spec.series.map(() => [])];
  const u = new uPlot(opts, data, el);
  return u;
}

// The staleness histogram: bars of the chosen view (sliding window or
// cumulative, as fractions) and the other as a step line, mean and p99 as
// labelled vertical lines. stats() returns {mean, p99} of the bars; names
// are the two series' labels, the bars' first.
export function histChart(el, stats, names) {
  const bars = uPlot.paths.bars({ size: [0.85, 60] });
  const steps = uPlot.paths.stepped({ align: 0 });
  const opts = {
    width: el.clientWidth || 400,
    height: chartHeight(),
    scales: {
      x: { time: false, range: (u, lo, hi) => [lo - 0.5, hi + 0.5] },
      y: { range: (u, lo, hi) => [0, Math.max(hi * 1.1, 0.05)] },
    },
    series: [
      { label: "staleness", value: (u, v) => (v == null ? "" : v >= 64 ? ">63" : String(v)) },
      { label: names[0], stroke: C.blue, fill: "rgba(0,114,178,0.55)", paths: bars, points: { show: false },
        value: (u, v) => (v == null ? "" : (100 * v).toFixed(1) + "%") },
      { label: names[1], stroke: C.orange, width: 2, paths: steps, points: { show: false },
        value: (u, v) => (v == null ? "" : (100 * v).toFixed(1) + "%") },
    ],
    axes: [
      { ...axes("staleness (versions)", "")[0], values: (u, vs) => vs.map((v) => (v >= 64 ? ">63" : v)) },
      { ...axes("", "share of gradients")[1], values: (u, vs) => vs.map((v) => Math.round(v * 100) + "%") },
    ],
    cursor: { drag: { x: false, y: false } },
    plugins: [{
      hooks: {
        draw: (u) => {
          const s = stats();
          if (!s) return;
          const ctx = u.ctx;
          const { top, height } = u.bbox;
          const dpr = uPlot.pxRatio;
          ctx.save();
          ctx.font = font(12 * dpr, "bold ");
          ctx.textBaseline = "top";
        ctx.textAlign = "left";
          const lines = [["mean", s.mean, C.ink, [2 * dpr, 3 * dpr]], ["p99", s.p99, C.vermillion, [8 * dpr, 4 * dpr]]];
          lines.forEach(([name, val, colour, dash], i) => {
            if (val == null || !isFinite(val)) return;
            const x = u.valToPos(Math.min(val, 64), "x", true);
            ctx.strokeStyle = colour;
            ctx.lineWidth = 2 * dpr;
            ctx.setLineDash(dash);
            ctx.beginPath();
            ctx.moveTo(x, top);
            ctx.lineTo(x, top + height);
            ctx.stroke();
            ctx.fillStyle = colour;
            const text = `${name} ${fmt(val, 1)}`;
            const tw = ctx.measureText(text).width;
            const right = u.bbox.left + u.bbox.width;
            const tx = x + 4 * dpr + tw > right ? x - 4 * dpr - tw : x + 4 * dpr; // inside the plot
            ctx.fillText(text, tx, top + 4 * dpr + i * px(16) * dpr);
          });
          ctx.restore();
        },
      },
    }],
  };
  return new uPlot(opts, [[], [], []], el);
}

export function fmt(x, digits) {
  if (x == null || !isFinite(x)) return "–";
  return Number(x).toFixed(digits);
}

// a chart's height for this window: two rows of charts fill a projector's
// screen; otherwise by width (phones, laptops, large screens)
function chartHeight() {
  const w = window.innerWidth;
  if (document.body.classList.contains("projector"))
    return Math.max(180, Math.floor((window.innerHeight - 440) / 2));
  return w < 900 ? 200 : w >= 1800 ? 300 : 240;
}

// keep a chart as wide as its box and as tall as chartHeight() says;
// returns the function that stops it (before the chart is destroyed)
export function autosize(u, el) {
  const fit = () => {
    const w = Math.floor(el.clientWidth);
    const h = chartHeight();
    if (w > 0 && (w !== u.width || h !== u.height)) u.setSize({ width: w, height: h });
  };
  const ro = new ResizeObserver(fit);
  ro.observe(el);
  window.addEventListener("resize", fit);
  return () => {
    ro.disconnect();
    window.removeEventListener("resize", fit);
  };
}

function download(name, blob) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

// the chart as a PNG: white background, title and legend on top
export function chartPNG(u, title) {
  const src = u.ctx.canvas;
  const dpr = uPlot.pxRatio;
  const head = Math.round(44 * dpr);
  const c = document.createElement("canvas");
  c.width = src.width;
  c.height = src.height + head;
  const ctx = c.getContext("2d");
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, c.width, c.height);
  ctx.fillStyle = C.ink;
  ctx.font = `bold ${Math.round(15 * dpr)}px system-ui, sans-serif`;
  ctx.textBaseline = "top";
        ctx.textAlign = "left";
  ctx.fillText(title, 8 * dpr, 4 * dpr);
  ctx.font = `${Math.round(12 * dpr)}px system-ui, sans-serif`;
  let x = 8 * dpr;
  u.series.slice(1).forEach((s) => {
    if (!s.show) return;
    const colour = typeof s.stroke === "function" ? s.stroke(u, 1) : s.stroke;
    ctx.fillStyle = colour || C.ink;
    ctx.fillRect(x, 26 * dpr, 14 * dpr, 4 * dpr);
    ctx.fillStyle = C.ink;
    ctx.fillText(s.label, x + 18 * dpr, 22 * dpr);
    x += ctx.measureText(s.label).width + 34 * dpr;
  });
  ctx.drawImage(src, 0, head);
  return c;
}

export function downloadPNG(u, title, name) {
  chartPNG(u, title).toBlob((b) => b && download(name, b), "image/png");
}

// the chart's data as CSV: one column per series, the x column first
export function chartCSV(u, xName) {
  const cols = u.series.map((s, i) => (i === 0 ? xName : s.label));
  const esc = (s) => (/[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
  const rows = [cols.map(esc).join(",")];
  const n = u.data[0] ? u.data[0].length : 0;
  for (let i = 0; i < n; i++)
    rows.push(u.data.map((col) => (col[i] == null ? "" : String(col[i]))).join(","));
  return rows.join("\n") + "\n";
}

export function downloadCSV(u, xName, name) {
  download(name, new Blob([chartCSV(u, xName)], { type: "text/csv" }));
}
