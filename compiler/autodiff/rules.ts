// Grad rules: one small function per forward op kind. A rule takes the op and
// the gradient of its primary output and returns the gradients of its inputs
// (undefined where an input has none: ids, targets). Backward op semantics are
// in native/kernels/dispatch.h.

import type { OpAttrs, OpKind, Op, Tensor } from '../ir/types.js';
import { shapeStr } from '../ir/types.js';

export interface GradContext {
  tensor(id: number): Tensor;
  /** Emits a backward op; returns its output tensor ids. */
  emit(kind: OpKind, inputs: number[], attrs: OpAttrs, names: string[]): number[];
}

export type GradRule = (ctx: GradContext, op: Op, dy: number) => (number | undefined)[];

const d = (ctx: GradContext, t: number) => `d.${ctx.tensor(t).name}`;

/** Reduces a broadcast gradient back to the operand's shape (or passes it through). */
function reduceTo(ctx: GradContext, g: number, target: number): number {
  const want = ctx.tensor(target).shape;
  if (shapeStr(ctx.tensor(g).shape) === shapeStr(want)) return g;
  return ctx.emit('sumToShape', [g], { shape: [...want] }, [d(ctx, target)])[0];
}

const noGrad: GradRule = () => [];

export const GRAD_RULES: Readonly<Record<OpKind, GradRule>> = {
  matmul: (ctx, op, dy) => {
    const [a, b] = op.inputs;
    const t = { transB: op.attrs.transB ?? false };
    return [ctx.emit('matmulGradA', [dy, b], t, [d(ctx, a)])[0], ctx.emit('matmulGradB', [a, dy], t, [d(ctx, b)])[0]];
  },
  add: (ctx, op, dy) => [dy, reduceTo(ctx, dy, op.inputs[1])],
  mul: (ctx, op, dy) => {
    const [a, b] = op.inputs;
    const da = ctx.emit('mul', [dy, b], {}, [d(ctx, a)])[0];
    const dbFull = ctx.emit('mul', [dy, a], {}, [d(ctx, b)])[0];
    return [da, reduceTo(ctx, dbFull, b)];
  },
  gelu: (ctx, op, dy) => [ctx.emit('geluBackward', [op.inputs[0], dy], {}, [d(ctx, op.inputs[0])])[0]],
  layerNorm: (ctx, op, dy) => {
    const [x, w, b] = op.inputs;
    const [, mean, rstd] = op.outputs;
    return ctx.emit('layerNormBackward', [x, w, mean, rstd, dy], {}, [d(ctx, x), d(ctx, w), d(ctx, b)]);
  },
  softmax: (ctx, op, dy) => [ctx.emit('softmaxBackward', [op.outputs[0], dy], {}, [d(ctx, op.inputs[0])])[0]],
  causalAttention: (ctx, op, dy) => [ctx.emit('causalAttentionBackward', [op.inputs[0], op.outputs[1], dy], { heads: op.attrs.heads }, [d(ctx, op.inputs[0])])[0]],
  embedding: (ctx, op, dy) => {
    const [ids, table] = op.inputs;
    return [undefined, ctx.emit('embeddingBackward', [ids, dy], { shape: [...ctx.tensor(table).shape] }, [d(ctx, table)])[0]];
  },
  crossEntropy: (ctx, op, dy) => [ctx.emit('crossEntropyBackward', [op.inputs[0], op.inputs[1], dy], {}, [d(ctx, op.inputs[0])])[0], undefined],
  reshape: (ctx, op, dy) => [ctx.emit('reshape', [dy], { shape: [...ctx.tensor(op.inputs[0]).shape] }, [d(ctx, op.inputs[0])])[0]],
  transpose: (ctx, op, dy) => {
    const perm = op.attrs.perm ?? [];
    const inv = perm.map((_, i) => perm.indexOf(i));
    return [ctx.emit('transpose', [dy], { perm: inv }, [d(ctx, op.inputs[0])])[0]];
  },
  // backward and update kinds are never differentiated
  matmulGradA: noGrad, matmulGradB: noGrad, sumToShape: noGrad, geluBackward: noGrad,
  layerNormBackward: noGrad, softmaxBackward: noGrad, causalAttentionBackward: noGrad,
  embeddingBackward: noGrad, crossEntropyBackward: noGrad, fill: noGrad, adam: noGrad,
};
