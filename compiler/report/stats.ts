// Report statistics: Plan -> the numbers every report format prints.
// Placement bytes per role and tier (by home), op counts per phase and tier,
// transfer traffic and counts, tier peaks against capacities, predictions.

import type { Tier } from '../cost/cost.js';
import { ROLES, type Role } from '../ir/types.js';
import type { Plan, StreamName } from '../plan/types.js';

export interface PlanStats {
  model: string;
  hardware: string;
  precision: string;
  method: string;
  params: number;
  tiers: Record<Tier, { capacityBytes: number; peakBytes: number }>;
  placement: Record<Role, Record<Tier, number>>;
  ops: Record<'forward' | 'backward' | 'update', Record<'gpu' | 'cpu', number>>;
  traffic: { h2dBytes: number; d2hBytes: number; nvmeReadBytes: number; nvmeWriteBytes: number; inputBytes: number; copies: number };
  predicted: { stepSeconds: number; streamBusySeconds: Record<StreamName, number> };
  lambdaSecondsPerByte: number;
}

export function planStats(plan: Plan): PlanStats {
  const g = plan.graph, p = plan.placement;
  const zero = () => ({ gpu: 0, cpu: 0, nvme: 0 });
  const placement = Object.fromEntries(ROLES.map((r) => [r, zero()])) as Record<Role, Record<Tier, number>>;
  for (const t of g.tensors) placement[t.role][p.home[t.id]] += t.sizeBytes;
  const ops = { forward: { gpu: 0, cpu: 0 }, backward: { gpu: 0, cpu: 0 }, update: { gpu: 0, cpu: 0 } };
  for (const op of g.ops) ops[op.phase][p.opTier[op.id]]++;
  return {
    model: `${plan.model.source} --preset ${plan.model.preset}`,
    hardware: plan.hardware.name,
    precision: g.precision,
    method: p.method,
    params: g.paramCount,
    tiers: { gpu: { ...plan.tiers.gpu }, cpu: { ...plan.tiers.cpu }, nvme: { ...plan.tiers.nvme } },
    placement,
    ops,
    traffic: { ...plan.traffic, copies: plan.instructions.filter((x) => x.kind === 'copy').length },
    predicted: { stepSeconds: plan.predicted.stepSeconds, streamBusySeconds: { ...plan.predicted.streamBusySeconds } },
    lambdaSecondsPerByte: p.lambdaSecondsPerByte,
  };
}
