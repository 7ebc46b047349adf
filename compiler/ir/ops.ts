// The op catalog: for every op kind, its number in the plan/native contract
// (native/kernels/dispatch.h), its output shapes and dtypes from its inputs,
// and its cost (flops and bytes touched) for the roofline model.
//
// This is data, read by the builder (to create ops), the verifier (to re-check
// shapes after every pass) and the plan writer (to encode attributes).

import type { DType, OpAttrs, OpKind } from './types.js';
import { numel, shapeStr, UNARY_FNS } from './types.js';

export const OP_CODES: Readonly<Record<OpKind, number>> = {
  matmul: 0, add: 1, mul: 2, gelu: 3, layerNorm: 4, softmax: 5, causalAttention: 6,
  embedding: 7, crossEntropy: 8, reshape: 9, transpose: 10, matmulGradA: 11, matmulGradB: 12,
  sumToShape: 13, geluBackward: 14, layerNormBackward: 15, softmaxBackward: 16,
  causalAttentionBackward: 17, embeddingBackward: 18, crossEntropyBackward: 19, fill: 20, adam: 21,
  sub: 22, div: 23, affine: 24, powScalar: 25, unary: 26, unaryBackward: 27, where: 28, expand: 29,
  unbroadcast: 30, slice: 31, sliceBackward: 32, concat: 33, bmm: 34, logSoftmax: 35, logSoftmaxBackward: 36,
  cast: 37,
  rmsNorm: 38, rmsNormBackward: 39, silu: 40, siluBackward: 41, rope: 42, attention: 43, attentionBackward: 44,
  conv2d: 45, conv2dGradInput: 46, conv2dGradWeight: 47, batchNorm: 48, batchNormBackward: 49, batchNormRunning: 50,
  maxPool2d: 51, maxPool2dBackward: 52, avgPool2d: 53, avgPool2dBackward: 54,
  ringAttention: 55, ringAttentionBackward: 56, allReduce: 57,
};

export const OP_KINDS = Object.keys(OP_CODES) as OpKind[];

export interface Operand { readonly shape: readonly number[]; readonly dtype: DType }
export interface OutputSpec { readonly shape: readonly number[]; readonly dtype: DType }

/** Thrown by shape rules; the caller adds the source location. */
export class ShapeError extends Error {}

function fail(kind: OpKind, msg: string): never {
  throw new ShapeError(`${kind}: ${msg}`);
}

function last(s: readonly number[]): number { return s[s.length - 1]; }

function isSuffix(a: readonly number[], b: readonly number[]): boolean {
  if (b.length > a.length) return false;
  for (let i = 1; i <= b.length; i++) if (a[a.length - i] !== b[b.length - i]) return false;
  return true;
}

/** numpy broadcasting: `small` (aligned right) has, per dim, 1 or the dim of `big`. */
export function broadcastsTo(small: readonly number[], big: readonly number[]): boolean {
  if (small.length > big.length) return false;
  const off = big.length - small.length;
  return small.every((d, i) => d === 1 || d === big[off + i]);
}

function sameShape(a: readonly number[], b: readonly number[]): boolean { return shapeStr(a) === shapeStr(b); }

function sameDims(a: readonly number[], b: readonly number[]): boolean { return a.length === b.length && a.every((d, i) => d === b[i]); }

function expectFloat(kind: OpKind, name: string, o: Operand): void {
  if (o.dtype === 'i32' || o.dtype === 'i64') fail(kind, `${name} must be a float tensor, got ${o.dtype}`);
}

function expectInt(kind: OpKind, name: string, o: Operand): void {
  if (o.dtype !== 'i32') fail(kind, `${name} must be an i32 tensor, got ${o.dtype}`);
}

function expectCount(kind: OpKind, ins: readonly Operand[], n: number): void {
  if (ins.length !== n) fail(kind, `expects ${n} inputs, got ${ins.length}`);
}

/** 2-D window geometry of conv2d and the pools, with defaults filled in. */
export interface Window2d { kernel: [number, number]; strides: [number, number]; pads: [number, number, number, number]; dilations: [number, number]; ceilMode: boolean }

export function window2d(attrs: OpAttrs, kernel: readonly number[]): Window2d {
  const s = attrs.strides ?? [1, 1], p = attrs.pads ?? [0, 0, 0, 0], d = attrs.dilations ?? [1, 1];
  return { kernel: [kernel[0], kernel[1]], strides: [s[0], s[1]], pads: [p[0], p[1], p[2], p[3]], dilations: [d[0], d[1]], ceilMode: attrs.ceilMode ?? false };
}

/**
 * Output size along one spatial axis (PyTorch's pooling_output_shape): floor
 * or, in ceil mode, ceil of (in + pads - extent) / stride + 1, less one when
 * the last window would start in the bottom/right padding. 0 when no window fits.
 */
export function windowOutSize(input: number, k: number, stride: number, padBegin: number, padEnd: number, dilation: number, ceil: boolean): number {
  const span = input + padBegin + padEnd - dilation * (k - 1) - 1;
  if (span < 0) return 0;
  let out = Math.floor((span + (ceil ? stride - 1 : 0)) / stride) + 1;
  if (ceil && (out - 1) * stride >= input + padBegin) out--;
  return out;
}

function checkWindow(kind: OpKind, w: Window2d): void {
  const all = [...w.kernel, ...w.strides, ...w.dilations];
  if (all.some((v) => !Number.isInteger(v) || v < 1) || w.pads.some((v) => !Number.isInteger(v) || v < 0))
    fail(kind, `kernel [${w.kernel.join(',')}], strides [${w.strides.join(',')}] and dilations [${w.dilations.join(',')}] must be positive and pads [${w.pads.join(',')}] non-negative integers`);
}

