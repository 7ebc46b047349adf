// The sequence-parallel lowering and the gradient all-reduce as pure passes:
// what the rank-local graph holds, and that the verifier accepts it.
import { describe, it, expect } from 'vitest';
import { importDsl } from '../../compiler/import/dsl.js';
import { lowerSequenceParallel, zigzagPositions } from '../../compiler/lower/sequence-parallel.js';
import { verifyGraph } from '../../compiler/ir/verify.js';
import { trainingGraph } from '../../src/compile.js';

describe('sequence-parallel lowering', () => {
  it('zigzag: the ranks partition the sequence; rank r holds chunks r and 2P-1-r', () => {
    for (const [T, P] of [[16, 2], [16, 4], [16, 8], [24, 3]]) {
      const all = Array.from({ length: P }, (_, r) => zigzagPositions(T, P, r));
      expect(all.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: T }, (_, i) => i));
      const len = T / (2 * P);
      for (let r = 0; r < P; r++) {
        expect(all[r].slice(0, len)).toEqual(Array.from({ length: len }, (_, i) => r * len + i));
        expect(all[r].slice(len)).toEqual(Array.from({ length: len }, (_, i) => (2 * P - 1 - r) * len + i));
      }
    }
  });

  it('the tiny GPT at --sp 4: T/P tokens, ring attention, the position table gathered, no T x T tensor', async () => {
    const { graph } = await importDsl('models/gpt.ts', { preset: 'tiny' });
    const { graph: g, sharding } = lowerSequenceParallel(graph, 4, 'models/gpt.ts');
    expect(verifyGraph(g)).toEqual([]);
    expect(g.ops.filter((o) => o.kind === 'causalAttention')).toEqual([]);
    const ring = g.ops.filter((o) => o.kind === 'ringAttention');
    expect(ring.length).toBe(2);
    for (const o of ring) expect(o.attrs).toEqual({ heads: 4, ranks: 4 });
    expect(sharding).toMatchObject({ ranks: 4, seq: 16 });
    expect(sharding.inputs.map((i) => [i.name, g.tensors[i.tensor].shape, i.fullShape])).toEqual([['tokens', [4, 4], [4, 16]], ['targets', [4, 4], [4, 16]]]);
    expect(g.tensors[sharding.positions!]).toMatchObject({ name: 'sp.positions', shape: [4], dtype: 'i32', role: 'input' });
    const gather = g.ops.find((o) => o.kind === 'embedding' && o.inputs[0] === sharding.positions)!;
    expect(g.tensors[gather.inputs[1]].name).toBe('wpe');
    expect(g.tensors.some((t) => t.shape.filter((d) => d === 16).length >= 2)).toBe(false);
    // parameters unchanged
    const params = (x: typeof graph) => x.tensors.filter((t) => t.role === 'param16').map((t) => `${t.name}${t.shape}`);
    expect(params(g)).toEqual(params(graph));
  });

  it('the training step: every parameter gradient is all-reduced (mean over the ranks) before its update', async () => {
    const { graph: g } = await trainingGraph({ model: 'models/gpt.ts', preset: 'tiny', sp: 2 });
    expect(verifyGraph(g)).toEqual([]);
    const grads = g.tensors.filter((t) => t.role === 'grad16');
    expect(grads.length).toBe(g.tensors.filter((t) => t.role === 'param16').length);
    const producer = new Map(g.ops.flatMap((o) => o.outputs.map((t) => [t, o] as const)));
    for (const t of grads) expect(producer.get(t.id)).toMatchObject({ kind: 'allReduce', attrs: { ranks: 2 } });
    for (const op of g.ops.filter((o) => o.kind === 'adam')) expect(g.tensors[op.inputs[1]].role).toBe('grad16');
  });
});
