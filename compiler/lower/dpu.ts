// Delayed parameter update (DPU, ZeRO-Offload section 5): training step ->
// its steady-state step, in which the CPU's updates of the previous step's
// gradients overlap this step's forward and backward.
//
// Takes a training-step Graph in fp16/bf16 (the update writes the fp32 master
// copy, and param16 is cast from it at the start of the step) and which
// updates to delay (compile: those the step's plan runs on the CPU; default
// every one). Gives the same ops in a new program order — every cast (reading
// the master copy as the last step left it), then the delayed updates, then
// forward and backward with the other updates where they were (dpuOrder) —
// with each delayed parameter's gradient made state
// (persistent, zero at the start): written by this step's backward, read by
// the next step's update. So from the step after the warm-up, step t+1's
// forward and backward use those parameters updated with the gradients of
// step t-1 (DESIGN.md glossary), and the CPU update runs while the GPU
// computes; an update left in place (one the GPU runs beside its own work)
// still applies this step's gradient, as in the warm-up. Keeps true: every
// in-place state write follows every read of the old value in program order
// (verified after the pass). Cost: O(ops).

import { diag } from '../../src/diagnostics.js';
import type { Graph, Op, Tensor } from '../ir/types.js';

export function lowerDpu(g: Graph, delays: (adam: Op) => boolean = () => true): Graph {
  if (g.precision === 'fp32') throw diag.usage('--dpu needs --precision fp16 or bf16: the delayed update writes the fp32 master copy while the step reads the half-precision one');
  const order = dpuOrder(g, delays);
  const grads = new Set(g.ops.filter((o) => o.kind === 'adam' && delays(o)).map((u) => u.inputs[1]));
  const tensors: Tensor[] = g.tensors.map((t) => (grads.has(t.id) ? { ...t, persistent: true, init: { kind: 'constant', value: 0 } } : t));
  const ops: Op[] = order.map((k, id) => ({ ...g.ops[k], id }));
  return { ...g, name: `${g.name} (dpu)`, tensors, ops };
}

/**
 * The steady step's program order as the plain step's op ids: every cast
 * (each reads master32 as the last step left it: a delayed update has not yet
 * run, an update left in place ran after its group's last reader), the delayed
 * updates, then the rest in their order. Every cast comes first: the CPU runs
 * its work in program order, so a cast left in place would wait behind every
 * delayed update.
 */
export function dpuOrder(g: Graph, delays: (adam: Op) => boolean): number[] {
  const casts = g.ops.filter((o) => o.phase === 'update' && o.kind !== 'adam');
  const delayed = g.ops.filter((o) => o.kind === 'adam' && delays(o));
  const first = new Set([...casts, ...delayed]);
  return [...casts, ...delayed, ...g.ops.filter((o) => !first.has(o))].map((o) => o.id);
}

/** Whether op is a delayed update of a steady step: an adam that reads its gradient as state (the last step's). */
export const isDelayedUpdate = (g: Graph, op: Op): boolean => op.kind === 'adam' && g.tensors[op.inputs[1]].persistent;
