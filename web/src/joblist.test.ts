// The jobs table's state (joblist.ts), with vitest (ctest: console.unit).
import { describe, expect, test } from "vitest";
import type { Job } from "./api";
import { applyChange, mergeFirstPage, visibleRange } from "./joblist";

// Job n was created at minute n: a higher n is newer.
function job(n: number, phase = "Running", name = `job-${n}`): Job {
  return {
    id: `j-${String(n).padStart(10, "0")}`,
    name,
    owner: "alice",
    fleet: "local",
    phase: phase as Job["phase"],
    reason: "",
    message: "",
    exitCode: null,
    capsule: null,
    cancelRequested: false,
    cleanup: { logsArchived: false, released: false },
    createdAt: new Date(Date.UTC(2026, 0, 1, 0, n)).toISOString(),
    updatedAt: new Date(Date.UTC(2026, 0, 1, 0, n)).toISOString(),
    startedAt: null,
    finishedAt: null,
  };
}
const ids = (jobs: Job[]) => jobs.map((j) => j.id.slice(-2));

describe("mergeFirstPage", () => {
  test("a first load takes the page and its cursor", () => {
    const r = mergeFirstPage({ jobs: [], nextCursor: null }, [job(9), job(8)], "c8");
    expect(ids(r.jobs)).toEqual(["09", "08"]);
    expect(r.nextCursor).toBe("c8");
  });
  test("a re-read keeps the older rows loaded beyond the first page, updated above them", () => {
    const old = { jobs: [job(9), job(8), job(7), job(6)], nextCursor: "c6" };
    const r = mergeFirstPage(old, [job(10), job(9, "Succeeded")], "c9");
    expect(ids(r.jobs)).toEqual(["10", "09", "08", "07", "06"]);
    expect(r.jobs[1].phase).toBe("Succeeded");
    expect(r.nextCursor).toBe("c6");
  });
  test("a job gone from the first page's range (filtered out) goes", () => {
    const old = { jobs: [job(9), job(8), job(7)], nextCursor: "c7" };
    const r = mergeFirstPage(old, [job(9), job(7)], "c7b");
    expect(ids(r.jobs)).toEqual(["09", "07"]);
    expect(r.nextCursor).toBe("c7b"); // nothing older was loaded: the fresh page's cursor
  });
  test("a fresh page that is everything replaces everything", () => {
    const old = { jobs: [job(9), job(8)], nextCursor: "c8" };
    expect(ids(mergeFirstPage(old, [job(9)], null).jobs)).toEqual(["09"]);
  });
});

describe("applyChange", () => {
  const rows = { jobs: [job(9), job(7), job(5)], nextCursor: "c5" };
  test("updates a loaded row in place", () => {
    const r = applyChange(rows, job(7, "Failed"), {});
    expect(ids(r.jobs)).toEqual(["09", "07", "05"]);
    expect(r.jobs[1].phase).toBe("Failed");
    expect(rows.jobs[1].phase).toBe("Running"); // not mutated
  });
  test("adds a new job by age, newest first", () => {
    expect(ids(applyChange(rows, job(10), {}).jobs)).toEqual(["10", "09", "07", "05"]);
    expect(ids(applyChange(rows, job(8), {}).jobs)).toEqual(["09", "08", "07", "05"]);
  });
  test("leaves a job older than every loaded row to its page, unless all are loaded", () => {
    expect(ids(applyChange(rows, job(3), {}).jobs)).toEqual(["09", "07", "05"]);
    expect(ids(applyChange({ ...rows, nextCursor: null }, job(3), {}).jobs)).toEqual(["09", "07", "05", "03"]);
  });
  test("a job that leaves the filtered phase goes; one that does not match is not added", () => {
    expect(ids(applyChange(rows, job(7, "Succeeded"), { phase: "Running" }).jobs)).toEqual(["09", "05"]);
    expect(ids(applyChange(rows, job(10, "Queued"), { phase: "Running" }).jobs)).toEqual(["09", "07", "05"]);
    expect(ids(applyChange(rows, job(10, "Running", "other"), { name: "job-10" }).jobs)).toEqual(["09", "07", "05"]);
  });
  test("nameContains matches a part of the name, ignoring case, as the API does", () => {
    expect(ids(applyChange(rows, job(10, "Running", "llm-eval-7b"), { nameContains: "EVAL" }).jobs)).toEqual(["10", "09", "07", "05"]);
    expect(ids(applyChange(rows, job(10, "Running", "llm-eval-7b"), { nameContains: "evals" }).jobs)).toEqual(["09", "07", "05"]);
    // A watched job renamed out of the filter leaves the table.
    expect(ids(applyChange(rows, job(7, "Running", "other"), { nameContains: "job-" }).jobs)).toEqual(["09", "05"]);
  });
});

describe("visibleRange", () => {
  test("draws the rows in view and a few more", () => {
    expect(visibleRange(0, 360, 36, 10_000, 5)).toEqual({ first: 0, end: 15 });
    expect(visibleRange(36 * 5000, 360, 36, 10_000, 5)).toEqual({ first: 4995, end: 5015 });
  });
  test("stops at the last row", () => {
    expect(visibleRange(36 * 9995, 360, 36, 10_000, 5)).toEqual({ first: 9990, end: 10_000 });
    expect(visibleRange(0, 360, 36, 3, 5)).toEqual({ first: 0, end: 3 });
  });
});
