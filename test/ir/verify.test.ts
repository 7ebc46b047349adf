// The IR verifier catches what the passes must never produce, and the DSL
// records the model line behind every op.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { GraphBuilder, topoOrder } from '../../compiler/ir/graph.js';
import { verifyGraph } from '../../compiler/ir/verify.js';
import type { Graph } from '../../compiler/ir/types.js';
import { importDsl } from '../../compiler/import/dsl.js';
import { trainingGraph } from '../../src/compile.js';

const loc = { file: 't.ts', line: 1, col: 1 };

function small(): Graph {
  const b = new GraphBuilder('small');
  const x = b.tensor({ name: 'x', shape: [2, 3], dtype: 'f32', role: 'input' });
  const y = b.tensor({ name: 'y', shape: [2], dtype: 'i32', role: 'input' });
  const w = b.tensor({ name: 'w', shape: [3, 4], dtype: 'f32', role: 'param16', persistent: true });
  const [h] = b.op('matmul', [x.id, w.id], {}, { names: ['h'], role: 'activation' }, 'forward', loc);
  const [l] = b.op('crossEntropy', [h.id, y.id], {}, { names: ['l'], role: 'loss' }, 'forward', loc);
  return b.build(l.id, 'fp32');
}

describe('IR verifier', () => {
  it('accepts a valid graph and the full GPT training step', async () => {
    expect(verifyGraph(small())).toEqual([]);
    const { graph } = await trainingGraph({ model: 'models/gpt.ts', preset: 'tiny', precision: 'fp16' });
    expect(verifyGraph(graph)).toEqual([]);
    expect(topoOrder(graph)).not.toBeNull();
  });
  it('rejects two producers of one tensor', () => {
    const g = small();
    const ops = [...g.ops, { ...g.ops[0], id: 2 }];
    expect(verifyGraph({ ...g, ops }).join('\n')).toMatch(/already has producer op 0/);
  });
  it('rejects a read before the write (out of order / cyclic)', () => {
    const g = small();
    const ops = [{ ...g.ops[1], id: 0 }, { ...g.ops[0], id: 1 }];
    expect(verifyGraph({ ...g, ops }).join('\n')).toMatch(/reads h before any op writes it/);
  });
  it('rejects an output whose shape disagrees with the op catalog', () => {
    const g = small();
    const tensors = g.tensors.map((t) => (t.name === 'h' ? { ...t, shape: [2, 5] } : t));
    expect(verifyGraph({ ...g, tensors }).join('\n')).toMatch(/output h is \[2,5\], the catalog says \[2,4\]/);
  });
  it('topoOrder handles 100k ops without recursion', () => {
    const b = new GraphBuilder('chain');
    let x = b.tensor({ name: 'x', shape: [4], dtype: 'f32', role: 'input' });
    for (let i = 0; i < 100_000; i++) x = b.op('gelu', [x.id], {}, { names: [`g${i}`], role: 'activation' }, 'forward', loc)[0];
    const g = b.build(x.id, 'fp32');
    expect(topoOrder(g)?.length).toBe(100_000);
  });
});

describe('DSL', () => {
  it('records the model line that created every op', async () => {
    const { graph } = await importDsl('models/gpt.ts', { preset: 'tiny' });
    const lines = readFileSync('models/gpt.ts', 'utf8').split('\n');
    const attn = graph.ops.find((o) => o.kind === 'causalAttention')!;
    expect('line' in attn.loc && lines[attn.loc.line - 1]).toContain('causalAttention');
    const ce = graph.ops.find((o) => o.kind === 'crossEntropy')!;
    expect('line' in ce.loc && lines[ce.loc.line - 1]).toContain('crossEntropy');
    expect(graph.ops.every((o) => 'line' in o.loc && o.loc.line > 0)).toBe(true);
  });
  it('names GPT parameters as the PyTorch fixture does and counts them', async () => {
    const { graph } = await importDsl('models/gpt.ts', { preset: 'tiny' });
    const names = graph.tensors.filter((t) => t.role === 'param16').map((t) => t.name).sort();
    expect(names).toContain('h.1.attn.qkv.w');
    expect(names).toContain('h.0.mlp.proj.b');
    expect(graph.paramCount).toBe(29056);
  });
});
