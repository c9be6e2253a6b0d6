// chart.js: a step chart in SVG (the best value so far over steps), with axes, ticks, a dashed
// reference line and a dot with a tooltip at each point where the value changed.
import { h, s } from "./dom.js";

const W = 640;
const H = 240;
const M = { left: 52, right: 16, top: 14, bottom: 40 };

// About n round tick values (1, 2 or 5 times a power of ten apart) covering [lo, hi].
function ticks(lo, hi, n) {
  const raw = (hi - lo) / n || 1;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((k) => k * mag).find((v) => v >= raw);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toFixed(10));
  return out;
}

// opts: {points: [{x, y, title}], xMin (0), xMax, xLabel, yLabel, ref, refLabel,
// format(y) -> text, caption}. The line holds each point's y until the next point and runs on
// to xMax.
export function stepChart(opts) {
  const pts = opts.points;
  const fmt = opts.format || ((y) => String(y));
  const xMin = opts.xMin ?? 0;
  const xMax = Math.max(opts.xMax ?? 0, ...pts.map((p) => p.x), xMin + 1);
  const yMax = Math.max(opts.ref ?? 0, ...pts.map((p) => p.y)) * 1.15 || 1;
  const px = (x) => M.left + ((x - xMin) / (xMax - xMin)) * (W - M.left - M.right);
  const py = (y) => H - M.bottom - (y / yMax) * (H - M.top - M.bottom);
  const midY = (M.top + H - M.bottom) / 2;

  const yTicks = ticks(0, yMax, 4).map((v) =>
    s("g", { class: "tick" },
      s("line", { x1: M.left, x2: W - M.right, y1: py(v), y2: py(v) }),
      s("text", { x: M.left - 6, y: py(v), "text-anchor": "end", "dominant-baseline": "middle" }, fmt(v))));
  const xTicks = ticks(xMin, xMax, Math.min(8, xMax - xMin))
    .filter((v) => Number.isInteger(v))
    .map((v) => s("text", { class: "tick", x: px(v), y: H - M.bottom + 16, "text-anchor": "middle" }, v));
  const ref = opts.ref === undefined ? null : s("g", { class: "ref" },
    s("line", { x1: M.left, x2: W - M.right, y1: py(opts.ref), y2: py(opts.ref) }),
    s("text", { x: W - M.right - 4, y: py(opts.ref) - 5, "text-anchor": "end" }, opts.refLabel || ""));

  let d = pts.map((p, i) => (i === 0 ? `M${px(p.x)},${py(p.y)}` : `H${px(p.x)}V${py(p.y)}`)).join("");
  if (pts.length) d += `H${px(xMax)}`;
  const dots = pts.map((p) =>
    s("circle", { class: "dot", cx: px(p.x), cy: py(p.y), r: 4 }, s("title", {}, p.title || fmt(p.y))));

  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": opts.caption || "" },
    yTicks,
    ref,
    s("line", { class: "axis", x1: M.left, x2: W - M.right, y1: py(0), y2: py(0) }),
    xTicks,
    s("path", { class: "line", d }),
    dots,
    s("text", { class: "label", x: (M.left + W - M.right) / 2, y: H - 6, "text-anchor": "middle" }, opts.xLabel || ""),
    s("text", { class: "label", x: 14, y: midY, "text-anchor": "middle", transform: `rotate(-90 14 ${midY})` },
      opts.yLabel || ""),
  );
  return h("figure", { class: "chart-box" }, svg, opts.caption ? h("figcaption", {}, opts.caption) : null);
}
