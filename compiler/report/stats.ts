// Report statistics: Plan -> the numbers every report format prints.
// Placement bytes per role and tier (by home), op counts per phase and tier,
// transfer traffic and counts, tier peaks against capacities, predictions,
// the predicted step's critical path (the plan simulated again) and the step
// of the same program without the waits the arena adds for address reuse.

import type { Tier } from '../cost/cost.js';
import { ROLES, type Role } from '../ir/types.js';
import type { DpuDeclined, Plan, PlanBuffer, StreamName } from '../plan/types.js';
import { isDelayedUpdate } from '../lower/dpu.js';
import { buildProgram } from '../schedule/program.js';
import { criticalPath } from '../simulate/critical-path.js';
import { simulate } from '../simulate/simulate.js';
import { instructionLabel } from '../simulate/trace.js';
import type { WhatIf } from './what-if.js';

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
  predicted: { stepSeconds: number; streamBusySeconds: Record<StreamName, number>; tflops: number };
  /** How the prediction was costed: pure rooflines, or with what `hw calibrate` measured (kernel kinds fitted). */
  costModel: { kind: 'roofline' | 'calibrated'; kernelKinds: number; executorOverheads: boolean; nvmeLatency: boolean };
  /** The NVMe store settings the plan names (its profile's), null where it names none; absent without an NVMe tier. */
  nvmeIo?: { queueDepth: number | null; blockBytes: number | null };
  lambdaSecondsPerByte: number;
  /** The LP's lower bound on the step time (absent in plans made without it). */
  lowerBoundSeconds?: number;
  gapPercent?: number;
  /** The model fits on the GPU and stays there: the bound above is over such plans (the GPU's own work). */
  keptOnGpu?: boolean;
  /** With keptOnGpu: the LP's bound over every placement. */
  anyPlacementLowerBoundSeconds?: number;
  /** The plan computes on the CPU, outside the LP's family: the bound above is the op-cost floor over every placement, not the LP's. */
  opCostFloor?: boolean;
  /** Parameters the plan holds in parts (compile's second try, compiler/lower/chunks.ts): how many, and in how many parts in all. */
  paramsInParts?: { parameters: number; parts: number };
  /** An LP the compile needed ended without an optimum (plan.lpStatus). */
  lpStatus?: string;
  /** The plan leaves the LP's family these ways: the bound above is the LP's widened by them (plan.bound.widenedBy). */
  widenedBy?: NonNullable<Plan['bound']>['widenedBy'];
  /** The bound above is the LP's without its fetch-then-update rows, the full one having ended without an optimum (plan.bound.relaxed). */
  relaxed?: boolean;
  /**
   * With --dpu: the warm-up length, how many updates the steady step delays
   * (those the plain step runs on the CPU) and its prediction and peaks; or,
   * where it was declined, no steady step and why (plan.dpu.declined).
   */
  dpu?: {
    warmupSteps: number; delayedUpdates: number;
    steady?: { stepSeconds: number; tiers: Record<Tier, { capacityBytes: number; peakBytes: number }>; traffic: PlanStats['traffic'] };
    declined?: DpuDeclined;
  };
  /**
   * Sequence parallelism: per rank, its tokens, its peak bytes per tier (every
   * rank runs the same step, so the plan's arenas) and the bytes it sends over
   * the ring per step (ring attention forward + backward, gradient all-reduce).
   */
  sp?: {
    ranks: number; seq: number; tokensPerRank: number;
    perRank: {
      rank: number; positions: number[]; peakBytes: Record<Tier, number>;
      /** Outside the arenas, in the tier of the collective ops: the largest one's ring buffers and scratch. */
      ringWorkspaceBytes: number;
      ringSendBytes: { attention: number; allReduce: number; total: number };
    }[];
  };
  /** Capacities given with the report (--gpu-mem, --cpu-mem, --nvme): whether the plan fits them (what-if.ts). */
  whatIf?: WhatIf;
  /** Per tier: what occupies it at its peak (bytes per role), and when (instruction id). */
  atPeak: Record<Tier, { at: number; bytes: Partial<Record<Role, number>> }>;
  /**
   * What sets the predicted step: its critical path (compiler/simulate
   * critical-path.ts) as runs on one stream, in time order, each with its
   * first and last instruction (`from`, `to`: as the traces label them).
   */
  criticalPath: { stream: StreamName; startSeconds: number; endSeconds: number; busySeconds: number; instructions: number; from: string; to: string }[];
  /**
   * The predicted step of the plan's program without the waits its arena
   * offsets add (a buffer's first write waiting for the free of the bytes'
   * last occupant): what the memory layout costs. Absent where the plan's
   * instructions are not its placement's program (a plan from another
   * generator).
   */
  withoutArenaWaitsSeconds?: number;
}

