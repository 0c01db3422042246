// Pure functions of the Playground pages (no DOM, no I/O): the TTL countdown, durations as
// people type them, the status line, and the text of a streamed chat answer's chunks.
import type { Playground } from "./api";

export const PLAYGROUND_ENDED: ReadonlySet<string> = new Set(["Stopped", "Expired", "Failed"]);

// A countdown that changes every second: "45s", "4m 05s", "1h 02m 05s".
export function countdown(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const hr = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  const two = (n: number) => String(n).padStart(2, "0");
  if (hr > 0) return `${hr}h ${two(m)}m ${two(sec)}s`;
  if (m > 0) return `${m}m ${two(sec)}s`;
  return `${sec}s`;
}

// The seconds left at `nowMs`, from the server's `ttlRemainingSeconds` read at `readAtMs`
// (this browser's clock only: the server's and the browser's clocks are never compared).
export function ttlLeft(remainingAtRead: number, readAtMs: number, nowMs: number): number {
  return Math.max(0, remainingAtRead - Math.floor((nowMs - readAtMs) / 1000));
}

// "90m", "2h", "45s", "1h30m", "1d" (as `forge playground start --ttl` takes them), or a bare
// number of minutes → seconds; null when it is not a duration.
export function parseDuration(text: string): number | null {
  const t = text.trim().toLowerCase();
  if (/^\d+$/.test(t)) return Number(t) * 60;
  if (!/^(\d+[dhms])+$/.test(t)) return null;
  const unit: Record<string, number> = { d: 86400, h: 3600, m: 60, s: 1 };
  let total = 0;
  for (const [, n, u] of t.matchAll(/(\d+)([dhms])/g)) total += Number(n) * unit[u];
  return total;
}

// The one line at the top of a playground: state · reason — message (for a Pending one, the
// fleet's diagnosis of why it is not ready yet, as for a job).
export function playgroundLine(p: Pick<Playground, "state" | "reason" | "message">): string {
  let s = p.state;
  if (p.reason) s += ` · ${p.reason}`;
  if (p.message) s += ` — ${p.message}`;
  return s;
}

// The text one Server-Sent Event of a streamed chat completion adds to the answer (OpenAI's
// chat.completion.chunk: choices[0].delta.content; a completion's choices[0].text); null for
// the closing "[DONE]". Unparsable data adds nothing.
export function chatDelta(data: string): string | null {
  if (data.trim() === "[DONE]") return null;
  try {
    const j = JSON.parse(data) as { choices?: { delta?: { content?: string | null }; text?: string }[] };
    const c = j.choices?.[0];
    return c?.delta?.content ?? c?.text ?? "";
  } catch {
    return "";
  }
}

// The message of an error answer, whether StarForge's ({"error": "Kind", "message"}) or vLLM's
// (OpenAI's {"error": {"message", "type"}}).
export function errorMessage(status: number, text: string): string {
  try {
    const j = JSON.parse(text) as { message?: string; error?: string | { message?: string } };
    if (typeof j.message === "string") return j.message;
    if (j.error && typeof j.error === "object" && typeof j.error.message === "string") return j.error.message;
  } catch {
    // not JSON
  }
  return text.trim() || `HTTP ${status}`;
}
