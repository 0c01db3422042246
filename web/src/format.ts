// Pure functions that turn API data into what the pages show (no DOM, no I/O).
import type { Job, JobEvent, Transition } from "./api";
import { TERMINAL } from "./api";

// "3s", "4m", "2h5m", "3d" — the way kubectl prints ages.
export function age(fromIso: string | null, now = Date.now()): string {
  if (!fromIso) return "";
  return duration(now - Date.parse(fromIso));
}

export function duration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${s % 60 ? `${s % 60}s` : ""}`;
  const hr = Math.floor(m / 60);
  if (hr < 24) return `${hr}h${m % 60 ? `${m % 60}m` : ""}`;
  return `${Math.floor(hr / 24)}d${hr % 24 ? `${hr % 24}h` : ""}`;
}

// One time format everywhere, with its zone: "2026-12-07 13:12:46 UTC".
export function clock(iso: string | null): string {
  if (!iso) return "—";
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  return `${new Date(t).toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

// The last line of a Python traceback (or a line like it) in a log's tail: "ValueError: bad
// learning rate". "" when there is none.
export function lastError(logTail: string): string {
  const lines = logTail.split("\n").map((l) => l.trimEnd());
  for (let i = lines.length - 1; i >= 0; i--) {
    if (/^([A-Za-z_][\w.]*)?(Error|Exception|Interrupt|Exit|Failure)(:.*)?$/.test(lines[i]) && !/^starforge-runner:/.test(lines[i])) return lines[i].slice(0, 300);
  }
  return "";
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

// The one line at the top of a job: phase, reason, message (for a Pending job the reason and
// message are the fleet's diagnosis of why it is not running yet).
export function statusLine(job: Job): string {
  let s: string = job.phase;
  if (job.reason) s += ` · ${job.reason}`;
  if (job.message) s += ` — ${job.message}`;
  if (job.cancelRequested && !TERMINAL.has(job.phase)) s += " (cancel requested)";
  return s;
}

// Fleet events carry their Kubernetes object in the source ("kuberay:Pod/sf-x-head"); the
// controller's own events have a plain source ("controller", "fleet:local", "api").
export function eventObject(e: JobEvent): { object: string; source: string } {
  const m = /^kuberay:(.*)$/.exec(e.source);
  if (m) return { object: m[1], source: "kubernetes" };
  return { object: "", source: e.source };
}

export interface Segment {
  phase: string;
  start: number; // ms since the epoch
  end: number;
  fraction: number; // of the whole timeline
}

// The phase timeline as consecutive segments (the last one runs to `now` unless terminal).
export function timelineSegments(timeline: Transition[], now = Date.now()): Segment[] {
  if (timeline.length === 0) return [];
  const points = timeline.map((t) => ({ phase: t.to as string, at: Date.parse(t.at) }));
  const last = points[points.length - 1];
  const endAll = TERMINAL.has(last.phase) ? last.at : Math.max(now, last.at);
  const total = Math.max(1, endAll - points[0].at);
  const segs: Segment[] = [];
  for (let i = 0; i < points.length; i++) {
    const start = points[i].at;
    const end = i + 1 < points.length ? points[i + 1].at : endAll;
    if (i === points.length - 1 && TERMINAL.has(points[i].phase)) {
      segs.push({ phase: points[i].phase, start, end: start, fraction: 0 });
    } else {
      segs.push({ phase: points[i].phase, start, end, fraction: (end - start) / total });
    }
  }
  return segs;
}

// How long each phase took in all (a phase entered twice counts both times), in the order first
// entered, and the whole: from the first transition to the terminal one (or `now`).
export function phaseDurations(timeline: Transition[], now = Date.now()): { phases: { phase: string; ms: number }[]; total: number; ended: boolean } {
  const segs = timelineSegments(timeline, now);
  const phases: { phase: string; ms: number }[] = [];
  for (const s of segs) {
    if (s.end === s.start && TERMINAL.has(s.phase)) continue; // the end, not a phase that lasted
    const p = phases.find((x) => x.phase === s.phase);
    if (p) p.ms += s.end - s.start;
    else phases.push({ phase: s.phase, ms: s.end - s.start });
  }
  const last = segs[segs.length - 1];
  return { phases, total: segs.length ? last.end - segs[0].start : 0, ended: Boolean(last && TERMINAL.has(last.phase)) };
}

// A duration in milliseconds below a second ("40 ms"), to a tenth of a second below ten
// ("3.2s"), else as duration().
export function shortDuration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)}s`;
  return duration(ms);
}

// JSON → YAML (block style) for showing a JobSpec; strings are quoted when YAML would read them
// as something else.
export function toYaml(value: unknown, indent = 0): string {
  const pad = "  ".repeat(indent);
  if (Array.isArray(value)) {
    if (value.length === 0) return "[]";
    return value
      .map((v) => {
        const inner = toYaml(v, indent + 1);
        if (isBlock(v)) return `${pad}- ${inner.trimStart()}`;
        return `${pad}- ${inner}`;
      })
      .join("\n");
  }
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 0) return "{}";
    return entries
      .map(([k, v]) => {
        if (isBlock(v)) return `${pad}${k}:\n${toYaml(v, indent + 1)}`;
        return `${pad}${k}: ${toYaml(v, indent + 1)}`;
      })
      .join("\n");
  }
  if (typeof value === "string") return yamlString(value);
  return String(value);
}

function isBlock(v: unknown): boolean {
  return (
    v !== null &&
    typeof v === "object" &&
    (Array.isArray(v) ? v.length > 0 : Object.keys(v as object).length > 0)
  );
}

function yamlString(s: string): string {
  const plain =
    /^[A-Za-z_./][A-Za-z0-9_./ =+-]*$/.test(s) &&
    !/^(true|false|yes|no|on|off|null|~)$/i.test(s) &&
    !/[ ]$/.test(s) &&
    !/ #|: /.test(s);
  return plain ? s : JSON.stringify(s);
}

// The 1-based line of a YAML text where a field path such as "pools[1].gpusPerMachine" is
// written, as closely as a line scan can tell (the path's deepest key found after its parents);
// 0 when it is not found.
export function yamlLineOf(text: string, path: string): number {
  const parts = path.split(".").flatMap((p) => {
    const m = /^([^[\]]*)((\[\d+\])*)$/.exec(p);
    if (!m) return [{ key: p, index: -1 }];
    const idx = [...m[2].matchAll(/\[(\d+)\]/g)].map((x) => Number(x[1]));
    return [{ key: m[1], index: idx.length ? idx[0] : -1 }];
  });
  const lines = text.split("\n");
  let from = 0;
  let found = 0;
  for (const part of parts) {
    if (!part.key) continue;
    const re = new RegExp(`^\\s*(- )?["']?${escapeRe(part.key)}["']?\\s*:`);
    let line = -1;
    for (let i = from; i < lines.length; i++) {
      if (re.test(lines[i])) {
        line = i;
        break;
      }
    }
    if (line < 0) return found;
    found = line + 1;
    from = line + 1;
    if (part.index >= 0) {
      // Skip to the index-th "- " item after the key.
      let seen = -1;
      for (let i = from; i < lines.length; i++) {
        if (/^\s*- /.test(lines[i])) {
          seen++;
          if (seen === part.index) {
            found = i + 1;
            from = i;
            break;
          }
        }
      }
    }
  }
  return found;
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

