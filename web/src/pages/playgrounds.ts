// Playgrounds: the user's playgrounds (an admin's: everyone's) with their state and the TTL
// counting down, and the form that starts one (model, card series, GPUs, TTL) — POST
// /api/v1/playgrounds, then the playground's page — offered only with the fleets that can run
// one (the list's `fleets`; with none, what to configure instead). Re-read every 3 s.
import {
  type ApiError,
  type Capacity,
  getJson,
  kuberayFleet,
  type Playground,
  type PlaygroundFleet,
  type PlaygroundList,
  sendJson,
} from "../api";
import { clear, h, link } from "../dom";
import { fleetHelp } from "../help";
import type { Cleanup, Ctx } from "../main";
import { countdown, parseDuration, PLAYGROUND_ENDED, ttlLeft } from "../playground";
import { poll } from "../poll";

const POLL_MS = 3000;

export function playgroundsPage(ctx: Ctx): Cleanup {
  document.title = "Playgrounds · StarForge";
  const tbody = h("tbody");
  const status = h("p", { class: "muted", role: "status", id: "playgrounds-status" });
  let items: Playground[] = [];
  let readAt = Date.now();
  // Whether some fleet of this server can run a playground (the list's `fleets`); null: not read yet.
  let canStart: boolean | null = null;

  // Rows are updated in place while the list holds the same playgrounds (a focused link keeps
  // its focus as the TTL counts down); redrawn when one comes or goes.
  let drawn: string | null = null; // null: nothing drawn yet (an empty list is drawn too)
  const cells = new Map<string, { state: HTMLElement; ttl: HTMLElement; reason: HTMLElement }>();
  const ttlText = (p: Playground, now: number) => (PLAYGROUND_ENDED.has(p.state) ? "—" : countdown(ttlLeft(p.ttlRemainingSeconds, readAt, now)));
  const draw = () => {
    const now = Date.now();
    const ids = items.map((p) => p.id).join(" ");
    if (ids !== drawn) {
      drawn = ids;
      cells.clear();
      clear(
        tbody,
        items.map((p) => {
          const c = { state: h("td"), ttl: h("td", { class: "ttl" }), reason: h("td", { class: "reason" }) };
          cells.set(p.id, c);
          return h(
            "tr",
            { "data-playground": p.id },
            h("td", null, link(`/playgrounds/${encodeURIComponent(p.id)}`, p.id)),
            c.state,
            h("td", { class: "mono" }, p.spec.model),
            h("td", null, `${p.spec.series || "any"} × ${p.spec.gpus}`),
            c.ttl,
            c.reason,
            ctx.me.admin ? h("td", null, p.owner) : null,
          );
        }),
      );
      if (!items.length)
        clear(tbody, h("tr", null, h("td", { colspan: 7, class: "muted" }, canStart === false ? "No playgrounds." : "No playgrounds yet: start one below.")));
    }
    for (const p of items) {
      const c = cells.get(p.id)!;
      if (c.state.textContent !== p.state) clear(c.state, h("span", { class: `phase pg-${p.state}` }, p.state));
      c.ttl.textContent = ttlText(p, now);
      c.reason.textContent = p.reason;
    }
  };

  const table = h(
    "table",
    { id: "playgrounds", "aria-label": "Playgrounds" },
    h(
      "thead",
      null,
      h("tr", null, ["Playground", "State", "Model", "GPUs", "Expires in", "Reason", ...(ctx.me.admin ? ["Owner"] : [])].map((c) => h("th", { scope: "col" }, c))),
    ),
    tbody,
  );

  // ---- the start form ----
  const field = (id: string, label: string, input: HTMLElement, help?: string) =>
    h("div", { class: "field" }, h("label", { for: id }, label), input, help ? h("small", { class: "muted", id: `${id}-help` }, help) : null);
  const model = h("input", {
    id: "pg-model",
    name: "model",
    type: "text",
    required: true,
    spellcheck: "false",
    placeholder: "jobs/j-…/ckpt/final",
    "aria-describedby": "pg-model-help",
    size: 40,
  });
  const seriesList = h("datalist", { id: "pg-series-list" });
  const series = h("input", { id: "pg-series", name: "series", type: "text", list: "pg-series-list", spellcheck: "false", placeholder: "h200", "aria-describedby": "pg-series-help" });
  // The fleets this server has (from capacity); the server's default unless one is chosen, so
  // that a refusal naming "fleet" points at a field of the form.
  const fleet = h("select", { id: "pg-fleet", name: "fleet", "aria-describedby": "pg-fleet-help" }, h("option", { value: "" }, "the server's default"));
  const gpus = h("input", { id: "pg-gpus", name: "gpus", type: "number", min: 1, max: 64, value: 1, required: true });
  const ttl = h("input", { id: "pg-ttl", name: "ttl", type: "text", value: "1h", required: true, spellcheck: "false", "aria-describedby": "pg-ttl-help" });
  const errors = h("ul", { class: "field-errors error", id: "pg-errors", role: "alert" });
  const start = h("button", { type: "submit", class: "primary", id: "pg-start" }, "Start playground");
  const form = h(
    "form",
    { class: "card pg-start", "aria-labelledby": "h-start", novalidate: true },
    h("h2", { id: "h-start" }, "Start a playground"),
    h(
      "div",
      { class: "filters" },
      field("pg-model", "Model", model, "A directory one of your jobs wrote (jobs/<job id>/<path>), or a model name the image can load."),
      field("pg-series", "Card series", series, "The GPU series to run on; empty: any node."),
      field("pg-fleet", "Fleet", fleet, "kuberay: a pod on a node of the series; local: vLLM on the server's machine (FORGE_LOCAL_VLLM_COMMAND)."),
      field("pg-gpus", "GPUs", gpus),
      field("pg-ttl", "TTL", ttl, "How long it lives: 30m, 2h, 1h30m."),
    ),
    seriesList,
    h("div", { class: "actions" }, start),
    errors,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clear(errors);
    const seconds = parseDuration(ttl.value);
    const problems: string[] = [];
    if (!model.value.trim()) problems.push("model: name a model");
    if (seconds === null) problems.push("ttlSeconds: the TTL is a duration such as 30m, 2h or 1h30m");
    if (!(Number(gpus.value) >= 1)) problems.push("gpus: at least 1");
    if (problems.length) {
      clear(errors, problems.map((p) => h("li", null, p)));
      return;
    }
    const body: Record<string, unknown> = { model: model.value.trim(), gpus: Number(gpus.value), ttlSeconds: seconds };
    if (series.value.trim()) body.series = series.value.trim();
    if (fleet.value) body.fleet = fleet.value;
    start.disabled = true;
    try {
      const p = await sendJson<Playground>("POST", "/api/v1/playgrounds", body);
      ctx.navigate(`/playgrounds/${encodeURIComponent(p.id)}`);
    } catch (e) {
      const err = e as ApiError;
      const list = err.errors?.length ? err.errors.map((fe) => `${fe.field}: ${fe.message}`) : [err.field ? `${err.field}: ${err.message}` : err.message];
      clear(errors, list.map((l) => h("li", null, l)));
      start.disabled = false;
    }
  });
  // The series the kuberay fleet has, as suggestions.
  void getJson<Capacity>("/api/v1/capacity")
    .then((cap) => {
      const names = cap.fleets.flatMap((f) => (kuberayFleet(f) ? (f.series ?? []) : []).map((s) => s.series)).filter(Boolean);
      clear(seriesList, [...new Set(names)].map((n) => h("option", { value: n })));
    })
    .catch(() => {});

  // Only the fleets that can run a playground are offered; with none, no form but what to
  // configure (each fleet's reason, from the server).
  const unavailable = h("section", { class: "card", id: "pg-unavailable", hidden: true });
  form.hidden = true; // until the server says which fleets can
  let fleetsShown = "";
  const showFleets = (fleets: PlaygroundFleet[]) => {
    const key = JSON.stringify(fleets);
    if (key === fleetsShown) return;
    fleetsShown = key;
    const able = fleets.filter((f) => f.available);
    canStart = able.length > 0;
    form.hidden = !canStart;
    unavailable.hidden = canStart;
    drawn = null; // the empty list's sentence depends on it
    if (canStart) {
      const chosen = fleet.value;
      clear(
        fleet,
        h("option", { value: "" }, "the server's default"),
        able.map((f) => h("option", { value: f.fleet }, f.fleet)),
      );
      fleet.value = able.some((f) => f.fleet === chosen) ? chosen : "";
    } else {
      clear(
        unavailable,
        h("h2", null, "No fleet here can run a playground"),
        h("p", null, "This server cannot start one until a fleet is configured for it:"),
        h(
          "ul",
          null,
          fleets.map((f) => {
            const help = fleetHelp(f.fleet, "playgrounds");
            return h("li", { "data-fleet": f.fleet }, h("strong", null, f.fleet), `: ${f.message ?? "not available"}`, help ? [" ", link(help, `How to set up ${f.fleet === "kuberay" ? "the kuberay fleet" : "playgrounds on the local fleet"}`)] : null);
          }),
        ),
      );
    }
  };

  clear(ctx.main, h("h1", null, "Playgrounds"), h("p", { class: "muted" }, "A vLLM server for a model, for a while: talk to a checkpoint without a serving stack."), table, status, form, unavailable);

  const stopPoll = poll(async () => {
    try {
      const list = await getJson<PlaygroundList>("/api/v1/playgrounds");
      items = list.items;
      readAt = Date.now();
      if (list.fleets) showFleets(list.fleets);
      draw();
      status.textContent = `Updated ${new Date().toLocaleTimeString()} (every ${POLL_MS / 1000} s).`;
    } catch (e) {
      status.textContent = `Cannot read the playgrounds: ${(e as Error).message}`;
    }
  }, POLL_MS);
  const tick = setInterval(() => {
    if (!document.hidden) draw();
  }, 1000);
  return () => {
    stopPoll();
    clearInterval(tick);
  };
}
