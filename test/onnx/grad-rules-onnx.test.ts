// The grad rules of the op kinds added for ONNX import, against central finite
// differences in float64 on the native kernels (the harness
// in test/grad-check.ts): L(x) = sum(y(x) * dy) for a random dy;
// dL/dx from the rule's backward ops must match (L(x+h) - L(x-h)) / 2h.
import { describe, it, expect } from 'vitest';
import { GraphBuilder } from '../../compiler/ir/graph.js';
import { UNARY_FNS } from '../../compiler/ir/types.js';
import { GRAD_RULES } from '../../compiler/autodiff/rules.js';
import { checkGradRule, type GradCase, type GradInput } from '../grad-check.js';
import { interpret } from '../helpers.js';


const positive = (shape: number[]): GradInput => ({ shape, scale: 0.5, offset: 1.5 });

const CASES: GradCase[] = [
  { name: 'sub broadcast', kind: 'sub', inputs: [{ shape: [2, 3, 4] }, { shape: [4] }] },
  { name: 'div broadcast', kind: 'div', inputs: [{ shape: [2, 3, 4] }, positive([3, 4])] },
  { name: 'div same shape', kind: 'div', inputs: [{ shape: [5] }, positive([5])] },
  { name: 'affine', kind: 'affine', inputs: [{ shape: [7] }], attrs: { scale: -2.5, offset: 0.3 } },
  { name: 'powScalar 3', kind: 'powScalar', inputs: [{ shape: [9] }], attrs: { exponent: 3 } },
  { name: 'powScalar 0.5', kind: 'powScalar', inputs: [positive([9])], attrs: { exponent: 0.5 } },
  ...UNARY_FNS.map((fn): GradCase => ({ name: `unary ${fn}`, kind: 'unary', inputs: [fn === 'sqrt' || fn === 'log' ? positive([11]) : { shape: [11], scale: 2 }], attrs: { fn } })),
  { name: 'where', kind: 'where', inputs: [{ shape: [2, 3], values: [1, 0, 1, 1, 0, 0], noGrad: true }, { shape: [2, 3] }, { shape: [2, 3] }] },
  { name: 'expand', kind: 'expand', inputs: [{ shape: [3, 1] }], attrs: { shape: [2, 3, 4] } },
  { name: 'unbroadcast', kind: 'unbroadcast', inputs: [{ shape: [2, 3, 4] }], attrs: { shape: [3, 1] } },
  { name: 'slice', kind: 'slice', inputs: [{ shape: [2, 5, 3] }], attrs: { axis: 1, start: 1, end: 4 } },
  { name: 'concat', kind: 'concat', inputs: [{ shape: [2, 1, 3] }, { shape: [2, 2, 3] }, { shape: [2, 3, 3] }], attrs: { axis: 1 } },
  { name: 'bmm', kind: 'bmm', inputs: [{ shape: [2, 3, 4, 5] }, { shape: [2, 3, 5, 2] }], attrs: { transA: false, transB: false } },
  { name: 'bmm transB', kind: 'bmm', inputs: [{ shape: [3, 4, 5] }, { shape: [3, 2, 5] }], attrs: { transA: false, transB: true } },
  { name: 'bmm transA', kind: 'bmm', inputs: [{ shape: [3, 5, 4] }, { shape: [3, 5, 2] }], attrs: { transA: true, transB: false } },
  { name: 'bmm transA transB', kind: 'bmm', inputs: [{ shape: [3, 5, 4] }, { shape: [3, 2, 5] }], attrs: { transA: true, transB: true } },
  { name: 'logSoftmax', kind: 'logSoftmax', inputs: [{ shape: [3, 6], scale: 2 }] },
];

describe('ONNX grad rules vs finite differences (f64)', () => {
  for (const c of CASES) it(c.name, () => checkGradRule(c));

  it('cast: int32 -> float, no gradient to the integers', () => {
    const b = new GraphBuilder('cast');
    const x = b.tensor({ name: 'x', shape: [4], dtype: 'i32', role: 'input' });
    const [y] = b.op('cast', [x.id], {}, { names: ['y'], role: 'activation' }, 'forward', { file: 'test', line: 0, col: 0 });
    const values = new Map<number, Float64Array | Int32Array>([[x.id, Int32Array.from([3, -1, 0, 7])]]);
    interpret(b.build(y.id, 'fp32'), values);
    expect(Array.from(values.get(y.id)!)).toEqual([3, -1, 0, 7]);
    expect(GRAD_RULES.cast({ tensor: (id) => b.tensors[id], emit: () => [] }, b.ops[0], y.id)).toEqual([undefined]);
  });
});
