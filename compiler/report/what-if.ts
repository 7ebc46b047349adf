// What-if capacities: Plan + capacities given on the command line (report and
// run's --gpu-mem, --cpu-mem, --nvme) -> whether the plan fits them.
//
// A plan's memory is fixed when it is compiled: each tier's arena (its peak,
// plan.tiers[t].peakBytes; a DPU plan's steady step has arenas of its own).
// It fits other capacities where every arena is within them, the rule compile
// and the runtime apply to the plan's own (native/plan/program.cc: arenaBytes
// <= capacityBytes). Where it does not, only a compile for those capacities
// can say what would; where they are larger than the plan's own, a compile for
// them may find a faster plan. Keeps true: the plan is not changed. Cost: O(1).

import type { Tier } from '../cost/cost.js';
import type { HardwareProfile, ProfileOverrides } from '../cost/profiles.js';
import { withCapacities } from '../cost/profiles.js';
import type { Plan } from '../plan/types.js';

export interface WhatIf {
  /** The capacities asked about: the given ones, the plan's own elsewhere. */
  capacityBytes: Record<Tier, number>;
  /** The tiers given on the command line. */
  given: Tier[];
  fits: boolean;
  /** Each arena over its capacity: the plan's step's, or (`step: 'steady'`) its DPU steady step's. */
  over: { tier: Tier; step: 'plain' | 'steady'; peakBytes: number; capacityBytes: number; overBytes: number }[];
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
    for (const tier of TIERS) {
      const peakBytes = p.tiers[tier].peakBytes;
      if (peakBytes > capacityBytes[tier]) overflows.push({ tier, step, peakBytes, capacityBytes: capacityBytes[tier], overBytes: peakBytes - capacityBytes[tier] });
    }
  }
  const roomier = given.some((t) => capacityBytes[t] > plan.tiers[t].capacityBytes);
  return { capacityBytes, given, fits: overflows.length === 0, over: overflows, roomier };
}

function capacityOf(over: ProfileOverrides, t: Tier): number | undefined {
  return t === 'gpu' ? over.gpuMemBytes : t === 'cpu' ? over.cpuMemBytes : over.nvmeBytes;
}

/** The command-line flag of a tier's capacity. */
export const capacityFlag = (t: Tier) => (t === 'gpu' ? '--gpu-mem' : t === 'cpu' ? '--cpu-mem' : '--nvme');
