// compile: model file -> Plan. Wires the compiler passes in order and runs the
// verifiers between them (DESIGN.md, data flow).

import { autodiff } from '../compiler/autodiff/autodiff.js';
import type { Tier } from '../compiler/cost/cost.js';
import { loadProfile, type HardwareProfile } from '../compiler/cost/profiles.js';
import { importDsl } from '../compiler/import/dsl.js';
import type { AdamAttrs, Graph, Precision } from '../compiler/ir/types.js';
import { assertGraph } from '../compiler/ir/verify.js';
import { ADAM_DEFAULTS, lowerOptimizer } from '../compiler/lower/optimizer.js';
import { lowerPrecision } from '../compiler/lower/precision.js';
import { allGpu, fmtBytes, partitionMinCut } from '../compiler/partition/mincut.js';
import type { Placement } from '../compiler/partition/placement.js';
import { FORMAT_VERSION, type Plan, type Traffic } from '../compiler/plan/types.js';
import { assignOffsets } from '../compiler/schedule/arena.js';
import { buildProgram, liveBytesPeak } from '../compiler/schedule/program.js';
import { simulate } from '../compiler/simulate/simulate.js';
import { verifyPlan } from '../compiler/simulate/verify-plan.js';
import { diag } from './diagnostics.js';

export interface CompileOptions {
  model: string;
  preset?: string;
  hw?: string;
  gpuMemBytes?: number;
  cpuMemBytes?: number;
  nvmeBytes?: number;
  precision?: Precision;
  batch?: number;
  seq?: number;
  optimizer?: Partial<AdamAttrs>;
}

/** The whole training step of a model: forward, backward, optimizer, in the compute precision. */
export async function trainingGraph(opts: CompileOptions): Promise<{ graph: Graph; preset: string; config: Record<string, unknown> }> {
  const imported = await importDsl(opts.model, { preset: opts.preset, batch: opts.batch, seq: opts.seq });
  assertGraph(imported.graph, 'import');
  const withGrad = autodiff(imported.graph);
  assertGraph(withGrad, 'autodiff');
  const lowered = lowerPrecision(withGrad, opts.precision ?? 'fp32');
  assertGraph(lowered, 'precision lowering');
  const step = lowerOptimizer(lowered, { ...ADAM_DEFAULTS, ...opts.optimizer });
  assertGraph(step, 'optimizer lowering');
  return { graph: step, preset: imported.preset, config: imported.config };
}

/** Placement: everything on the GPU when it fits, else the min-cut under the GPU capacity. */
export function place(g: Graph, hw: HardwareProfile): Placement {
  const gpuPeak = (p: Placement) => liveBytesPeak(buildProgram(g, p)).gpu;
  const whole = allGpu(g);
  if (gpuPeak(whole) <= hw.gpu.capacityBytes) return whole;
  // fragmentation can push the arena above the live-bytes peak: tighten the target and retry
  let target = hw.gpu.capacityBytes;
  for (let attempt = 0; attempt < 4; attempt++) {
    const p = partitionMinCut(g, hw, { gpuPeakBytes: gpuPeak, capacityBytes: target });
    const arena = assignOffsets(buildProgram(g, p)).arenaBytes.gpu;
    if (arena <= hw.gpu.capacityBytes) return p;
    target -= arena - hw.gpu.capacityBytes;
  }
  throw diag.doesNotFit(`does not fit: the GPU arena stays above ${fmtBytes(hw.gpu.capacityBytes)} after placement; raise --gpu-mem`);
}

export function planFor(g: Graph, hw: HardwareProfile, p: Placement, model: Plan['model'], optimizer: AdamAttrs): Plan {
  const prog = buildProgram(g, p);
  const arenas = assignOffsets(prog);
  const sim = simulate(g, p, arenas.buffers, arenas.instructions, hw);
  const traffic = { h2dBytes: 0, d2hBytes: 0, nvmeReadBytes: 0, nvmeWriteBytes: 0, inputBytes: 0 };
  for (const x of arenas.instructions) {
    if (x.kind !== 'copy') continue;
    const bytes = arenas.buffers[x.inputs[0]].sizeBytes;
    if (x.stream === 'h2d') traffic.h2dBytes += bytes;
    if (x.stream === 'd2h') traffic.d2hBytes += bytes;
    if (x.stream === 'nvmeRead') traffic.nvmeReadBytes += bytes;
    if (x.stream === 'nvmeWrite') traffic.nvmeWriteBytes += bytes;
  }
  for (const t of g.tensors) if (t.role === 'input') traffic.inputBytes += t.sizeBytes;
  const tiers = Object.fromEntries((['gpu', 'cpu', 'nvme'] as Tier[]).map((t) => [t, { capacityBytes: hw[t].capacityBytes, peakBytes: arenas.arenaBytes[t] }])) as Plan['tiers'];
  for (const t of ['cpu', 'nvme'] as Tier[]) {
    if (tiers[t].peakBytes > tiers[t].capacityBytes) throw diag.doesNotFit(`does not fit: the ${t} tier needs ${fmtBytes(tiers[t].peakBytes)}, capacity is ${fmtBytes(tiers[t].capacityBytes)} (short by ${fmtBytes(tiers[t].peakBytes - tiers[t].capacityBytes)}); raise --${t === 'cpu' ? 'cpu-mem' : 'nvme'}`);
  }
  const plan: Plan = {
    formatVersion: FORMAT_VERSION, generator: 'tiercut 0.1.0', model, hardware: hw, optimizer, graph: g, placement: p,
    tiers, buffers: arenas.buffers, instructions: arenas.instructions, traffic: traffic as Traffic,
    predicted: { stepSeconds: sim.stepSeconds, streamBusySeconds: sim.streamBusySeconds, peakBytes: arenas.arenaBytes },
  };
  const problems = verifyPlan(plan);
  if (problems.length) throw new Error(`internal: the emitted plan fails verification:\n  ${problems.slice(0, 8).join('\n  ')}`);
  return plan;
}

export async function compile(opts: CompileOptions): Promise<Plan> {
  const hw = loadProfile(opts.hw ?? 'local', { gpuMemBytes: opts.gpuMemBytes, cpuMemBytes: opts.cpuMemBytes, nvmeBytes: opts.nvmeBytes });
  const { graph, preset, config } = await trainingGraph(opts);
  const placement = place(graph, hw);
  const optimizer = { ...ADAM_DEFAULTS, ...opts.optimizer };
  return planFor(graph, hw, placement, { source: opts.model, preset, config }, optimizer);
}