function withoutArenaWaits(plan: Plan): number | undefined {
  let prog: Plan['instructions'];
  // (a plan file's placement that its own program was not made from, edited by hand, may not schedule: then there is no such program to compare)
  try { prog = buildProgram(plan.graph, plan.placement).instructions; } catch { return undefined; }
  const same = prog.length === plan.instructions.length && prog.every((x, i) => {
    const y = plan.instructions[i];
    return x.stream === y.stream && x.kind === y.kind && x.op === y.op && x.waits.every((w) => y.waits.includes(w));
  });
  return same ? simulate(plan.graph, plan.placement, plan.buffers, prog, plan.hardware).stepSeconds : undefined;
}

type Sim = ReturnType<typeof simulate>;

function pathOf(plan: Plan, sim: Sim): PlanStats['criticalPath'] {
  return criticalPath(plan.instructions, sim.start, sim.end).map(({ first, last, ...run }) => ({
    ...run, from: instructionLabel(plan, plan.instructions[first]), to: instructionLabel(plan, plan.instructions[last]),
  }));
}

/** The moment each tier's live bytes peak, and the bytes per role alive then. */
/**
 * The model as the compile that made the plan named it: "models/gpt.ts
 * --preset gpt2-124m --batch 1 --seq 256" (a plan compiled with --batch and
 * --seq had read as the preset's own); an ONNX file alone (its shapes are
 * its own, and compile takes no --preset for it).
 */
function modelLabel(model: Plan['model']): string {
  if (model.preset === 'onnx') return model.source;
  const { batch, seq } = model.config as { batch?: unknown; seq?: unknown };
  const dims = typeof batch === 'number' && typeof seq === 'number' ? ` --batch ${batch} --seq ${seq}` : '';
  return `${model.source} --preset ${model.preset}${dims}`;
}

/**
 * Each tier's most bytes alive at one moment of the predicted step, and the
 * bytes per role alive then: a buffer is alive from its first write's start
 * (the step's start for one valid before it) to its free's end, in the
 * simulated time of the six streams (program order had been taken for time:
 * 570 MiB "alive at once" where the streams held 946 MiB together, as the
 * runtime measured). `at` is the instruction whose write began that moment.
 */
function occupancyAtPeak(plan: Plan, sim: Sim): PlanStats['atPeak'] {
  const out = {} as PlanStats['atPeak'];
  for (const tier of ['gpu', 'cpu', 'nvme'] as Tier[]) {
    const mine = plan.buffers.filter((b) => b.tier === tier);
    const from = (b: PlanBuffer) => (b.allocAt < 0 ? 0 : sim.start[b.allocAt]), to = (b: PlanBuffer) => (b.freeAt < 0 ? Infinity : sim.end[b.freeAt]);
    // frees before writes at one instant: reused bytes are not alive twice
    const events = mine.flatMap((b) => [{ t: from(b), d: b.sizeBytes, b }, ...(b.freeAt < 0 ? [] : [{ t: to(b), d: -b.sizeBytes, b }])])
      .sort((x, y) => x.t - y.t || x.d - y.d);
    let cur = 0, best = -1, when = 0, at = 0;
    for (const e of events) {
      cur += e.d;
      if (e.d > 0 && cur > best) { best = cur; when = e.t; at = Math.max(0, e.b.allocAt); }
    }
    const bytes: Partial<Record<Role, number>> = {};
    for (const b of mine) {
      if (from(b) <= when && when < to(b)) { const r = plan.graph.tensors[b.tensor].role; bytes[r] = (bytes[r] ?? 0) + b.sizeBytes; }
    }
    out[tier] = { at, bytes };
  }
  return out;
}

/** The plan's predicted TFLOPS: the step's flops over its predicted time. */
export function planTflops(plan: Plan): number {
  return plan.graph.ops.reduce((f, op) => f + op.flops, 0) / plan.predicted.stepSeconds / 1e12;
}

/** The whole parameters the graph's param16 parts are cut from, and how many parts (none: {}). */
function paramsInParts(g: Plan['graph']): { paramsInParts?: PlanStats['paramsInParts'] } {
  const wholes = new Set<string>();
  let parts = 0;
  for (const t of g.tensors) if (t.role === 'param16' && t.slice) { wholes.add(t.slice.of); parts++; }
  return parts ? { paramsInParts: { parameters: wholes.size, parts } } : {};
}

