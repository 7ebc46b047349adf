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
  gelu: (ctx, op, dy) => [ctx.emit('geluBackward', [op.inputs[0], dy], op.attrs.erf ? { erf: true } : {}, [d(ctx, op.inputs[0])])[0]],
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
  sub: (ctx, op, dy) => {
    const neg = ctx.emit('affine', [dy], { scale: -1, offset: 0 }, [d(ctx, op.inputs[1])])[0];
    return [dy, reduceTo(ctx, neg, op.inputs[1])];
  },
  div: (ctx, op, dy) => {
    // y = a / b: da = dy / b, db = -(dy * y) / b (summed over the broadcast)
    const [a, b] = op.inputs;
    const da = ctx.emit('div', [dy, b], {}, [d(ctx, a)])[0];
    const dyy = ctx.emit('mul', [dy, op.outputs[0]], {}, [`${d(ctx, b)}.dyy`])[0];
    const q = ctx.emit('div', [dyy, b], {}, [`${d(ctx, b)}.q`])[0];
    const db = ctx.emit('affine', [q], { scale: -1, offset: 0 }, [d(ctx, b)])[0];
    return [da, reduceTo(ctx, db, b)];
  },
  affine: (ctx, op, dy) => [ctx.emit('affine', [dy], { scale: op.attrs.scale ?? 1, offset: 0 }, [d(ctx, op.inputs[0])])[0]],
  powScalar: (ctx, op, dy) => {
    const x = op.inputs[0], e = op.attrs.exponent ?? 1;
    const p = ctx.emit('powScalar', [x], { exponent: e - 1 }, [`${d(ctx, x)}.pow`])[0];
    const pe = ctx.emit('affine', [p], { scale: e, offset: 0 }, [`${d(ctx, x)}.dpow`])[0];
    return [ctx.emit('mul', [dy, pe], {}, [d(ctx, x)])[0]];
  },
  unary: (ctx, op, dy) => [ctx.emit('unaryBackward', [op.inputs[0], op.outputs[0], dy], { fn: op.attrs.fn }, [d(ctx, op.inputs[0])])[0]],
  where: (ctx, op, dy) => {
    const [c, a, b] = op.inputs;
    const da = ctx.emit('mul', [dy, c], {}, [d(ctx, a)])[0];
    return [undefined, da, ctx.emit('sub', [dy, da], {}, [d(ctx, b)])[0]];
  },
  expand: (ctx, op, dy) => [ctx.emit('unbroadcast', [dy], { shape: [...ctx.tensor(op.inputs[0]).shape] }, [d(ctx, op.inputs[0])])[0]],
  unbroadcast: (ctx, op, dy) => [ctx.emit('expand', [dy], { shape: [...ctx.tensor(op.inputs[0]).shape] }, [d(ctx, op.inputs[0])])[0]],
  slice: (ctx, op, dy) => [ctx.emit('sliceBackward', [dy], { axis: op.attrs.axis, start: op.attrs.start, shape: [...ctx.tensor(op.inputs[0]).shape] }, [d(ctx, op.inputs[0])])[0]],
  concat: (ctx, op, dy) => {
    const axis = op.attrs.axis ?? 0;
    let at = 0;
    return op.inputs.map((x) => {
      const n = ctx.tensor(x).shape[axis];
      const g = ctx.emit('slice', [dy], { axis, start: at, end: at + n }, [d(ctx, x)])[0];
      at += n;
      return g;
    });
  },
  bmm: (ctx, op, dy) => {
    const [a, b] = op.inputs;
    const tA = op.attrs.transA ?? false, tB = op.attrs.transB ?? false;
    const mm = (x: number, y: number, transA: boolean, transB: boolean, name: string) => ctx.emit('bmm', [x, y], { transA, transB }, [name])[0];
    // y = op(a) op(b); the four cases of which operand is stored transposed
    if (!tA && !tB) return [mm(dy, b, false, true, d(ctx, a)), mm(a, dy, true, false, d(ctx, b))];
    if (!tA && tB) return [mm(dy, b, false, false, d(ctx, a)), mm(dy, a, true, false, d(ctx, b))];
    if (tA && !tB) return [mm(b, dy, false, true, d(ctx, a)), mm(a, dy, false, false, d(ctx, b))];
    return [mm(b, dy, true, true, d(ctx, a)), mm(dy, a, true, true, d(ctx, b))];
  },
  logSoftmax: (ctx, op, dy) => [ctx.emit('logSoftmaxBackward', [op.outputs[0], dy], {}, [d(ctx, op.inputs[0])])[0]],
  cast: () => [undefined],
  rmsNorm: (ctx, op, dy) => {
    const [x, w] = op.inputs;
    return ctx.emit('rmsNormBackward', [x, w, op.outputs[1], dy], {}, [d(ctx, x), d(ctx, w)]);
  },
  silu: (ctx, op, dy) => [ctx.emit('siluBackward', [op.inputs[0], dy], {}, [d(ctx, op.inputs[0])])[0]],
  // a rotation: the gradient is the inverse rotation of dy
  rope: (ctx, op, dy) => [ctx.emit('rope', [dy], { ...op.attrs, inverse: !op.attrs.inverse }, [d(ctx, op.inputs[0])])[0]],
  attention: (ctx, op, dy) => {
    const [q, k, v] = op.inputs;
    const [y, lse] = op.outputs;
    return ctx.emit('attentionBackward', [q, k, v, y, lse, dy], op.attrs, [d(ctx, q), d(ctx, k), d(ctx, v)]);
  },
  // ring attention's backward recomputes the probabilities from q, k and lse (never stored);
  // dq, dk, dv come back into one dqkv, as causalAttention's
  ringAttention: (ctx, op, dy) => {
    const [qkv] = op.inputs;
    const [y, lse] = op.outputs;
    return [ctx.emit('ringAttentionBackward', [qkv, y, lse, dy], op.attrs, [d(ctx, qkv)])[0]];
  },
  conv2d: (ctx, op, dy) => {
    const [x, w, b] = op.inputs;
    const geom = { strides: op.attrs.strides, pads: op.attrs.pads, dilations: op.attrs.dilations };
    const dx = ctx.emit('conv2dGradInput', [dy, w], { ...geom, shape: [...ctx.tensor(x).shape] }, [d(ctx, x)])[0];
    const [dw, db] = ctx.emit('conv2dGradWeight', [x, dy], { ...geom, shape: [...ctx.tensor(w).shape] }, [d(ctx, w), d(ctx, b)]);
    return [dx, dw, db];
  },
  // the batch statistics are functions of x (the rule differentiates through them);
  // the running statistics never reach the loss in training mode
  batchNorm: (ctx, op, dy) => {
    const [x, w, b] = op.inputs;
    const [, mean, variance] = op.outputs;
    return ctx.emit('batchNormBackward', [x, w, mean, variance, dy], { eps: op.attrs.eps }, [d(ctx, x), d(ctx, w), d(ctx, b)]);
  },
  maxPool2d: (ctx, op, dy) => [ctx.emit('maxPool2dBackward', [op.inputs[0], dy], op.attrs, [d(ctx, op.inputs[0])])[0]],
  avgPool2d: (ctx, op, dy) => [ctx.emit('avgPool2dBackward', [dy], { ...op.attrs, shape: [...ctx.tensor(op.inputs[0]).shape] }, [d(ctx, op.inputs[0])])[0]],
  batchNormRunning: noGrad,
  conv2dGradInput: noGrad, conv2dGradWeight: noGrad, batchNormBackward: noGrad, maxPool2dBackward: noGrad, avgPool2dBackward: noGrad,
  rmsNormBackward: noGrad, siluBackward: noGrad, attentionBackward: noGrad,
  // backward and update kinds are never differentiated
  unaryBackward: noGrad, sliceBackward: noGrad, logSoftmaxBackward: noGrad,
  matmulGradA: noGrad, matmulGradB: noGrad, sumToShape: noGrad, geluBackward: noGrad,
  layerNormBackward: noGrad, softmaxBackward: noGrad, causalAttentionBackward: noGrad,
  embeddingBackward: noGrad, crossEntropyBackward: noGrad, fill: noGrad, adam: noGrad,
  // inserted after autodiff (compiler/lower/grad-allreduce.ts)
  ringAttentionBackward: noGrad, allReduce: noGrad,
};