/** [N, C, OH, OW] for x [N, C, H, W] under window w, or ShapeError. */
function windowOut(kind: OpKind, x: readonly number[], outChannels: number, w: Window2d): number[] {
  checkWindow(kind, w);
  // (as the kernels and PyTorch: a plane of no rows or columns has windows of padding alone)
  if (!(x[2] >= 1 && x[3] >= 1)) fail(kind, `x${shapeStr(x)}: its planes need at least one row and one column`);
  const oh = windowOutSize(x[2], w.kernel[0], w.strides[0], w.pads[0], w.pads[2], w.dilations[0], w.ceilMode);
  const ow = windowOutSize(x[3], w.kernel[1], w.strides[1], w.pads[1], w.pads[3], w.dilations[1], w.ceilMode);
  if (oh < 1 || ow < 1) fail(kind, `a ${w.kernel.join('x')} window (dilations [${w.dilations.join(',')}], pads [${w.pads.join(',')}]) does not fit in x${shapeStr(x)}`);
  return [x[0], outChannels, oh, ow];
}

function convOut(kind: OpKind, x: readonly number[], w: readonly number[], attrs: OpAttrs): number[] {
  if (x.length !== 4 || w.length !== 4) fail(kind, `needs x[N,C,H,W] and w[M,C/groups,kH,kW], got x${shapeStr(x)} w${shapeStr(w)}`);
  const [C, Cg, M] = [x[1], w[1], w[0]];
  if (!(C >= 1 && Cg >= 1) || C % Cg !== 0 || M % (C / Cg) !== 0) fail(kind, `w${shapeStr(w)} does not split x${shapeStr(x)}'s ${C} channels into groups (C / w[1] groups must divide M = ${M})`);
  return windowOut(kind, x, M, window2d(attrs, [w[2], w[3]]));
}

function poolOut(kind: OpKind, x: readonly number[], attrs: OpAttrs): number[] {
  if (x.length !== 4) fail(kind, `x must be [N,C,H,W], got ${shapeStr(x)}`);
  const k = attrs.kernel ?? [];
  if (k.length !== 2) fail(kind, `kernel must be [kH,kW], got [${k.join(',')}]`);
  if ((attrs.dilations ?? [1, 1]).some((d) => d !== 1)) fail(kind, 'dilated pooling windows are not supported');
  const w = window2d(attrs, k);
  if (w.pads[0] >= k[0] || w.pads[2] >= k[0] || w.pads[1] >= k[1] || w.pads[3] >= k[1]) fail(kind, `pads [${w.pads.join(',')}] must be smaller than the window [${k.join(',')}] (every window must hold an element of x)`);
  return windowOut(kind, x, x[1], w);
}

/**
 * The inputs the runtime takes as i32 (a bit per input: ids, targets, a cast's
 * source); every other input of every op is a float tensor (native/plan/
 * program.cc's kSignatures, which refuses any other plan at run start).
 */
const INT_INPUTS: Partial<Record<OpKind, number>> = { embedding: 1, crossEntropy: 2, embeddingBackward: 1, crossEntropyBackward: 2, cast: 1 };

/** Output shapes and dtypes of an op, or ShapeError. `adam` is special (in place) and not inferred here. */
export function inferOutputs(kind: OpKind, ins: readonly Operand[], attrs: OpAttrs): OutputSpec[] {
  const out = outputsOf(kind, ins, attrs); // (its own checks first: they name the operand)
  // (a concat, transpose or sum of run-time integers had compiled, and run then refused the plan naming a buffer, not the model's line)
  for (const [j, o] of ins.entries()) {
    if ((o.dtype === 'i32' || o.dtype === 'i64') && !(((INT_INPUTS[kind] ?? 0) >> j) & 1)) fail(kind, `input ${j} is ${o.dtype}: the runtime's ${kind} takes float tensors there (integers only as ids, targets or a cast's source)`);
  }
  return out;
}

