// Job detail: the status line (phase · reason — message; for a Pending job that is the fleet's
// diagnosis), the phase timeline, the event view, the driver log (follow, search, download),
// the JobSpec and the capsule; cancel and submit again. Kept live by the API's job watch
// (live.ts), polled when there is none.
import { ApiError, getJson, postJson, request, TERMINAL, type CapsuleInfo, type Job, type JobEvent } from "../api";
import { clear, h, link } from "../dom";
import { age, bytes, duration, eventObject, statusLine, timelineSegments, toYaml } from "../format";
import { live } from "../live";
import { followLog } from "../logstream";
import type { Cleanup, Ctx } from "../main";

export const RESUBMIT_KEY = "starforge.resubmit";
const MAX_LOG_LINES = 50_000;
const MAX_CAPSULE_FILES = 2_000; // rows of the capsule's file list drawn

export function jobPage(ctx: Ctx, id: string): Cleanup {
  document.title = `${id} · StarForge`;
  const path = `/api/v1/jobs/${encodeURIComponent(id)}`;
  const title = h("h1", null, id);
  const status = h("p", { class: "status-line", id: "status-line", role: "status" });
  const actions = h("div", { class: "actions" });
  const timeline = h("div", { class: "timeline", id: "timeline", role: "img", "aria-label": "Phase timeline" });
  const transitions = h("ol", { class: "transitions" });
  const eventsBody = h("tbody");
  const eventsNote = h("p", { class: "muted", id: "events-note" });
  const spec = h("pre", { class: "code", id: "spec", tabindex: "0", "aria-label": "JobSpec (canonical)" });
  const capsule = h("dl", { class: "kv", id: "capsule" });
  const facts = h("dl", { class: "kv", id: "facts" });
  const error = h("p", { class: "error", role: "alert" });
  const archive = h("div", { id: "archive" }, h("p", { class: "muted" }, "Shown once the job has ended and its logs are collected."));

  // ---- the log ----
  const lines: string[] = [];
  let dropped = 0;
  const logPre = h("pre", { class: "log", id: "log", tabindex: "0", "aria-label": "Driver log", "aria-live": "off" });
  const follow = h("input", { type: "checkbox", id: "log-follow", checked: true });
  const search = h("input", { type: "search", id: "log-search", placeholder: "search the log" });
  const logStatus = h("span", { class: "muted", id: "log-status", role: "status" }, "waiting for output…");
  const download = h("button", { type: "button", id: "log-download" }, "Download");
  const matches = (l: string) => !search.value || l.toLowerCase().includes(search.value.toLowerCase());
  // The stream's state ("12 lines, following"), unless a search shows its match count.
  let streamStatus = "waiting for output…";
  const setStreamStatus = (text: string) => {
    streamStatus = text;
    if (!search.value) logStatus.textContent = text;
  };
  const redrawLog = () => {
    const shown = lines.filter(matches);
    logPre.textContent = shown.length ? shown.join("\n") + "\n" : "";
    logStatus.textContent = search.value ? plural(shown.length, "matching line") : streamStatus;
    scrollLog();
  };
  const scrollLog = () => {
    if (follow.checked) logPre.scrollTop = logPre.scrollHeight;
  };
  search.addEventListener("input", redrawLog);
  follow.addEventListener("change", scrollLog);
  download.addEventListener("click", async () => {
    try {
      const res = await request(`${path}/logs`);
      const blob = await res.blob();
      const a = h("a", { href: URL.createObjectURL(blob), download: `${id}-driver.log` });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
    } catch (e) {
      logStatus.textContent = `download failed: ${(e as Error).message}`;
    }
  });
  const stopLog = followLog(
    id,
    (newLines) => {
      for (const l of newLines) lines.push(l);
      if (lines.length > MAX_LOG_LINES) {
        const cut = lines.length - MAX_LOG_LINES;
        lines.splice(0, cut);
        dropped += cut;
      }
      const shown = newLines.filter(matches);
      if (dropped > 0 || search.value) redrawLog();
      else if (shown.length) logPre.append(shown.join("\n") + "\n");
      setStreamStatus(
        `${plural(lines.length + dropped, "line")}${dropped ? ` (the first ${dropped} only in the download)` : ""}, following`,
      );
      scrollLog();
    },
    (end) => {
      setStreamStatus(`${plural(lines.length + dropped, "line")}; the job ended ${end.phase}${end.exitCode !== null ? ` (exit ${end.exitCode})` : ""}`);
    },
    (msg) => setStreamStatus(msg),
  );

  // ---- cancel / submit again ----
  let job: Job | null = null;
  const renderActions = () => {
    if (!job) return;
    const again = h("button", { type: "button", id: "submit-again" }, "Submit again…");
    again.addEventListener("click", () => {
      sessionStorage.setItem(RESUBMIT_KEY, toYaml(job!.spec ?? {}) + "\n");
      ctx.navigate("/submit");
    });
    const cancel = h("button", { type: "button", id: "cancel", class: "danger" }, "Cancel job…");
    cancel.disabled = TERMINAL.has(job.phase) || job.cancelRequested;
    cancel.addEventListener("click", () => {
      const yes = h("button", { type: "button", id: "cancel-confirm", class: "danger" }, "Yes, cancel it");
      const no = h("button", { type: "button" }, "Keep it");
      yes.addEventListener("click", async () => {
        yes.disabled = true;
        try {
          job = await postJson<Job>(`${path}/cancel`);
          await refresh();
        } catch (e) {
          error.textContent = `Cannot cancel: ${(e as Error).message}`;
        }
        renderActions();
      });
      no.addEventListener("click", renderActions);
      clear(actions, h("span", null, `Cancel ${job!.name}? Its processes are stopped.`), yes, no);
      yes.focus();
    });
    clear(actions, cancel, again);
  };

  const renderJob = (j: Job, events: JobEvent[]) => {
    const now = Date.now();
    clear(title, j.name, " ", h("span", { class: "mono muted" }, j.id));
    clear(status, h("span", { class: `phase phase-${j.phase}` }, j.phase), " ", statusLine(j).slice(j.phase.length).replace(/^ · /, ""));
    status.title = statusLine(j);
    clear(
      facts,
      kv("Owner", j.owner),
      kv("Fleet", j.fleet),
      kv("Created", `${j.createdAt} (${age(j.createdAt, now)} ago)`),
      kv("Started", j.startedAt ?? "—"),
      kv("Finished", j.finishedAt ?? "—"),
      kv("Exit code", j.exitCode === null ? "—" : String(j.exitCode)),
      kv("Logs archived", j.cleanup.logsArchived ? "yes" : "no"),
      kv("Released", j.cleanup.released ? "yes" : "no"),
    );
    const segs = timelineSegments(j.timeline ?? [], now);
    clear(
      timeline,
      segs.map((s) => {
        const el = h(
          "div",
          { class: `seg phase-bg-${s.phase}`, title: `${s.phase} ${duration(s.end - s.start)}` },
          h("span", null, s.phase),
        );
        el.style.flexGrow = String(Math.max(s.fraction, 0.04));
        return el;
      }),
    );
    timeline.setAttribute("aria-label", `Phase timeline: ${segs.map((s) => `${s.phase} ${duration(s.end - s.start)}`).join(", ")}`);
    clear(
      transitions,
      (j.timeline ?? []).map((t) =>
        h(
          "li",
          null,
          h("time", { datetime: t.at }, new Date(t.at).toLocaleTimeString()),
          " ",
          h("strong", null, t.to),
          t.reason ? ` · ${t.reason}` : "",
          t.message ? ` — ${t.message}` : "",
          h("span", { class: "muted" }, ` (${t.cause})`),
        ),
      ),
    );
    // Newest first: the event that explains a stuck job is usually the latest.
    const sorted = [...events].sort((a, b) => Date.parse(b.lastAt) - Date.parse(a.lastAt));
    clear(
      eventsBody,
      sorted.map((e) => {
        const { object, source } = eventObject(e);
        return h(
          "tr",
          { class: e.type === "Warning" ? "warning" : "" },
          h("td", null, e.type),
          h("td", null, e.reason),
          h("td", { class: "mono" }, object),
          h("td", null, source),
          h("td", { class: "msg" }, e.message),
          h("td", null, e.count > 1 ? `${age(e.lastAt, now)} (×${e.count} over ${age(e.firstAt, now)})` : age(e.lastAt, now)),
        );
      }),
    );
    eventsNote.textContent = events.length ? "" : "No events yet.";
    spec.textContent = toYaml(j.spec ?? {});
    if (!capsuleInfo)
      clear(
        capsule,
        j.capsule
          ? [...kv("SHA-256", j.capsule.sha256), ...kv("Object key", j.capsule.key)]
          : kv("Capsule", "not built yet (the job is packaged after it is queued)"),
      );
    void loadCapsule(j);
  };

  // The capsule's size and file list, from its manifest (GET …/capsule), once it is stored.
  let capsuleInfo: CapsuleInfo | null = null;
  let capsuleLoading = false;
  const capsuleFiles = h("div", { id: "capsule-files" });
  const loadCapsule = async (j: Job) => {
    if (capsuleInfo || capsuleLoading || !j.capsule || ["Queued", "Packaging"].includes(j.phase)) return;
    capsuleLoading = true;
    try {
      const info = await getJson<CapsuleInfo>(`${path}/capsule`);
      capsuleInfo = info;
      clear(
        capsule,
        kv("SHA-256", info.sha256),
        kv("Object key", info.key),
        kv("Size", bytes(info.size)),
        kv("Files", `${info.userFiles} of yours + ${info.files.length - info.userFiles} of StarForge's`),
      );
      const shown = info.files.slice(0, MAX_CAPSULE_FILES);
      clear(
        capsuleFiles,
        h(
          "details",
          null,
          h("summary", null, `Files in the capsule's manifest (${info.files.length})`),
          h(
            "table",
            { class: "files", "aria-label": "Files in the capsule" },
            h("thead", null, h("tr", null, ["Path", "Size", "SHA-256"].map((c) => h("th", { scope: "col" }, c)))),
            h(
              "tbody",
              null,
              shown.map((f) =>
                h(
                  "tr",
                  { class: f.starforge ? "muted" : "" },
                  h("td", { class: "mono" }, f.path, f.executable ? " (executable)" : ""),
                  h("td", null, bytes(f.size)),
                  h("td", { class: "mono", title: f.sha256 }, f.sha256.slice(0, 12)),
                ),
              ),
            ),
          ),
          info.files.length > shown.length
            ? h("p", { class: "muted" }, `and ${info.files.length - shown.length} more, not shown.`)
            : null,
        ),
      );
    } catch {
      // Not stored yet (a capsule the client built is stored while Packaging): tried again
      // at the job's next change.
    } finally {
      capsuleLoading = false;
    }
  };

  let archiveLoaded = false;
  const loadArchive = async () => {
    archiveLoaded = true;
    const found: { name: string; text: string }[] = [];
    for (const name of ARCHIVE_FILES) {
      try {
        // JSON files whole (they are parsed); logs: their last 2,000 lines (Download has all).
        const tail = name.endsWith(".json") ? "" : "&tail=2000";
        const res = await request(`${path}/logs?file=${encodeURIComponent(name)}${tail}`);
        found.push({ name, text: await res.text() });
      } catch {
        // The job has no such file (another fleet, or the cluster was gone): not shown.
      }
    }
    if (!found.length) {
      clear(archive, h("p", { class: "muted" }, "No archived files beside the driver log."));
      return;
    }
    const view = h("pre", { class: "code log", id: "archive-view", tabindex: "0", "aria-live": "polite" });
    const tabs = h("div", { class: "actions", role: "group", "aria-label": "Archived files" });
    const show = (f: { name: string; text: string }, button: HTMLButtonElement) => {
      for (const b of tabs.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b === button));
      view.textContent = renderArchived(f.name, f.text);
      view.setAttribute("aria-label", f.name);
    };
    const buttons = found.map((f) => {
      const b = h("button", { type: "button", "data-file": f.name, "aria-pressed": "false" }, f.name);
      b.addEventListener("click", () => show(f, b));
      return b;
    });
    clear(tabs, buttons);
    clear(archive, tabs, view);
    show(found[0], buttons[0]);
  };

  let stopLive: () => void = () => {};
  let events: JobEvent[] = [];
  const show = (j: Job) => {
    const changed = !job || job.phase !== j.phase || job.cancelRequested !== j.cancelRequested;
    job = j;
    document.title = `${j.name} (${j.phase}) · StarForge`;
    renderJob(j, events);
    if (changed) renderActions();
    if (TERMINAL.has(j.phase) && j.cleanup.logsArchived && !archiveLoaded) void loadArchive();
  };
  const notFound = () => {
    stopLive();
    stopLog();
    clear(ctx.main, h("h1", null, "Job not found"), h("p", { id: "not-found" }, `There is no job ${id} that you can see. `, link("/jobs", "Back to the jobs.")));
  };
  // The job and its events with plain requests: when there is no watch stream, and after a cancel.
  const refresh = async () => {
    try {
      const [j, ev] = await Promise.all([getJson<Job>(path), getJson<{ items: JobEvent[] }>(`${path}/events`)]);
      events = ev.items;
      show(j);
      if (TERMINAL.has(j.phase) && j.cleanup.logsArchived && j.cleanup.released) stopLive();
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return notFound();
      error.textContent = `Cannot load the job: ${(e as Error).message}`;
    }
  };
  const onEvent = (ev: { event: string; data: string }) => {
    try {
      if (ev.event === "job") show(JSON.parse(ev.data) as Job);
      else if (ev.event === "events") {
        events = (JSON.parse(ev.data) as { items: JobEvent[] }).items;
        if (job) renderJob(job, events);
      } else if (ev.event === "end") stopLive(); // nothing changes any more
    } catch (e) {
      error.textContent = `Cannot read the job's update: ${(e as Error).message}`;
    }
  };
  // Ages move on without news from the server.
  const ticker = setInterval(() => {
    if (job && !document.hidden) renderJob(job, events);
  }, 10_000);

  const section = (id2: string, heading: string, ...body: (HTMLElement | null)[]) =>
    h("section", { "aria-labelledby": id2 }, h("h2", { id: id2 }, heading), ...body);
  clear(
    ctx.main,
    h("p", { class: "crumbs" }, link("/jobs", "Jobs"), " / ", id),
    title,
    status,
    actions,
    error,
    section("h-timeline", "Timeline", timeline, transitions),
    section(
      "h-events",
      "Events",
      h(
        "table",
        { class: "events", id: "events", "aria-labelledby": "h-events" },
        h("thead", null, h("tr", null, ["Type", "Reason", "Object", "Source", "Message", "Age"].map((c) => h("th", { scope: "col" }, c)))),
        eventsBody,
      ),
      eventsNote,
    ),
    section(
      "h-log",
      "Driver log",
      h(
        "div",
        { class: "log-tools" },
        h("label", { for: "log-follow", class: "check" }, follow, " Follow"),
        h("label", { for: "log-search", class: "sr-only" }, "Search the log"),
        search,
        download,
        logStatus,
      ),
      logPre,
    ),
    section("h-archive", "Archived logs", archive),
    h(
      "div",
      { class: "two" },
      section("h-facts", "Job", facts),
      section("h-capsule", "Capsule", capsule, capsuleFiles),
    ),
    section("h-spec", "JobSpec", spec),
  );
  stopLive = live({ url: () => `${path}?watch=1`, onEvent, snapshot: refresh, snapshotFirst: false, everyMs: 2000 });
  return () => {
    stopLive();
    stopLog();
    clearInterval(ticker);
  };
}

// What fleets keep beside driver.log (docs/api.md, Logs: ?file=): the kuberay fleet's archive
// after the end, the local fleet's runner log.
const ARCHIVE_FILES = ["ray-job.log", "submitter.log", "events.json", "rayjob.json", "not-archived.txt", "runner.log"];

// JSON files are shown readably: the RayJob as YAML, the archived events one per line.
function renderArchived(name: string, text: string): string {
  if (!name.endsWith(".json")) return text;
  try {
    const v = JSON.parse(text) as unknown;
    if (name === "rayjob.json") return toYaml(v);
    return JSON.stringify(v, null, 2);
  } catch {
    return text;
  }
}

function plural(n: number, what: string): string {
  return `${n} ${what}${n === 1 ? "" : "s"}`;
}

function kv(k: string, v: string): HTMLElement[] {
  return [h("dt", null, k), h("dd", null, v)];
}
