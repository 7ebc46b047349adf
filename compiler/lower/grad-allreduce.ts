// Gradient all-reduce (sequence parallelism): after autodiff, each parameter's
// gradient is the gradient of this rank's loss only; the optimizer needs the
// gradient of the mean loss over the P ranks, the mean of the P gradients.
//
// Takes the rank-local forward + backward Graph (compiler/lower/sequence-parallel.ts,
// then autodiff) and P. Gives the same Graph with one `allReduce` op (mean over
// the ranks) right after each final parameter gradient is made: its output
// becomes the parameter's grad16, and the rank-local gradient becomes an
// ordinary activationGrad. The native all-reduce (ring reduce-scatter, then
// all-gather, native/exec/collective.cc) gives bit-identical results on every
// rank, so parameters stay identical across ranks without ever being compared.
// Keeps true: tensor ids (new tensors are appended), program order (each
// all-reduce follows its gradient's producer), one producer per tensor.
// Cost: O(ops + tensors).

import { GraphBuilder } from '../ir/graph.js';
import type { Graph, Op } from '../ir/types.js';

export function insertGradAllReduce(g: Graph, P: number): Graph {
  const b = GraphBuilder.from(g);
  const after: Op[][] = g.ops.map(() => []);
  const producer = new Int32Array(g.tensors.length).fill(-1);
  for (const op of g.ops) for (const t of op.outputs) producer[t] = op.id;
  for (const t of g.tensors) {
    if (t.role !== 'grad16' || t.param === undefined) continue;
    const at = producer[t.id];
    const mean = b.tensor({ name: `${t.name}.mean`, shape: t.shape, dtype: t.dtype, role: 'grad16', param: t.param });
    b.tensors[t.id] = { id: t.id, name: t.name, shape: t.shape, dtype: t.dtype, sizeBytes: t.sizeBytes, role: 'activationGrad', persistent: false };
    after[at].push(b.opWith('allReduce', [t.id], [mean.id], { ranks: P }, 'backward', g.ops[at].loc));
  }
  const ops: Op[] = [];
  for (let i = 0; i < g.ops.length; i++) {
    ops.push({ ...g.ops[i], id: ops.length });
    for (const u of after[i]) ops.push({ ...u, id: ops.length });
  }
  return { ...b.build(g.loss, g.precision), ops };
}
