// Keeps a view current with the API's watch streams (docs/api.md, Watching jobs): Server-Sent
// Events read with fetch (EventSource cannot send the bearer header). When a stream cannot be
// had — an older server, too many watches (429), a proxy that buffers — the view polls instead
// and tries the stream again later. A hidden tab holds no stream (browsers allow six connections
// per server; the visible tab needs them) and catches up when shown.
import { authHeaders, unauthorized } from "./api";
import { sseEvents, type SseEvent } from "./logstream";

export type LiveMode = "live" | "polling" | "paused";

export interface LiveOptions {
  // The stream's URL, asked again at each (re)connection (it may carry a resourceVersion).
  url: () => string;
  onEvent: (ev: SseEvent) => void;
  // Reads the view's state with plain requests: before each stream when `snapshotFirst`, and
  // every `everyMs` while there is no stream.
  snapshot: () => Promise<void>;
  snapshotFirst: boolean;
  everyMs: number;
  onMode?: (mode: LiveMode) => void;
}

// How long the view polls before it tries the stream again.
const RETRY_STREAM_MS = 30_000;

// Starts at once; returns stop. `onEvent` may call stop (e.g. on the stream's "end").
export function live(opts: LiveOptions): () => void {
  let stopped = false;
  let abort: AbortController | null = null;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let generation = 0; // a newer run() makes an older one give up
  const setMode = (m: LiveMode) => opts.onMode?.(m);

  const later = (f: () => void, ms: number) => {
    clearTimeout(timer);
    if (!stopped) timer = setTimeout(f, ms);
  };

  // Polls until RETRY_STREAM_MS has passed, then tries the stream again.
  const fallBack = (gen: number) => {
    setMode("polling");
    const until = Date.now() + RETRY_STREAM_MS;
    const step = async () => {
      if (gen !== generation || stopped || document.hidden) return;
      if (Date.now() >= until) return void run();
      try {
        await opts.snapshot();
      } catch {
        // the snapshot shows its own errors
      }
      if (gen === generation) later(step, opts.everyMs);
    };
    void step();
  };

  const run = async () => {
    const gen = ++generation;
    abort?.abort();
    clearTimeout(timer);
    if (stopped) return;
    if (document.hidden) return setMode("paused");
    const ac = new AbortController();
    abort = ac;
    try {
      if (opts.snapshotFirst) await opts.snapshot();
      if (gen !== generation || stopped) return;
      const res = await fetch(opts.url(), { headers: authHeaders(), signal: ac.signal, cache: "no-store" });
      if (res.status === 401) return unauthorized();
      // 410: the view's resourceVersion is too old: read it again and watch from there.
      if (res.status === 410) return later(() => void run(), 0);
      if (!res.ok || !res.body || !(res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
        void res.body?.cancel();
        return fallBack(gen);
      }
      setMode("live");
      for await (const ev of sseEvents(res.body)) {
        if (ev.event === "expired") return later(() => void run(), 0);
        opts.onEvent(ev);
        if (stopped || gen !== generation) return;
      }
      // The server closed the stream (it restarted, or stops): connect again.
      later(() => void run(), 1000);
    } catch {
      if (ac.signal.aborted || gen !== generation) return;
      // The network broke, or the snapshot failed: try again in a moment.
      later(() => void run(), 2000);
    }
  };

  const onVisibility = () => {
    if (document.hidden) {
      generation++;
      abort?.abort();
      clearTimeout(timer);
      setMode("paused");
    } else {
      void run();
    }
  };
  document.addEventListener("visibilitychange", onVisibility);
  void run();
  return () => {
    stopped = true;
    generation++;
    abort?.abort();
    clearTimeout(timer);
    document.removeEventListener("visibilitychange", onVisibility);
  };
}
