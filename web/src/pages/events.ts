// The event view of a job or a playground: Kubernetes' and the controller's events, newest first
// (the event that explains a stuck job is usually the latest), with type, reason, object,
// source, message and age.
import { clear, h } from "../dom";
import { age } from "../format";

export interface EventRow {
  type: string;
  reason: string;
  object: string;
  source: string;
  message: string;
  count: number;
  firstAt: string;
  lastAt: string;
}

// An empty events table (`id`, labelled by the heading `labelledBy`) and its body.
export function eventsTable(id: string, labelledBy: string): { table: HTMLTableElement; body: HTMLTableSectionElement } {
  const body = h("tbody");
  const table = h(
    "table",
    { class: "events", id, "aria-labelledby": labelledBy },
    h("thead", null, h("tr", null, ["Type", "Reason", "Object", "Source", "Message", "Age"].map((c) => h("th", { scope: "col" }, c)))),
    body,
  );
  return { table, body };
}

// Fills `body` with `events`, newest first.
export function drawEvents(body: HTMLTableSectionElement, events: EventRow[], now = Date.now()): void {
  const sorted = [...events].sort((a, b) => Date.parse(b.lastAt) - Date.parse(a.lastAt));
  clear(
    body,
    sorted.map((e) =>
      h(
        "tr",
        { class: e.type === "Warning" ? "warning" : "" },
        h("td", null, e.type),
        h("td", null, e.reason),
        h("td", { class: "mono" }, e.object),
        h("td", null, e.source),
        h("td", { class: "msg" }, e.message),
        h("td", null, e.count > 1 ? `${age(e.lastAt, now)} (×${e.count} over ${age(e.firstAt, now)})` : age(e.lastAt, now)),
      ),
    ),
  );
}
