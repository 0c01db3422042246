// The console's pure mappings (format.ts, logstream.ts), with vitest (ctest: console.unit).
import { describe, expect, test } from "vitest";
import type { JobEvent, Transition } from "./api";
import { age, duration, eventObject, ignoredPath, stripTopFolder, timelineSegments, toYaml, yamlLineOf } from "./format";
import { parseSse } from "./logstream";

describe("yamlLineOf", () => {
  const spec = `name: x
fleet: local
pools:
  - name: head
    machines: 1
  - name: rollout
    gpusPerMachine: -1
    machinez: 2
deadlines:
  preRunningSeconds: -5
`;
  test("finds a nested field under the right list item", () => {
    expect(yamlLineOf(spec, "pools[1].gpusPerMachine")).toBe(7);
    expect(yamlLineOf(spec, "pools[1].machinez")).toBe(8);
    expect(yamlLineOf(spec, "pools[0].machines")).toBe(5);
    expect(yamlLineOf(spec, "deadlines.preRunningSeconds")).toBe(10);
  });
  test("a missing field points at its deepest parent, or nowhere", () => {
    expect(yamlLineOf(spec, "pools[1].cpusPerMachine")).toBe(6);
    expect(yamlLineOf(spec, "image")).toBe(0);
  });
});

describe("parseSse", () => {
  test("events split across reads are kept until complete", () => {
    const a = parseSse("id: 7\nevent: log\ndata: step 1\ndata: step 2\n\n: keep-alive\n\nid: 9\nevent: lo");
    expect(a.events).toEqual([{ id: "7", event: "log", data: "step 1\nstep 2" }]);
    const b = parseSse(`${a.rest}g\ndata: x\n\nevent: end\ndata: {"phase":"Succeeded"}\n\n`);
    expect(b.events).toEqual([
      { id: "9", event: "log", data: "x" },
      { id: null, event: "end", data: '{"phase":"Succeeded"}' },
    ]);
    expect(b.rest).toBe("");
  });
  test("a data line keeps everything after the first space", () => {
    expect(parseSse("event: log\ndata:  two spaces: kept\n\n").events[0].data).toBe(" two spaces: kept");
  });
});

describe("timelineSegments", () => {
  const t = (to: string, at: string): Transition => ({ at, from: null, to: to as Transition["to"], reason: "", message: "", cause: "" });
  test("each phase lasts until the next; a terminal phase is a point", () => {
    const segs = timelineSegments([
      t("Queued", "2026-01-01T00:00:00Z"),
      t("Running", "2026-01-01T00:00:10Z"),
      t("Succeeded", "2026-01-01T00:00:40Z"),
    ]);
    expect(segs.map((s) => [s.phase, s.end - s.start])).toEqual([
      ["Queued", 10_000],
      ["Running", 30_000],
      ["Succeeded", 0],
    ]);
    expect(segs[0].fraction).toBeCloseTo(0.25);
  });
  test("a running job's last phase runs to now", () => {
    const now = Date.parse("2026-01-01T00:01:00Z");
    const segs = timelineSegments([t("Queued", "2026-01-01T00:00:00Z"), t("Running", "2026-01-01T00:00:30Z")], now);
    expect(segs[1].end).toBe(now);
    expect(segs[1].fraction).toBeCloseTo(0.5);
  });
});

test("events of Kubernetes objects carry the object in their source", () => {
  const e = (source: string): JobEvent => ({ type: "Warning", reason: "Failed", message: "", source, count: 1, firstAt: "", lastAt: "" });
  expect(eventObject(e("kuberay:Pod/sf-j-1-head-x"))).toEqual({ object: "Pod/sf-j-1-head-x", source: "kubernetes" });
  expect(eventObject(e("controller"))).toEqual({ object: "", source: "controller" });
});

test("ages and durations read like kubectl's", () => {
  expect(duration(59_000)).toBe("59s");
  expect(duration(61_000)).toBe("1m1s");
  expect(duration(3 * 3600_000 + 5 * 60_000)).toBe("3h5m");
  expect(duration(50 * 3600_000)).toBe("2d2h");
  expect(age("2026-01-01T00:00:00Z", Date.parse("2026-01-01T00:02:00Z"))).toBe("2m");
});

test("toYaml quotes what YAML would read as something else", () => {
  expect(toYaml({ a: "true", b: "4", c: "x: y", d: [1, "two"], e: {}, f: "plain-word" })).toBe(
    'a: "true"\nb: "4"\nc: "x: y"\nd:\n  - 1\n  - two\ne: {}\nf: plain-word',
  );
});

test("a picked folder loses its own name and the capsule's default exclusions", () => {
  expect(stripTopFolder(["code/a.py", "code/sub/b.py"])).toEqual(["a.py", "sub/b.py"]);
  expect(stripTopFolder(["a.py", "b.py"])).toEqual(["a.py", "b.py"]);
  for (const p of [".git/config", "x/__pycache__/m.cpython-311.pyc", "m.pyc", ".venv/bin/python", ".forge/x"])
    expect(ignoredPath(p)).toBe(true);
  for (const p of ["train.py", "git/config", "data/.gitkeep"]) expect(ignoredPath(p)).toBe(false);
});
