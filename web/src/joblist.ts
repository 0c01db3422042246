// The jobs table's state as pure functions (joblist.test.ts): the rows loaded so far, newest
// first, kept current by the API's watch events and re-reads of the first page; and which of
// them a virtualised table draws.
import type { Job } from "./api";

export interface Rows {
  jobs: Job[];
  nextCursor: string | null; // where the next (older) page starts; null: all are loaded
}

// A fresh first page (`fresh`, whose next page starts at `freshCursor`) merged into what was
// loaded: the fresh page stands for the newest jobs up to its last one; the older rows loaded
// beyond it stay (a re-read must not throw away what the user scrolled to).
export function mergeFirstPage(old: Rows, fresh: Job[], freshCursor: string | null): Rows {
  if (freshCursor === null || fresh.length === 0 || old.jobs.length === 0) return { jobs: fresh, nextCursor: freshCursor };
  const last = fresh[fresh.length - 1];
  const ids = new Set(fresh.map((j) => j.id));
  const at = old.jobs.findIndex((j) => j.id === last.id);
  const rest =
    at >= 0
      ? old.jobs.slice(at + 1)
      : old.jobs.filter((j) => !ids.has(j.id) && Date.parse(j.createdAt) < Date.parse(last.createdAt));
  // Nothing older was loaded beyond the fresh page: continue after the fresh page.
  return { jobs: [...fresh, ...rest], nextCursor: rest.length ? old.nextCursor : freshCursor };
}

export interface JobFilters {
  phase?: string;
  fleet?: string;
  name?: string; // the exact name
  nameContains?: string; // a part of the name, ignoring case (as the API's nameContains)
  owner?: string;
}

export function matches(job: Job, f: JobFilters): boolean {
  return (
    (!f.phase || job.phase === f.phase) &&
    (!f.fleet || job.fleet === f.fleet) &&
    (!f.name || job.name === f.name) &&
    (!f.nameContains || job.name.toLowerCase().includes(f.nameContains.toLowerCase())) &&
    (!f.owner || job.owner === f.owner)
  );
}

// One job as a watch sent it: its row updated; a new job that matches added in its place by
// age (newest first); a job that no longer matches the filters (its phase moved on) removed.
// A job older than every loaded row is left for the page that will load it.
export function applyChange(rows: Rows, job: Job, f: JobFilters): Rows {
  const at = rows.jobs.findIndex((j) => j.id === job.id);
  const keep = matches(job, f);
  if (at >= 0) {
    const jobs = rows.jobs.slice();
    if (keep) jobs[at] = job;
    else jobs.splice(at, 1);
    return { ...rows, jobs };
  }
  if (!keep) return rows;
  const created = Date.parse(job.createdAt);
  const pos = rows.jobs.findIndex((j) => Date.parse(j.createdAt) <= created);
  if (pos < 0) {
    if (rows.nextCursor !== null) return rows; // older than all loaded: its page has it
    return { ...rows, jobs: [...rows.jobs, job] };
  }
  const jobs = rows.jobs.slice();
  jobs.splice(pos, 0, job);
  return { ...rows, jobs };
}

// The rows [first, end) a table of `total` rows of `rowHeight` px draws when scrolled to
// `scrollTop` in a viewport `height` px high, with `overscan` rows more on each side.
export function visibleRange(scrollTop: number, height: number, rowHeight: number, total: number, overscan = 10): { first: number; end: number } {
  const first = Math.max(0, Math.floor(scrollTop / rowHeight) - overscan);
  const end = Math.min(total, Math.ceil((scrollTop + height) / rowHeight) + overscan);
  return { first: Math.min(first, end), end };
}

// The jobs table's sortable columns; the order the API gives (newest first) is the default.
export type SortKey = "name" | "id" | "owner" | "fleet" | "phase" | "reason" | "age" | "ran";
export interface Sort {
  key: SortKey;
  desc: boolean;
}

// Run time in ms (running jobs up to `now`); -1 before it started.
function ran(j: Job, now: number): number {
  if (!j.startedAt) return -1;
  return (j.finishedAt ? Date.parse(j.finishedAt) : now) - Date.parse(j.startedAt);
}

// The rows in the order of `sort` (a stable sort: equal rows keep the API's newest-first order).
// Age ascending is newest first, as "Age" reads.
export function sortJobs(jobs: Job[], sort: Sort | null, now = Date.now()): Job[] {
  if (!sort) return jobs;
  const key = (j: Job): string | number => {
    switch (sort.key) {
      case "age":
        return -Date.parse(j.createdAt);
      case "ran":
        return ran(j, now);
      default:
        return j[sort.key].toLowerCase();
    }
  };
  const keyed = jobs.map((j, i) => ({ j, i, k: key(j) }));
  keyed.sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : 0) * (sort.desc ? -1 : 1) || a.i - b.i);
  return keyed.map((x) => x.j);
}

export function parseSort(v: string | null): Sort | null {
  const m = /^(-?)(name|id|owner|fleet|phase|reason|age|ran)$/.exec(v ?? "");
  return m ? { key: m[2] as SortKey, desc: m[1] === "-" } : null;
}

export function formatSort(s: Sort | null): string {
  return s ? `${s.desc ? "-" : ""}${s.key}` : "";
}
