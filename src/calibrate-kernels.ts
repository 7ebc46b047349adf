// The kernels of this machine against the roofline, for `tiercut hw calibrate`.
//
// The roofline (compiler/cost) prices every op at the machine's matmul peak or
// memory bandwidth. Real kernels miss it in kind-specific ways: a GELU spends
// its time in tanh, a small matmul in loop overhead, every call has a fixed
// cost. So: run a calibration workload through the real runtime, time every
// run instruction (the executor's per-instruction trace; median over steps),
// and fit, per kernel (compiler/cost kernelKey: the op kind and its flag
// attributes, e.g. gelu and gelu[erf]) over all its instances,
//   measured seconds = fixedSeconds + rooflineFactor x roofline seconds
// by least squares on the relative error (weights 1 / measured^2, so a 1 µs
// kernel counts as much as a 100 µs one: small models are sums of small
// kernels); both coefficients >= 0; through the origin when the instances do
// not spread enough to separate the two.
//
// The workload: the bundled DSL models (gpt, llama, bert, mlp) at their tiny
// preset with the batch halved and doubled — shapes on both sides of the tiny
// presets, none equal to them — all on the (emulated) GPU, each in fp32, fp16
// and bf16 (a half kernel is keyed apart: cost.ts opKernelKey). Kernels the
// workload does not contain keep their roofline cost.

import { join } from 'node:path';
import { opKernelKey, rooflineSeconds } from '../compiler/cost/cost.js';
import { loadProfile, type KernelCost } from '../compiler/cost/profiles.js';
import type { Precision } from '../compiler/ir/types.js';
import { syntheticData } from '../runtime/data.js';
import { TrainingSession } from '../runtime/session.js';
import { compile } from './compile.js';
import { packageRoot } from './paths.js';

const MODELS: readonly [string, number][] = [
  ['gpt.ts', 2], ['gpt.ts', 8], ['llama.ts', 2], ['llama.ts', 8], ['bert.ts', 2], ['bert.ts', 8], ['mlp.ts', 4], ['mlp.ts', 16],
];
const WORKLOADS: readonly [string, number, Precision][] = (['fp32', 'fp16', 'bf16'] as const).flatMap((p) => MODELS.map(([f, b]): [string, number, Precision] => [f, b, p]));

const median = (a: readonly number[]) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };

/** Weighted least squares m = a + b r (weights 1 / m^2: relative error) with a, b >= 0. */
export function fitKernel(roofline: readonly number[], measured: readonly number[]): KernelCost {
  const n = roofline.length;
  const w = measured.map((m) => 1 / Math.max(m, 1e-12) ** 2);
  const W = w.reduce((s, x) => s + x, 0);
  let mr = 0, mm = 0;
  for (let i = 0; i < n; i++) { mr += w[i] * roofline[i]; mm += w[i] * measured[i]; }
  mr /= W; mm /= W;
  let srr = 0, srm = 0, s0rr = 0, s0rm = 0;
  for (let i = 0; i < n; i++) {
    srr += w[i] * (roofline[i] - mr) ** 2; srm += w[i] * (roofline[i] - mr) * (measured[i] - mm);
    s0rr += w[i] * roofline[i] ** 2; s0rm += w[i] * roofline[i] * measured[i];
  }
  const spread = mr > 0 ? Math.sqrt(srr / W) / mr : 0;
  if (spread > 0.05) {
    const b = srm / srr, a = mm - b * mr;
    if (a >= 0 && b >= 0) return { fixedSeconds: a, rooflineFactor: b };
    if (b < 0) return { fixedSeconds: mm, rooflineFactor: 0 };
  }
  // through the origin (the instances are alike, or the free fit wanted a < 0)
  return s0rr > 0 ? { fixedSeconds: 0, rooflineFactor: s0rm / s0rr } : { fixedSeconds: mm, rooflineFactor: 0 };
}

export interface KernelCalibration {
  kernels: Record<string, KernelCost>;
  /** Instances per kind. */
  samples: Record<string, number>;
  workloads: string[];
}

/** `hwFile`: the profile measured so far (rooflines); the workload is compiled and priced with it. */
export async function measureKernels(hwFile: string, opts: { steps?: number } = {}): Promise<KernelCalibration> {
  const steps = opts.steps ?? 12;
  const hw = loadProfile(hwFile);
  const byKind = new Map<string, { r: number[]; m: number[] }>();
  const workloads: string[] = [];
  for (const [file, batch, precision] of WORKLOADS) {
    const plan = await compile({ model: join(packageRoot(), 'models', file), preset: 'tiny', hw: hwFile, batch, precision });
    workloads.push(`${file.replace('.ts', '')} tiny batch ${batch} ${precision}`);
    const session = new TrainingSession(plan, { seed: 0, trace: true });
    const data = syntheticData(plan.graph, 0);
    const n = plan.instructions.length;
    const times: number[][] = Array.from({ length: n }, () => []);
    try {
      for (let k = 1; k <= steps + 2; k++) {
        const r = await session.step(k, data(k));
        const t = r.stats.trace!;
        if (k > 2) for (let i = 0; i < n; i++) times[i].push(t.endSeconds[i] - t.startSeconds[i]);
      }
    } finally {
      session.close();
    }
    for (const x of plan.instructions) {
      if (x.kind !== 'run') continue;
      const op = plan.graph.ops[x.op];
      const tier = plan.placement.opTier[x.op];
      const key = opKernelKey(plan.graph, op);
      const e = byKind.get(key) ?? { r: [], m: [] };
      e.r.push(rooflineSeconds(plan.graph, op, tier, hw));
      e.m.push(median(times[x.id]));
      byKind.set(key, e);
    }
  }
  const kernels: Record<string, KernelCost> = {}, samples: Record<string, number> = {};
  for (const kind of [...byKind.keys()].sort()) {
    const e = byKind.get(kind)!;
    kernels[kind] = fitKernel(e.r, e.m);
    samples[kind] = e.r.length;
  }
  return { kernels, samples, workloads };
}
