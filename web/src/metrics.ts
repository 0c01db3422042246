// A job's training curves: the points of GET /api/v1/jobs/{id}/metrics merged as they arrive
// (pure, unit-tested), and each series drawn as a line chart in plain SVG (no chart library: a
// line per scalar with its axes is ~100 lines, costs nothing in the bundle, needs no inline
// style under the CSP, and its points are in the DOM for the tests to count).

import type { MetricsAnswer } from "./api";

export const MAX_SERIES = 24; // charts drawn at most
export const MAX_POINTS = 100_000; // points kept per series (the oldest half thinned beyond)

// Every series' points, in the order of their first appearance. A point without a step gets
// the series' last step + 1.
export class MetricSeries {
  readonly series = new Map<string, [number, number][]>();
  skipped = 0;
  dropped = 0; // series beyond MAX_SERIES
  warning = "";

  add(answer: MetricsAnswer): void {
    this.skipped += answer.skipped;
    if (answer.warning) this.warning = answer.warning;
    for (const s of answer.series) {
      let pts = this.series.get(s.name);
      if (!pts) {
        if (this.series.size >= MAX_SERIES) {
          this.dropped++;
          continue;
        }
        pts = [];
        this.series.set(s.name, pts);
      }
      for (const [step, value] of s.points) {
        // A [step, value] point: OpenAPI 3.0 cannot type an array's positions apart, so the
        // schema lets the value be null as the step may; the server never sends a null value.
        if (value === null) continue;
        const x = step ?? (pts.length ? pts[pts.length - 1][0] + 1 : 0);
        pts.push([x, value]);
      }
      if (pts.length > MAX_POINTS) {
        const half = Math.floor(pts.length / 2);
        const thinned = pts.slice(0, half).filter((_, i) => i % 2 === 0);
        pts.splice(0, half, ...thinned);
      }
    }
  }
}

// At most `max` points for drawing: each bucket of steps keeps its lowest and highest value (so
// spikes stay visible), in step order; the first and last points are always kept.
export function downsample(points: [number, number][], max: number): [number, number][] {
  if (points.length <= max) return points;
  const buckets = Math.max(1, Math.floor(max / 2));
  const size = points.length / buckets;
  const out: [number, number][] = [];
  for (let b = 0; b < buckets; b++) {
    const from = Math.floor(b * size);
    const to = Math.min(points.length, Math.floor((b + 1) * size));
    if (from >= to) continue;
    let lo = from;
    let hi = from;
    for (let i = from; i < to; i++) {
      if (points[i][1] < points[lo][1]) lo = i;
      if (points[i][1] > points[hi][1]) hi = i;
    }
    for (const i of lo === hi ? [lo] : lo < hi ? [lo, hi] : [hi, lo]) out.push(points[i]);
  }
  if (out[0] !== points[0]) out.unshift(points[0]);
  if (out[out.length - 1] !== points[points.length - 1]) out.push(points[points.length - 1]);
  return out;
}

// About `count` round tick values covering [min, max] (1, 2 or 5 times a power of ten apart).
export function ticks(min: number, max: number, count = 4): number[] {
  if (!(max > min)) return [min];
  const raw = (max - min) / count;
  const pow = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= raw) ?? 10 * pow;
  const out: number[] = [];
  for (let v = Math.ceil(min / step) * step; v <= max + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

// A value as a chart label: short, and exact enough to tell neighbours apart.
export function formatValue(v: number): string {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) return v.toExponential(2);
  return String(Number(v.toPrecision(4)));
}

const SVG = "http://www.w3.org/2000/svg";
function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

const W = 360;
const H = 180;
const PAD = { left: 52, right: 12, top: 10, bottom: 24 };
const MAX_DRAWN = 600;

// One series as an SVG line chart with its axes; a pointer over it shows the nearest point.
export function drawChart(name: string, points: [number, number][]): SVGSVGElement {
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart-svg", role: "img" });
  const last = points[points.length - 1];
  root.setAttribute("aria-label", `${name}: ${points.length} points${last ? `, last ${formatValue(last[1])} at step ${last[0]}` : ""}`);
  if (!points.length) return root;
  const shown = downsample(points, MAX_DRAWN);
  let [x0, x1, y0, y1] = [Infinity, -Infinity, Infinity, -Infinity];
  for (const [x, y] of shown) {
    x0 = Math.min(x0, x);
    x1 = Math.max(x1, x);
    y0 = Math.min(y0, y);
    y1 = Math.max(y1, y);
  }
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) [y0, y1] = [y0 - (Math.abs(y0) || 1) * 0.05, y1 + (Math.abs(y1) || 1) * 0.05];
  const px = (x: number) => PAD.left + ((x - x0) / (x1 - x0)) * (W - PAD.left - PAD.right);
  const py = (y: number) => H - PAD.bottom - ((y - y0) / (y1 - y0)) * (H - PAD.top - PAD.bottom);
  for (const t of ticks(y0, y1)) {
    root.append(svg("line", { x1: PAD.left, x2: W - PAD.right, y1: py(t), y2: py(t), class: "grid" }));
    root.append(svg("text", { x: PAD.left - 6, y: py(t) + 4, "text-anchor": "end", class: "tick" }, formatValue(t)));
  }
  for (const t of ticks(x0, x1)) {
    root.append(svg("text", { x: px(t), y: H - 6, "text-anchor": "middle", class: "tick" }, formatValue(t)));
  }
  root.append(svg("line", { x1: PAD.left, x2: W - PAD.right, y1: H - PAD.bottom, y2: H - PAD.bottom, class: "axis" }));
  root.append(
    svg("polyline", {
      class: "line",
      "data-points": shown.length,
      points: shown.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(" "),
    }),
  );
  const dot = svg("circle", { r: 3, class: "dot", cx: px(last[0]), cy: py(last[1]) });
  const readout = svg("text", { x: W - PAD.right, y: PAD.top + 4, "text-anchor": "end", class: "readout" });
  root.append(dot, readout);
  root.addEventListener("pointermove", (e) => {
    const box = root.getBoundingClientRect();
    const sx = ((e.clientX - box.left) / box.width) * W;
    const target = x0 + ((sx - PAD.left) / (W - PAD.left - PAD.right)) * (x1 - x0);
    let best = shown[0];
    for (const p of shown) if (Math.abs(p[0] - target) < Math.abs(best[0] - target)) best = p;
    dot.setAttribute("cx", String(px(best[0])));
    dot.setAttribute("cy", String(py(best[1])));
    readout.textContent = `step ${best[0]}: ${formatValue(best[1])}`;
  });
  root.addEventListener("pointerleave", () => {
    dot.setAttribute("cx", String(px(last[0])));
    dot.setAttribute("cy", String(py(last[1])));
    readout.textContent = "";
  });
  return root;
}
