// One playground: its state in one line (for a Pending one, the fleet's diagnosis, as for a
// job), the TTL counting down, extend and stop, a chat box whose answer streams in token by token
// through the API's OpenAI-compatible route (chat.ts), the Kubernetes events while it is not
// Ready, and the vLLM server's log. Re-read every 2 s until it has ended and been released.
import { ApiError, getJson, request, sendJson, type Playground, type PlaygroundEventList } from "../api";
import { streamChat, type ChatMessage } from "../chat";
import { clear, h, kv, link } from "../dom";
import type { Cleanup, Ctx } from "../main";
import { countdown, PLAYGROUND_ENDED, playgroundLine, ttlLeft } from "../playground";
import { poll } from "../poll";
import { drawEvents, eventsTable } from "./events";

const POLL_MS = 2000;
const EXTEND_CHOICES: [string, number][] = [
  ["10 minutes", 600],
  ["30 minutes", 1800],
  ["1 hour", 3600],
  ["2 hours", 7200],
];

export function playgroundPage(ctx: Ctx, id: string): Cleanup {
  document.title = `${id} · StarForge`;
  const path = `/api/v1/playgrounds/${encodeURIComponent(id)}`;
  const title = h("h1", null, id);
  const status = h("p", { class: "status-line", id: "pg-status", role: "status" });
  const ttl = h("p", { class: "ttl-line", id: "pg-ttl-left", role: "timer", "aria-live": "off" });
  const actions = h("div", { class: "actions", id: "pg-actions" });
  const error = h("p", { class: "error", role: "alert", id: "pg-error" });
  const facts = h("dl", { class: "kv", id: "pg-facts" });
  const { table: eventsView, body: eventsBody } = eventsTable("pg-events", "h-pg-events");
  let pg: Playground | null = null;
  let readAt = Date.now();

  const section = (sid: string, heading: string, ...body: (HTMLElement | null)[]) =>
    h("section", { "aria-labelledby": sid }, h("h2", { id: sid }, heading), ...body);
  const eventsSection = section("h-pg-events", "Events", eventsView);
  eventsSection.hidden = true;

  // ---- the TTL, counting down with this browser's clock from the server's answer ----
  const showTtl = () => {
    if (!pg) return;
    if (PLAYGROUND_ENDED.has(pg.state)) {
      ttl.textContent = `Ended${pg.finishedAt ? ` at ${new Date(pg.finishedAt).toLocaleTimeString()}` : ""}.`;
      return;
    }
    const left = ttlLeft(pg.ttlRemainingSeconds, readAt, Date.now());
    ttl.textContent = `Expires in ${countdown(left)} (at ${new Date(pg.expiresAt).toLocaleTimeString()}).`;
  };

  // ---- extend / stop ----
  const extendBy = h(
    "select",
    { id: "pg-extend-by" },
    EXTEND_CHOICES.map(([label, s]) => h("option", { value: s }, label)),
  );
  const extend = h("button", { type: "button", id: "pg-extend" }, "Extend");
  extend.addEventListener("click", async () => {
    extend.disabled = true;
    error.textContent = "";
    try {
      apply(await sendJson<Playground>("POST", `${path}/extend`, { seconds: Number(extendBy.value) }));
    } catch (e) {
      error.textContent = `Cannot extend: ${(e as Error).message}`;
    }
    extend.disabled = false;
  });
  // Built once and only enabled or disabled as the state changes, so that a re-read never
  // takes the focus from a control (or closes the question "Stop it now?").
  const stop = h("button", { type: "button", id: "pg-stop", class: "danger" }, "Stop playground…");
  const showActions = () => clear(actions, h("label", { for: "pg-extend-by" }, "Extend by"), extendBy, extend, stop);
  const renderActions = () => {
    const ended = !pg || PLAYGROUND_ENDED.has(pg.state);
    extend.disabled = ended;
    extendBy.disabled = ended;
    stop.disabled = ended;
  };
  stop.addEventListener("click", () => {
    const yes = h("button", { type: "button", id: "pg-stop-confirm", class: "danger" }, "Yes, stop it");
    const no = h("button", { type: "button" }, "Keep it");
    yes.addEventListener("click", async () => {
      yes.disabled = true;
      try {
        apply(await sendJson<Playground>("DELETE", path, {}));
      } catch (e) {
        error.textContent = `Cannot stop: ${(e as Error).message}`;
      }
      showActions();
      stop.focus();
    });
    no.addEventListener("click", () => {
      showActions();
      stop.focus();
    });
    clear(actions, h("span", null, "Stop it now? Its server is deleted and its GPUs freed."), yes, no);
    yes.focus();
  });
  showActions();

  // ---- the chat ----
  const history: ChatMessage[] = [];
  const transcript = h("div", { class: "chat-log", id: "chat-log", role: "log", "aria-live": "polite", "aria-label": "Conversation", tabindex: "0" });
  const input = h("textarea", { id: "chat-input", rows: 3, placeholder: "Ask the model something", "aria-describedby": "chat-help" });
  const send = h("button", { type: "submit", class: "primary", id: "chat-send" }, "Send");
  const cancel = h("button", { type: "button", id: "chat-stop", hidden: true }, "Stop answering");
  const chatStatus = h("span", { class: "muted", id: "chat-status", role: "status" });
  const chatForm = h(
    "form",
    { class: "chat-form", "aria-label": "Chat" },
    h("label", { for: "chat-input" }, "Message"),
    input,
    h("small", { id: "chat-help", class: "muted" }, "Enter sends; Shift+Enter starts a new line."),
    h("div", { class: "actions" }, send, cancel, chatStatus),
  );
  let answering: AbortController | null = null;
  const bubble = (who: string, text: string, cls: string) => {
    const p = h("p", { class: "chat-text" }, text);
    transcript.append(h("div", { class: `chat-msg ${cls}` }, h("span", { class: "chat-who" }, who), p));
    transcript.scrollTop = transcript.scrollHeight;
    return p;
  };
  const canChat = () => pg?.state === "Ready" && !answering;
  const renderChat = () => {
    send.disabled = !canChat();
    input.disabled = pg?.state !== "Ready";
    if (!answering) chatStatus.textContent = pg?.state === "Ready" ? "" : PLAYGROUND_ENDED.has(pg?.state ?? "") ? "The playground has ended." : "The chat opens when the playground is Ready.";
  };
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      chatForm.requestSubmit();
    }
  });
  cancel.addEventListener("click", () => answering?.abort());
  chatForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = input.value.trim();
    if (!text || !canChat() || !pg) return;
    input.value = "";
    history.push({ role: "user", content: text });
    bubble("You", text, "user");
    const answer = bubble(pg.spec.servedModelName || "model", "", "assistant");
    answer.setAttribute("aria-busy", "true");
    answering = new AbortController();
    cancel.hidden = false;
    chatStatus.textContent = "Answering…";
    renderChat();
    let got = "";
    try {
      await streamChat(
        pg.openaiBaseUrl,
        pg.spec.servedModelName ?? "",
        history,
        (piece) => {
          got += piece;
          answer.textContent = got;
          transcript.scrollTop = transcript.scrollHeight;
        },
        answering.signal,
      );
      chatStatus.textContent = "";
    } catch (e) {
      if (answering.signal.aborted) chatStatus.textContent = "Stopped.";
      else {
        answer.classList.add("error");
        if (!got) answer.textContent = `(no answer: ${(e as Error).message})`;
        chatStatus.textContent = `The answer broke off: ${(e as Error).message}`;
      }
    }
    answer.removeAttribute("aria-busy");
    if (got) history.push({ role: "assistant", content: got });
    else history.pop(); // unanswered: not part of the conversation sent next time
    answering = null;
    cancel.hidden = true;
    renderChat();
    input.focus();
  });

  // ---- the server's log, read when asked ----
  const logPre = h("pre", { class: "log", id: "pg-log", tabindex: "0", "aria-label": "vLLM server log", hidden: true });
  const logButton = h("button", { type: "button", id: "pg-log-read" }, "Read the log");
  logButton.addEventListener("click", async () => {
    try {
      logPre.hidden = false;
      logPre.textContent = await (await request(`${path}/logs?tailLines=500`)).text();
      logPre.scrollTop = logPre.scrollHeight;
    } catch (e) {
      logPre.hidden = false;
      logPre.textContent = `Cannot read the log: ${(e as Error).message}`;
    }
  });

  // ---- state ----
  const apply = (p: Playground) => {
    pg = p;
    readAt = Date.now();
    document.title = `${p.spec.servedModelName || p.id} · ${p.state} · StarForge`;
    clear(title, p.spec.servedModelName || p.id, " ", h("span", { class: "mono muted" }, p.id));
    clear(status, h("span", { class: `phase pg-${p.state}` }, p.state), " ", playgroundLine(p).slice(p.state.length).replace(/^ · /, ""));
    status.title = playgroundLine(p);
    showTtl();
    clear(
      facts,
      kv("Owner", p.owner),
      kv("Fleet", p.fleet),
      kv("Model", p.spec.model),
      kv("Served as", p.spec.servedModelName ?? ""),
      kv("Image", p.spec.image ?? ""),
      kv("GPUs", `${p.spec.gpus} of ${p.spec.series || "any series"}`),
      kv("Created", p.createdAt),
      kv("Ready", p.readyAt ?? "—"),
      kv("Expires", p.expiresAt),
      kv("Finished", p.finishedAt ?? "—"),
      kv("Released", p.released ? "yes" : "no"),
      kv("OpenAI base URL", location.origin + p.openaiBaseUrl),
    );
    renderActions();
    renderChat();
  };
  const refresh = async () => {
    try {
      const p = await getJson<Playground>(path);
      apply(p);
      // The events explain a playground that is not Ready; once it is (or has ended), the API
      // has none and the section goes.
      const events = p.state !== "Ready" && !PLAYGROUND_ENDED.has(p.state) ? (await getJson<PlaygroundEventList>(`${path}/events`)).items : [];
      drawEvents(eventsBody, events);
      eventsSection.hidden = events.length === 0;
      if (PLAYGROUND_ENDED.has(p.state) && p.released) stopPoll();
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        stopPoll();
        clear(ctx.main, h("p", { class: "crumbs" }, link("/playgrounds", "Playgrounds"), " / ", id), h("h1", null, "Not found"), h("p", null, e.message));
        return;
      }
      error.textContent = `Cannot read the playground: ${(e as Error).message}`;
    }
  };

  clear(
    ctx.main,
    h("p", { class: "crumbs" }, link("/playgrounds", "Playgrounds"), " / ", id),
    title,
    status,
    ttl,
    actions,
    error,
    eventsSection,
    h(
      "div",
      { class: "two" },
      section("h-chat", "Chat", transcript, chatForm),
      section("h-pg-facts", "Playground", facts),
    ),
    section("h-pg-log", "Server log", h("div", { class: "log-tools" }, logButton), logPre),
  );
  renderActions();
  renderChat();

  let stopped = false;
  const stopPollInner = poll(refresh, POLL_MS);
  function stopPoll() {
    if (!stopped) stopPollInner();
    stopped = true;
  }
  const tick = setInterval(() => {
    if (!document.hidden) showTtl();
  }, 1000);
  return () => {
    stopPoll();
    clearInterval(tick);
    answering?.abort();
  };
}
