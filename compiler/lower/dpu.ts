// Delayed parameter update (DPU, ZeRO-Offload section 5): training step ->
// its steady-state step, in which the update of the previous step's gradients
// overlaps this step's forward and backward.
//
// Takes a training-step Graph in fp16/bf16 (the update writes the fp32 master
// copy, and param16 is cast from it at the start of the step). Gives the same
// ops in a new program order — the casts (reading the master copy as the last
// step left it), then every update, then forward and backward — with each
// parameter's gradient made state (persistent, zero at the start): written by
// this step's backward, read by the next step's update. So from the step after
// the warm-up, step t+1's forward and backward use parameters updated with the
// gradients of step t-1 (DESIGN.md glossary), and the CPU update runs while the
// GPU computes. Keeps true: every in-place state write follows every read of
// the old value in program order (verified after the pass). Cost: O(ops).

import { diag } from '../../src/diagnostics.js';
import type { Graph, Op, Tensor } from '../ir/types.js';

export function lowerDpu(g: Graph): Graph {
  if (g.precision === 'fp32') throw diag.usage('--dpu needs --precision fp16 or bf16: the delayed update writes the fp32 master copy while the step reads the half-precision one');
  const updates = g.ops.filter((o) => o.kind === 'adam');
  const casts = g.ops.filter((o) => o.phase === 'update' && o.kind !== 'adam');
  const rest = g.ops.filter((o) => o.phase !== 'update');
  const grads = new Set(updates.map((u) => u.inputs[1]));
  const tensors: Tensor[] = g.tensors.map((t) => (grads.has(t.id) ? { ...t, persistent: true, init: { kind: 'constant', value: 0 } } : t));
  const ops: Op[] = [...casts, ...updates, ...rest].map((op, id) => ({ ...op, id }));
  return { ...g, name: `${g.name} (dpu)`, tensors, ops };
}