export function planStats(plan: Plan, whatIf?: WhatIf): PlanStats {
  const g = plan.graph, p = plan.placement;
  const sim = simulate(plan.graph, plan.placement, plan.buffers, plan.instructions, plan.hardware);
  const zero = () => ({ gpu: 0, cpu: 0, nvme: 0 });
  const placement = Object.fromEntries(ROLES.map((r) => [r, zero()])) as Record<Role, Record<Tier, number>>;
  for (const t of g.tensors) placement[t.role][p.home[t.id]] += t.sizeBytes;
  const ops = { forward: { gpu: 0, cpu: 0 }, backward: { gpu: 0, cpu: 0 }, update: { gpu: 0, cpu: 0 } };
  for (const op of g.ops) ops[op.phase][p.opTier[op.id]]++;
  const withoutWaits = withoutArenaWaits(plan);
  return {
    model: modelLabel(plan.model),
    hardware: plan.hardware.name,
    precision: g.precision,
    method: p.method,
    params: g.paramCount,
    tiers: { gpu: { ...plan.tiers.gpu }, cpu: { ...plan.tiers.cpu }, nvme: { ...plan.tiers.nvme } },
    placement,
    ops,
    // (inputBytes is optional in a plan file: its absence had crashed the text report)
    traffic: { ...plan.traffic, inputBytes: plan.traffic.inputBytes ?? 0, copies: plan.instructions.filter((x) => x.kind === 'copy').length },
    predicted: { stepSeconds: plan.predicted.stepSeconds, streamBusySeconds: { ...plan.predicted.streamBusySeconds }, tflops: planTflops(plan) },
    costModel: {
      kind: plan.hardware.kernels || plan.hardware.executor || plan.hardware.nvme.readLatencySeconds !== undefined || plan.hardware.nvme.writeLatencySeconds !== undefined ? 'calibrated' : 'roofline',
      kernelKinds: Object.keys(plan.hardware.kernels ?? {}).length, executorOverheads: plan.hardware.executor !== undefined,
      nvmeLatency: plan.hardware.nvme.readLatencySeconds !== undefined || plan.hardware.nvme.writeLatencySeconds !== undefined,
    },
    ...(plan.tiers.nvme.peakBytes > 0 ? { nvmeIo: { queueDepth: plan.hardware.nvme.queueDepth ?? null, blockBytes: plan.hardware.nvme.blockBytes ?? null } } : {}),
    lambdaSecondsPerByte: p.lambdaSecondsPerByte,
    ...(plan.bound ? { lowerBoundSeconds: plan.bound.lowerBoundSeconds, gapPercent: plan.bound.gapPercent } : {}),
    ...(plan.bound?.keptOnGpu ? { keptOnGpu: true } : {}),
    ...(plan.bound?.anyPlacementLowerBoundSeconds !== undefined ? { anyPlacementLowerBoundSeconds: plan.bound.anyPlacementLowerBoundSeconds } : {}),
    ...(plan.bound?.opCostFloor ? { opCostFloor: true } : {}),
    ...(plan.lpStatus !== undefined ? { lpStatus: plan.lpStatus } : {}),
    ...paramsInParts(g),
    ...(plan.bound?.widenedBy ? { widenedBy: plan.bound.widenedBy } : {}),
    ...(plan.bound?.relaxed ? { relaxed: true } : {}),
    atPeak: occupancyAtPeak(plan, sim),
    criticalPath: pathOf(plan, sim),
    ...(withoutWaits !== undefined ? { withoutArenaWaitsSeconds: withoutWaits } : {}),
    ...(whatIf ? { whatIf } : {}),
    ...(plan.sp ? {
      sp: {
        ranks: plan.sp.ranks, seq: plan.sp.seq, tokensPerRank: plan.sp.seq / plan.sp.ranks,
        perRank: plan.sp.perRank.map((r) => ({
          rank: r.rank, positions: [...r.positions],
          peakBytes: { gpu: plan.tiers.gpu.peakBytes, cpu: plan.tiers.cpu.peakBytes, nvme: plan.tiers.nvme.peakBytes },
          ringWorkspaceBytes: r.ringWorkspaceBytes,
          ringSendBytes: { ...r.ringSendBytes, total: r.ringSendBytes.attention + r.ringSendBytes.allReduce },
        })),
      },
    } : {}),
    ...(plan.dpu ? { dpu: dpuStats(plan.dpu) } : {}),
  };
}

export function dpuStats(d: NonNullable<Plan['dpu']>): NonNullable<PlanStats['dpu']> {
  if (!d.steady) return { warmupSteps: d.warmupSteps, delayedUpdates: d.declined?.delayedUpdates ?? 0, ...(d.declined ? { declined: { ...d.declined } } : {}) };
  const s = d.steady, g = s.graph;
  return {
    warmupSteps: d.warmupSteps, delayedUpdates: g.ops.filter((o) => isDelayedUpdate(g, o)).length,
    steady: {
      stepSeconds: s.predicted.stepSeconds,
      tiers: { gpu: { ...s.tiers.gpu }, cpu: { ...s.tiers.cpu }, nvme: { ...s.tiers.nvme } },
      traffic: { ...s.traffic, inputBytes: s.traffic.inputBytes ?? 0, copies: s.instructions.filter((x) => x.kind === 'copy').length },
    },
  };
}
