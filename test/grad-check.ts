// The finite-difference harness every grad-rule test uses: one op with random
// inputs, a random upstream gradient dy, L(x) = sum(y(x) * dy); the rule's
// backward ops, run on the native kernels in float64, must give dL/dx equal to
// the central difference (L(x + h) - L(x - h)) / 2h for every input element.
import { expect } from 'vitest';
import { GraphBuilder } from '../compiler/ir/graph.js';
import type { OpAttrs, OpKind } from '../compiler/ir/types.js';
import { numel } from '../compiler/ir/types.js';
import { GRAD_RULES } from '../compiler/autodiff/rules.js';
import { interpret, randomValues, expectClose } from './helpers.js';

export interface GradInput {
  shape: number[];
  /** Random values are uniform in [offset - scale, offset + scale]. */
  scale?: number;
  offset?: number;
  /** Fixed values instead of random ones. */
  values?: number[];
  /** An int32 input with values in [0, int) (ids, targets): no gradient. */
  int?: number;
  /** A float input that gets no gradient (e.g. a mask). */
  noGrad?: boolean;
}

export interface GradCase { name: string; kind: OpKind; inputs: GradInput[]; attrs?: OpAttrs }

export function checkGradRule(c: GradCase): void {
  const b = new GraphBuilder('fd');
  const constant = (s: GradInput) => s.int !== undefined || s.noGrad === true;
  const ins = c.inputs.map((s, k) => b.tensor({ name: `x${k}`, shape: s.shape, dtype: s.int !== undefined ? 'i32' : 'f32', role: constant(s) ? 'input' : 'param16', persistent: !constant(s) }));
  const [y] = b.op(c.kind, ins.map((t) => t.id), c.attrs ?? {}, { names: ['y'], role: 'activation' }, 'forward', { file: 'test', line: 0, col: 0 });
  const fwd = b.ops[0];
  const dy = b.tensor({ name: 'dy', shape: y.shape, dtype: 'f32', role: 'activationGrad' });
  const ctx = {
    tensor: (id: number) => b.tensors[id],
    emit: (kind: OpKind, inputs: number[], attrs: OpAttrs, names: string[]) =>
      b.op(kind, inputs, attrs, { names, role: 'activationGrad' }, 'backward', fwd.loc).map((t) => t.id),
  };
  const grads = GRAD_RULES[c.kind](ctx, fwd, dy.id);
  const g = b.build(y.id, 'fp32');

  const values = new Map<number, Float64Array | Int32Array>();
  c.inputs.forEach((s, k) => {
    const n = numel(s.shape);
    if (s.int !== undefined) values.set(ins[k].id, Int32Array.from(randomValues(n, 7 + k), (v) => Math.floor(((v + 1) / 2) * s.int!) % s.int!));
    else values.set(ins[k].id, s.values ? Float64Array.from(s.values) : randomValues(n, 11 + k, s.scale ?? 1).map((v) => v + (s.offset ?? 0)));
  });
  const dyv = randomValues(numel(y.shape), 99);
  values.set(dy.id, dyv);
  interpret(g, values);

  const loss = (vals: Map<number, Float64Array | Int32Array>) => {
    const m = new Map(vals);
    interpret(g, m, [g.ops[0]]);
    const yv = m.get(y.id)!;
    let s = 0;
    for (let i = 0; i < yv.length; i++) s += yv[i] * dyv[i];
    return s;
  };
  let checked = 0;
  c.inputs.forEach((s, k) => {
    if (s.int !== undefined) { expect(grads[k], `no gradient for the integer input ${k}`).toBeUndefined(); return; }
    if (s.noGrad) return;
    const gid = grads[k];
    expect(gid, `rule gives a gradient for input ${k}`).toBeDefined();
    const analytic = values.get(gid!) as Float64Array;
    const x = values.get(ins[k].id) as Float64Array;
    const fd = new Float64Array(x.length);
    const h = 1e-6;
    for (let i = 0; i < x.length; i++) {
      const plus = new Float64Array(x); plus[i] += h;
      const minus = new Float64Array(x); minus[i] -= h;
      fd[i] = (loss(new Map(values).set(ins[k].id, plus)) - loss(new Map(values).set(ins[k].id, minus))) / (2 * h);
    }
    expectClose(`${c.name} d${ins[k].name}`, analytic, fd, 1e-7, 1e-6);
    checked++;
  });
  expect(checked).toBeGreaterThan(0);
}
