// Every grad rule against central finite differences in float64, run on the
// native kernels: L(x) = sum(y(x) * dy) for a random dy; dL/dx from the rule's
// backward ops must match (L(x + h) - L(x - h)) / 2h for every input element.
import { describe, it, expect } from 'vitest';
import { GraphBuilder } from '../../compiler/ir/graph.js';
import type { OpAttrs, OpKind } from '../../compiler/ir/types.js';
import { numel } from '../../compiler/ir/types.js';
import { GRAD_RULES } from '../../compiler/autodiff/rules.js';
import { interpret, randomValues, expectClose } from '../helpers.js';

interface Case { name: string; kind: OpKind; inputs: { shape: number[]; int?: number; scale?: number }[]; attrs?: OpAttrs }

const CASES: Case[] = [
  { name: 'matmul', kind: 'matmul', inputs: [{ shape: [2, 3, 5] }, { shape: [5, 4] }], attrs: { transB: false } },
  { name: 'matmul transB', kind: 'matmul', inputs: [{ shape: [3, 5] }, { shape: [4, 5] }], attrs: { transB: true } },
  { name: 'add same shape', kind: 'add', inputs: [{ shape: [3, 4] }, { shape: [3, 4] }] },
  { name: 'add broadcast', kind: 'add', inputs: [{ shape: [2, 3, 4] }, { shape: [4] }] },
  { name: 'mul broadcast', kind: 'mul', inputs: [{ shape: [2, 3, 4] }, { shape: [3, 4] }] },
  { name: 'gelu', kind: 'gelu', inputs: [{ shape: [17], scale: 3 }] },
  { name: 'layerNorm', kind: 'layerNorm', inputs: [{ shape: [2, 3, 7] }, { shape: [7] }, { shape: [7] }], attrs: { eps: 1e-5 } },
  { name: 'softmax', kind: 'softmax', inputs: [{ shape: [3, 6], scale: 2 }] },
  { name: 'causalAttention', kind: 'causalAttention', inputs: [{ shape: [2, 5, 12] }], attrs: { heads: 2 } },
  { name: 'embedding', kind: 'embedding', inputs: [{ shape: [2, 4], int: 6 }, { shape: [6, 3] }] },
  { name: 'crossEntropy', kind: 'crossEntropy', inputs: [{ shape: [2, 3, 5], scale: 2 }, { shape: [2, 3], int: 5 }] },
  { name: 'reshape', kind: 'reshape', inputs: [{ shape: [2, 6] }], attrs: { shape: [3, 4] } },
  { name: 'transpose', kind: 'transpose', inputs: [{ shape: [2, 3, 4] }], attrs: { perm: [2, 0, 1] } },
  // model zoo (LLaMA, BERT)
  { name: 'rmsNorm', kind: 'rmsNorm', inputs: [{ shape: [2, 3, 7] }, { shape: [7] }], attrs: { eps: 1e-5 } },
  { name: 'silu', kind: 'silu', inputs: [{ shape: [17], scale: 4 }] },
  { name: 'gelu erf', kind: 'gelu', inputs: [{ shape: [17], scale: 3 }], attrs: { erf: true } },
  { name: 'rope', kind: 'rope', inputs: [{ shape: [2, 5, 12] }], attrs: { heads: 2, theta: 100 } },
  { name: 'rope inverse', kind: 'rope', inputs: [{ shape: [1, 4, 8] }], attrs: { heads: 1, theta: 10, inverse: true } },
  { name: 'attention causal GQA', kind: 'attention', inputs: [{ shape: [2, 5, 12] }, { shape: [2, 5, 6] }, { shape: [2, 5, 6] }], attrs: { heads: 4, kvHeads: 2, causal: true } },
  { name: 'attention bidirectional', kind: 'attention', inputs: [{ shape: [2, 4, 8], scale: 2 }, { shape: [2, 4, 8], scale: 2 }, { shape: [2, 4, 8] }], attrs: { heads: 2, kvHeads: 2, causal: false } },
  { name: 'attention causal MQA', kind: 'attention', inputs: [{ shape: [1, 4, 9] }, { shape: [1, 4, 3] }, { shape: [1, 4, 3] }], attrs: { heads: 3, kvHeads: 1, causal: true } },
];

describe('grad rules vs finite differences (f64)', () => {
  for (const c of CASES) {
    it(c.name, () => {
      const b = new GraphBuilder('fd');
      const ins = c.inputs.map((s, k) => b.tensor({ name: `x${k}`, shape: s.shape, dtype: s.int ? 'i32' : 'f32', role: s.int ? 'input' : 'param16', persistent: !s.int }));
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
        values.set(ins[k].id, s.int ? Int32Array.from(randomValues(n, 7 + k), (v) => Math.floor((v + 1) / 2 * s.int!) % s.int!) : randomValues(n, 11 + k, s.scale ?? 1));
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
        if (s.int) { expect(grads[k]).toBeUndefined(); return; }
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
    });
  }
});
