// compiler/lower/chunks.ts (work in progress, branch chunks): gpt.ts tiny's
// blocks in two parts give bench/compile/gpt-chunked.ts's training graph (the
// same ops, shapes and parameters, in the same order), and train as the whole
// model does from its weights cut by the pass's own ranges (ParamChunk): the
// same 5 losses. A part that took the wrong heads' columns or rows differs at
// the first step by far more than the tolerance.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { cli } from '../cli-helpers.js';
import { compile, trainingGraph } from '../../src/compile.js';
import { importDsl } from '../../compiler/import/dsl.js';
import { chunkBlocks, type ParamChunk } from '../../compiler/lower/chunks.js';
import { writePlan } from '../../compiler/plan/io.js';
import { readSafetensors, writeSafetensors, type SafeTensor } from '../../runtime/safetensors.js';
import type { Graph } from '../../compiler/ir/types.js';
import { scratchDir } from '../scratch-dir.js';

const dir = scratchDir('tiercut-chunks-');
const LOSS_TOL = 1e-6;

const f32 = (t: SafeTensor) => new Float32Array(t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength / 4);
/** The part of a whole parameter that chunk c holds: its ranges along its axis (axis 0 or 1 of a matrix, or a vector's). */
function cut(whole: SafeTensor, c: ParamChunk): SafeTensor {
  const x = f32(whole), rows = whole.shape.length === 2 ? whole.shape[0] : 1, cols = whole.shape.length === 2 ? whole.shape[1] : whole.shape[0];
  const keep = (i: number, j: number) => c.ranges.some(([s, e]) => { const at = c.axis === 0 && whole.shape.length === 2 ? i : j; return at >= s && at < e; });
  const out: number[] = [];
  // (ranges in order along the axis: row-major order keeps them so)
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) if (keep(i, j)) out.push(x[i * cols + j]);
  const shape = [...whole.shape];
  shape[c.axis] = c.ranges.reduce((a, [s, e]) => a + e - s, 0);
  return { dtype: 'F32', shape, bytes: new Uint8Array(Float32Array.from(out).buffer) };
}

const signature = (g: Graph) => g.ops.map((o) => `${o.kind} ${JSON.stringify(o.attrs)} ${o.outputs.map((t) => g.tensors[t].shape.join('x')).join(',')}`);
const losses = (stdout: string) => stdout.trim().split('\n').filter((l) => l.includes('"loss"')).map((l) => (JSON.parse(l) as { loss: number }).loss);

describe('chunkBlocks', () => {
  it("gives gpt-chunked.ts's training graph from gpt.ts's", async () => {
    const a = (await trainingGraph({ model: 'models/gpt.ts', preset: 'tiny', chunks: 2 })).graph;
    const b = (await trainingGraph({ model: 'bench/compile/gpt-chunked.ts', preset: 'tiny' })).graph;
    expect(signature(a)).toEqual(signature(b));
    expect(a.paramCount).toBe(b.paramCount);
    const whole = (await trainingGraph({ model: 'models/gpt.ts', preset: 'tiny' })).graph;
    expect(a.paramCount).toBe(whole.paramCount);
  });

  it('trains as the whole model does from its weights cut into the parts', async () => {
    const plain = join(dir, 'plain.json'), chunked = join(dir, 'chunked.json'), w = join(dir, 'plain.safetensors'), wc = join(dir, 'chunked.safetensors');
    writePlan(plain, await compile({ model: 'models/gpt.ts', preset: 'tiny' }));
    writePlan(chunked, await compile({ model: 'models/gpt.ts', preset: 'tiny', chunks: 2 }));
    expect(cli('run', plain, '--steps', '1', '--save', w).status).toBe(0);
    const { chunks, graph } = chunkBlocks((await importDsl('models/gpt.ts', { preset: 'tiny' })).graph, 2);
    const weights = readSafetensors(w), out = new Map<string, SafeTensor>();
    const parted = new Set(chunks.map((c) => c.param));
    for (const [name, t] of weights) if (!parted.has(name)) out.set(name, t);
    for (const c of chunks) out.set(graph.tensors[c.tensor].param!, cut(weights.get(c.param)!, c));
    writeSafetensors(wc, out);
    const ra = cli('run', plain, '--steps', '5', '--weights', w, '--json'), rb = cli('run', chunked, '--steps', '5', '--weights', wc, '--json');
    expect(ra.status, ra.stderr).toBe(0);
    expect(rb.status, rb.stderr).toBe(0);
    expect(rb.stderr).not.toMatch(/not loaded/);
    const la = losses(ra.stdout), lb = losses(rb.stdout);
    expect(la).toHaveLength(5);
    for (let s = 0; s < 5; s++) expect(Math.abs(la[s] - lb[s]), `step ${s + 1}: ${la[s]} vs ${lb[s]}`).toBeLessThanOrEqual(LOSS_TOL);
  });
});
