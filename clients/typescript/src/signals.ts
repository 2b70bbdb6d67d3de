// A helper that turns the process's stop signals into an AbortSignal, for
// Worker's `signal` option. Only here does the package touch `process`,
// and only when the helper is called.

/** What shutdownOnSignals returns. */
export interface ShutdownSignals {
  /** Aborted at the first of the signals. */
  readonly signal: AbortSignal;
  readonly controller: AbortController;
  /** Removes the signal handlers. */
  dispose(): void;
}

/** Options of shutdownOnSignals. */
export interface ShutdownSignalsOptions {
  /** The signals to handle; SIGTERM and SIGINT by default. */
  signals?: string[];
  /** Called for every signal after the first (such as a second Ctrl-C):
   * `() => worker.stop({ timeoutMs: 0 })` releases the running jobs at once. */
  onRepeat?: (signal: string) => void;
}

interface ProcessLike {
  on(event: string, listener: (signal: string) => void): unknown;
  off(event: string, listener: (signal: string) => void): unknown;
}

/**
 * Handles SIGTERM and SIGINT (or `options.signals`): the first aborts the
 * returned signal, later ones call `options.onRepeat`. While handled, the
 * signals no longer end the process: the worker's graceful stop does.
 * Needs a runtime with Node's `process` (Node, Bun, Deno's compatibility).
 */
export function shutdownOnSignals(options: ShutdownSignalsOptions = {}): ShutdownSignals {
  const proc = (globalThis as { process?: ProcessLike }).process;
  if (!proc || typeof proc.on !== "function") {
    throw new Error("shutdownOnSignals needs Node's process object; abort an AbortController yourself instead");
  }
  const controller = new AbortController();
  const signals = options.signals ?? ["SIGTERM", "SIGINT"];
  const onSignal = (sig: string): void => {
    if (!controller.signal.aborted) controller.abort(new Error(`received ${sig}`));
    else options.onRepeat?.(sig);
  };
  for (const s of signals) proc.on(s, onSignal);
  return {
    signal: controller.signal,
    controller,
    dispose(): void {
      for (const s of signals) proc.off(s, onSignal);
    },
  };
}
