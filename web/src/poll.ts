// Runs `step` now and again `everyMs` after each run ends, until the returned stop is called.
export function poll(step: () => Promise<void>, everyMs: number): () => void {
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const run = async () => {
    if (stopped) return;
    try {
      await step();
    } finally {
      if (!stopped) timer = setTimeout(run, everyMs);
    }
  };
  void run();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