function outputsOf(kind: OpKind, ins: readonly Operand[], attrs: OpAttrs): OutputSpec[] {
  switch (kind) {
    case 'matmul': {
      expectCount(kind, ins, 2);
      const [a, b] = ins;
      expectFloat(kind, 'a', a); expectFloat(kind, 'b', b);
      if (a.shape.length < 1 || b.shape.length !== 2) fail(kind, `needs a[...,K] and a 2-D b, got a${shapeStr(a.shape)} b${shapeStr(b.shape)}`);
      const k = last(a.shape);
      const [bk, bm] = attrs.transB ? [b.shape[1], b.shape[0]] : [b.shape[0], b.shape[1]];
      if (bk !== k) fail(kind, `a${shapeStr(a.shape)} and b${shapeStr(b.shape)}${attrs.transB ? ' (transposed)' : ''} disagree on the inner dimension (${k} vs ${bk})`);
      return [{ shape: [...a.shape.slice(0, -1), bm], dtype: a.dtype }];
    }
    case 'add': case 'mul': case 'sub': case 'div': {
      expectCount(kind, ins, 2);
      const [a, b] = ins;
      expectFloat(kind, 'a', a); expectFloat(kind, 'b', b);
      if (!isSuffix(a.shape, b.shape)) fail(kind, `b${shapeStr(b.shape)} does not broadcast to a${shapeStr(a.shape)} (b must be a trailing part of a's shape)`);
      return [{ shape: a.shape, dtype: a.dtype }];
    }
    case 'gelu': case 'softmax': {
      expectCount(kind, ins, 1);
      expectFloat(kind, 'x', ins[0]);
      if (kind === 'softmax' && ins[0].shape.length < 1) fail(kind, 'x must have rank >= 1 (it normalises the last axis), got a scalar');
      return [{ shape: ins[0].shape, dtype: ins[0].dtype }];
    }
    case 'layerNorm': {
      expectCount(kind, ins, 3);
      const [x, w, b] = ins;
      expectFloat(kind, 'x', x); expectFloat(kind, 'weight', w); expectFloat(kind, 'bias', b);
      const c = last(x.shape);
      if (w.shape.length !== 1 || w.shape[0] !== c || b.shape.length !== 1 || b.shape[0] !== c)
        fail(kind, `weight${shapeStr(w.shape)} and bias${shapeStr(b.shape)} must both be [${c}] for x${shapeStr(x.shape)}`);
      const lead = x.shape.slice(0, -1);
      return [{ shape: x.shape, dtype: x.dtype }, { shape: lead, dtype: 'f32' }, { shape: lead, dtype: 'f32' }];
    }
    case 'causalAttention': {
      expectCount(kind, ins, 1);
      const [qkv] = ins;
      expectFloat(kind, 'qkv', qkv);
      const heads = attrs.heads ?? 0;
      if (qkv.shape.length !== 3 || last(qkv.shape) % 3 !== 0) fail(kind, `qkv must be [B,T,3C], got ${shapeStr(qkv.shape)}`);
      const [B, T, C3] = qkv.shape;
      const C = C3 / 3;
      if (!(Number.isInteger(heads) && heads > 0) || C % heads !== 0) fail(kind, `${heads} heads do not divide ${C} channels`);
      return [{ shape: [B, T, C], dtype: qkv.dtype }, { shape: [B, heads, T, T], dtype: qkv.dtype }];
    }
    case 'embedding': {
      expectCount(kind, ins, 2);
      const [ids, table] = ins;
      expectInt(kind, 'ids', ids);
      expectFloat(kind, 'table', table);
      if (table.shape.length !== 2) fail(kind, `table must be [V,C], got ${shapeStr(table.shape)}`);
      return [{ shape: [...ids.shape, table.shape[1]], dtype: table.dtype }];
    }
    case 'crossEntropy': {
      expectCount(kind, ins, 2);
      const [logits, targets] = ins;
      expectInt(kind, 'targets', targets);
      expectFloat(kind, 'logits', logits);
      if (logits.shape.length !== targets.shape.length + 1 || !isSuffix(logits.shape.slice(0, -1), targets.shape) || numel(targets.shape) * last(logits.shape) !== numel(logits.shape))
        fail(kind, `logits${shapeStr(logits.shape)} must be targets${shapeStr(targets.shape)} plus a class dimension`);
      return [{ shape: [], dtype: 'f32' }];
    }
    case 'reshape': {
      expectCount(kind, ins, 1);
      const to = attrs.shape ?? [];
      if (numel(to) !== numel(ins[0].shape)) fail(kind, `cannot reshape ${shapeStr(ins[0].shape)} (${numel(ins[0].shape)} elements) to ${shapeStr(to)}`);
      return [{ shape: to, dtype: ins[0].dtype }];
    }
    case 'transpose': {
      expectCount(kind, ins, 1);
      const perm = attrs.perm ?? [];
      const r = ins[0].shape.length;
      const seen = new Set(perm);
      if (perm.length !== r || seen.size !== r || perm.some((p) => !Number.isInteger(p) || p < 0 || p >= r)) fail(kind, `perm [${perm.join(',')}] is not a permutation of ${r} axes`);
      return [{ shape: perm.map((p) => ins[0].shape[p]), dtype: ins[0].dtype }];
    }
    case 'matmulGradA': {
      expectCount(kind, ins, 2);
      const [dy, b] = ins;
      const k = attrs.transB ? b.shape[1] : b.shape[0];
      return [{ shape: [...dy.shape.slice(0, -1), k], dtype: dy.dtype }];
    }
    case 'matmulGradB': {
      expectCount(kind, ins, 2);
      const [a, dy] = ins;
      const k = last(a.shape), m = last(dy.shape);
      return [{ shape: attrs.transB ? [m, k] : [k, m], dtype: dy.dtype }];
    }
    case 'sumToShape': {
      expectCount(kind, ins, 1);
      const to = attrs.shape ?? [];
      if (!isSuffix(ins[0].shape, to)) fail(kind, `${shapeStr(to)} is not a trailing part of ${shapeStr(ins[0].shape)}`);
      return [{ shape: to, dtype: ins[0].dtype }];
    }
    case 'geluBackward': expectCount(kind, ins, 2); return [{ shape: ins[0].shape, dtype: ins[1].dtype }];
    case 'softmaxBackward': expectCount(kind, ins, 2); return [{ shape: ins[0].shape, dtype: ins[1].dtype }];
    case 'layerNormBackward': {
      expectCount(kind, ins, 5);
      const [x, w, , , dy] = ins;
      return [{ shape: x.shape, dtype: dy.dtype }, { shape: w.shape, dtype: dy.dtype }, { shape: w.shape, dtype: dy.dtype }];
    }
    case 'causalAttentionBackward': expectCount(kind, ins, 3); return [{ shape: ins[0].shape, dtype: ins[2].dtype }];
    case 'embeddingBackward': {
      expectCount(kind, ins, 2);
      const table = attrs.shape ?? [];
      return [{ shape: table, dtype: ins[1].dtype }];
    }
    case 'crossEntropyBackward': expectCount(kind, ins, 3); return [{ shape: ins[0].shape, dtype: ins[0].dtype }];
    case 'fill': expectCount(kind, ins, 0); return [{ shape: attrs.shape ?? [], dtype: 'f32' }];
    case 'adam': fail(kind, 'adam is built by the optimizer lowering, not inferred');
    case 'rmsNorm': {
      expectCount(kind, ins, 2);
      const [x, w] = ins;
      expectFloat(kind, 'x', x); expectFloat(kind, 'weight', w);
      const c = last(x.shape);
      if (x.shape.length < 1 || w.shape.length !== 1 || w.shape[0] !== c) fail(kind, `weight${shapeStr(w.shape)} must be [${c}] for x${shapeStr(x.shape)}`);
      return [{ shape: x.shape, dtype: x.dtype }, { shape: x.shape.slice(0, -1), dtype: 'f32' }];
    }
    case 'rmsNormBackward': {
      expectCount(kind, ins, 4);
      const [x, w, , dy] = ins;
      return [{ shape: x.shape, dtype: dy.dtype }, { shape: w.shape, dtype: dy.dtype }];
    }
    case 'silu': expectCount(kind, ins, 1); expectFloat(kind, 'x', ins[0]); return [{ shape: ins[0].shape, dtype: ins[0].dtype }];
    case 'siluBackward': expectCount(kind, ins, 2); return [{ shape: ins[0].shape, dtype: ins[1].dtype }];
    case 'rope': {
      expectCount(kind, ins, 1);
      const [x] = ins;
      expectFloat(kind, 'x', x);
      const heads = attrs.heads ?? 0;
      if (x.shape.length !== 3) fail(kind, `x must be [B,T,heads*headSize], got ${shapeStr(x.shape)}`);
      const C = x.shape[2];
      if (!(Number.isInteger(heads) && heads > 0) || C % heads !== 0 || (C / heads) % 2 !== 0) fail(kind, `${heads} heads must split ${C} channels into heads of even size`);
      if (!((attrs.theta ?? 0) > 0)) fail(kind, `theta must be positive, got ${attrs.theta}`);
      return [{ shape: x.shape, dtype: x.dtype }];
    }
    case 'attention': case 'attentionBackward': {
      expectCount(kind, ins, kind === 'attention' ? 3 : 6);
      const [q, k, v] = ins;
      expectFloat(kind, 'q', q); expectFloat(kind, 'k', k); expectFloat(kind, 'v', v);
      const heads = attrs.heads ?? 0, kvHeads = attrs.kvHeads ?? heads;
      if (q.shape.length !== 3) fail(kind, `q must be [B,T,heads*headSize], got ${shapeStr(q.shape)}`);
      const [B, T, C] = q.shape;
      if (!(Number.isInteger(heads) && heads > 0) || C % heads !== 0) fail(kind, `${heads} heads do not divide ${C} channels of q`);
      if (!(Number.isInteger(kvHeads) && kvHeads > 0) || heads % kvHeads !== 0) fail(kind, `${kvHeads} key/value heads do not divide ${heads} query heads`);
      const kv = [B, T, kvHeads * (C / heads)];
      if (!sameDims(k.shape, kv) || !sameDims(v.shape, kv)) fail(kind, `k${shapeStr(k.shape)} and v${shapeStr(v.shape)} must both be ${shapeStr(kv)} for q${shapeStr(q.shape)} with ${heads} heads, ${kvHeads} key/value heads`);
      if (kind === 'attention') return [{ shape: q.shape, dtype: q.dtype }, { shape: [B, heads, T], dtype: 'f32' }];
      const dy = ins[5];
      return [{ shape: q.shape, dtype: dy.dtype }, { shape: k.shape, dtype: dy.dtype }, { shape: v.shape, dtype: dy.dtype }];
    }
    case 'affine': case 'powScalar': case 'unary': case 'logSoftmax': {
      expectCount(kind, ins, 1);
      expectFloat(kind, 'x', ins[0]);
      if (kind === 'unary' && !UNARY_FNS.includes(attrs.fn!)) fail(kind, `unknown function ${String(attrs.fn)}`);
      if (kind === 'logSoftmax' && ins[0].shape.length < 1) fail(kind, 'x must have rank >= 1');
      return [{ shape: ins[0].shape, dtype: ins[0].dtype }];
    }
    case 'unaryBackward': {
      expectCount(kind, ins, 3);
      if (!UNARY_FNS.includes(attrs.fn!)) fail(kind, `unknown function ${String(attrs.fn)}`);
      if (!sameShape(ins[0].shape, ins[1].shape) || !sameShape(ins[0].shape, ins[2].shape)) fail(kind, `x${shapeStr(ins[0].shape)}, y${shapeStr(ins[1].shape)} and dy${shapeStr(ins[2].shape)} must have one shape`);
      return [{ shape: ins[0].shape, dtype: ins[2].dtype }];
    }
    case 'logSoftmaxBackward': {
      expectCount(kind, ins, 2);
      if (!sameShape(ins[0].shape, ins[1].shape)) fail(kind, `y${shapeStr(ins[0].shape)} and dy${shapeStr(ins[1].shape)} must have one shape`);
      return [{ shape: ins[0].shape, dtype: ins[1].dtype }];
    }
    case 'where': {
      expectCount(kind, ins, 3);
      const [c, a, b] = ins;
      if (!sameShape(c.shape, a.shape) || !sameShape(a.shape, b.shape)) fail(kind, `cond${shapeStr(c.shape)}, a${shapeStr(a.shape)} and b${shapeStr(b.shape)} must have one shape`);
      expectFloat(kind, 'cond', c); expectFloat(kind, 'a', a); expectFloat(kind, 'b', b);
      return [{ shape: a.shape, dtype: a.dtype }];
    }
    case 'expand': {
      expectCount(kind, ins, 1);
      const to = attrs.shape ?? [];
      if (!broadcastsTo(ins[0].shape, to)) fail(kind, `${shapeStr(ins[0].shape)} does not broadcast to ${shapeStr(to)}`);
      return [{ shape: to, dtype: ins[0].dtype }];
    }
    case 'unbroadcast': {
      expectCount(kind, ins, 1);
      const to = attrs.shape ?? [];
      if (!broadcastsTo(to, ins[0].shape)) fail(kind, `${shapeStr(to)} does not broadcast to ${shapeStr(ins[0].shape)}`);
      return [{ shape: to, dtype: ins[0].dtype }];
    }
    case 'slice': {
      expectCount(kind, ins, 1);
      const s = ins[0].shape, ax = attrs.axis ?? -1, st = attrs.start ?? 0, en = attrs.end ?? 0;
      if (!(ax >= 0 && ax < s.length) || !(st >= 0 && st < en && en <= s[ax])) fail(kind, `axis ${ax} [${st}, ${en}) is not a non-empty range inside ${shapeStr(s)}`);
      return [{ shape: s.map((d, i) => (i === ax ? en - st : d)), dtype: ins[0].dtype }];
    }
    case 'sliceBackward': {
      expectCount(kind, ins, 1);
      const to = attrs.shape ?? [], s = ins[0].shape, ax = attrs.axis ?? -1, st = attrs.start ?? 0;
      if (!(ax >= 0 && ax < to.length) || to.length !== s.length || s.some((d, i) => (i === ax ? st < 0 || st + d > to[i] : d !== to[i])))
        fail(kind, `dy${shapeStr(s)} at axis ${ax} offset ${st} does not fit in ${shapeStr(to)}`);
      return [{ shape: to, dtype: ins[0].dtype }];
    }
    case 'concat': {
      if (ins.length < 1 || ins.length > 8) fail(kind, `expects 1..8 inputs, got ${ins.length}`);
      const ax = attrs.axis ?? -1, s0 = ins[0].shape;
      if (!(ax >= 0 && ax < s0.length)) fail(kind, `axis ${ax} is outside ${shapeStr(s0)}`);
      let total = 0;
      for (const x of ins) {
        if (x.shape.length !== s0.length || x.shape.some((d, i) => i !== ax && d !== s0[i])) fail(kind, `${shapeStr(x.shape)} and ${shapeStr(s0)} differ outside axis ${ax}`);
        total += x.shape[ax];
      }
      return [{ shape: s0.map((d, i) => (i === ax ? total : d)), dtype: ins[0].dtype }];
    }
    case 'bmm': {
      expectCount(kind, ins, 2);
      const [a, b] = ins;
      expectFloat(kind, 'a', a); expectFloat(kind, 'b', b);
      const r = a.shape.length;
      if (r < 2 || b.shape.length !== r || !sameShape(a.shape.slice(0, -2), b.shape.slice(0, -2))) fail(kind, `needs a[...,M,K] and b[...,K,N] with the same leading dims, got a${shapeStr(a.shape)} b${shapeStr(b.shape)}`);
      const [am, ak] = attrs.transA ? [a.shape[r - 1], a.shape[r - 2]] : [a.shape[r - 2], a.shape[r - 1]];
      const [bk, bn] = attrs.transB ? [b.shape[r - 1], b.shape[r - 2]] : [b.shape[r - 2], b.shape[r - 1]];
      if (ak !== bk) fail(kind, `a${shapeStr(a.shape)} and b${shapeStr(b.shape)} disagree on the inner dimension (${ak} vs ${bk})`);
      return [{ shape: [...a.shape.slice(0, -2), am, bn], dtype: a.dtype }];
    }
    case 'cast': {
      expectCount(kind, ins, 1);
      expectInt(kind, 'x', ins[0]);
      return [{ shape: ins[0].shape, dtype: 'f32' }];
    }
    case 'conv2d': {
      expectCount(kind, ins, 3);
      const [x, w, b] = ins;
      expectFloat(kind, 'x', x); expectFloat(kind, 'w', w); expectFloat(kind, 'b', b);
      const y = convOut(kind, x.shape, w.shape, attrs);
      if (!sameDims(b.shape, [w.shape[0]])) fail(kind, `bias${shapeStr(b.shape)} must be [${w.shape[0]}] for w${shapeStr(w.shape)}`);
      return [{ shape: y, dtype: x.dtype }];
    }
    case 'conv2dGradInput': {
      expectCount(kind, ins, 2);
      const [dy, w] = ins;
      const x = attrs.shape ?? [];
      const y = convOut(kind, x, w.shape, attrs);
      if (!sameDims(dy.shape, y)) fail(kind, `dy${shapeStr(dy.shape)} must be ${shapeStr(y)}, the output of a conv of x${shapeStr(x)} with w${shapeStr(w.shape)}`);
      return [{ shape: x, dtype: dy.dtype }];
    }
    case 'conv2dGradWeight': {
      expectCount(kind, ins, 2);
      const [x, dy] = ins;
      const w = attrs.shape ?? [];
      const y = convOut(kind, x.shape, w, attrs);
      if (!sameDims(dy.shape, y)) fail(kind, `dy${shapeStr(dy.shape)} must be ${shapeStr(y)}, the output of a conv of x${shapeStr(x.shape)} with w${shapeStr(w)}`);
      return [{ shape: w, dtype: dy.dtype }, { shape: [w[0]], dtype: dy.dtype }];
    }
    case 'batchNorm': {
      expectCount(kind, ins, 3);
      const [x, w, b] = ins;
      expectFloat(kind, 'x', x);
      if (x.shape.length < 2) fail(kind, `x must be [N,C,...], got ${shapeStr(x.shape)}`);
      const C = x.shape[1];
      if (!sameDims(w.shape, [C]) || !sameDims(b.shape, [C])) fail(kind, `weight${shapeStr(w.shape)} and bias${shapeStr(b.shape)} must both be [${C}] for x${shapeStr(x.shape)}`);
      if (numel(x.shape) / C < 2) fail(kind, `x${shapeStr(x.shape)} has one value per channel; batch statistics need more`);
      return [{ shape: x.shape, dtype: x.dtype }, { shape: [C], dtype: 'f32' }, { shape: [C], dtype: 'f32' }];
    }
    case 'batchNormBackward': {
      expectCount(kind, ins, 5);
      const [x, w, mean, v, dy] = ins;
      if (x.shape.length < 2 || !sameDims(w.shape, [x.shape[1]]) || !sameDims(mean.shape, w.shape) || !sameDims(v.shape, w.shape) || !sameDims(dy.shape, x.shape))
        fail(kind, `needs x[N,C,...], w, mean, var [C] and dy of x's shape, got x${shapeStr(x.shape)} w${shapeStr(w.shape)} mean${shapeStr(mean.shape)} var${shapeStr(v.shape)} dy${shapeStr(dy.shape)}`);
      return [{ shape: x.shape, dtype: dy.dtype }, { shape: w.shape, dtype: dy.dtype }, { shape: w.shape, dtype: dy.dtype }];
    }
    case 'batchNormRunning': {
      expectCount(kind, ins, 4);
      const C = ins[0].shape;
      if (C.length !== 1 || ins.some((t) => !sameDims(t.shape, C))) fail(kind, `running mean, running var, mean and var must all be [C], got ${ins.map((t) => shapeStr(t.shape)).join(' ')}`);
      const m = attrs.momentum ?? -1, n = attrs.count ?? 0;
      if (!(m >= 0 && m <= 1)) fail(kind, `momentum must be in [0, 1], got ${attrs.momentum}`);
      if (!(Number.isInteger(n) && n >= 2)) fail(kind, `count must be an integer >= 2, got ${attrs.count}`);
      return [{ shape: C, dtype: 'f32' }, { shape: C, dtype: 'f32' }];
    }
    case 'maxPool2d': case 'avgPool2d': {
      expectCount(kind, ins, 1);
      expectFloat(kind, 'x', ins[0]);
      return [{ shape: poolOut(kind, ins[0].shape, attrs), dtype: ins[0].dtype }];
    }
    case 'ringAttention': case 'ringAttentionBackward': {
      // rank-local rows R of a sequence of R * P tokens: this rank's two zigzag chunks of R / 2
      expectCount(kind, ins, kind === 'ringAttention' ? 1 : 4);
      const [qkv] = ins;
      expectFloat(kind, 'qkv', qkv);
      const heads = attrs.heads ?? 0, P = attrs.ranks ?? 0;
      if (qkv.shape.length !== 3 || last(qkv.shape) % 3 !== 0) fail(kind, `qkv must be [B,R,3C], got ${shapeStr(qkv.shape)}`);
      const [B, R, C3] = qkv.shape;
      const C = C3 / 3;
      if (!(heads > 0) || C % heads !== 0) fail(kind, `${heads} heads do not divide ${C} channels`);
      if (!(Number.isInteger(P) && P >= 1)) fail(kind, `ranks must be a positive integer, got ${attrs.ranks}`);
      if (R % 2 !== 0) fail(kind, `a rank's ${R} rows must be two zigzag chunks of equal length`);
      const y = [B, R, C], lse = [B, heads, R];
      if (kind === 'ringAttention') return [{ shape: y, dtype: qkv.dtype }, { shape: lse, dtype: 'f32' }];
      const [, yy, l, dy] = ins;
      if (!sameDims(yy.shape, y) || !sameDims(l.shape, lse) || !sameDims(dy.shape, y))
        fail(kind, `needs y${shapeStr(y)}, lse${shapeStr(lse)} and dy${shapeStr(y)} for qkv${shapeStr(qkv.shape)}, got y${shapeStr(yy.shape)} lse${shapeStr(l.shape)} dy${shapeStr(dy.shape)}`);
      return [{ shape: qkv.shape, dtype: dy.dtype }];
    }
    case 'allReduce': {
      expectCount(kind, ins, 1);
      expectFloat(kind, 'x', ins[0]);
      const P = attrs.ranks ?? 0;
      if (!(Number.isInteger(P) && P >= 1)) fail(kind, `ranks must be a positive integer, got ${attrs.ranks}`);
      return [{ shape: ins[0].shape, dtype: ins[0].dtype }];
    }
    case 'maxPool2dBackward': case 'avgPool2dBackward': {
      expectCount(kind, ins, kind === 'maxPool2dBackward' ? 2 : 1);
      const x = kind === 'maxPool2dBackward' ? ins[0].shape : attrs.shape ?? [];
      const dy = ins[ins.length - 1];
      const y = poolOut(kind, x, attrs);
      if (!sameDims(dy.shape, y)) fail(kind, `dy${shapeStr(dy.shape)} must be ${shapeStr(y)}, the pooled shape of x${shapeStr(x)}`);
      return [{ shape: x, dtype: dy.dtype }];
    }
  }
}

