// Ring attention (threads backend) against full attention computed by Debian's
// PyTorch in float64 (fixtures/ring, scripts/fixtures/gen_ring.py): forward out
// and lse, backward dq, dk, dv, for P in {1, 2, 4, 8}, causal and not, with seq
// not a multiple of the tile nor (mostly) of 2P. Plus bad input.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ringAttention, ringAttentionBackward, shardRows, zigzagChunk } from '../../src/index.js';
import { hashUniform } from '../../runtime/ring.js';
import { readSafetensors, toFloat64 } from '../../runtime/safetensors.js';
import { expectClose } from '../helpers.js';

interface FixtureCase {
  case: string; batch: number; heads: number; seq: number; dim: number; seed: number; causal: boolean; qFirst: number[];
}
const dir = new URL('../../fixtures/ring/', import.meta.url).pathname;
const meta = JSON.parse(readFileSync(dir + 'reference.json', 'utf8')) as { cases: FixtureCase[] };
const ref = readSafetensors(dir + 'reference.safetensors');
const want = (c: FixtureCase, key: string) => toFloat64(ref.get(`${c.case}/${key}`)!);

// Tolerances (absolute, then relative to the reference), per tensor: float32
// accumulation over at most a few hundred keys stays well inside both.
const TOL = { out: [1e-5, 1e-5], lse: [1e-5, 1e-5], dq: [1e-5, 1e-5], dk: [1e-5, 1e-5], dv: [1e-5, 1e-5] } as const;

function inputs(c: FixtureCase) {
  const n = c.batch * c.heads * c.seq * c.dim;
  return { q: hashUniform(c.seed, n), k: hashUniform(c.seed + 1, n), v: hashUniform(c.seed + 2, n), dout: hashUniform(c.seed + 3, n) };
}

describe('zigzag sharding', () => {
  it('cuts seq into 2P chunks differing by at most one token, rank r holding chunks r and 2P-1-r', () => {
    for (const [seq, P] of [[37, 4], [100, 8], [203, 2], [16, 8], [64, 1]]) {
      let total = 0, prevEnd = 0;
      for (let c = 0; c < 2 * P; c++) {
        const ch = zigzagChunk(seq, P, c);
        expect(ch.start).toBe(prevEnd);
        expect(Math.abs(ch.length - seq / (2 * P))).toBeLessThan(1);
        prevEnd = ch.start + ch.length;
        total += ch.length;
      }
      expect(total).toBe(seq);
      let rows = 0;
      for (let r = 0; r < P; r++) rows += shardRows(seq, P, r);
      expect(rows).toBe(seq);
    }
  });
});

describe('ring attention vs PyTorch float64', () => {
  it('the seeded inputs match the fixture generator', () => {
    for (const c of meta.cases) expect(Array.from(hashUniform(c.seed, 4))).toEqual(c.qFirst);
  });

  for (const c of meta.cases) {
    for (const P of [1, 2, 4, 8]) {
      for (const block of P === 2 ? [64, 7] : [64]) {
        it(`${c.case} P=${P} block=${block}: out, lse, dq, dk, dv within 1e-5`, () => {
          const { q, k, v, dout } = inputs(c);
          const shape = { batch: c.batch, heads: c.heads, seq: c.seq, dim: c.dim, causal: c.causal, ranks: P, block };
          const fwd = ringAttention({ q, k, v, ...shape });
          const tag = `${c.case} P=${P} block=${block}`;
          expectClose(`${tag} out`, fwd.out, want(c, 'out'), ...TOL.out);
          expectClose(`${tag} lse`, fwd.lse, want(c, 'lse'), ...TOL.lse);
          const bwd = ringAttentionBackward({ q, k, v, out: fwd.out, lse: fwd.lse, dout, ...shape });
          expectClose(`${tag} dq`, bwd.dq, want(c, 'dq'), ...TOL.dq);
          expectClose(`${tag} dk`, bwd.dk, want(c, 'dk'), ...TOL.dk);
          expectClose(`${tag} dv`, bwd.dv, want(c, 'dv'), ...TOL.dv);
          expect(fwd.stats.ranks.length).toBe(P);
          expect(fwd.stats.ranks.map((r) => r.rows).reduce((a, b) => a + b, 0)).toBe(c.seq);
        });
      }
    }
  }

  it('per-rank memory is flat in S/P: doubling S and P leaves each rank the same bytes', () => {
    const run = (seq: number, ranks: number) => {
      const n = 2 * seq * 16;
      const x = hashUniform(1, n);
      return ringAttention({ q: x, k: x, v: x, batch: 1, heads: 2, seq, dim: 16, causal: true, ranks }).stats.ranks;
    };
    const a = run(256, 2), b = run(512, 4);
    console.log(`peak bytes per rank: S=256 P=2 ${a.map((r) => r.peakBytes).join(', ')}; S=512 P=4 ${b.map((r) => r.peakBytes).join(', ')}`);
    expect(Math.max(...b.map((r) => r.peakBytes))).toBe(Math.max(...a.map((r) => r.peakBytes)));
  });
});

