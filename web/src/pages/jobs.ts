// Jobs: the user's jobs (an admin's: everyone's, with an owner filter), newest first, filtered
// by phase / fleet / a part of the name. One virtualised table: pages of the API's cursor are
// loaded as it is scrolled, and only the rows in view are in the DOM, so 10,000 jobs scroll like
// 50. Kept live by the API's jobs watch (live.ts), or by re-reading the first page when there is
// none.
import { getJson, PHASES, type Job, type JobList } from "../api";
import { clear, h, link } from "../dom";
import { age, duration } from "../format";
import { applyChange, formatSort, mergeFirstPage, parseSort, sortJobs, visibleRange, type JobFilters, type Rows, type Sort, type SortKey } from "../joblist";
import { live, type LiveMode } from "../live";
import type { Cleanup, Ctx } from "../main";

const PAGE = 200; // jobs per request (the API allows 500)
const ROW_PX = 36; // every row's height (style.css: table.jobs tbody tr)

export function jobsPage(ctx: Ctx): Cleanup {
  document.title = "Jobs · StarForge";
  const params = new URLSearchParams(location.search);
  const phase = h(
    "select",
    { id: "f-phase", name: "phase" },
    h("option", { value: "" }, "any"),
    PHASES.map((p) => h("option", { value: p }, p)),
  );
  phase.value = params.get("phase") ?? "";
  const fleet = h(
    "select",
    { id: "f-fleet", name: "fleet" },
    h("option", { value: "" }, "any"),
    h("option", { value: "local" }, "local"),
    h("option", { value: "kuberay" }, "kuberay"),
  );
  fleet.value = params.get("fleet") ?? "";
  // A part of the name (the API's nameContains); `name=` links from before still fill it.
  const name = h("input", {
    id: "f-name",
    name: "nameContains",
    type: "search",
    placeholder: "part of the name",
    value: params.get("nameContains") ?? params.get("name") ?? "",
  });
  const owner = ctx.me.admin
    ? h("input", { id: "f-owner", name: "owner", type: "search", placeholder: "everyone", value: params.get("owner") ?? "" })
    : null;
  const status = h("p", { class: "muted", role: "status", id: "jobs-status" });
  const tbody = h("tbody");
  const columns = ["Name", "ID", ctx.me.admin ? "Owner" : null, "Fleet", "Phase", "Reason", "Age", "Ran"].filter((x) => x !== null);
  // A click on a column's heading sorts the loaded rows by it; again, the other way; a third
  // time, back to newest first. Kept in the URL (?sort=-ran).
  let sort: Sort | null = parseSort(params.get("sort"));
  let sorted: Job[] = [];
  let sortedFor: { rows: Rows | null; sort: Sort | null } = { rows: null, sort: null }; // what `sorted` is of
  const headers = columns.map((c) => {
    const key = c.toLowerCase() as SortKey;
    // The arrow is for the eye; aria-sort says it to a screen reader (and keeps the name "Name").
    const button = h("button", { type: "button", class: "sort", "data-sort": key }, c, h("span", { class: "arrow", "aria-hidden": "true" }));
    button.addEventListener("click", () => {
      sort = sort?.key !== key ? { key, desc: key === "ran" } : sort.desc === (key === "ran") ? { key, desc: !sort.desc } : null;
      keepUrl();
      draw();
    });
    return h("th", { scope: "col", "data-col": key, class: `c-${key}` }, button);
  });
  const showSort = () => {
    for (const th of headers) {
      const on = sort?.key === th.getAttribute("data-col");
      th.setAttribute("aria-sort", on ? (sort!.desc ? "descending" : "ascending") : "none");
      th.classList.toggle("sorted", on);
      th.querySelector(".arrow")!.textContent = on ? (sort!.desc ? " ▼" : " ▲") : "";
    }
    table.setAttribute("aria-label", sort ? `Jobs, by ${sort.key}${sort.desc ? ", descending" : ""}` : "Jobs, newest first");
  };
  const table = h(
    "table",
    { class: "jobs", id: "jobs", "aria-label": "Jobs, newest first", "aria-rowcount": "-1" },
    h("thead", null, h("tr", { "aria-rowindex": "1" }, headers)),
    tbody,
  );
  const empty = h("div", { class: "empty", id: "jobs-empty", hidden: true });
  // The scrolling box: focusable, so the keyboard scrolls it (arrows, Page Down, End).
  const scroller = h("div", { class: "jobs-scroll", id: "jobs-scroll", tabindex: "0", "aria-label": "Jobs table, scrollable" }, table);

  let rows: Rows = { jobs: [], nextCursor: null };
  let loaded = false; // the first page has been read
  let loadingMore = false;
  let mode: LiveMode = "paused";
  let error = "";

  const filters = (): JobFilters => ({
    phase: phase.value || undefined,
    fleet: fleet.value || undefined,
    nameContains: name.value.trim() || undefined,
    owner: owner?.value.trim() || undefined,
  });
  const query = (withPhase = true) => {
    const f = filters();
    const q = new URLSearchParams();
    if (withPhase && f.phase) q.set("phase", f.phase);
    if (f.fleet) q.set("fleet", f.fleet);
    if (f.nameContains) q.set("nameContains", f.nameContains);
    if (f.owner) q.set("owner", f.owner);
    return q;
  };

  let emptyKind = "";
  const filtered = () => Boolean(phase.value || fleet.value || name.value.trim() || owner?.value.trim());
  const showStatus = () => {
    const n = rows.jobs.length;
    const what = !loaded
      ? "Loading…"
      : n === 0
        ? filtered()
          ? "No jobs match."
          : "No jobs yet."
        : rows.nextCursor
          ? `${n} newest jobs loaded; scroll for older ones${sort ? " (sorted among those loaded)" : ""}.`
          : `All ${n} job${n === 1 ? "" : "s"}.`;
    // No jobs: say what to do instead of an empty table.
    const none = loaded && n === 0;
    empty.hidden = !none;
    scroller.hidden = none;
    const kind = none ? (filtered() ? "filtered" : "none") : "";
    if (kind && kind !== emptyKind) {
      const clearFilters = h("button", { type: "button", id: "clear-filters" }, "Clear the filters");
      clearFilters.addEventListener("click", () => {
        phase.value = fleet.value = name.value = "";
        if (owner) owner.value = "";
        refilter();
      });
      clear(
        empty,
        filtered()
          ? [h("p", null, "No jobs match these filters."), clearFilters]
          : [
              h("p", null, h("strong", null, "You have no jobs yet.")),
              h(
                "p",
                null,
                "Run a first one from the ",
                link("/submit?example=tiny-train", "tiny-train example"),
                " (a small training loop that draws its loss curve; no code to pick), or ",
                link("/submit", "submit your own"),
                ". From a terminal: ",
                h("code", null, "forge submit examples/tiny-train/job.yaml --follow"),
                ".",
              ),
            ],
      );
    }
    emptyKind = kind;
    const how = mode === "live" ? " Live." : mode === "polling" ? ` Updated ${new Date().toLocaleTimeString()} (every 2 s).` : "";
    status.textContent = error ? `${error} ${what}` : what + how;
    table.setAttribute("aria-rowcount", rows.nextCursor ? "-1" : String(n + 1));
  };

  // Draws the rows in view, with spacer rows standing for the others.
  const now = () => Date.now();
  const draw = () => {
    // The box grows with its rows up to its maximum: draw for the window's height, never less.
    const height = Math.max(scroller.clientHeight, window.innerHeight);
    const { first, end } = visibleRange(scroller.scrollTop, height, ROW_PX, rows.jobs.length);
    const spacer = (count: number) => {
      if (count <= 0) return null;
      const tr = h("tr", { class: "spacer", "aria-hidden": "true" }, h("td", { colspan: String(columns.length) }));
      tr.style.height = `${count * ROW_PX}px`;
      return tr;
    };
    const t = now();
    if (sortedFor.rows !== rows || sortedFor.sort !== sort) {
      sorted = sortJobs(rows.jobs, sort, t);
      sortedFor = { rows, sort };
    }
    showSort();
    clear(
      tbody,
      spacer(first),
      sorted.slice(first, end).map((j, i) =>
        h(
          "tr",
          { "data-job": j.id, "aria-rowindex": String(first + i + 2) },
          h("td", { title: j.name }, link(`/jobs/${encodeURIComponent(j.id)}`, j.name)),
          h("td", { class: "mono c-id" }, j.id),
          ctx.me.admin ? h("td", { class: "c-owner" }, j.owner) : null,
          h("td", { class: "c-fleet" }, j.fleet),
          h("td", null, h("span", { class: `phase phase-${j.phase}` }, j.phase)),
          h("td", { class: "reason c-reason", title: j.message || null }, j.reason),
          h("td", { title: j.createdAt }, age(j.createdAt, t)),
          h("td", { class: "c-ran" }, j.startedAt ? duration((j.finishedAt ? Date.parse(j.finishedAt) : t) - Date.parse(j.startedAt)) : ""),
        ),
      ),
      spacer(rows.jobs.length - end),
    );
    showStatus();
    // Near the end of what is loaded: load the next page.
    if (end >= rows.jobs.length - 20) void loadMore();
  };

  let resourceVersion: string | null = null;
  // The first page, read again (before each watch, and as the poll without one).
  const snapshot = async () => {
    const q = query();
    q.set("limit", String(PAGE));
    try {
      const list = await getJson<JobList & { resourceVersion?: string }>(`/api/v1/jobs?${q}`);
      resourceVersion = list.resourceVersion ?? null;
      rows = mergeFirstPage(rows, list.items, list.nextCursor);
      loaded = true;
      error = "";
    } catch (e) {
      error = `Cannot list jobs: ${(e as Error).message}.`;
    }
    draw();
  };
  const loadMore = async () => {
    if (loadingMore || !loaded || !rows.nextCursor) return;
    loadingMore = true;
    const cursor = rows.nextCursor;
    const q = query();
    q.set("limit", String(PAGE));
    q.set("cursor", cursor);
    try {
      const list = await getJson<JobList>(`/api/v1/jobs?${q}`);
      // Only if nothing replaced the rows meanwhile (a new filter).
      if (rows.nextCursor === cursor) {
        const have = new Set(rows.jobs.map((j) => j.id));
        rows = { jobs: [...rows.jobs, ...list.items.filter((j) => !have.has(j.id))], nextCursor: list.nextCursor };
      }
      error = "";
    } catch (e) {
      error = `Cannot list older jobs: ${(e as Error).message}.`;
    } finally {
      loadingMore = false;
    }
    draw();
  };

  let stop = () => {};
  const start = () => {
    stop();
    stop = live({
      // The watch takes the filters a job keeps for life; the phase is filtered here.
      url: () => {
        const q = query(false);
        q.set("watch", "1");
        if (resourceVersion) q.set("resourceVersion", resourceVersion);
        return `/api/v1/jobs?${q}`;
      },
      onEvent: (ev) => {
        if (ev.event !== "job") return;
        try {
          rows = applyChange(rows, JSON.parse(ev.data) as Job, filters());
        } catch {
          return;
        }
        if (ev.id) resourceVersion = ev.id;
        draw();
      },
      snapshot,
      snapshotFirst: true,
      everyMs: 2000,
      onMode: (m) => {
        mode = m;
        showStatus();
      },
    });
  };
  const keepUrl = () => {
    const q = query();
    if (sort) q.set("sort", formatSort(sort));
    history.replaceState(null, "", `/jobs${q.size ? `?${q}` : ""}`);
  };
  const refilter = () => {
    rows = { jobs: [], nextCursor: null };
    loaded = false;
    resourceVersion = null;
    scroller.scrollTop = 0;
    keepUrl();
    draw();
    start();
  };
  for (const el of [phase, fleet]) el.addEventListener("change", refilter);
  for (const el of [name, owner]) el?.addEventListener("change", refilter);
  let frame = 0;
  scroller.addEventListener("scroll", () => {
    cancelAnimationFrame(frame);
    frame = requestAnimationFrame(draw);
  });
  // Ages move on without news from the server.
  const ticker = setInterval(() => {
    if (!document.hidden) draw();
  }, 10_000);

  const field = (id: string, label: string, el: HTMLElement) =>
    h("div", { class: "field" }, h("label", { for: id }, label), el);
  clear(
    ctx.main,
    h(
      "div",
      { class: "title-row" },
      h("h1", null, ctx.me.admin ? "Jobs (everyone's)" : "Your jobs"),
      link("/submit", "Submit a job"),
    ),
    h(
      "form",
      { class: "filters", role: "search", "aria-label": "Filter jobs", onsubmit: (e: Event) => e.preventDefault() },
      field("f-phase", "Phase", phase),
      field("f-fleet", "Fleet", fleet),
      field("f-name", "Name", name),
      owner ? field("f-owner", "Owner", owner) : null,
    ),
    scroller,
    empty,
    status,
  );
  draw();
  start();
  return () => {
    stop();
    clearInterval(ticker);
    cancelAnimationFrame(frame);
  };
}
