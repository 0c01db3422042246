// Capacity: what each fleet has and uses, from GET /api/v1/capacity (the numbers `forge capacity`
// prints and the scheduler places on); for the kuberay fleet per card series, drawn as bars,
// with each blocked node and why. Kept live by the capacity watch (GET /api/v1/capacity?watch=1,
// sent when the numbers change); re-read every 5 s where there is no stream.
import {
  type Capacity,
  type FleetCapacity,
  fleetError,
  fleetUnavailable,
  getJson,
  type KubeRayFleetCapacity,
  kuberayFleet,
  localFleet,
  type SeriesCapacity,
} from "../api";
import { clear, h, link } from "../dom";
import { fleetHelp } from "../help";
import { bytes } from "../format";
import { live, type LiveMode } from "../live";
import type { Cleanup, Ctx } from "../main";

const POLL_MS = 5000;

export function capacityPage(ctx: Ctx): Cleanup {
  document.title = "Capacity · StarForge";
  const body = h("div", { id: "capacity" });
  const status = h("p", { class: "muted", role: "status", id: "capacity-status" });
  clear(ctx.main, h("h1", null, "Capacity"), body, status);
  let version = ""; // the resourceVersion drawn: the watch sends nothing until it changes
  let mode: LiveMode = "paused";
  let updated = "";
  let error = "";
  const showStatus = () => {
    const how = mode === "live" ? "Live." : mode === "polling" ? `Updated ${updated} (every ${POLL_MS / 1000} s).` : "Paused while the tab is hidden.";
    status.textContent = error ? `${error} ${how}` : how;
  };
  const draw = (cap: Capacity) => {
    version = cap.resourceVersion ?? "";
    clear(body, cap.fleets.map(fleetCard));
    updated = new Date().toLocaleTimeString();
    error = "";
    showStatus();
  };
  return live({
    url: () => `/api/v1/capacity?watch=1${version ? `&resourceVersion=${encodeURIComponent(version)}` : ""}`,
    onEvent: (ev) => {
      if (ev.event === "capacity") draw(JSON.parse(ev.data) as Capacity);
    },
    snapshot: async () => {
      try {
        draw(await getJson<Capacity>("/api/v1/capacity"));
      } catch (e) {
        error = `Cannot read capacity: ${(e as Error).message}.`;
        showStatus();
      }
    },
    // The watch's first event is the answer itself (or, on a reconnect from the version drawn,
    // only what changed since): no separate read is needed.
    snapshotFirst: false,
    everyMs: POLL_MS,
    onMode: (m) => {
      mode = m;
      showStatus();
    },
  });
}

// A bar of `used` out of `total`, with a second shade for `blocked` at the end.
export function bar(label: string, used: number, total: number, blocked = 0): HTMLElement {
  const el = h("div", {
    class: "bar",
    role: "meter",
    "aria-label": label,
    "aria-valuemin": 0,
    "aria-valuemax": total,
    "aria-valuenow": used,
    "aria-valuetext": `${used} of ${total} in use${blocked ? `, ${blocked} blocked` : ""}`,
  });
  const fill = h("div", { class: "fill" });
  fill.style.width = `${total > 0 ? Math.min(100, (100 * used) / total) : 0}%`;
  el.append(fill);
  if (blocked > 0 && total > 0) {
    const b = h("div", { class: "blocked" });
    b.style.width = `${Math.min(100, (100 * blocked) / total)}%`;
    el.append(b);
  }
  return el;
}

