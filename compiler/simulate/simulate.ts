// Discrete-event simulation of one step: Plan instructions + hardware profile
// -> predicted step time and per-stream busy time.
//
// Each stream runs its instructions in order; an instruction starts when its
// stream is free and every instruction it waits on has finished; it lasts its
// cost (compiler/cost: roofline, or the measured kernel cost). With the
// executor's overheads in the profile (`hw calibrate`, src/calibrate-executor.ts):
// a stream is free instructionSeconds after its previous instruction ends; a
// stream that had to block for an instruction of another stream starts
// wakeSeconds after that instruction ends; the step ends stepSeconds after its
// last instruction. Busy time counts instruction durations only (as the runtime
// measures it). Because every wait points to an earlier instruction, one pass
// in id order computes every start and end time. Cost: O(instructions + waits).

import { copySeconds, opSeconds } from '../cost/cost.js';
import type { HardwareProfile } from '../cost/profiles.js';
import type { Graph } from '../ir/types.js';
import type { Placement } from '../partition/placement.js';
import type { PlanBuffer, PlanInstruction, StreamName } from '../plan/types.js';
import { STREAMS } from '../plan/types.js';

export interface Simulation {
  stepSeconds: number;
  streamBusySeconds: Record<StreamName, number>;
  start: Float64Array;
  end: Float64Array;
}

export function instructionSeconds(g: Graph, p: Placement, buffers: readonly PlanBuffer[], x: PlanInstruction, hw: HardwareProfile): number {
  if (x.kind === 'run') return opSeconds(g, g.ops[x.op], p.opTier[x.op], hw);
  if (x.kind === 'copy') { const s = buffers[x.inputs[0]], d = buffers[x.outputs[0]]; return copySeconds(s.sizeBytes, s.tier, d.tier, hw); }
  return 0;
}

export function simulate(g: Graph, p: Placement, buffers: readonly PlanBuffer[], ins: readonly PlanInstruction[], hw: HardwareProfile): Simulation {
  const start = new Float64Array(ins.length), end = new Float64Array(ins.length);
  const free = Object.fromEntries(STREAMS.map((s) => [s, 0])) as Record<StreamName, number>;
  const busy = Object.fromEntries(STREAMS.map((s) => [s, 0])) as Record<StreamName, number>;
  const over = hw.executor ?? { instructionSeconds: 0, wakeSeconds: 0, stepSeconds: 0 };
  let step = 0;
  for (const x of ins) {
    const ready = free[x.stream];
    let t = ready;
    for (const w of x.waits) {
      // blocked on another stream's instruction: woken after it ends
      const woken = end[w] > ready && ins[w].stream !== x.stream ? end[w] + over.wakeSeconds : end[w];
      t = Math.max(t, woken);
    }
    const d = instructionSeconds(g, p, buffers, x, hw);
    start[x.id] = t; end[x.id] = t + d;
    free[x.stream] = t + d + over.instructionSeconds;
    busy[x.stream] += d;
    step = Math.max(step, t + d);
  }
  return { stepSeconds: ins.length > 0 ? step + over.stepSeconds : 0, streamBusySeconds: busy, start, end };
}
