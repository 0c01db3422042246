// A chat with a playground's model through the API's OpenAI-compatible route
// (POST /api/v1/playgrounds/{id}/openai/v1/chat/completions, "stream": true): the answer's
// Server-Sent Events are read with fetch as they arrive, each chunk's text handed on at once.
// The token goes in the Authorization header only, never in a URL.
import { authHeaders, unauthorized } from "./api";
import { sseEvents } from "./logstream";
import { chatDelta, errorMessage } from "./playground";

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

// Streams the model's answer to `messages`; `onText` gets each piece as it comes. Resolves when
// the answer is complete (or `signal` aborts it); rejects with the server's or vLLM's message.
export async function streamChat(
  openaiBaseUrl: string,
  model: string,
  messages: ChatMessage[],
  onText: (text: string) => void,
  signal: AbortSignal,
): Promise<void> {
  const res = await fetch(`${openaiBaseUrl}/chat/completions`, {
    method: "POST",
    headers: { ...authHeaders(), "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify({ model, messages, stream: true }),
    signal,
    cache: "no-store",
  });
  if (res.status === 401) {
    unauthorized();
    throw new Error("your token is no longer valid");
  }
  if (!res.ok || !res.body) throw new Error(errorMessage(res.status, await res.text()));
  for await (const ev of sseEvents(res.body)) {
    const text = chatDelta(ev.data);
    if (text === null) return;
    if (text) onText(text);
  }
}
