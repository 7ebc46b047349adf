// tiercut's CNN kernels against PyTorch (fixtures/onnx/cnn-kernels.json, from
// scripts/fixtures/gen_cnn_kernels.py, float64): outputs and input gradients of
// conv2d (groups, asymmetric strides, pads and dilations), max and average
// pooling (ceil mode, with and without count_include_pad) and batch norm in
// training mode, plus its running-statistics update. The forward op and the
// backward ops its grad rule emits run in float64 on the native kernels.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { GraphBuilder } from '../../compiler/ir/graph.js';
import type { OpAttrs, OpKind } from '../../compiler/ir/types.js';
import { encodeAttrs, OP_CODES } from '../../compiler/ir/ops.js';
import { GRAD_RULES } from '../../compiler/autodiff/rules.js';
import { nativeAddon } from '../../runtime/binding.js';
import { interpret, expectClose } from '../helpers.js';

interface Case {
  name: string; op: OpKind; attrs: OpAttrs;
  inputs: Record<string, { shape: number[]; data: number[] }>;
  dy: number[]; y: { shape: number[]; data: number[] }; grads: Record<string, number[]>;
  running?: { momentum: number; count: number; mean: number[]; var: number[]; newMean: number[]; newVar: number[] };
}
const { cases } = JSON.parse(readFileSync('fixtures/onnx/cnn-kernels.json', 'utf8')) as { cases: Case[] };

// float64 on both sides (only summation order differs); the fixture keeps 12 significant digits
const ABS = 1e-9, REL = 1e-9;

describe('CNN kernels = PyTorch (f64)', () => {
  for (const c of cases) {
    it(c.name, () => {
      const b = new GraphBuilder('torch');
      const names = Object.keys(c.inputs);
      const ins = names.map((n) => b.tensor({ name: n, shape: c.inputs[n].shape, dtype: 'f32', role: 'param16', persistent: true }));
      const outs = b.op(c.op, ins.map((t) => t.id), c.attrs, { names: ['y'], role: 'activation' }, 'forward', { file: 'test', line: 0, col: 0 });
      expect(outs[0].shape).toEqual(c.y.shape);
      const dy = b.tensor({ name: 'dy', shape: outs[0].shape, dtype: 'f32', role: 'activationGrad' });
      const ctx = {
        tensor: (id: number) => b.tensors[id],
        emit: (kind: OpKind, inputs: number[], attrs: OpAttrs, n: string[]) => b.op(kind, inputs, attrs, { names: n, role: 'activationGrad' }, 'backward', b.ops[0].loc).map((t) => t.id),
      };
      const grads = GRAD_RULES[c.op](ctx, b.ops[0], dy.id);
      const values = new Map<number, Float64Array | Int32Array>(ins.map((t, k) => [t.id, Float64Array.from(c.inputs[names[k]].data)]));
      values.set(dy.id, Float64Array.from(c.dy));
      interpret(b.build(outs[0].id, 'fp32'), values);
      expectClose(`${c.name}: y`, values.get(outs[0].id)!, c.y.data, ABS, REL);
      names.forEach((n, k) => expectClose(`${c.name}: d${n}`, values.get(grads[k]!)!, c.grads[n], ABS, REL));
      if (c.running) {
        const r = c.running;
        const { iattr, fattr } = encodeAttrs('batchNormRunning', { momentum: r.momentum, count: r.count });
        const C = r.mean.length;
        const args = [r.mean, r.var, Array.from(values.get(outs[1].id)!), Array.from(values.get(outs[2].id)!)].map((d) => ({ shape: [C], data: Float64Array.from(d) }));
        const [m, v] = nativeAddon().runOp(OP_CODES.batchNormRunning, 'f64', iattr, fattr, args, [{ shape: [C] }, { shape: [C] }]) as Float64Array[];
        expectClose(`${c.name}: running mean`, m, r.newMean, ABS, REL);
        expectClose(`${c.name}: running var`, v, r.newVar, ABS, REL);
      }
    });
  }
});
