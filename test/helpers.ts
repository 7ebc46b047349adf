// Shared test helpers: an f64 interpreter of IR graphs over the native kernels
// (runOp), tolerance checks that print the max difference, the losses of a
// few training steps of a plan, a seeded generator, and a widened bound
// checked on a placement.
import { expect } from 'vitest';
import { nativeAddon } from '../runtime/binding.js';
import { OP_CODES, encodeAttrs } from '../compiler/ir/ops.js';
import type { Graph } from '../compiler/ir/types.js';
import { numel } from '../compiler/ir/types.js';
import type { Plan } from '../compiler/plan/types.js';
import { TrainingSession } from '../runtime/session.js';
import { syntheticData } from '../runtime/data.js';
import { loadProfile, type HardwareProfile } from '../compiler/cost/profiles.js';
import { ADAM_DEFAULTS } from '../compiler/lower/optimizer.js';
import { allGpu } from '../compiler/partition/mincut.js';
import { verifyPlan } from '../compiler/simulate/verify-plan.js';
import { planFor, trainingGraph } from '../src/compile.js';
import { placementBound, type Widening } from '../compiler/partition/lp.js';
import type { LpWorker } from '../compiler/partition/highs-worker.js';
import type { Placement } from '../compiler/partition/placement.js';
import { buildProgram } from '../compiler/schedule/program.js';
import { assignOffsets } from '../compiler/schedule/arena.js';
import { simulate } from '../compiler/simulate/simulate.js';

/** Runs ops of `g` in program order in float64; `values` holds inputs and receives every output. */
export function interpret(g: Graph, values: Map<number, Float64Array | Int32Array>, ops = g.ops): void {
  const addon = nativeAddon();
  for (const op of ops) {
    const { iattr, fattr } = encodeAttrs(op.kind, op.attrs);
    const inputs = op.inputs.map((t) => {
      const v = values.get(t);
      if (!v) throw new Error(`interpret: ${g.tensors[t].name} has no value`);
      return { shape: [...g.tensors[t].shape], data: v };
    });
    const outs = addon.runOp(OP_CODES[op.kind], 'f64', iattr, fattr, inputs, op.outputs.map((t) => ({ shape: [...g.tensors[t].shape] })));
    op.outputs.forEach((t, k) => values.set(t, outs[k] as Float64Array));
  }
}

export function randomValues(n: number, seed: number, scale = 1): Float64Array {
  let s = seed >>> 0 || 1;
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    out[i] = ((s / 4294967296) * 2 - 1) * scale;
  }
  return out;
}

/** |a - b| <= abs + rel * |b| elementwise; reports the worst element. */
export function expectClose(name: string, got: ArrayLike<number>, want: ArrayLike<number>, abs: number, rel = 0): number {
  expect(got.length, `${name}: length`).toBe(want.length);
  let worst = 0, at = -1;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i] - want[i]);
    const excess = d - (abs + rel * Math.abs(want[i]));
    if (!(excess <= 0) && (at < 0 || excess > worst)) { worst = excess; at = i; }
  }
  let maxDiff = 0;
  for (let i = 0; i < want.length; i++) maxDiff = Math.max(maxDiff, Math.abs(got[i] - want[i]));
  console.log(`${name}: max |diff| = ${maxDiff.toExponential(3)} over ${want.length} values`);
  expect(at, `${name}: element ${at} got ${got[at]}, want ${want[at]} (abs ${abs}, rel ${rel})`).toBe(-1);
  return maxDiff;
}

export const count = (shape: readonly number[]) => numel(shape);

/** The losses of `steps` training steps of a plan on synthetic data (session and data seeded with `seed`). */
export async function trainLosses(plan: Plan, steps: number, seed: number): Promise<number[]> {
  const s = new TrainingSession(plan, { seed });
  const data = syntheticData(plan.graph, seed);
  try {
    const out: number[] = [];
    for (let k = 1; k <= steps; k++) out.push((await s.step(k, data(k))).loss);
    return out;
  } finally { s.close(); }
}

/**
 * gpt tiny in fp16 and llama tiny in bf16 on a V100's profile, each with the
 * losses of 4 steps of its all-GPU plan and a function that verifies a plan
 * of it and gives its losses: the reference placements are trained against.
 */
export async function tinyHalfModels(): Promise<{ source: string; g: Graph; hw: HardwareProfile; model: Plan['model']; reference: number[]; losses: (plan: Plan) => Promise<number[]> }[]> {
  const hw = loadProfile('v100-32g');
  const losses = (plan: Plan) => { expect(verifyPlan(plan)).toEqual([]); return trainLosses(plan, 4, 0); };
  const out = [];
  for (const [source, precision] of [['models/gpt.ts', 'fp16'], ['models/llama.ts', 'bf16']] as const) {
    const { graph: g } = await trainingGraph({ model: source, preset: 'tiny', precision });
    const model = { source, preset: 'tiny', config: {} };
    const reference = await losses(planFor(g, hw, allGpu(g), model, ADAM_DEFAULTS));
    expect(reference.length).toBe(4);
    out.push({ source, g, hw, model, reference, losses });
  }
  return out;
}

/**
 * Schedules p; where it fits, checks that it simulates at or above `bound`
 * (the bound LP widened by `widen`, unfixed) and that the same LP fixed to p
 * lies between the two. False where p does not fit (nothing checked).
 */
export async function widenedBoundHolds(g: Graph, hw: HardwareProfile, p: Placement, solver: LpWorker, widen: Widening, bound: number, label: string): Promise<boolean> {
  const a = assignOffsets(buildProgram(g, p), { gpu: hw.gpu.capacityBytes, cpu: hw.cpu.capacityBytes, nvme: hw.nvme.capacityBytes });
  if (a.arenaBytes.gpu > hw.gpu.capacityBytes || a.arenaBytes.cpu > hw.cpu.capacityBytes) return false;
  const step = simulate(g, p, a.buffers, a.instructions, hw).stepSeconds;
  const own = await placementBound(g, hw, p, solver, { widen });
  console.log(`${label}: step ${step.toExponential(4)} s, its own bound ${typeof own === 'number' ? own.toExponential(4) : own}, the bound ${bound.toExponential(4)} s`);
  expect(step).toBeGreaterThanOrEqual(bound * (1 - 1e-9));
  expect(typeof own).toBe('number');
  expect(own as number).toBeLessThanOrEqual(step * (1 + 1e-9));
  expect(own as number).toBeGreaterThanOrEqual(bound * (1 - 1e-6));
  return true;
}

/** Uniform numbers in [0, 1) from `seed`: the same sequence every run (a linear congruential generator). */
export function seeded(seed: number): () => number {
  return () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
}