function fleetCard(f: FleetCapacity): HTMLElement {
  const heading = h("h2", null, `Fleet ${f.fleet}`);
  if (fleetUnavailable(f))
    return h(
      "section",
      { class: "card", "data-fleet": f.fleet },
      heading,
      h("p", { class: "muted" }, f.message ?? "Not configured on this server."),
      fleetHelp(f.fleet, "jobs") ? h("p", null, link(fleetHelp(f.fleet, "jobs"), `How to set up the ${f.fleet} fleet`)) : null,
    );
  if (fleetError(f)) return h("section", { class: "card", "data-fleet": f.fleet }, heading, h("p", { class: "error" }, f.error));
  if (kuberayFleet(f)) return kuberayCard(f, heading);
  // The schema's four kinds of entry end with the local fleet's.
  if (!localFleet(f)) return h("section", { class: "card", "data-fleet": f.fleet }, heading);
  return h(
    "section",
    { class: "card", "data-fleet": f.fleet },
    heading,
    h("p", { class: "muted" }, `host ${f.host} · ${f.running} running, ${f.waiting} waiting · memory ${bytes(f.memoryBytes)}`),
    meterRow("CPUs", f.cpusInUse, f.cpus),
    // A machine without GPUs gets no GPU bar ("0 / 0" says nothing).
    f.gpus ? meterRow("GPUs", f.gpusInUse, f.gpus) : h("p", { class: "muted", id: `${f.fleet}-no-gpus` }, "No GPUs on this machine."),
    f.jobs.length
      ? h(
          "table",
          { "aria-label": `Jobs holding the ${f.fleet} fleet` },
          h("thead", null, h("tr", null, ["Job", "CPUs", "GPUs", "State"].map((c) => h("th", { scope: "col" }, c)))),
          h(
            "tbody",
            null,
            f.jobs.map((j) =>
              h("tr", null, h("td", null, link(`/jobs/${encodeURIComponent(j.id)}`, j.id)), h("td", null, j.cpus), h("td", null, j.gpus), h("td", null, j.state)),
            ),
          ),
        )
      : null,
  );
}

function meterRow(label: string, used: number, total: number, blocked = 0, extra = ""): HTMLElement {
  return h(
    "div",
    { class: "meter-row" },
    h("span", { class: "meter-label" }, label),
    bar(label, used, total, blocked),
    h("span", { class: "meter-num" }, `${used} / ${total} in use${extra}`),
  );
}

function kuberayCard(f: KubeRayFleetCapacity, heading: HTMLElement): HTMLElement {
  return h(
    "section",
    { class: "card", "data-fleet": f.fleet },
    heading,
    h("p", { class: "muted" }, `namespace ${f.namespace} · card series from node label ${f.gpuNodeLabel ?? "?"}`),
    (f.series ?? []).length === 0 ? h("p", null, "No nodes.") : null,
    (f.series ?? []).map(seriesBlock),
  );
}

function seriesBlock(s: SeriesCapacity): HTMLElement {
  const name = s.series || "(no series label)";
  const blockedGpus = s.nodeDetail.filter((n) => n.blocked.length > 0).reduce((a, n) => a + n.gpus.allocatable, 0);
  return h(
    "div",
    { class: "series", "data-series": s.series },
    h(
      "h3",
      null,
      name,
      h("span", { class: "muted" }, ` · ${s.nodes} node${s.nodes === 1 ? "" : "s"}, up to ${s.maxGpusPerNode} GPUs per node`),
      s.blockedNodes ? h("span", { class: "badge warn" }, `${s.blockedNodes} blocked`) : null,
    ),
    meterRow(`GPUs of ${name}`, s.gpus.requested, s.gpus.allocatable, blockedGpus, ` · ${s.gpus.free} free · ${s.gpus.capacity} total`),
    h(
      "dl",
      { class: "numbers" },
      ...([
        ["total", s.gpus.capacity],
        ["allocatable", s.gpus.allocatable],
        ["in use", s.gpus.requested],
        ["free", s.gpus.free],
        ["blocked nodes", s.blockedNodes],
      ] as [string, number][]).flatMap(([k, v]) => [h("dt", null, k), h("dd", { "data-k": k }, v)]),
    ),
    h(
      "table",
      { class: "nodes", "aria-label": `Nodes of ${name}` },
      h("thead", null, h("tr", null, ["Node", "GPUs in use / allocatable", "Free", "Pods", "State"].map((c) => h("th", { scope: "col" }, c)))),
      h(
        "tbody",
        null,
        s.nodeDetail.map((n) =>
          h(
            "tr",
            { class: n.blocked.length ? "blocked-node" : "", "data-node": n.name },
            h("td", { class: "mono" }, n.name),
            h("td", null, bar(`GPUs of ${n.name}`, n.gpus.requested, n.gpus.allocatable), ` ${n.gpus.requested} / ${n.gpus.allocatable}`),
            h("td", null, n.gpus.free),
            h("td", null, n.pods),
            h("td", null, n.blocked.length ? h("span", { class: "warn-text" }, `blocked: ${n.blocked.join("; ")}`) : "schedulable"),
          ),
        ),
      ),
    ),
  );
}
