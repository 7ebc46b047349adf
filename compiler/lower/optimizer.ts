// Optimizer lowering: forward + backward graph -> one whole training step.
//
// Takes a Graph with grad16 tensors and Adam/AdamW settings. Gives the Graph
// with, per parameter: first and second moments (adamM, adamV, fp32,
// persistent) and one `adam` op. In fp32 training the op updates the parameter
// in place. In fp16/bf16 it updates a separate fp32 master copy (master32,
// persistent) in place, and the half-precision parameter is no longer state:
// a `reshape` of master32 into half-precision storage (a cast: the runtime
// rounds on store) makes it at the start of the step, before its first use.
// So persistent state is 12 bytes per parameter (master32, m, v); where param16
// rests during the step, or whether it is made again for each use, is the
// partitioner's choice. Every state tensor and op is separate, so each can be
// placed.
// Keeps true: each adam op sits right after the later of its gradient's
// producer and the last read of the parameter, so updates overlap the rest of
// the backward pass and in-place writes follow every read. Cost: O(ops).

import { diag } from '../../src/diagnostics.js';
import { GraphBuilder } from '../ir/graph.js';
import type { AdamAttrs, Graph, Op } from '../ir/types.js';

export const ADAM_DEFAULTS: AdamAttrs = { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, adamw: false };

/** Adam's settings in range: lr, eps, weight decay >= 0 and finite, betas in [0, 1), adamw a boolean. */
export function checkOptimizer(o: Partial<AdamAttrs>): void {
  // (a key misspelt, lrr, had been kept in the plan and the default used; 'adamw' as a string had become {"0":"a",...})
  const keys = ['lr', 'beta1', 'beta2', 'eps', 'weightDecay', 'adamw'];
  if (typeof o !== 'object' || o === null || Array.isArray(o)) throw diag.usage(`optimizer: expected an object of ${keys.join(', ')}, got ${JSON.stringify(o)}`);
  const unknown = Object.keys(o).find((k) => !keys.includes(k));
  if (unknown !== undefined) throw diag.usage(`optimizer: unknown key '${unknown}' (it takes ${keys.join(', ')})`);
  for (const [flag, key] of [['--lr', 'lr'], ['--eps', 'eps'], ['--weight-decay', 'weightDecay']] as const) {
    // (a key given as undefined too: it had replaced the default, and the plan written had no lr)
    const v = o[key];
    if ((v !== undefined || Object.hasOwn(o, key)) && !(v! >= 0 && Number.isFinite(v))) throw diag.badNumber(flag, String(v), 'a number >= 0');
  }
  // (eps 0 divides 0 by 0 wherever a gradient is exactly 0 at the first step, an unused embedding row: a NaN
  // parameter, and a checkpoint --weights then refused; torch allows it and gives the same NaN)
  if (o.eps === 0) throw diag.badNumber('--eps', '0', 'a number above 0 (Adam divides by sqrt(v) + eps, and v is 0 where a gradient is)');
  for (const [flag, key] of [['beta1', 'beta1'], ['beta2', 'beta2']] as const) {
    const v = o[key];
    if ((v !== undefined || Object.hasOwn(o, key)) && !(v! >= 0 && v! < 1)) throw diag.usage(`--betas: expected ${flag} with 0 <= B < 1, got ${v}`);
  }
  if ((o.adamw !== undefined || Object.hasOwn(o, 'adamw')) && typeof o.adamw !== 'boolean') throw diag.usage(`--optimizer: adamw must be true or false, got ${JSON.stringify(o.adamw)}`);
}

export function lowerOptimizer(g: Graph, adam: AdamAttrs = ADAM_DEFAULTS): Graph {
  const b = GraphBuilder.from(g);
  const half = g.precision !== 'fp32';
  const gradOf = new Map<string, number>();
  for (const t of g.tensors) if (t.role === 'grad16' && t.param !== undefined) gradOf.set(t.param, t.id);
  const lastUse = new Int32Array(g.tensors.length).fill(-1);
  for (const op of g.ops) {
    for (const t of op.inputs) lastUse[t] = op.id;
    for (const t of op.outputs) lastUse[t] = Math.max(lastUse[t], op.id);
  }

  const firstUse = new Int32Array(g.tensors.length).fill(-1);
  for (const op of g.ops) for (const t of op.inputs) if (firstUse[t] < 0) firstUse[t] = op.id;
  // after[i]: update ops to place right after original op i; before[i]: casts to place right before it
  const after: Op[][] = g.ops.map(() => []);
  const before: Op[][] = g.ops.map(() => []);
  for (const p of g.tensors) {
    if (p.role !== 'param16') continue;
    const grad = gradOf.get(p.name);
    if (grad === undefined) continue;
    const zero = { kind: 'constant', value: 0 } as const;
    const state = { dtype: 'f32' as const, shape: p.shape, persistent: true, param: p.name, ...(p.slice ? { slice: p.slice } : {}) };
    const m = b.tensor({ ...state, name: `adam.m.${p.name}`, role: 'adamM', init: zero });
    const v = b.tensor({ ...state, name: `adam.v.${p.name}`, role: 'adamV', init: zero });
    const loc = g.ops[lastUse[grad]].loc;
    let op: Op;
    if (half) {
      const master = b.tensor({ ...state, name: `master.${p.name}`, role: 'master32', ...(p.init ? { init: p.init } : {}) });
      op = b.opWith('adam', [master.id, grad, m.id, v.id], [master.id, m.id, v.id], { adam }, 'update', loc);
      b.tensors[p.id] = { ...b.tensors[p.id], persistent: false };
      const first = firstUse[p.id] >= 0 ? firstUse[p.id] : 0;
      before[first].push(b.opWith('reshape', [master.id], [p.id], { shape: [...p.shape] }, 'update', g.ops[first].loc));
    } else {
      op = b.opWith('adam', [p.id, grad, m.id, v.id], [p.id, m.id, v.id], { adam }, 'update', loc);
    }
    after[Math.max(lastUse[grad], lastUse[p.id])].push(op);
  }

  const ops: Op[] = [];
  for (let i = 0; i < g.ops.length; i++) {
    for (const c of before[i]) ops.push({ ...c, id: ops.length });
    ops.push({ ...g.ops[i], id: ops.length });
    for (const u of after[i]) ops.push({ ...u, id: ops.length });
  }
  const built = b.build(g.loss, g.precision);
  return { ...built, ops };
}
