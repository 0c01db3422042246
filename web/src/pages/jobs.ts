// Jobs: the user's jobs (an admin's: everyone's, with an owner filter), newest first, filtered
// by phase / fleet / name, paged by the API's cursor, refreshed every 2 s without a reload.
import { getJson, PHASES, type Job, type JobList } from "../api";
import { clear, h, link } from "../dom";
import { age, duration } from "../format";
import type { Cleanup, Ctx } from "../main";
import { poll } from "../poll";

const PAGE = 50;

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
  const name = h("input", { id: "f-name", name: "name", type: "search", placeholder: "exact name", value: params.get("name") ?? "" });
  const owner = ctx.me.admin
    ? h("input", { id: "f-owner", name: "owner", type: "search", placeholder: "everyone", value: params.get("owner") ?? "" })
    : null;
  const status = h("p", { class: "muted", role: "status", id: "jobs-status" });
  const tbody = h("tbody");
  const prev = h("button", { type: "button", id: "prev" }, "← Newer");
  const next = h("button", { type: "button", id: "next" }, "Older →");
  const pageNo = h("span", { class: "muted", id: "page-no" });

  // cursors[i] is the cursor of page i (page 0 has none).
  let cursors: (string | null)[] = [null];
  let page = 0;
  let nextCursor: string | null = null;

  const query = () => {
    const q = new URLSearchParams();
    if (phase.value) q.set("phase", phase.value);
    if (fleet.value) q.set("fleet", fleet.value);
    if (name.value.trim()) q.set("name", name.value.trim());
    if (owner && owner.value.trim()) q.set("owner", owner.value.trim());
    return q;
  };

  const load = async () => {
    const q = query();
    q.set("limit", String(PAGE));
    const cursor = cursors[page];
    if (cursor) q.set("cursor", cursor);
    try {
      const list = await getJson<JobList>(`/api/v1/jobs?${q}`);
      nextCursor = list.nextCursor;
      renderRows(list.items);
      status.textContent = list.items.length === 0 ? "No jobs match." : `Updated ${new Date().toLocaleTimeString()}`;
    } catch (e) {
      status.textContent = `Cannot list jobs: ${(e as Error).message}`;
    }
    prev.disabled = page === 0;
    next.disabled = !nextCursor;
    pageNo.textContent = `page ${page + 1}`;
  };

  const now = () => Date.now();
  const renderRows = (jobs: Job[]) => {
    clear(
      tbody,
      jobs.map((j) =>
        h(
          "tr",
          { "data-job": j.id },
          h("td", null, link(`/jobs/${encodeURIComponent(j.id)}`, j.name)),
          h("td", { class: "mono" }, j.id),
          ctx.me.admin ? h("td", null, j.owner) : null,
          h("td", null, j.fleet),
          h("td", null, h("span", { class: `phase phase-${j.phase}` }, j.phase)),
          h("td", { class: "reason", title: j.message }, j.reason),
          h("td", { title: j.createdAt }, age(j.createdAt, now())),
          h(
            "td",
            null,
            j.startedAt ? duration((j.finishedAt ? Date.parse(j.finishedAt) : now()) - Date.parse(j.startedAt)) : "",
          ),
        ),
      ),
    );
  };

  let stop = () => {};
  const restart = () => {
    stop();
    stop = poll(load, 2000);
  };
  const refilter = () => {
    cursors = [null];
    page = 0;
    const q = query();
    history.replaceState(null, "", `/jobs${q.size ? `?${q}` : ""}`);
    restart();
  };
  for (const el of [phase, fleet]) el.addEventListener("change", refilter);
  for (const el of [name, owner]) el?.addEventListener("change", refilter);
  prev.addEventListener("click", () => {
    if (page > 0) page--;
    restart();
  });
  next.addEventListener("click", () => {
    if (!nextCursor) return;
    page++;
    cursors[page] = nextCursor;
    restart();
  });

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
    h(
      "table",
      { class: "jobs", "aria-label": "Jobs, newest first" },
      h(
        "thead",
        null,
        h(
          "tr",
          null,
          ["Name", "ID", ctx.me.admin ? "Owner" : null, "Fleet", "Phase", "Reason", "Age", "Ran"]
            .filter((x) => x !== null)
            .map((c) => h("th", { scope: "col" }, c)),
        ),
      ),
      tbody,
    ),
    h("div", { class: "pager" }, prev, pageNo, next),
    status,
  );
  restart();
  return () => stop();
}
