// nonfinite.test.ts — an inf or NaN gradient (or one that overflows when scaled)
// leaves params, expAvg, expAvgSq and the half copy exactly as they were, on
// every path, wherever the bad element sits (first, in a vector body, in the
// scalar tail, in the last tile).
import { describe, expect, it } from 'vitest';

import { nativeAddon } from '../../runtime/binding.js';
import { cpuAdamInfo, cpuAdamStep } from '../../src/index.js';
import { bytesOf, randomState } from './helpers.js';

const addon = nativeAddon();
const N = 100_003;

describe('non-finite gradients leave all state untouched', () => {
  for (const isa of cpuAdamInfo().supported) {
    for (const gradType of ['fp32', 'fp16', 'bf16'] as const) {
      it(`${isa}, grads ${gradType}`, () => {
        for (const at of [0, 17, 50_000, N - 1]) {
          for (const bad of [Infinity, -Infinity, NaN]) {
            const s = randomState(N, 5);
            s.grads[at] = bad;
            const grads = gradType === 'fp32' ? s.grads : addon.halfRound(s.grads, gradType);
            const half = new Uint16Array(N).fill(0x1234);
            const before = [s.params, s.expAvg, s.expAvgSq, half].map((a) => bytesOf(a).slice());
            const r = cpuAdamStep({ params: s.params, grads, gradType, expAvg: s.expAvg, expAvgSq: s.expAvgSq, half,
              halfType: 'bf16', step: 2, lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01, adamw: true,
              isa, threads: cpuAdamInfo().maxThreads, tileElems: 4096 });
            expect(r.finite, `${bad} at ${at}`).toBe(false);
            [s.params, s.expAvg, s.expAvgSq, half].forEach((a, k) =>
              expect(Buffer.compare(bytesOf(a), before[k]!), `array ${k} changed (${bad} at ${at})`).toBe(0));
          }
        }
      });
    }
  }

  it('a finite gradient that overflows under gradScale counts as non-finite', () => {
    const s = randomState(33, 6);
    s.grads[32] = 3e38;
    const before = bytesOf(s.params).slice();
    const r = cpuAdamStep({ ...s, step: 1, lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, adamw: false, gradScale: 1024 });
    expect(r.finite).toBe(false);
    expect(Buffer.compare(bytesOf(s.params), before)).toBe(0);
  });

  it('checkFinite: false skips the check (the NaN reaches the state)', () => {
    const s = randomState(33, 6);
    s.grads[3] = NaN;
    const r = cpuAdamStep({ ...s, step: 1, lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, adamw: false, checkFinite: false });
    expect(r.finite).toBe(true);
    expect(s.params[3]).toBeNaN();
    expect(Number.isFinite(s.params[4])).toBe(true);
  });
});
