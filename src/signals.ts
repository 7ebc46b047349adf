// What a command leaves on disk while it works (a run's spill files, hw
// calibrate's test file) removed when it is stopped: on SIGINT, SIGTERM or
// SIGHUP the cleanup runs and the process exits with the shell's 128 + the
// signal's number (130, 143, 129); on any other exit (bin/tiercut.js exits
// when stdout's reader goes away) the cleanup runs too.
//
// Installed before the work that makes the files begins: a signal that comes
// while a synchronous native call runs (a session's constructor writing its
// initial state, a calibration pass) waits for it and then cleans up; without
// a listener it had killed the process with the whole spill file left. A
// second signal while the first cleans up (close waits for a running step) is
// ignored: a `once` listener had left the next one the default action.

const SIGNALS = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 } as const;

/** Installs the cleanup; gives the function that takes it off again (the caller cleans up itself on the normal path). */
export function cleanupOnSignals(cleanup: () => void): () => void {
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    try { cleanup(); } finally { process.exit(SIGNALS[signal as keyof typeof SIGNALS] ?? 130); }
  };
  const onExit = () => cleanup();
  process.once('exit', onExit);
  for (const s of Object.keys(SIGNALS)) process.on(s, stop);
  return () => {
    for (const s of Object.keys(SIGNALS)) process.off(s, stop);
    process.off('exit', onExit);
  };
}
