// arrival-check.test.ts — the inf/NaN check of an adam's gradient rides on the
// copy that brings the gradient in (adam_copy_grads_checked): every path copies
// the bits exactly and finds a non-finite value wherever it is (head, vector
// body, scalar tail); in the runtime, a gradient copied gpu -> cpu and then
// updated trains bit-identically to cpuAdamStep, and an inf or NaN anywhere
// fails the adam with its usual message and leaves p, m, v untouched — which
// also shows the adam trusted the copy's verdict only when it was right (the
// adam skips its own check pass when the copy checked).
import { describe, expect, it } from 'vitest';

import { DTYPE, INSTRUCTION, OP_KIND, STREAM, TIER, nativeAddon, type NativeProgram } from '../../runtime/binding.js';
import { cpuAdamInfo, cpuAdamStep } from '../../src/index.js';
import { expectSameBits, expectStepFailsUntouched, randomState } from './helpers.js';

const addon = nativeAddon();
const info = cpuAdamInfo();
const HP = { lr: 1e-2, beta1: 0.9, beta2: 0.99, eps: 1e-6, weightDecay: 0.1, adamw: false } as const;
const BAD = [Infinity, -Infinity, NaN];

function gradsOf(type: 'fp32' | 'fp16' | 'bf16', values: Float32Array): Float32Array | Uint16Array {
  return type === 'fp32' ? values : addon.halfRound(values, type);
}

describe('adam_copy_grads_checked', () => {
  for (const isa of info.supported) {
    for (const type of ['fp32', 'fp16', 'bf16'] as const) {
      it(`${isa}, ${type}: exact bits, and a non-finite value is found at every position class`, () => {
        for (const n of [1, 15, 16, 17, 33, 1000, 4099]) {
          const src = gradsOf(type, randomState(n, 11 + n).grads);
          const dst = type === 'fp32' ? new Float32Array(n) : new Uint16Array(n);
          expect(addon.adamCopyGrads({ dst, src, type, isa }), `n=${n} finite`).toBe(true);
          expectSameBits(`n=${n} copy`, dst, src);
          for (const at of [...new Set([0, Math.floor(n / 2), n - 1])]) {
            for (const bad of BAD) {
              const values = randomState(n, 5).grads;
              values[at] = bad;
              const s2 = gradsOf(type, values);
              const d2 = type === 'fp32' ? new Float32Array(n) : new Uint16Array(n);
              expect(addon.adamCopyGrads({ dst: d2, src: s2, type, isa }), `n=${n}, ${bad} at ${at}`).toBe(false);
              expectSameBits(`n=${n}, ${bad} at ${at}: copy`, d2, s2);
            }
          }
        }
      });
    }
  }

  it('rejects mismatched arrays with the argument named', () => {
    expect(() => addon.adamCopyGrads({ dst: new Float32Array(3), src: new Float32Array(4), type: 'fp32' })).toThrow('adamCopyGrads: dst: expected 4 elements');
    expect(() => addon.adamCopyGrads({ dst: new Uint16Array(4), src: new Float32Array(4), type: 'fp32' })).toThrow('adamCopyGrads: dst: expected a Float32Array');
  });
});

// gpu: g16 (the gradient as backward left it); cpu: g (its copy), p, m, v.
// Instruction 0 copies g16 gpu -> cpu on the d2h stream; instruction 1, the adam,
// waits for it.
function program(n: number, gradDtype: number): NativeProgram {
  const gsize = n * (gradDtype === DTYPE.f32 ? 4 : 2);
  const align = (x: number) => Math.ceil(x / 64) * 64;
  const cpuSizes = [n * 4, gsize, n * 4, n * 4];  // p, g, m, v
  let off = 0;
  const cpu = cpuSizes.map((size, k) => { const b = { tensor: k, tier: TIER.cpu, offsetBytes: off, sizeBytes: size }; off += align(size); return b; });
  const buffers = [...cpu, { tensor: 4, tier: TIER.gpu, offsetBytes: 0, sizeBytes: gsize }];
  return {
    tiers: [{ capacityBytes: align(gsize), arenaBytes: align(gsize) }, { capacityBytes: off, arenaBytes: off }, { capacityBytes: 0, arenaBytes: 0 }],
    spillDir: '',
    tensors: [DTYPE.f32, gradDtype, DTYPE.f32, DTYPE.f32, gradDtype].map((dtype) => ({ dtype, shape: [n] })),
    buffers,
    ops: [{ kind: OP_KIND.adam, iattr: [0, 0], fattr: [HP.lr, HP.beta1, HP.beta2, HP.eps, HP.weightDecay] }],
    instructions: [
      { stream: STREAM.d2h, kind: INSTRUCTION.copy, op: -1, inputs: [4], outputs: [1], waits: [] },
      { stream: STREAM.cpu, kind: INSTRUCTION.run, op: 0, inputs: [0, 1, 2, 3], outputs: [0, 2, 3], waits: [0] },
    ],
  };
}

describe('runtime: the gradient is checked by the copy that delivers it', () => {
  const N = 100_003;
  for (const type of ['fp32', 'fp16', 'bf16'] as const) {
    const dtype = { fp32: DTYPE.f32, fp16: DTYPE.f16, bf16: DTYPE.bf16 }[type];
    it(`${type}: 3 steps bit-identical to cpuAdamStep; inf/NaN anywhere leaves p, m, v untouched`, async () => {
      const s = addon.createSession(program(N, dtype));
      try {
        const ref = randomState(N, 21);
        const g = gradsOf(type, ref.grads);
        s.write(0, ref.params); s.write(2, ref.expAvg); s.write(3, ref.expAvgSq); s.write(4, g);
        for (let step = 1; step <= 3; step++) {
          await s.step(step);
          cpuAdamStep({ params: ref.params, grads: g, ...(type === 'fp32' ? {} : { gradType: type }), expAvg: ref.expAvg, expAvgSq: ref.expAvgSq, step, ...HP });
        }
        const f32 = (u8: Uint8Array) => new Float32Array(u8.slice().buffer);
        expectSameBits('p', f32(s.read(0)), ref.params);
        expectSameBits('m', f32(s.read(2)), ref.expAvg);
        expectSameBits('v', f32(s.read(3)), ref.expAvgSq);

        for (const at of [0, N >> 1, N - 1]) {
          for (const bad of BAD) {
            const values = randomState(N, 22).grads;
            values[at] = bad;
            s.write(4, gradsOf(type, values));
            await expectStepFailsUntouched(s, 4, 'instruction 1 (cpu, run adam): adam: the gradient has an inf or NaN; parameters and moments left unchanged', [0, 2, 3], `${bad} at ${at}:`);
          }
        }
        // and the next finite gradient trains on
        s.write(4, g);
        await s.step(4);
        cpuAdamStep({ params: ref.params, grads: g, ...(type === 'fp32' ? {} : { gradType: type }), expAvg: ref.expAvg, expAvgSq: ref.expAvgSq, step: 4, ...HP });
        expectSameBits('p after a skipped step', f32(s.read(0)), ref.params);
      } finally {
        s.close();
      }
    });
  }
});