describe('ring attention bad input', () => {
  const c = { batch: 1, heads: 2, seq: 10, dim: 4 };
  const n = 1 * 2 * 10 * 4;
  const x = hashUniform(3, n);
  const base = { q: x, k: x, v: x, ...c, causal: true, ranks: 2 };

  it('P larger than the number of chunks allows', () => {
    expect(() => ringAttention({ ...base, ranks: 6 })).toThrow(/ringAttention: ranks: 6 ranks need 12 zigzag chunks of at least one token each, but seq is 10/);
  });
  it('mismatched heads or dim name the array', () => {
    expect(() => ringAttention({ ...base, heads: 3 })).toThrow(/ringAttention: q: expected 120 elements \(batch 1 x heads 3 x seq 10 x dim 4\), got 80/);
    expect(() => ringAttention({ ...base, k: hashUniform(3, 2 * 10 * 8) })).toThrow(/ringAttention: k: expected 80 elements .*got 160/);
    expect(() => ringAttentionBackward({ ...base, out: x, lse: new Float32Array(19), dout: x })).toThrow(/ringAttentionBackward: lse: expected 20 elements/);
  });
  it('non-positive or non-integer dims, wrong types', () => {
    expect(() => ringAttention({ ...base, dim: 0 })).toThrow(/ringAttention: dim: expected an integer in \[1, /);
    expect(() => ringAttention({ ...base, heads: -1 })).toThrow(/ringAttention: heads: expected an integer/);
    expect(() => ringAttention({ ...base, ranks: 0 })).toThrow(/ringAttention: ranks: expected an integer in \[1, 256\], got 0/);
    expect(() => ringAttention({ ...base, seq: 2.5 })).toThrow(/ringAttention: seq: expected an integer/);
    expect(() => ringAttention({ ...base, v: new Float64Array(n) as unknown as Float32Array })).toThrow(/ringAttention: v: expected a Float32Array, got Float64Array/);
  });
  it('the native layer checks on its own (no crash when the TS checks are bypassed)', async () => {
    const { nativeAddon } = await import('../../runtime/binding.js');
    const addon = nativeAddon();
    expect(() => addon.ringAttention({ ...base, ranks: 6 })).toThrow(/ranks: 6 ranks need 12 zigzag chunks/);
    expect(() => addon.ringAttention({ ...base, q: new Float32Array(3) })).toThrow(/ringAttention: q: expected 80 elements/);
    expect(() => addon.ringAttention({ ...base, dim: 0 })).toThrow(/ringAttention: dim: expected an integer in \[1, /);
    expect(() => addon.ringAttentionBackward({ ...base, out: x, lse: x, dout: x })).toThrow(/ringAttentionBackward: lse: expected 20 elements/);
  });
});
