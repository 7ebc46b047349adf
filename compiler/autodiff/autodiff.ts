// Reverse-mode autodiff: forward graph -> forward + backward graph.
//
// Takes a forward Graph with a scalar loss. Gives the same graph with backward
// ops appended: a `fill` seeding d(loss) = 1, then, in reverse program order,
// the grad rule of every op on a path from a parameter to the loss. Gradient
// contributions to one tensor are summed with `add`. The final gradient of each
// parameter gets role grad16 and the parameter's name.
// Keeps true: program order stays an execution order; forward ops and tensors
// keep their ids; every backward op carries the location of the forward op it
// differentiates. Cost: O(ops).

import { GraphBuilder } from '../ir/graph.js';
import type { Graph, Op } from '../ir/types.js';
import { shapeStr } from '../ir/types.js';
import { GRAD_RULES, type GradContext } from './rules.js';

export function autodiff(fwd: Graph): Graph {
  const b = GraphBuilder.from(fwd);
  const T = fwd.tensors.length;

  // needs[t]: t depends on a parameter, so its gradient matters
  const needs = new Uint8Array(T);
  for (const t of fwd.tensors) if (t.role === 'param16' && !t.frozen) needs[t.id] = 1;
  for (const op of fwd.ops) if (op.inputs.some((t) => needs[t])) for (const t of op.outputs) needs[t] = 1;

  const contributions: number[][] = fwd.tensors.map(() => []);
  const claimed = new Set<number>();
  const uses = new Map<number, number>(); // grad tensor -> how many tensors it is a contribution to
  let current: Op = fwd.ops[0];

  const ctx: GradContext = {
    tensor: (id) => b.tensors[id],
    emit(kind, inputs, attrs, names) {
      return b.op(kind, inputs, attrs, { names, role: 'activationGrad' }, 'backward', current.loc).map((t) => t.id);
    },
  };

  // the sum of all contributions to t's gradient (undefined: t does not reach the loss)
  const finalGrad = (t: number): number | undefined => {
    const parts = contributions[t];
    if (parts.length === 0) return undefined;
    let g = parts[0];
    for (let i = 1; i < parts.length; i++) g = ctx.emit('add', [g, parts[i]], {}, [`d.${fwd.tensors[t].name}+${i}`])[0];
    return g;
  };

  const loss = fwd.tensors[fwd.loss];
  current = fwd.ops[fwd.ops.length - 1];
  const seed = b.op('fill', [], { value: 1, shape: [...loss.shape] }, { names: [`d.${loss.name}`], role: 'activationGrad' }, 'backward', current.loc)[0];
  contributions[fwd.loss].push(seed.id);

  for (let i = fwd.ops.length - 1; i >= 0; i--) {
    const op = fwd.ops[i];
    if (!op.outputs.some((t) => needs[t])) continue;
    const dys = op.outputs.map(finalGrad);
    if (dys[0] === undefined) continue; // only the primary output carries a gradient
    current = op;
    const dxs = GRAD_RULES[op.kind](ctx, op, dys[0]);
    op.inputs.forEach((t, k) => {
      const dx = dxs[k];
      if (dx === undefined || !needs[t]) return;
      const got = b.tensors[dx].shape, want = fwd.tensors[t].shape;
      if (shapeStr(got) !== shapeStr(want)) throw new Error(`autodiff: ${op.kind} rule gave d${fwd.tensors[t].name} shape ${shapeStr(got)}, expected ${shapeStr(want)}`);
      contributions[t].push(dx);
      uses.set(dx, (uses.get(dx) ?? 0) + 1);
    });
  }

  for (const p of fwd.tensors) {
    if (p.role !== 'param16' || p.frozen) continue;
    let g = finalGrad(p.id);
    if (g === undefined) continue; // a parameter that does not reach the loss gets no gradient and no update
    const aliased = claimed.has(g) || b.tensors[g].role !== 'activationGrad' || (uses.get(g) ?? 0) > 1;
    if (aliased) g = ctx.emit('reshape', [g], { shape: [...p.shape] }, [`grad.${p.name}`])[0];
    claimed.add(g);
    const t = b.tensors[g];
    b.tensors[g] = { ...t, role: 'grad16', param: p.name };
  }
  return b.build(fwd.loss, fwd.precision);
}