/** Floating-point operations of one execution (a roofline input; fused multiply-add = 2). */
export function opFlops(kind: OpKind, ins: readonly Operand[], outs: readonly Operand[], attrs: OpAttrs = {}): number {
  const n = (o: Operand) => numel(o.shape);
  switch (kind) {
    case 'matmul': return 2 * n(outs[0]) * last(ins[0].shape);
    case 'matmulGradA': return 2 * n(outs[0]) * last(ins[0].shape);
    case 'matmulGradB': return 2 * n(ins[0]) * last(ins[1].shape);
    case 'causalAttention': case 'causalAttentionBackward': {
      const [B, T, C3] = ins[0].shape;
      const f = 2 * B * T * T * (C3 / 3); // QK^T and AV over the causal half, both directions
      return kind === 'causalAttention' ? f : 2 * f;
    }
    case 'gelu': case 'geluBackward': return 15 * n(outs[0]);
    case 'layerNorm': case 'layerNormBackward': return 8 * n(ins[0]);
    case 'softmax': case 'softmaxBackward': case 'crossEntropy': case 'crossEntropyBackward': return 5 * n(ins[0]);
    case 'adam': return 20 * n(ins[0]);
    case 'add': case 'mul': case 'sumToShape': return n(kind === 'sumToShape' ? ins[0] : outs[0]);
    case 'bmm': return 2 * n(ins[0]) * last(outs[0].shape); // 2 * batch*M*N*K
    case 'sub': case 'div': case 'affine': case 'where': case 'unbroadcast': return n(kind === 'unbroadcast' ? ins[0] : outs[0]);
    case 'powScalar': case 'unary': case 'unaryBackward': return 10 * n(outs[0]);
    case 'logSoftmax': case 'logSoftmaxBackward': return 5 * n(outs[0]);
    case 'attention': case 'attentionBackward': {
      // QK^T and PV (2 matmuls) forward; backward recomputes QK^T and does dV, dP, dQ, dK (5): 2.5x
      const [B, T, C] = ins[0].shape;
      const f = (attrs.causal ? 2 : 4) * B * T * T * C;
      return kind === 'attention' ? f : 2.5 * f;
    }
    case 'rmsNorm': case 'rmsNormBackward': return 6 * n(ins[0]);
    case 'silu': case 'siluBackward': return 8 * n(ins[0]);
    case 'rope': return 3 * n(ins[0]);
    // a conv is a matmul per output element over C/groups * kH * kW inputs; its two gradients the same
    case 'conv2d': { const w = ins[1].shape; return 2 * n(outs[0]) * w[1] * w[2] * w[3]; }
    case 'conv2dGradInput': { const w = ins[1].shape; return 2 * n(ins[0]) * w[1] * w[2] * w[3]; }
    case 'conv2dGradWeight': { const w = outs[0].shape; return 2 * n(ins[1]) * w[1] * w[2] * w[3]; }
    case 'batchNorm': case 'batchNormBackward': return 8 * n(ins[0]);
    case 'batchNormRunning': return 6 * n(ins[0]);
    case 'maxPool2d': case 'avgPool2d': return n(outs[0]) * numel(attrs.kernel ?? [1]);
    case 'maxPool2dBackward': return n(ins[1]) * numel(attrs.kernel ?? [1]);
    case 'avgPool2dBackward': return n(ins[0]) * numel(attrs.kernel ?? [1]);
    case 'ringAttention': case 'ringAttentionBackward': {
      // this rank's R query rows against all R * P keys, causal half: 1/P of causalAttention's work
      const [B, R, C3] = ins[0].shape;
      const f = 2 * B * R * R * (attrs.ranks ?? 1) * (C3 / 3);
      return kind === 'ringAttention' ? f : 2 * f;
    }
    case 'allReduce': return n(ins[0]);
    default: return 0;
  }
}

