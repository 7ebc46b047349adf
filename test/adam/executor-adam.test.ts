// executor-adam.test.ts — the runtime's adam instruction runs the fused CPU Adam
// on the arena bytes: an fp16 (or bf16) gradient read as is and the p16 copy
// written as half give exactly what cpuAdamStep gives on the same data; an inf
// gradient fails the instruction and leaves p, m, v and p16 untouched.
import { describe, expect, it } from 'vitest';

import { DTYPE, INSTRUCTION, OP_KIND, STREAM, TIER, nativeAddon, type NativeProgram } from '../../runtime/binding.js';
import { cpuAdamStep } from '../../src/index.js';
import { expectSameBits, expectStepFailsUntouched, randomState } from './helpers.js';

const addon = nativeAddon();
const N = 4099;
const HP = { lr: 1e-2, beta1: 0.9, beta2: 0.99, eps: 1e-6, weightDecay: 0.1, adamw: true } as const;

function program(gradDtype: number, halfDtype: number): NativeProgram {
  const dtypes = [DTYPE.f32, gradDtype, DTYPE.f32, DTYPE.f32, halfDtype];  // p, g, m, v, p16
  const size = (d: number) => N * (d === DTYPE.f32 ? 4 : 2);
  let offset = 0;
  const buffers = dtypes.map((d, k) => {
    const b = { tensor: k, tier: TIER.cpu, offsetBytes: offset, sizeBytes: size(d) };
    offset += Math.ceil(size(d) / 64) * 64;
    return b;
  });
  return {
    tiers: [{ capacityBytes: 0, arenaBytes: 0 }, { capacityBytes: offset, arenaBytes: offset }, { capacityBytes: 0, arenaBytes: 0 }],
    spillDir: '',
    tensors: dtypes.map((dtype) => ({ dtype, shape: [N] })),
    buffers,
    ops: [{ kind: OP_KIND.adam, iattr: [HP.adamw ? 1 : 0, 0], fattr: [HP.lr, HP.beta1, HP.beta2, HP.eps, HP.weightDecay] }],
    instructions: [{ stream: STREAM.cpu, kind: INSTRUCTION.run, op: 0, inputs: [0, 1, 2, 3], outputs: [0, 2, 3, 4], waits: [] }],
  };
}

describe('executor adam = the fused kernel', () => {
  for (const [gradType, halfType] of [['fp16', 'fp16'], ['bf16', 'bf16'], ['fp16', 'bf16']] as const) {
    it(`grads ${gradType}, p16 ${halfType}: bit-identical to cpuAdamStep over 3 steps`, async () => {
      const dt = { fp16: DTYPE.f16, bf16: DTYPE.bf16 };
      const s = addon.createSession(program(dt[gradType], dt[halfType]));
      try {
        const ref = randomState(N, 77);
        const g16 = addon.halfRound(ref.grads, gradType);
        s.write(0, ref.params); s.write(1, g16); s.write(2, ref.expAvg); s.write(3, ref.expAvgSq);
        const half = new Uint16Array(N);
        for (let step = 1; step <= 3; step++) {
          await s.step(step);
          cpuAdamStep({ params: ref.params, grads: g16, gradType, expAvg: ref.expAvg, expAvgSq: ref.expAvgSq, half, halfType, step, ...HP });
        }
        const f32 = (u8: Uint8Array) => new Float32Array(u8.slice().buffer);
        const u16 = (u8: Uint8Array) => new Uint16Array(u8.slice().buffer);
        expectSameBits('p', f32(s.read(0)), ref.params);
        expectSameBits('m', f32(s.read(2)), ref.expAvg);
        expectSameBits('v', f32(s.read(3)), ref.expAvgSq);
        expectSameBits('p16', u16(s.read(4)), half);
      } finally {
        s.close();
      }
    });
  }

  it('an inf gradient fails the instruction and leaves the state untouched', async () => {
    const s = addon.createSession(program(DTYPE.f16, DTYPE.f16));
    try {
      const st = randomState(N, 78);
      st.grads[N - 1] = Infinity;
      s.write(0, st.params); s.write(1, addon.halfRound(st.grads, 'fp16')); s.write(2, st.expAvg); s.write(3, st.expAvgSq);
      s.write(4, new Uint16Array(N).fill(7));
      await expectStepFailsUntouched(s, 1, 'instruction 0 (cpu, run adam): adam: the gradient has an inf or NaN; parameters and moments left unchanged', [0, 2, 3, 4]);
    } finally {
      s.close();
    }
  });
});
