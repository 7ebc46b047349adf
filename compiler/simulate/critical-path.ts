// Critical path of a simulated step: Plan instructions + their simulated start
// and end times -> the chain of instructions that sets the step's length, as
// runs of instructions on one stream (what `report` prints under "what sets
// the step").
//
// From the instruction that ends last, each instruction's binding predecessor
// is whichever ended last of its stream's previous instruction and the
// instructions it waits on (ties: its stream's). Every wait points to an
// earlier instruction, so the walk ends, at an instruction with neither. The
// simulator's finer rules (NVMe batches, a copy following its producer tile by
// tile, wake-up overheads) are not retraced: the chain is the waits' and the
// streams' order, which explains the step up to those.
// Keeps true: runs in time order; consecutive runs on different streams; a
// run's instructions follow each other on its stream.

import type { PlanInstruction, StreamName } from '../plan/types.js';

export interface PathRun {
  stream: StreamName;
  startSeconds: number;
  endSeconds: number;
  /** The time its instructions cover (the rest of its span is waiting; an NVMe batch's copies overlap and count once). */
  busySeconds: number;
  instructions: number;
  /** The run's first and last instruction ids. */
  first: number;
  last: number;
}

export function criticalPath(ins: readonly PlanInstruction[], start: ArrayLike<number>, end: ArrayLike<number>): PathRun[] {
  if (ins.length === 0) return [];
  const previous = new Int32Array(ins.length).fill(-1);
  const lastOn = new Map<StreamName, number>();
  for (const x of ins) { previous[x.id] = lastOn.get(x.stream) ?? -1; lastOn.set(x.stream, x.id); }
  let at = 0;
  for (const x of ins) if (end[x.id] > end[at]) at = x.id;
  const path: number[] = [];
  for (let cur = at; cur >= 0;) {
    path.push(cur);
    let next = previous[cur];
    for (const w of ins[cur].waits) if (next < 0 || end[w] > end[next]) next = w;
    cur = next;
  }
  const runs: PathRun[] = [];
  for (const i of path.reverse()) {
    const x = ins[i], run = runs[runs.length - 1];
    if (run && run.stream === x.stream) {
      run.busySeconds += Math.max(0, end[i] - Math.max(start[i], run.endSeconds));
      run.endSeconds = Math.max(run.endSeconds, end[i]); run.instructions++; run.last = i;
    } else {
      runs.push({ stream: x.stream, startSeconds: start[i], endSeconds: end[i], busySeconds: end[i] - start[i], instructions: 1, first: i, last: i });
    }
  }
  return runs;
}
