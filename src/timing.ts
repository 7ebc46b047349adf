// TIERCUT_TIMING=1: compile prints when each phase ends (milliseconds since the
// module loaded) on stderr, for finding where compile time goes
// (docs/BENCHMARKS.md, compile time). Off: one boolean test per mark.

const on = process.env.TIERCUT_TIMING === '1';
const now = () => performance.timeOrigin + performance.now();
const t0 = now();

/** Whether marks print (callers skip work that only feeds a mark). */
export const timingOn = on;

/** Notes that `label` just ended on this thread, or, with `atEpochMs`, ended at that time on another. */
export function mark(label: string, atEpochMs?: number, detail?: string): void {
  if (!on) return;
  const at = (atEpochMs ?? now()) - t0;
  process.stderr.write(`[timing] ${at.toFixed(0).padStart(5)} ms  ${label}${detail ? ` (${detail})` : ''}\n`);
}
