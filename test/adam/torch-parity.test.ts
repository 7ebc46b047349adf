// torch-parity.test.ts — cpuAdamStep against torch.optim.Adam / AdamW (torch
// 1.13, fixtures/adam/expected.json by scripts/fixtures/gen_adam.py): 4 settings
// of lr / betas / eps / weight decay (one with a gradient scale, one with bf16
// gradients) x Adam/AdamW x 5 steps x sizes 1, 15, 16, 17, 4099, 10^6+3. The
// inputs come from the fixture's PRNG; the fixture holds sampled values, sums and
// max |x| of p, m, v after every step.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

import { nativeAddon } from '../../runtime/binding.js';
import { cpuAdamStep } from '../../src/index.js';
import { xorshiftFloats } from './helpers.js';

// Tolerances (data): p absolute; m, v relative with a floor for values near 0;
// sums scale with n (each element within its own tolerance).
const TOL = { pAbs: 1e-6, mRel: 1e-5, mAbs: 1e-12, vRel: 1e-5, vAbs: 1e-15 } as const;

type Step = Record<'p' | 'm' | 'v', number[]> & Record<'pSum' | 'mSum' | 'vSum' | 'pMaxAbs' | 'mMaxAbs' | 'vMaxAbs', number>;
interface Case {
  n: number; seed: number; adamw: boolean; lr: number; beta1: number; beta2: number; eps: number;
  weightDecay: number; gradScale: number; gradType: 'fp32' | 'bf16'; sample: number[]; steps: Step[];
}
const fixture = JSON.parse(readFileSync('fixtures/adam/expected.json', 'utf8')) as { formatVersion: number; torch: string; steps: number; cases: Case[] };
// sampled values are stored as the shortest decimal of the float32; read them back as float32
for (const c of fixture.cases) for (const s of c.steps) for (const k of ['p', 'm', 'v'] as const) s[k] = s[k].map(Math.fround);

function sum(a: Float32Array): number { let s = 0; for (let i = 0; i < a.length; i++) s += a[i]!; return s; }
function maxAbs(a: Float32Array): number { let s = 0; for (let i = 0; i < a.length; i++) s = Math.max(s, Math.abs(a[i]!)); return s; }

describe(`cpuAdamStep vs torch ${fixture.torch}`, () => {
  it('reads the fixture', () => {
    expect(fixture.formatVersion).toBe(1);
    expect(fixture.cases.length).toBe(48);
  });
  const inputsBySize = new Map<number, { p0: Float32Array; grads: Float32Array[] }>();
  const inputs = (n: number, seed: number) => {
    let got = inputsBySize.get(n);
    if (!got) {
      const u = xorshiftFloats(seed, n * (1 + fixture.steps));
      const grads = [];
      for (let t = 1; t <= fixture.steps; t++) grads.push(Float32Array.from(u.subarray(n * t, n * (t + 1)), (x) => x * 0.1));
      got = { p0: Float32Array.from(u.subarray(0, n)), grads };
      inputsBySize.set(n, got);
    }
    return got;
  };

  for (const c of fixture.cases) {
    const name = `n=${c.n} ${c.adamw ? 'AdamW' : 'Adam'} lr=${c.lr} betas=${c.beta1},${c.beta2} eps=${c.eps} wd=${c.weightDecay}` +
      (c.gradScale !== 1 ? ` gradScale=${c.gradScale}` : '') + (c.gradType !== 'fp32' ? ` grads ${c.gradType}` : '');
    it(name, () => {
      const { p0, grads } = inputs(c.n, c.seed);
      const params = p0.slice(), expAvg = new Float32Array(c.n), expAvgSq = new Float32Array(c.n);
      const worst = { p: 0, m: 0, v: 0, sums: 0 };
      for (let t = 0; t < fixture.steps; t++) {
        const g = c.gradType === 'bf16' ? nativeAddon().halfRound(grads[t]!, 'bf16') : grads[t]!;
        const r = cpuAdamStep({
          params, grads: g, gradType: c.gradType, expAvg, expAvgSq, step: t + 1, lr: c.lr, beta1: c.beta1,
          beta2: c.beta2, eps: c.eps, weightDecay: c.weightDecay, adamw: c.adamw, gradScale: c.gradScale,
        });
        expect(r.finite).toBe(true);
        const want = c.steps[t]!;
        c.sample.forEach((i, k) => {
          const dp = Math.abs(params[i]! - want.p[k]!);
          const dm = Math.abs(expAvg[i]! - want.m[k]!), dv = Math.abs(expAvgSq[i]! - want.v[k]!);
          worst.p = Math.max(worst.p, dp);
          worst.m = Math.max(worst.m, dm / Math.max(Math.abs(want.m[k]!), TOL.mAbs / TOL.mRel));
          worst.v = Math.max(worst.v, dv / Math.max(Math.abs(want.v[k]!), TOL.vAbs / TOL.vRel));
          if (dp > TOL.pAbs) expect(params[i], `step ${t + 1} p[${i}]`).toBe(want.p[k]);
          if (dm > TOL.mAbs + TOL.mRel * Math.abs(want.m[k]!)) expect(expAvg[i], `step ${t + 1} m[${i}]`).toBe(want.m[k]);
          if (dv > TOL.vAbs + TOL.vRel * Math.abs(want.v[k]!)) expect(expAvgSq[i], `step ${t + 1} v[${i}]`).toBe(want.v[k]);
        });
        for (const [label, a, s, mx, abs] of [
          ['p', params, want.pSum, want.pMaxAbs, TOL.pAbs], ['m', expAvg, want.mSum, want.mMaxAbs, TOL.mRel * want.mMaxAbs],
          ['v', expAvgSq, want.vSum, want.vMaxAbs, TOL.vRel * want.vMaxAbs],
        ] as const) {
          const ds = Math.abs(sum(a) - s);
          worst.sums = Math.max(worst.sums, ds / (c.n * abs + 1e-30));
          expect(ds, `step ${t + 1} sum(${label})`).toBeLessThanOrEqual(c.n * abs + 1e-9 * Math.abs(s));
          expect(Math.abs(maxAbs(a) - mx), `step ${t + 1} max|${label}|`).toBeLessThanOrEqual(abs);
        }
      }
      console.log(`${name}: max |dp| ${worst.p.toExponential(2)}, max rel dm ${worst.m.toExponential(2)}, ` +
        `max rel dv ${worst.v.toExponential(2)}, worst sum error / allowance ${worst.sums.toExponential(2)}`);
    });
  }
});
