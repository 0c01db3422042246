// Job detail: the status line (phase · reason — message; for a Pending job that is the fleet's
// diagnosis), the phase timeline, the event view, the driver log (follow, search, download),
// the JobSpec and the capsule; cancel and submit again. Kept live by the API's job watch
// (live.ts), polled when there is none.
import {
  ApiError,
  type Artifacts,
  type CapsuleInfo,
  type EventList,
  getJson,
  type Job,
  type JobDetail,
  type JobEvent,
  type JobWithSpec,
  type MetricsAnswer,
  postJson,
  request,
  TERMINAL,
} from "../api";
import { clear, h, kv, link } from "../dom";
import { age, bytes, clock, duration, eventObject, lastError, mergeEchoes, phaseDurations, shortDuration, statusLine, timelineSegments, toYaml } from "../format";
import { live, type LiveMode } from "../live";
import { followLog } from "../logstream";
import { drawChart, formatValue, MetricSeries } from "../metrics";
import type { Cleanup, Ctx } from "../main";
import { drawEvents, eventsTable } from "./events";

export const RESUBMIT_KEY = "starforge.resubmit";
// What "Edit and run…" hands the Submit page (sessionStorage, as JSON).
export interface Resubmit {
  spec: string; // the JobSpec, as YAML
  capsuleSha256?: string; // the earlier job's stored capsule
  from?: string; // its id
}
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
  const { table: eventsView, body: eventsBody } = eventsTable("events", "h-events");
  const eventsNote = h("p", { class: "muted", id: "events-note" });
  const spec = h("pre", { class: "code", id: "spec", tabindex: "0", "aria-label": "JobSpec (canonical)" });
  const capsule = h("dl", { class: "kv", id: "capsule" });
  const facts = h("dl", { class: "kv", id: "facts" });
  const durations = h("dl", { class: "kv durations", id: "durations", "aria-label": "How long each phase took" });
  const resources = h("div", { id: "resources" });
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
    logPre.textContent = shown.length ? `${shown.join("\n")}\n` : "";
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
      else if (shown.length) logPre.append(`${shown.join("\n")}\n`);
      setStreamStatus(
        `${plural(lines.length + dropped, "line")}${dropped ? ` (the first ${dropped} only in the download)` : ""}, following`,
      );
      scrollLog();
    },
    (end) => {
      setStreamStatus(`${plural(lines.length + dropped, "line")}; the job ended${end ? ` ${end.phase}` : ""}${end && end.exitCode !== null ? ` (exit ${end.exitCode})` : ""}`);
    },
    (msg) => setStreamStatus(msg),
  );

  // ---- cancel / submit again ----
  // The job as last read (JobDetail), with what the cancel answered until the refresh that follows.
  let job: JobDetail | null = null;
  const renderActions = () => {
    if (!job) return;
    const again = h("button", { type: "button", id: "submit-again" }, "Edit and run…");
    again.addEventListener("click", () => {
      const r: Resubmit = { spec: `${toYaml(job!.spec ?? {})}\n`, capsuleSha256: job!.capsule?.sha256, from: job!.id };
      sessionStorage.setItem(RESUBMIT_KEY, JSON.stringify(r));
      ctx.navigate("/submit");
    });
    // The same JobSpec and the stored capsule (capsuleSha256): nothing is uploaded or picked.
    const rerun = h("button", { type: "button", id: "run-again", title: "The same JobSpec and code, from the stored capsule" }, "Run again");
    rerun.disabled = !job.capsule || !job.spec;
    rerun.addEventListener("click", async () => {
      rerun.disabled = true;
      try {
        const body = new FormData();
        body.append("spec", new Blob([JSON.stringify(job!.spec)], { type: "application/json" }), "job.json");
        body.append("capsuleSha256", job!.capsule!.sha256);
        const res = await request("/api/v1/jobs", { method: "POST", body });
        const created = (await res.json()) as JobWithSpec;
        ctx.navigate(`/jobs/${encodeURIComponent(created.id)}`);
      } catch (e) {
        error.textContent = `Cannot run it again: ${(e as Error).message}`;
        rerun.disabled = false;
      }
    });
    const cancel = h("button", { type: "button", id: "cancel", class: "danger" }, "Cancel job…");
    cancel.disabled = TERMINAL.has(job.phase) || job.cancelRequested;
    cancel.addEventListener("click", () => {
      const yes = h("button", { type: "button", id: "cancel-confirm", class: "danger" }, "Yes, cancel it");
      const no = h("button", { type: "button" }, "Keep it");
      yes.addEventListener("click", async () => {
        yes.disabled = true;
        try {
          // The cancel answers the job without its detail (spec, timeline, resources): kept.
          job = { ...(job as JobDetail), ...(await postJson<Job>(`${path}/cancel`)) };
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
    clear(actions, rerun, again, cancel);
  };

  // A failed job's headline quotes the error: the last line of a traceback in the log's tail.
  let failure: string | null = null;
  const loadFailure = async () => {
    failure = "";
    try {
      failure = lastError(await (await request(`${path}/logs?tail=100`)).text());
    } catch {
      return;
    }
    if (failure && job) renderJob(job, events);
  };
  const renderJob = (j: JobDetail, events: JobEvent[]) => {
    const now = Date.now();
    clear(title, j.name, " ", h("span", { class: "mono muted" }, j.id));
    clear(
      status,
      h("span", { class: `phase phase-${j.phase}` }, j.phase),
      " ",
      statusLine(j).slice(j.phase.length).replace(/^ · /, ""),
      failure ? h("span", { class: "failure", id: "failure" }, h("br"), h("code", null, failure)) : null,
    );
    if (j.phase === "Failed" && failure === null) void loadFailure();
    status.title = statusLine(j);
    clear(
      facts,
      kv("Owner", j.owner),
      kv("Fleet", j.fleet),
      kv("Created", `${clock(j.createdAt)} (${age(j.createdAt, now)} ago)`),
      kv("Started", clock(j.startedAt)),
      kv("Finished", clock(j.finishedAt)),
      kv("Took", j.startedAt ? duration((j.finishedAt ? Date.parse(j.finishedAt) : now) - Date.parse(j.startedAt)) + (j.finishedAt ? "" : " so far") : "—"),
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
          h("span", null, `${s.phase} ${duration(s.end - s.start)}`),
        );
        el.style.flexGrow = String(Math.max(s.fraction, 0.02)); // to scale (flex-basis 0), each at least a sliver
        return el;
      }),
    );
    timeline.setAttribute("aria-label", `Phase timeline: ${segs.map((s) => `${s.phase} ${duration(s.end - s.start)}`).join(", ")}`);
    // How long each phase took in all, and the whole, in words (the bar's labels may be slivers).
    const took = phaseDurations(j.timeline ?? [], now);
    clear(
      durations,
      took.phases.flatMap((p) => kv(p.phase, shortDuration(p.ms))),
      took.phases.length ? kv(took.ended ? "Total" : "So far", shortDuration(took.total)) : null,
    );
    renderResources(j);
    clear(
      transitions,
      (j.timeline ?? []).map((t) =>
        h(
          "li",
          null,
          h("time", { datetime: t.at }, clock(t.at)),
          " ",
          h("strong", null, t.to),
          t.reason ? ` · ${t.reason}` : "",
          t.message ? ` — ${t.message}` : "",
          h("span", { class: "muted" }, ` (${t.cause})`),
        ),
      ),
    );
    drawEvents(
      eventsBody,
      mergeEchoes(events.map((e) => ({ ...e, ...eventObject(e) }))),
      now,
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

  // What the job asks of its fleet and what it used (GET …/jobs/{id}: resources): the kuberay
  // fleet's pods with their requests; the CPU time and peak memory the runner recorded at the end.
  const renderResources = (j: JobDetail) => {
    const r = j.resources;
    const pods = r?.pods?.length
      ? h(
          "table",
          { class: "files", id: "pod-requests", "aria-label": "Pods the job's RayJob requests" },
          h("thead", null, h("tr", null, ["Group", "Pool", "Pods", "CPU each", "Memory each", "GPUs each"].map((c) => h("th", { scope: "col" }, c)))),
          h(
            "tbody",
            null,
            r.pods.map((p) =>
              h(
                "tr",
                { "data-group": p.group },
                h("td", null, p.group),
                h("td", null, p.pool),
                h("td", null, String(p.pods)),
                h("td", null, p.requests.cpu ?? "—"),
                h("td", null, p.requests.memory ?? "—"),
                h("td", null, String(p.requests.gpus)),
              ),
            ),
          ),
        )
      : null;
    const usage = r?.usage
      ? h(
          "dl",
          { class: "kv", id: "usage" },
          kv("CPU time", `${r.usage.cpuSeconds.toFixed(1)} s (user + system, the entrypoint and its children)`),
          kv("Peak memory", `${bytes(r.usage.maxRssBytes)} (the largest process's resident set)`),
        )
      : h(
          "p",
          { class: "muted", id: "usage-note" },
          TERMINAL.has(j.phase)
            ? "No CPU or memory use was recorded for this job (the runner records it when the entrypoint ends)."
            : "CPU time and peak memory are recorded when the entrypoint ends.",
        );
    clear(resources, pods ? [h("h3", null, "Pods requested"), pods] : null, usage);
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
    // Only the files the server lists (GET …/artifacts): a request for one the job does not
    // have would be a 404 in the browser's console.
    let listed: string[] = [];
    try {
      const a = await getJson<Artifacts>(`${path}/artifacts`);
      listed = a.items.map((f) => f.name).filter((n) => n !== "driver.log");
    } catch {
      // An older server: none shown.
    }
    const names = [...ARCHIVE_FILES.filter((n) => listed.includes(n)), ...listed.filter((n) => !ARCHIVE_FILES.includes(n))];
    for (const name of names) {
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
      view.textContent = f.text ? renderArchived(f.name, f.text) : `${f.name} is empty.`;
      view.classList.toggle("muted", !f.text);
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

  // ---- training curves: GET …/metrics?follow=1 from the cursor read so far (SSE: each event an
  // answer with only what is new, then "end"); read by cursor every 2 s where there is no stream ----
  const metrics = new MetricSeries();
  let metricsCursor = "0";
  let metricsFiles: string[] = []; // the TensorBoard event files read
  let metricsDone = false;
  let metricsBusy = false;
  let metricsDrawn = false;
  let metricsMode: LiveMode = "live";
  const charts = h("div", { class: "charts", id: "charts" });
  const metricsNote = h("p", { class: "muted", id: "metrics-note", role: "status" }, "Looking for metrics…");
  const howTo = h(
    "details",
    { class: "howto" },
    h("summary", null, "How a job reports metrics"),
    h(
      "p",
      null,
      "Write one JSON object per line to ",
      h("code", null, "$FORGE_JOB_DIR/metrics.jsonl"),
      ", e.g. ",
      h("code", null, '{"step": 10, "loss": 0.31}'),
      ": every number but step and time is drawn as a curve over the steps. From Python, the runner in the capsule does it:",
    ),
    h(
      "pre",
      { class: "code" },
      'import os, sys\nsys.path.insert(0, os.path.join(os.environ["FORGE_CODE_DIR"], ".starforge", "runner.pyz"))\nfrom starforge_runner import metrics\nmetrics.log(step, loss=loss, accuracy=accuracy)',
    ),
    h(
      "p",
      null,
      "TensorBoard event files the job writes under ",
      h("code", null, "$FORGE_JOB_DIR"),
      " (tensorboardX, PyTorch's SummaryWriter, Lightning, tf.summary) are read too: their scalars are drawn by tag.",
    ),
  );
  const drawMetrics = () => {
    const figures = [...metrics.series].map(([name, pts]) => {
      const last = pts[pts.length - 1];
      return h(
        "figure",
        { class: "chart", "data-series": name, "data-count": pts.length },
        h("figcaption", null, h("strong", null, name), " ", h("span", { class: "muted" }, `${formatValue(last[1])} at step ${last[0]}`)),
        drawChart(name, pts) as unknown as HTMLElement,
      );
    });
    clear(charts, figures);
    const notes: string[] = [];
    if (!figures.length) notes.push(metricsDone ? "This job wrote no metrics." : "No metrics yet.");
    else notes.push(metricsDone ? "Final." : metricsMode === "polling" ? "Updated every 2 s while the job runs." : "Live: drawn as the job writes them.");
    if (metricsFiles.length) notes.push(`Also from TensorBoard event files: ${metricsFiles.join(", ")}.`);
    if (metrics.skipped) notes.push(`${metrics.skipped} line(s) of metrics.jsonl were not a JSON object of numbers.`);
    if (metrics.dropped) notes.push("More series than are drawn: only the first 24 are.");
    if (metrics.warning) notes.push(metrics.warning);
    metricsNote.textContent = notes.join(" ");
    howTo.hidden = figures.length > 0;
  };
  // One answer (a plain read's or a stream event's) merged in; true when it has news to draw.
  const takeMetrics = (a: MetricsAnswer): boolean => {
    const news = a.series.length > 0 || a.complete || a.skipped > 0 || Boolean(a.warning);
    metrics.add(a);
    metricsCursor = a.cursor;
    if (a.eventFiles.length) metricsFiles = a.eventFiles.map((f) => f.path);
    if (a.complete) metricsDone = true;
    return news;
  };
  // Where there is no stream: plain reads from the cursor, as many as the server has more.
  const loadMetrics = async () => {
    if (metricsDone || metricsBusy || document.hidden) return;
    metricsBusy = true;
    try {
      // Big files come in pieces of at most 4 MiB: read on while the server has more. The
      // cursor covers metrics.jsonl and the job's TensorBoard event files.
      let news = !metricsDrawn;
      for (let i = 0; i < 16; i++) {
        const before = metricsCursor;
        const a = await getJson<MetricsAnswer>(`${path}/metrics?cursor=${encodeURIComponent(metricsCursor)}`);
        news = takeMetrics(a) || news;
        if (a.complete || !a.more || a.cursor === before) break;
      }
      // Redrawn only with news: a pointer over a chart keeps its readout between reads.
      if (news) drawMetrics();
      metricsDrawn = true;
      if (metricsDone) stopMetrics();
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) metricsNote.textContent = `Cannot read the metrics: ${(e as Error).message}`;
    } finally {
      metricsBusy = false;
    }
  };
  const onMetricsEvent = (ev: { event: string; data: string }) => {
    try {
      if (ev.event === "metrics") {
        if (takeMetrics(JSON.parse(ev.data) as MetricsAnswer) || !metricsDrawn) drawMetrics();
        metricsDrawn = true;
      } else if (ev.event === "end") {
        metricsDone = true;
        drawMetrics();
        stopMetrics();
      }
    } catch (e) {
      metricsNote.textContent = `Cannot read the metrics: ${(e as Error).message}`;
    }
  };
  const stopMetrics = live({
    url: () => `${path}/metrics?follow=1&cursor=${encodeURIComponent(metricsCursor)}`,
    onEvent: onMetricsEvent,
    snapshot: loadMetrics,
    snapshotFirst: false,
    everyMs: 2000,
    onMode: (m) => {
      const changed = m !== metricsMode;
      metricsMode = m;
      // The stream is open: what there is so far comes as its first event; until then, say so.
      if (metricsDone || !(changed || (m === "live" && !metricsDrawn))) return;
      drawMetrics();
      metricsDrawn = true;
    },
  });

  let stopLive: () => void = () => {};
  let events: JobEvent[] = [];
  const show = (j: JobDetail) => {
    const changed = !job || job.phase !== j.phase || job.cancelRequested !== j.cancelRequested;
    job = j;
    document.title = `${j.name} (${j.phase}) · StarForge`;
    renderJob(j, events);
    if (changed) renderActions();
    if (TERMINAL.has(j.phase) && j.cleanup.logsArchived && !archiveLoaded) void loadArchive();
  };
  const notFound = () => {
    stopLive();
    stopMetrics();
    stopLog();
    clear(ctx.main, h("h1", null, "Job not found"), h("p", { id: "not-found" }, `There is no job ${id} that you can see. `, link("/jobs", "Back to the jobs.")));
  };
  // The job and its events with plain requests: when there is no watch stream, and after a cancel.
  const refresh = async () => {
    try {
      const [j, ev] = await Promise.all([getJson<JobDetail>(path), getJson<EventList>(`${path}/events`)]);
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
      if (ev.event === "job") show(JSON.parse(ev.data) as JobDetail);
      else if (ev.event === "events") {
        events = (JSON.parse(ev.data) as EventList).items;
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
    section("h-metrics", "Training curves", charts, metricsNote, howTo),
    section("h-timeline", "Timeline", timeline, durations, transitions),
    section(
      "h-events",
      "Events",
      eventsView,
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
      section("h-facts", "Job", facts, h("h3", null, "Resources"), resources),
      section("h-capsule", "Capsule", capsule, capsuleFiles),
    ),
    section("h-spec", "JobSpec", spec),
  );
  stopLive = live({ url: () => `${path}?watch=1`, onEvent, snapshot: refresh, snapshotFirst: false, everyMs: 2000 });
  return () => {
    stopLive();
    stopLog();
    stopMetrics();
    clearInterval(ticker);
  };
}

// What fleets keep beside driver.log (docs/api.md, Logs: ?file=), in the order their buttons are
// shown: the kuberay fleet's archive after the end, the local fleet's runner log; any other file
// the server lists comes after them.
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
