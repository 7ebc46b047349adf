// bench/compile/gpt-chunked.ts (the two-chunk GPT whose plans docs/BENCHMARKS.md
// compares with models/gpt.ts's) is the same function as models/gpt.ts: from
// gpt.ts tiny's weights (after one step, so that no bias is still 0), sliced
// into the chunked model's parameters (qkv0.w: the q, k and v columns of the
// first half of the heads; fc0.w: fc.w's first 2C columns; proj0.w: proj.w's
// first rows), both train the same synthetic batches to the same losses,
// 5 steps in fp32. A chunk that read the wrong heads or rows, or a proj bias
// added twice, differs at the first step by far more than the tolerance.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { cli } from '../cli-helpers.js';
import { readSafetensors, writeSafetensors, type SafeTensor } from '../../runtime/safetensors.js';
import { scratchDir } from '../scratch-dir.js';

const dir = scratchDir('tiercut-chunked-');
/** The tiny preset's channels (models/gpt.ts) and the chunks (bench/compile/gpt-chunked.ts). */
const C = 32, K = 2;
const LOSS_TOL = 1e-6;

const f32 = (t: SafeTensor) => new Float32Array(t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength / 4);
const tensor = (shape: number[], data: Float32Array): SafeTensor => ({ dtype: 'F32', shape, bytes: new Uint8Array(data.buffer) });
/** The columns in `ranges` of a [rows, cols] matrix, or of a vector. */
function columns(t: SafeTensor, ranges: [number, number][]): SafeTensor {
  const x = f32(t), rows = t.shape.length === 2 ? t.shape[0] : 1, cols = t.shape[t.shape.length - 1];
  const n = ranges.reduce((a, [s, e]) => a + e - s, 0), out = new Float32Array(rows * n);
  for (let i = 0, o = 0; i < rows; i++) for (const [s, e] of ranges) for (let j = s; j < e; j++) out[o++] = x[i * cols + j];
  return tensor(t.shape.length === 2 ? [rows, n] : [n], out);
}
const rowsOf = (t: SafeTensor, s: number, e: number) => tensor([e - s, t.shape[1]], f32(t).slice(s * t.shape[1], e * t.shape[1]));

/** gpt.ts's checkpoint as gpt-chunked.ts's parameters. */
function chunked(w: Map<string, SafeTensor>): Map<string, SafeTensor> {
  const out = new Map<string, SafeTensor>();
  for (const [name, t] of w) {
    const m = /^(h\.\d+\.(?:attn|mlp))\.(qkv|fc|proj)\.(w|b)$/.exec(name);
    if (!m || (m[2] === 'proj' && m[3] === 'b')) { out.set(name, t); continue; }
    const [, scope, kind, wb] = m;
    for (let k = 0; k < K; k++) {
      const key = `${scope}.${kind}${k}.${wb}`;
      if (kind === 'qkv') { const h = C / K; out.set(key, columns(t, [0, 1, 2].map((q): [number, number] => [q * C + k * h, q * C + (k + 1) * h]))); }
      else if (kind === 'fc') { const h = (4 * C) / K; out.set(key, columns(t, [[k * h, (k + 1) * h]])); }
      else { const h = t.shape[0] / K; out.set(key, rowsOf(t, k * h, (k + 1) * h)); }
    }
  }
  return out;
}

const losses = (stdout: string) => stdout.trim().split('\n').filter((l) => l.includes('"loss"')).map((l) => (JSON.parse(l) as { loss: number }).loss);

describe('bench/compile/gpt-chunked.ts', () => {
  it('trains as models/gpt.ts does from the same weights, sliced into its chunks', () => {
    const plain = join(dir, 'plain.json'), chunks = join(dir, 'chunked.json'), w = join(dir, 'plain.safetensors'), wc = join(dir, 'chunked.safetensors');
    for (const [model, plan] of [['models/gpt.ts', plain], ['bench/compile/gpt-chunked.ts', chunks]]) expect(cli('compile', model, '--preset', 'tiny', '-o', plan).status).toBe(0);
    expect(cli('run', plain, '--steps', '1', '--save', w).status).toBe(0);
    writeSafetensors(wc, chunked(readSafetensors(w)));
    const a = cli('run', plain, '--steps', '5', '--weights', w, '--json'), b = cli('run', chunks, '--steps', '5', '--weights', wc, '--json');
    expect(a.status, a.stderr).toBe(0);
    expect(b.status, b.stderr).toBe(0);
    // (every tensor of the sliced file is a parameter: run notes one that is not loaded)
    expect(b.stderr).not.toMatch(/not loaded/);
    const la = losses(a.stdout), lb = losses(b.stdout);
    expect(la).toHaveLength(5);
    expect(lb).toHaveLength(5);
    for (let s = 0; s < 5; s++) expect(Math.abs(la[s] - lb[s]), `step ${s + 1}: ${la[s]} vs ${lb[s]}`).toBeLessThanOrEqual(LOSS_TOL);
  });
});
