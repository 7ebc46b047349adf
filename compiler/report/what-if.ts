// What a plan needs per tier, and what-if capacities: Plan + capacities given
// on the command line (report and run's --gpu-mem, --cpu-mem, --nvme) ->
// whether the plan fits them.
//
// A plan's memory is fixed when it is compiled: each tier's arena (its peak,
// plan.tiers[t].peakBytes; a DPU plan's steady step has arenas of its own)
// and, beside the arena, the ring buffers of its largest collective op on
// that tier (a sequence-parallel plan's: the ring kernels allocate them per
// call). It fits other capacities where every tier's arena plus those is
// within them, the rule compile applies to its own (compile.ts; the runtime
// checks the arenas alone: native/plan/program.cc). Where it does not, only a
// compile for those capacities can say what would; where they are larger than
// the plan's own, a compile for them may find a faster plan. Keeps true: the
// plan is not changed. Cost: O(ops).

import type { Tier } from '../cost/cost.js';
import type { HardwareProfile, ProfileOverrides } from '../cost/profiles.js';
import { withCapacities } from '../cost/profiles.js';
import type { Plan } from '../plan/types.js';
import { ringWorkspaceBytes } from '../ir/ops.js';

export interface WhatIf {
  /** The capacities asked about: the given ones, the plan's own elsewhere. */
  capacityBytes: Record<Tier, number>;
  /** The tiers given on the command line. */
  given: Tier[];
  fits: boolean;
  /** Each tier over its capacity (its arena's peak and the ring buffers beside it): the plan's step's, or (`step: 'steady'`) its DPU steady step's. */
  over: { tier: Tier; step: 'plain' | 'steady'; peakBytes: number; ringBytes: number; capacityBytes: number; overBytes: number }[];
  /** Some given capacity is larger than the plan was compiled for: a compile for these may find a faster plan. */
  roomier: boolean;
}

const TIERS: Tier[] = ['gpu', 'cpu', 'nvme'];

/** Whether the plan fits the capacities `over` gives (the others the plan's own); undefined where none is given. */
export function whatIf(plan: Plan, over: ProfileOverrides): WhatIf | undefined {
  const given = TIERS.filter((t) => capacityOf(over, t) !== undefined);
  if (given.length === 0) return undefined;
  const hw: HardwareProfile = withCapacities(plan.hardware, over);
  const capacityBytes = { gpu: hw.gpu.capacityBytes, cpu: hw.cpu.capacityBytes, nvme: hw.nvme.capacityBytes };
  const steps: [Plan, 'plain' | 'steady'][] = [[plan, 'plain'], ...(plan.dpu?.steady ? [[plan.dpu.steady, 'steady'] as [Plan, 'steady']] : [])];
  const overflows: WhatIf['over'] = [];
  for (const [p, step] of steps) {
    const ring = ringBytes(p);
    for (const tier of TIERS) {
      const peakBytes = p.tiers[tier].peakBytes, need = peakBytes + ring[tier];
      if (need > capacityBytes[tier]) overflows.push({ tier, step, peakBytes, ringBytes: ring[tier], capacityBytes: capacityBytes[tier], overBytes: need - capacityBytes[tier] });
    }
  }
  const roomier = given.some((t) => capacityBytes[t] > plan.tiers[t].capacityBytes);
  return { capacityBytes, given, fits: overflows.length === 0, over: overflows, roomier };
}

/** Per tier, the ring buffers and scratch of the plan's largest collective op there (beside the arena; 0 without one). */
export function ringBytes(plan: Plan): Record<Tier, number> {
  const g = plan.graph, most: Record<Tier, number> = { gpu: 0, cpu: 0, nvme: 0 };
  for (const op of g.ops) {
    const tier = plan.placement.opTier[op.id];
    most[tier] = Math.max(most[tier], ringWorkspaceBytes(op.kind, op.inputs.map((t) => g.tensors[t]), op.attrs));
  }
  return most;
}

function capacityOf(over: ProfileOverrides, t: Tier): number | undefined {
  return t === 'gpu' ? over.gpuMemBytes : t === 'cpu' ? over.cpuMemBytes : over.nvmeBytes;
}

/** The command-line flag of a tier's capacity. */
export const capacityFlag = (t: Tier) => (t === 'gpu' ? '--gpu-mem' : t === 'cpu' ? '--cpu-mem' : '--nvme');
