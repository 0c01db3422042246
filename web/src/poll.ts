// Runs `step` now and again `everyMs` after each run ends, until the returned stop is called.
// A hidden tab skips its turns (nobody looks; the server is spared) and catches up when shown.
export function poll(step: () => Promise<void>, everyMs: number): () => void {
  let stopped = false;
  let running = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const run = async () => {
    if (stopped || running) return;
    clearTimeout(timer);
    running = true;
    try {
      if (!document.hidden) await step();
    } finally {
      running = false;
      if (!stopped) timer = setTimeout(run, everyMs);
    }
  };
  const onShow = () => {
    if (!document.hidden) void run();
  };
  document.addEventListener("visibilitychange", onShow);
  void run();
  return () => {
    stopped = true;
    clearTimeout(timer);
    document.removeEventListener("visibilitychange", onShow);
  };
}