export const DTYPE_CODES: Readonly<Record<DType, number>> = { f32: 0, f16: 1, bf16: 2, i32: 3, i64: 4 };

/** Integer and float attribute slots of the native OpCall (dispatch.h). */
export function encodeAttrs(kind: OpKind, attrs: OpAttrs): { iattr: number[]; fattr: number[] } {
  switch (kind) {
    case 'matmul': case 'matmulGradA': case 'matmulGradB': return { iattr: [attrs.transB ? 1 : 0], fattr: [] };
    case 'layerNorm': return { iattr: [], fattr: [attrs.eps ?? 1e-5] };
    case 'causalAttention': case 'causalAttentionBackward': return { iattr: [attrs.heads ?? 0], fattr: [] };
    case 'ringAttention': case 'ringAttentionBackward': return { iattr: [attrs.heads ?? 0, attrs.ranks ?? 0], fattr: [] };
    case 'allReduce': return { iattr: [attrs.ranks ?? 0], fattr: [] };
    case 'transpose': return { iattr: [...(attrs.perm ?? [])], fattr: [] };
    case 'fill': return { iattr: [], fattr: [attrs.value ?? 0] };
    case 'affine': return { iattr: [], fattr: [attrs.scale ?? 1, attrs.offset ?? 0] };
    case 'powScalar': return { iattr: [], fattr: [attrs.exponent ?? 1] };
    case 'unary': case 'unaryBackward': return { iattr: [UNARY_FNS.indexOf(attrs.fn!)], fattr: [] };
    case 'slice': return { iattr: [attrs.axis ?? 0, attrs.start ?? 0, attrs.end ?? 0], fattr: [] };
    case 'sliceBackward': return { iattr: [attrs.axis ?? 0, attrs.start ?? 0], fattr: [] };
    case 'concat': return { iattr: [attrs.axis ?? 0], fattr: [] };
    case 'bmm': return { iattr: [attrs.transA ? 1 : 0, attrs.transB ? 1 : 0], fattr: [] };
    case 'gelu': case 'geluBackward': return { iattr: [attrs.erf ? 1 : 0], fattr: [] };
    case 'rmsNorm': return { iattr: [], fattr: [attrs.eps ?? 1e-5] };
    case 'rope': return { iattr: [attrs.heads ?? 0, attrs.inverse ? 1 : 0], fattr: [attrs.theta ?? 10000] };
    case 'attention': case 'attentionBackward': return { iattr: [attrs.heads ?? 0, attrs.kvHeads ?? attrs.heads ?? 0, attrs.causal ? 1 : 0], fattr: [] };
    case 'conv2d': case 'conv2dGradInput': case 'conv2dGradWeight': {
      const w = window2d(attrs, [1, 1]);
      return { iattr: [...w.strides, ...w.pads, ...w.dilations], fattr: [] };
    }
    case 'maxPool2d': case 'maxPool2dBackward': case 'avgPool2d': case 'avgPool2dBackward': {
      const w = window2d(attrs, attrs.kernel ?? [1, 1]);
      const avg = kind === 'avgPool2d' || kind === 'avgPool2dBackward';
      return { iattr: [...w.kernel, ...w.strides, ...w.pads], fattr: avg ? [attrs.countIncludePad ? 1 : 0] : [] };
    }
    case 'batchNorm': case 'batchNormBackward': return { iattr: [], fattr: [attrs.eps ?? 1e-5] };
    case 'batchNormRunning': return { iattr: [attrs.count ?? 0], fattr: [attrs.momentum ?? 0.1] };
    case 'adam': {
      const a = attrs.adam!;
      return { iattr: [a.adamw ? 1 : 0, 1], fattr: [a.lr, a.beta1, a.beta2, a.eps, a.weightDecay] };
    }
    default: return { iattr: [], fattr: [] };
  }
}

