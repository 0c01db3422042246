import { describe, expect, it } from "vitest";
import { downsample, formatValue, MAX_SERIES, MetricSeries, ticks } from "./metrics";

const answer = (series: { name: string; points: [number | null, number][] }[], skipped = 0) => ({
  series,
  offset: 0,
  size: 0,
  lines: 0,
  skipped,
  complete: false,
  cursor: "0",
  eventFiles: [],
  more: false,
});

describe("MetricSeries", () => {
  it("appends each answer's points to their series; a point without a step follows the last", () => {
    const m = new MetricSeries();
    m.add(answer([{ name: "loss", points: [[0, 1], [10, 0.5]] }]));
    m.add(answer([{ name: "loss", points: [[null, 0.4]] }, { name: "acc", points: [[null, 0.1]] }], 2));
    expect(m.series.get("loss")).toEqual([[0, 1], [10, 0.5], [11, 0.4]]);
    expect(m.series.get("acc")).toEqual([[0, 0.1]]);
    expect(m.skipped).toBe(2);
  });
  it("keeps at most MAX_SERIES series", () => {
    const m = new MetricSeries();
    m.add(answer(Array.from({ length: MAX_SERIES + 3 }, (_, i) => ({ name: `s${i}`, points: [[0, i]] }))));
    expect(m.series.size).toBe(MAX_SERIES);
    expect(m.dropped).toBe(3);
  });
});

describe("downsample", () => {
  it("keeps short series as they are", () => {
    const p: [number, number][] = [[0, 1], [1, 2]];
    expect(downsample(p, 10)).toBe(p);
  });
  it("keeps the ends and every bucket's extremes, in order", () => {
    const p: [number, number][] = Array.from({ length: 1000 }, (_, i) => [i, i === 500 ? 99 : 0]);
    const d = downsample(p, 100);
    expect(d.length).toBeLessThanOrEqual(102);
    expect(d[0]).toEqual([0, 0]);
    expect(d[d.length - 1]).toEqual([999, 0]);
    expect(d).toContainEqual([500, 99]); // the spike survives
    for (let i = 1; i < d.length; i++) expect(d[i][0]).toBeGreaterThan(d[i - 1][0]);
  });
});

describe("ticks and labels", () => {
  it("gives round values inside the range", () => {
    expect(ticks(0, 200)).toEqual([0, 50, 100, 150, 200]);
    expect(ticks(0.06, 0.7)).toEqual([0.2, 0.4, 0.6]);
    expect(ticks(1, 1)).toEqual([1]);
  });
  it("formats values short", () => {
    expect(formatValue(0.067327)).toBe("0.06733");
    expect(formatValue(123456)).toBe("1.23e+5");
    expect(formatValue(0)).toBe("0");
  });
});
