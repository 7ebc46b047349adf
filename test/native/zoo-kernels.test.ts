// Forward semantics of the model-zoo kernels (grad-rules.test.ts checks their
// backward against these forwards): each against an independent reference —
// the existing causal-attention kernel, head repetition for grouped-query
// attention, and plain TypeScript for RoPE, RMS norm, SiLU and erf-GELU.
import { describe, it } from 'vitest';
import { nativeAddon } from '../../runtime/binding.js';
import { OP_CODES, encodeAttrs } from '../../compiler/ir/ops.js';
import type { OpAttrs, OpKind } from '../../compiler/ir/types.js';
import { randomValues, expectClose } from '../helpers.js';

function run(kind: OpKind, attrs: OpAttrs, inputs: { shape: number[]; data: Float64Array }[], outs: number[][]): Float64Array[] {
  const { iattr, fattr } = encodeAttrs(kind, attrs);
  return nativeAddon().runOp(OP_CODES[kind], 'f64', iattr, fattr, inputs, outs.map((shape) => ({ shape }))) as Float64Array[];
}

describe('model-zoo kernels, forward (f64)', () => {
  it('attention (causal, kvHeads = heads) equals causalAttention of the packed qkv', () => {
    const [Bn, T, C, NH] = [2, 5, 12, 3];
    const q = randomValues(Bn * T * C, 1), k = randomValues(Bn * T * C, 2), v = randomValues(Bn * T * C, 3);
    const qkv = new Float64Array(Bn * T * 3 * C);
    for (let r = 0; r < Bn * T; r++) {
      qkv.set(q.subarray(r * C, (r + 1) * C), r * 3 * C);
      qkv.set(k.subarray(r * C, (r + 1) * C), r * 3 * C + C);
      qkv.set(v.subarray(r * C, (r + 1) * C), r * 3 * C + 2 * C);
    }
    const [want] = run('causalAttention', { heads: NH }, [{ shape: [Bn, T, 3 * C], data: qkv }], [[Bn, T, C], [Bn, NH, T, T]]);
    const s = [Bn, T, C];
    const [got] = run('attention', { heads: NH, kvHeads: NH, causal: true }, [{ shape: s, data: q }, { shape: s, data: k }, { shape: s, data: v }], [s, [Bn, NH, T]]);
    expectClose('attention vs causalAttention', got, want, 1e-12, 1e-12);
  });

  for (const causal of [true, false]) {
    it(`grouped-query attention equals attention with repeated key/value heads (causal ${causal})`, () => {
      const [Bn, T, NH, KVH, hs] = [2, 4, 4, 2, 3];
      const q = randomValues(Bn * T * NH * hs, 4, 2), k = randomValues(Bn * T * KVH * hs, 5, 2), v = randomValues(Bn * T * KVH * hs, 6);
      const rep = (x: Float64Array) => {
        const out = new Float64Array(Bn * T * NH * hs);
        for (let r = 0; r < Bn * T; r++)
          for (let h = 0; h < NH; h++)
            for (let i = 0; i < hs; i++) out[(r * NH + h) * hs + i] = x[(r * KVH + Math.floor(h / (NH / KVH))) * hs + i];
        return out;
      };
      const sq = [Bn, T, NH * hs], skv = [Bn, T, KVH * hs];
      const [want, lseWant] = run('attention', { heads: NH, kvHeads: NH, causal }, [{ shape: sq, data: q }, { shape: sq, data: rep(k) }, { shape: sq, data: rep(v) }], [sq, [Bn, NH, T]]);
      const [got, lse] = run('attention', { heads: NH, kvHeads: KVH, causal }, [{ shape: sq, data: q }, { shape: skv, data: k }, { shape: skv, data: v }], [sq, [Bn, NH, T]]);
      expectClose('GQA y', got, want, 1e-12, 1e-12);
      expectClose('GQA lse', lse, lseWant, 1e-12, 1e-12);
      // lse is the log-sum-exp of the scaled scores of the row
      const want0 = Math.log(Array.from({ length: causal ? 1 : T }, (_, u) => Math.exp((q[0] * k[u * KVH * hs] + q[1] * k[u * KVH * hs + 1] + q[2] * k[u * KVH * hs + 2]) / Math.sqrt(hs))).reduce((a, b) => a + b));
      expectClose('lse[0,0,0]', [lse[0]], [want0], 1e-12, 1e-12);
    });
  }

  it('rope rotates (i, i + hs/2) of every head by t * theta^(-2i/hs); inverse undoes it', () => {
    const [Bn, T, NH, hs, theta] = [2, 6, 2, 8, 500];
    const x = randomValues(Bn * T * NH * hs, 7);
    const want = new Float64Array(x.length);
    for (let b = 0; b < Bn; b++)
      for (let t = 0; t < T; t++)
        for (let h = 0; h < NH; h++)
          for (let i = 0; i < hs / 2; i++) {
            const a = t * theta ** (-2 * i / hs), at = ((b * T + t) * NH + h) * hs + i;
            want[at] = x[at] * Math.cos(a) - x[at + hs / 2] * Math.sin(a);
            want[at + hs / 2] = x[at + hs / 2] * Math.cos(a) + x[at] * Math.sin(a);
          }
    const s = [Bn, T, NH * hs];
    const [y] = run('rope', { heads: NH, theta }, [{ shape: s, data: x }], [s]);
    expectClose('rope', y, want, 1e-12, 1e-12);
    const [back] = run('rope', { heads: NH, theta, inverse: true }, [{ shape: s, data: y }], [s]);
    expectClose('rope inverse', back, x, 1e-12, 1e-12);
  });

  it('rmsNorm, silu and erf-GELU', () => {
    const [N, C, eps] = [3, 5, 1e-6];
    const x = randomValues(N * C, 8, 3), w = randomValues(C, 9);
    const want = new Float64Array(N * C), rstdWant = new Float64Array(N);
    for (let n = 0; n < N; n++) {
      let ss = 0;
      for (let i = 0; i < C; i++) ss += x[n * C + i] ** 2;
      rstdWant[n] = 1 / Math.sqrt(ss / C + eps);
      for (let i = 0; i < C; i++) want[n * C + i] = x[n * C + i] * rstdWant[n] * w[i];
    }
    const [y, rstd] = run('rmsNorm', { eps }, [{ shape: [N, C], data: x }, { shape: [C], data: w }], [[N, C], [N]]);
    expectClose('rmsNorm y', y, want, 1e-12, 1e-12);
    expectClose('rmsNorm rstd', rstd, rstdWant, 1e-12, 1e-12);
    const [s] = run('silu', {}, [{ shape: [N * C], data: x }], [[N * C]]);
    expectClose('silu', s, x.map((v) => v / (1 + Math.exp(-v))), 1e-12, 1e-12);
    // 0.5 * x * (1 + math.erf(x / math.sqrt(2))) in Python, for x = 1, -0.5, 2.5, -3
    const [g] = run('gelu', { erf: true }, [{ shape: [4], data: Float64Array.from([1, -0.5, 2.5, -3]) }], [[4]]);
    expectClose('gelu erf', g, [0.8413447460685429, -0.15426876936299344, 2.4844758366855597, -0.00404969409489031], 1e-12, 1e-12);
  });
});