// ---------------------------------------------------------------------------
// Ring traffic of the collective kinds (what one rank sends per execution).
// The native kernels move float32 whatever the storage dtype (the executor
// widens fp16/bf16 operands first), so every element is 4 bytes on the ring.

/** Chunk c of the P chunks the all-reduce cuts n elements into: [floor(c n / P), floor((c+1) n / P)). */
export function ringChunk(n: number, P: number, c: number): { start: number; length: number } {
  const start = Math.floor((c * n) / P);
  return { start, length: Math.floor(((c + 1) * n) / P) - start };
}

/**
 * Bytes rank r sends in one all-reduce of n elements over P ranks (ring
 * reduce-scatter then all-gather, native/exec/collective.cc): at step s of
 * the reduce-scatter it sends chunk (r - s) mod P, at step s of the
 * all-gather chunk (r + 1 - s) mod P, for s = 0 .. P-2.
 */
export function allReduceSendBytes(n: number, P: number, r: number): number {
  let elems = 0;
  const mod = (x: number) => ((x % P) + P) % P;
  for (let s = 0; s + 1 < P; s++) elems += ringChunk(n, P, mod(r - s)).length + ringChunk(n, P, mod(r + 1 - s)).length;
  return 4 * elems;
}

/**
 * Bytes one rank sends per execution of a collective op (0 for every other
 * kind). Ring attention over P ranks with R local rows of C channels: the
 * forward pass passes its k/v block (2 B R C floats) on P - 1 times; the
 * backward pass the k/v block P - 1 times and the running dk/dv sum P times.
 */
