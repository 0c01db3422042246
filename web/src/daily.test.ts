// The daily-work pieces of the console that need no browser: one time format, a failed job's error line, the jobs table's sort.
import { describe, expect, it } from "vitest";
import type { Job, Transition } from "./api";
import { clock, lastError, mergeEchoes, phaseDurations, shortDuration } from "./format";
import { formatSort, parseSort, sortJobs } from "./joblist";

describe("clock", () => {
  it("is UTC with its zone, to the second", () => {
    expect(clock("2026-12-07T13:12:46.123Z")).toBe("2026-12-07 13:12:46 UTC");
    expect(clock(null)).toBe("—");
  });
});

describe("lastError", () => {
  it("finds a traceback's last line", () => {
    const log = `step 1\nTraceback (most recent call last):\n  File "train.py", line 3, in <module>\n    raise ValueError("bad learning rate")\nValueError: bad learning rate\n`;
    expect(lastError(log)).toBe("ValueError: bad learning rate");
    expect(lastError("torch.cuda.OutOfMemoryError: CUDA out of memory\n")).toBe("torch.cuda.OutOfMemoryError: CUDA out of memory");
    expect(lastError("KeyboardInterrupt\n")).toBe("KeyboardInterrupt");
  });
  it("finds nothing in a plain log", () => {
    expect(lastError("loss 0.3\nan error happened somewhere\n")).toBe("");
  });
});

const job = (name: string, createdAt: string, startedAt: string | null = null, finishedAt: string | null = null): Job =>
  ({ id: `j-${name}`, name, owner: "a", fleet: "local", phase: "Succeeded", reason: "", message: "", createdAt, startedAt, finishedAt }) as unknown as Job;

describe("sortJobs", () => {
  const jobs = [
    job("b", "2026-01-03T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-03T00:00:05Z"),
    job("a", "2026-01-02T00:00:00Z", "2026-01-02T00:00:00Z", "2026-01-02T00:01:00Z"),
    job("C", "2026-01-01T00:00:00Z"),
  ];
  it("keeps the API's order without a sort, and sorts names without case", () => {
    expect(sortJobs(jobs, null)).toBe(jobs);
    expect(sortJobs(jobs, { key: "name", desc: false }).map((j) => j.name)).toEqual(["a", "b", "C"]);
    expect(sortJobs(jobs, { key: "name", desc: true }).map((j) => j.name)).toEqual(["C", "b", "a"]);
  });
  it("sorts by run time (not started: shortest) and by age (ascending: newest first)", () => {
    expect(sortJobs(jobs, { key: "ran", desc: true }).map((j) => j.name)).toEqual(["a", "b", "C"]);
    expect(sortJobs(jobs, { key: "age", desc: false }).map((j) => j.name)).toEqual(["b", "a", "C"]);
  });
  it("reads and writes the URL's sort", () => {
    expect(parseSort("-ran")).toEqual({ key: "ran", desc: true });
    expect(parseSort("bogus")).toBeNull();
    expect(formatSort({ key: "name", desc: false })).toBe("name");
  });
});

describe("mergeEchoes", () => {
  const ev = (source: string, lastAt: string, reason = "AppFailed", object = "") => ({ type: "Warning", reason, message: "exit 1", object, source, lastAt });
  it("shows one event told by two sources at once as one row naming both", () => {
    const m = mergeEchoes([ev("controller", "2026-01-01T00:00:01Z"), ev("fleet:local", "2026-01-01T00:00:00Z")]);
    expect(m).toHaveLength(1);
    expect(m[0].source).toBe("controller, fleet:local");
  });
  it("keeps apart other reasons, other objects, repeats of one source and events far apart", () => {
    expect(mergeEchoes([ev("a", "2026-01-01T00:00:00Z"), ev("b", "2026-01-01T00:00:00Z", "Other")])).toHaveLength(2);
    expect(mergeEchoes([ev("a", "2026-01-01T00:00:00Z", "X", "Pod/p"), ev("b", "2026-01-01T00:00:00Z", "X", "Pod/q")])).toHaveLength(2);
    expect(mergeEchoes([ev("a", "2026-01-01T00:00:00Z"), ev("a", "2026-01-01T00:00:01Z")])).toHaveLength(2);
    expect(mergeEchoes([ev("a", "2026-01-01T00:00:00Z"), ev("b", "2026-01-01T00:01:00Z")])).toHaveLength(2);
  });
});

describe("phaseDurations", () => {
  const t = (to: string, at: string): Transition => ({ at, from: null, to, reason: "", message: "", cause: "controller" }) as unknown as Transition;
  it("sums each phase, in the order first entered, and the whole run", () => {
    const d = phaseDurations([
      t("Queued", "2026-12-07T10:00:00.000Z"),
      t("Pending", "2026-12-07T10:00:00.400Z"),
      t("Running", "2026-12-07T10:00:02.400Z"),
      t("Pending", "2026-12-07T10:00:12.400Z"),
      t("Running", "2026-12-07T10:00:13.400Z"),
      t("Succeeded", "2026-12-07T10:01:13.400Z"),
    ]);
    expect(d.phases).toEqual([
      { phase: "Queued", ms: 400 },
      { phase: "Pending", ms: 3000 },
      { phase: "Running", ms: 70_000 },
    ]);
    expect(d.total).toBe(73_400);
    expect(d.ended).toBe(true);
  });
  it("runs the last phase to now while the job is not over", () => {
    const d = phaseDurations([t("Queued", "2026-12-07T10:00:00.000Z"), t("Running", "2026-12-07T10:00:01.000Z")], Date.parse("2026-12-07T10:00:31.000Z"));
    expect(d.phases.at(-1)).toEqual({ phase: "Running", ms: 30_000 });
    expect(d.total).toBe(31_000);
    expect(d.ended).toBe(false);
  });
  it("says short durations in milliseconds, then to a tenth of a second", () => {
    expect(shortDuration(40)).toBe("40 ms");
    expect(shortDuration(1_250)).toBe("1.3s");
    expect(shortDuration(9_940)).toBe("9.9s");
    expect(shortDuration(70_000)).toBe("1m10s");
  });
});
