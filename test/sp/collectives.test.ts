// The collective ops of sequence parallelism, run by their native kernels on P
// rank threads (runCollective, native/exec/collective.h):
//  - ringAttention / ringAttentionBackward on each rank's zigzag rows of qkv
//    against the existing causalAttention over the whole sequence (float64
//    reference through runOp): y, lse, and the gradient rule's dqkv;
//  - allReduce: the mean over the ranks, the same bits on every rank, at awkward
//    sizes (fewer elements than ranks, uneven chunks), and the bytes each rank
//    sends equal to the closed form the compiler uses;
//  - the memory each op takes outside the arenas, equal to its closed form.
import { describe, it, expect } from 'vitest';
import { nativeAddon } from '../../runtime/binding.js';
import { OP_CODES, allReduceSendBytes, ringSendBytes, ringWorkspaceBytes } from '../../compiler/ir/ops.js';
import { zigzagPositions } from '../../compiler/lower/sequence-parallel.js';
import { expectClose, randomValues } from '../helpers.js';

const B = 2, T = 16, C = 12, NH = 3, D = C / NH;

/** Rows `pos` of x [B, T, W] -> [B, pos.length, W]. */
function rows(x: ArrayLike<number>, W: number, pos: number[]): Float32Array {
  const out = new Float32Array(B * pos.length * W);
  for (let b = 0; b < B; b++) pos.forEach((p, i) => { for (let w = 0; w < W; w++) out[(b * pos.length + i) * W + w] = x[(b * T + p) * W + w]; });
  return out;
}

describe('ringAttention vs causalAttention', () => {
  const addon = nativeAddon();
  const qkv = Float32Array.from(randomValues(B * T * 3 * C, 11));
  const dy = Float32Array.from(randomValues(B * T * C, 12));
  const f64 = (a: Float32Array) => Float64Array.from(a);
  const [yRef, att] = addon.runOp(OP_CODES.causalAttention, 'f64', [NH], [], [{ shape: [B, T, 3 * C], data: f64(qkv) }], [{ shape: [B, T, C] }, { shape: [B, NH, T, T] }]);
  const [dqkvRef] = addon.runOp(OP_CODES.causalAttentionBackward, 'f64', [NH], [], [
    { shape: [B, T, 3 * C], data: f64(qkv) }, { shape: [B, NH, T, T], data: att as Float64Array }, { shape: [B, T, C], data: f64(dy) },
  ], [{ shape: [B, T, 3 * C] }]);
  // lse[b,h,t] = log sum_{u <= t} exp(q_t . k_u / sqrt(D)), in float64
  const lseRef = new Float64Array(B * NH * T);
  for (let b = 0; b < B; b++) for (let h = 0; h < NH; h++) for (let t = 0; t < T; t++) {
    const s: number[] = [];
    for (let u = 0; u <= t; u++) {
      let dot = 0;
      for (let d = 0; d < D; d++) dot += qkv[(b * T + t) * 3 * C + h * D + d] * qkv[(b * T + u) * 3 * C + C + h * D + d];
      s.push(dot / Math.sqrt(D));
    }
    const m = Math.max(...s);
    lseRef[(b * NH + h) * T + t] = m + Math.log(s.reduce((a, x) => a + Math.exp(x - m), 0));
  }

  for (const P of [2, 4, 8]) {
    it(`P = ${P}: forward y and lse, backward dqkv`, () => {
      const R = T / P;
      const pos = Array.from({ length: P }, (_, r) => zigzagPositions(T, P, r));
      const fwd = addon.runCollective({
        kind: OP_CODES.ringAttention, iattr: [NH, P],
        inputs: pos.map((p) => [{ shape: [B, R, 3 * C], data: rows(qkv, 3 * C, p) }]),
        outputs: [{ shape: [B, R, C] }, { shape: [B, NH, R] }],
      });
      const bwd = addon.runCollective({
        kind: OP_CODES.ringAttentionBackward, iattr: [NH, P],
        inputs: pos.map((p, r) => [
          { shape: [B, R, 3 * C], data: rows(qkv, 3 * C, p) }, { shape: [B, R, C], data: fwd.outputs[r][0] },
          { shape: [B, NH, R], data: fwd.outputs[r][1] }, { shape: [B, R, C], data: rows(dy, C, p) },
        ]),
        outputs: [{ shape: [B, R, 3 * C] }],
      });
      for (let r = 0; r < P; r++) {
        expectClose(`P=${P} rank ${r} y`, fwd.outputs[r][0], rows(yRef, C, pos[r]), 2e-6, 1e-5);
        const lse = new Float64Array(B * NH * R);
        for (let bh = 0; bh < B * NH; bh++) pos[r].forEach((p, i) => { lse[bh * R + i] = lseRef[bh * T + p]; });
        expectClose(`P=${P} rank ${r} lse`, fwd.outputs[r][1], lse, 2e-6, 1e-5);
        expectClose(`P=${P} rank ${r} dqkv`, bwd.outputs[r][0], rows(dqkvRef, 3 * C, pos[r]), 5e-6, 1e-4);
        const operand = { shape: [B, R, 3 * C], dtype: 'f32' as const };
        expect(fwd.sentBytes[r]).toBe(ringSendBytes('ringAttention', [operand], { ranks: P }));
        expect(bwd.sentBytes[r]).toBe(ringSendBytes('ringAttentionBackward', [operand], { ranks: P }));
        expect(fwd.workspaceBytes[r]).toBe(ringWorkspaceBytes('ringAttention', [operand], { ranks: P, heads: NH }));
        expect(bwd.workspaceBytes[r]).toBe(ringWorkspaceBytes('ringAttentionBackward', [operand], { ranks: P, heads: NH }));
      }
    });
  }
});

describe('allReduce', () => {
  const addon = nativeAddon();
  for (const [P, n] of [[2, 1], [3, 2], [3, 10], [4, 4099], [8, 33]] as const) {
    it(`P = ${P}, ${n} elements: the mean, bit-identical on every rank; bytes sent as planned`, () => {
      const xs = Array.from({ length: P }, (_, r) => Float32Array.from(randomValues(n, 100 + r)));
      const res = addon.runCollective({ kind: OP_CODES.allReduce, iattr: [P], inputs: xs.map((x) => [{ shape: [n], data: x }]), outputs: [{ shape: [n] }] });
      const mean = Float64Array.from({ length: n }, (_, i) => xs.reduce((s, x) => s + x[i], 0) / P);
      expectClose(`P=${P} n=${n} mean`, res.outputs[0][0], mean, 1e-6, 1e-6);
      for (let r = 0; r < P; r++) {
        expect(Buffer.from(res.outputs[r][0].buffer).equals(Buffer.from(res.outputs[0][0].buffer)), `rank ${r}`).toBe(true);
        expect(res.sentBytes[r]).toBe(allReduceSendBytes(n, P, r));
        expect(res.workspaceBytes[r]).toBe(ringWorkspaceBytes('allReduce', [{ shape: [n], dtype: 'f32' }], { ranks: P }));
      }
    });
  }

  it('a communicator of the wrong size is an error, not a hang', () => {
    expect(() => addon.runCollective({ kind: OP_CODES.allReduce, iattr: [4], inputs: [[{ shape: [3], data: new Float32Array(3) }], [{ shape: [3], data: new Float32Array(3) }]], outputs: [{ shape: [3] }] }))
      .toThrow(/all_reduce: the plan is for 4 ranks \(iattr\[0\]\), the communicator has 2/);
  });
});