export function ringSendBytes(kind: OpKind, ins: readonly Operand[], attrs: OpAttrs, rank = 0): number {
  const P = attrs.ranks ?? 1;
  switch (kind) {
    case 'ringAttention': case 'ringAttentionBackward': {
      const [B, R, C3] = ins[0].shape;
      const block = 4 * 2 * B * R * (C3 / 3);
      return (kind === 'ringAttention' ? P - 1 : 2 * P - 1) * block;
    }
    case 'allReduce': return allReduceSendBytes(numel(ins[0].shape), P, rank);
    default: return 0;
  }
}

/** Tile rows of the native ring kernels (RingOptions::block in native/ring/ring_attention.h). */
export const RING_BLOCK_ROWS = 64;

/**
 * Memory one execution of a collective op takes outside the plan's arenas
 * (native/exec/collective.cc), in bytes. Ring attention with n = B R C:
 * forward, head-major q, k, v, out (4n) and the kernel's two k/v ring buffers
 * (4n), running max and sum (2 B NH R), a transposed key block (D R) and a
 * score tile (block^2); backward, q, k, v, out, dout, dq, dk, dv (8n), two k/v
 * buffers, two partial and one received dk/dv sum (10n), the row sums
 * (B NH R), transposed k and v (2 D R) and two tiles. All-reduce: one
 * received chunk, ceil(n / P) floats.
 */
export function ringWorkspaceBytes(kind: OpKind, ins: readonly Operand[], attrs: OpAttrs): number {
  const P = attrs.ranks ?? 1;
  switch (kind) {
    case 'ringAttention': case 'ringAttentionBackward': {
      const [B, R, C3] = ins[0].shape;
      const C = C3 / 3, NH = attrs.heads ?? 1, D = C / NH, n = B * R * C, tile = RING_BLOCK_ROWS * RING_BLOCK_ROWS;
      return 4 * (kind === 'ringAttention' ? 8 * n + 2 * B * NH * R + D * R + tile : 18 * n + B * NH * R + 2 * D * R + 2 * tile);
    }
    case 'allReduce': { const n = numel(ins[0].shape); return P > 1 && n > 0 ? 4 * Math.ceil(n / P) : 0; }
    default: return 0;
  }
}
