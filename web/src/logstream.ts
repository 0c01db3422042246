// Follows a job's driver log over the API's Server-Sent Events stream (docs/api.md, Logs).
// EventSource cannot send an Authorization header, so the stream is read with fetch and parsed
// here; a stream that closes without its `end` event is resumed from the last byte offset.
import { authHeaders, type LogEnd, unauthorized } from "./api";

export interface SseEvent {
  id: string | null;
  event: string;
  data: string;
}

// Splits SSE text into complete events; returns them and the unparsed rest.
export function parseSse(buffer: string): { events: SseEvent[]; rest: string } {
  const events: SseEvent[] = [];
  let start = 0;
  for (;;) {
    const end = buffer.indexOf("\n\n", start);
    if (end < 0) break;
    const block = buffer.slice(start, end);
    start = end + 2;
    let id: string | null = null;
    let event = "message";
    const data: string[] = [];
    let any = false;
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "id") id = value;
      else if (field === "event") event = value;
      else if (field === "data") data.push(value);
      else continue;
      any = true;
    }
    if (any) events.push({ id, event, data: data.join("\n") });
  }
  return { events, rest: buffer.slice(start) };
}

// The events of a text/event-stream body as they arrive: the one reader of every stream (log
// follows, watches).
export async function* sseEvents(body: NonNullable<Response["body"]>): AsyncGenerator<SseEvent> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    const parsed = parseSse(buffer);
    buffer = parsed.rest;
    yield* parsed.events;
  }
}

export function followLog(
  jobId: string,
  onLines: (lines: string[]) => void,
  onEnd: (end: LogEnd | null) => void, // null: the end event's data could not be read
  onError: (message: string) => void,
): () => void {
  const abort = new AbortController();
  let offset: string | null = null;
  let ended = false;
  const run = async () => {
    while (!ended && !abort.signal.aborted) {
      try {
        const q = offset ? `&offset=${encodeURIComponent(offset)}` : "";
        const res = await fetch(`/api/v1/jobs/${encodeURIComponent(jobId)}/logs?follow=1${q}`, {
          headers: authHeaders(),
          signal: abort.signal,
          cache: "no-store",
        });
        // The token was revoked or expired (the server also ends an open stream then).
        if (res.status === 401) return unauthorized();
        if (!res.ok || !res.body) {
          onError(`the log stream answered ${res.status}`);
          return;
        }
        for await (const ev of sseEvents(res.body)) {
          if (ev.id) offset = ev.id;
          if (ev.event === "log") onLines(ev.data.split("\n"));
          else if (ev.event === "end") {
            ended = true;
            try {
              onEnd(JSON.parse(ev.data) as LogEnd);
            } catch {
              onEnd(null);
            }
          }
        }
      } catch (e) {
        if (abort.signal.aborted) return;
        onError(`the log stream broke (${(e as Error).message}); resuming`);
      }
      if (!ended) await new Promise((r) => setTimeout(r, 1000));
    }
  };
  void run();
  return () => abort.abort();
}
