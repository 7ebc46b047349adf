// arrival-check.test.ts — the inf/NaN check of an adam's gradient rides on the
// copy that brings the gradient in (adam_copy_grads_checked): every path copies
// the bits exactly and finds a non-finite value wherever it is (head, vector
// body, scalar tail); in the runtime, a gradient copied to the cpu and then
// updated trains bit-identically to cpuAdamStep, and an inf or NaN anywhere
// fails the adam with its usual message and leaves p, m, v untouched — which
// also shows the adam trusted the copy's verdict only when it was right (the
// adam skips its own check pass when the copy checked). Copied cpu -> cpu, the
// copy checks as it copies; copied down from the gpu, the adam follows the copy
// chunk by chunk (the copy checks the whole gradient first): the same bits and
// the same failures, over several chunks, and the update starts before the
// copy has ended.
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

// gpu (or cpu): g16 (the gradient as backward left it); cpu: g (its copy), p, m, v.
// Instruction 0 copies g16 gpu -> cpu on the d2h stream; instruction 1, the adam,
// waits for it.
function program(n: number, gradDtype: number, from: 'gpu' | 'cpu'): NativeProgram {
  const gsize = n * (gradDtype === DTYPE.f32 ? 4 : 2);
  const align = (x: number) => Math.ceil(x / 64) * 64;
  const cpuSizes = [n * 4, gsize, n * 4, n * 4];  // p, g, m, v
  let off = 0;
  const cpu = cpuSizes.map((size, k) => { const b = { tensor: k, tier: TIER.cpu, offsetBytes: off, sizeBytes: size }; off += align(size); return b; });
  const buffers = [...cpu, { tensor: 4, tier: from === 'gpu' ? TIER.gpu : TIER.cpu, offsetBytes: from === 'gpu' ? 0 : off, sizeBytes: gsize }];
  const cpuBytes = from === 'gpu' ? off : off + align(gsize);
  return {
    tiers: [{ capacityBytes: align(gsize), arenaBytes: align(gsize) }, { capacityBytes: cpuBytes, arenaBytes: cpuBytes }, { capacityBytes: 0, arenaBytes: 0 }],
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
  // (the adam's follow takes 2^18 elements per chunk: N spans four of them)
  const N = 1_000_003;
  for (const [type, from] of [['fp32', 'cpu'], ['fp16', 'cpu'], ['fp32', 'gpu'], ['fp16', 'gpu'], ['bf16', 'gpu']] as const) {
    const dtype = { fp32: DTYPE.f32, fp16: DTYPE.f16, bf16: DTYPE.bf16 }[type];
    it(`${type} from the ${from}: 3 steps bit-identical to cpuAdamStep; inf/NaN anywhere leaves p, m, v untouched`, async () => {
      const s = addon.createSession(program(N, dtype, from));
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

  it('the update follows its gradient down: it starts before the copy ends, and its bits are final', async () => {
    const n = 8_000_000;  // a 16 MB fp16 gradient: the copy has chunks to follow
    const s = addon.createSession(program(n, DTYPE.f16, 'gpu'));
    try {
      const ref = randomState(n, 23);
      const g = gradsOf('fp16', ref.grads);
      s.write(0, ref.params); s.write(2, ref.expAvg); s.write(3, ref.expAvgSq); s.write(4, g);
      // whether the cpu stream's thread gets a core before the copy ends is up to the OS on a loaded
      // 2-core machine: over 5 steps at least one must overlap
      let ahead = 0;
      for (let step = 1; step <= 5; step++) {
        const st = await s.step(step, { trace: true });
        if (st.trace!.startSeconds[1]! < st.trace!.endSeconds[0]!) ahead++;
        cpuAdamStep({ params: ref.params, grads: g, gradType: 'fp16', expAvg: ref.expAvg, expAvgSq: ref.expAvgSq, step, ...HP });
      }
      expect(ahead).toBeGreaterThan(0);
      expectSameBits('p', new Float32Array(s.read(0).slice().buffer), ref.params);
      expectSameBits('v', new Float32Array(s.read(3).slice().buffer), ref.expAvgSq);
    } finally {
      s.close();
    }
  });

  it('an update waiting for its gradient is stopped when the step aborts first: no hang, state untouched', async () => {
    // as program(), but the gradient's copy waits for an adam on the gpu stream whose gradient has a NaN
    const n = 300_000, prog = program(n, DTYPE.f16, 'gpu');
    const gpuAt = (k: number, size: number) => ({ tensor: k, tier: TIER.gpu, offsetBytes: 4096 * 512 * (k - 4), sizeBytes: size });
    prog.tensors.push(...[DTYPE.f32, DTYPE.f32, DTYPE.f32, DTYPE.f32].map((dtype) => ({ dtype, shape: [n] })));
    prog.buffers[4] = gpuAt(4, 2 * n);
    prog.buffers.push(gpuAt(5, 4 * n), gpuAt(6, 4 * n), gpuAt(7, 4 * n), gpuAt(8, 4 * n));  // p, g, m, v of the gpu's adam
    const gpuBytes = 4096 * 512 * 5;
    prog.tiers[0] = { capacityBytes: gpuBytes, arenaBytes: gpuBytes };
    prog.instructions = [
      { stream: STREAM.gpu, kind: INSTRUCTION.run, op: 0, inputs: [5, 6, 7, 8], outputs: [5, 7, 8], waits: [] },
      { ...prog.instructions[0]!, waits: [0] },
      { ...prog.instructions[1]!, waits: [1] },
    ];
    const s = addon.createSession(prog);
    try {
      const st = randomState(n, 24);
      s.write(0, st.params); s.write(2, st.expAvg); s.write(3, st.expAvgSq); s.write(4, gradsOf('fp16', st.grads));
      const bad = randomState(n, 25).grads;
      bad[7] = NaN;
      s.write(6, bad);
      await expectStepFailsUntouched(s, 1, 'instruction 0 (gpu, run adam): adam: the gradient has an inf or NaN', [0, 2, 3]);
      // the session is still usable
      s.write(6, randomState(n, 26).grads);
      await s.step(1);
    } finally {
      s.close();
    }
  });
});