// The capsule's default exclusions (docs/capsule.md) applied to a folder picked in the browser,
// so what is uploaded is what `forge submit --code` would upload.
export function ignoredPath(relative: string): boolean {
  const parts = relative.split("/");
  for (const p of parts.slice(0, -1)) {
    if (p === ".git" || p === "__pycache__" || p === ".venv" || p === ".forge") return true;
  }
  const base = parts[parts.length - 1];
  return base === ".git" || base.endsWith(".pyc");
}

// A folder picked with webkitdirectory gives "folder/sub/file"; the capsule's paths are relative
// to the folder itself.
export function stripTopFolder(paths: string[]): string[] {
  if (paths.length === 0) return paths;
  const first = paths[0].split("/")[0];
  if (paths.every((p) => p.startsWith(`${first}/`))) return paths.map((p) => p.slice(first.length + 1));
  return paths;
}

// The same event told by two sources at about the same time (the controller's and the fleet's
// AppFailed) as one row naming both sources. Events of different objects, or more than 5 s
// apart, stay apart.
export function mergeEchoes<E extends { type: string; reason: string; message: string; object: string; source: string; lastAt: string }>(events: E[]): E[] {
  const out: E[] = [];
  for (const e of events) {
    const twin = out.find(
      (o) =>
        o.type === e.type &&
        o.reason === e.reason &&
        o.message === e.message &&
        o.object === e.object &&
        !o.source.split(", ").includes(e.source) &&
        Math.abs(Date.parse(o.lastAt) - Date.parse(e.lastAt)) <= 5000,
    );
    if (twin) twin.source = `${twin.source}, ${e.source}`;
    else out.push({ ...e });
  }
  return out;
}
