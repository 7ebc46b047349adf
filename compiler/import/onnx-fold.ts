// Constant folding for ONNX import: the ops a training-mode export uses to
// compute shapes, masks and index ranges, evaluated on small host arrays.
//
// Takes constant operands (from Constant nodes, integer initializers, Shape of
// any tensor); gives constant results with numpy/ONNX semantics (broadcasting,
// negative axes, clamped slices). Values are float64 whatever the ONNX type
// (int64 above 2^53 loses precision, which no shape reaches); `type` keeps the
// ONNX kind so Cast/Equal/Where behave. Nothing here touches the IR.
// Cost: proportional to the elements folded (shapes, masks: small).

export type ConstType = 'float' | 'int' | 'bool';

export interface Const {
  readonly type: ConstType;
  readonly shape: readonly number[];
  readonly data: Float64Array;
}

export class FoldError extends Error {}

/** Folding is for shapes, masks and index ranges; anything larger is a sign of a broken model. */
export const MAX_FOLD_ELEMENTS = 1 << 24;

export function checkSize(shape: readonly number[], what: string): void {
  const n = shape.reduce((a, b) => a * b, 1);
  if (!(n <= MAX_FOLD_ELEMENTS)) throw new FoldError(`${what} [${shape.join(',')}] has ${n} elements, too many to fold at import (max ${MAX_FOLD_ELEMENTS})`);
}

export const numelOf = (s: readonly number[]) => s.reduce((a, b) => a * b, 1);

export function constOf(type: ConstType, shape: readonly number[], data: ArrayLike<number>): Const {
  checkSize(shape, 'a constant');
  if (numelOf(shape) !== data.length) throw new FoldError(`constant of shape [${shape.join(',')}] has ${data.length} values`);
  return { type, shape: [...shape], data: Float64Array.from(data) };
}

export const scalar = (type: ConstType, v: number): Const => constOf(type, [], [v]);
export const intVector = (v: readonly number[]): Const => constOf('int', [v.length], v);

/** The values of an int constant as integers (shapes, axes, indices). */
export function ints(c: Const, what: string): number[] {
  const out = Array.from(c.data);
  if (out.some((v) => !Number.isInteger(v))) throw new FoldError(`${what} must be integers, got [${out.join(',')}]`);
  return out;
}

export function normAxis(axis: number, rank: number, what = 'axis'): number {
  const a = axis < 0 ? axis + rank : axis;
  if (!(a >= 0 && a < Math.max(rank, 1))) throw new FoldError(`${what} ${axis} is outside a rank-${rank} tensor`);
  return a;
}

export function strides(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) { s[i] = acc; acc *= shape[i]; }
  return s;
}

/** numpy broadcast of several shapes; FoldError when they do not broadcast. */
export function broadcastShapes(...shapes: (readonly number[])[]): number[] {
  const r = Math.max(0, ...shapes.map((s) => s.length));
  const out = new Array<number>(r).fill(1);
  for (const s of shapes) {
    const off = r - s.length;
    s.forEach((d, i) => {
      const o = out[off + i];
      if (d === o || d === 1) return;
      if (o === 1) { out[off + i] = d; return; }
      throw new FoldError(`shapes ${shapes.map((x) => `[${x.join(',')}]`).join(' and ')} do not broadcast`);
    });
  }
  return out;
}

/** x broadcast to `shape` (numpy rules). */
export function expandTo(x: Const, shape: readonly number[]): Const {
  const out = broadcastShapes(x.shape, shape);
  if (out.join(',') !== shape.join(',')) throw new FoldError(`[${x.shape.join(',')}] does not broadcast to [${shape.join(',')}]`);
  checkSize(shape, 'an expanded constant');
  const n = numelOf(shape);
  const r = shape.length, off = r - x.shape.length;
  const xs = strides(x.shape);
  const data = new Float64Array(n);
  const idx = new Array<number>(r).fill(0);
  for (let i = 0; i < n; i++) {
    let o = 0;
    for (let d = off; d < r; d++) if (x.shape[d - off] !== 1) o += idx[d] * xs[d - off];
    data[i] = x.data[o];
    for (let d = r - 1; d >= 0; d--) { if (++idx[d] < shape[d]) break; idx[d] = 0; }
  }
  return { type: x.type, shape: [...shape], data };
}

function resultType(kind: string, a: Const, b: Const): ConstType {
  if (['Equal', 'Less', 'Greater', 'LessOrEqual', 'GreaterOrEqual', 'And', 'Or', 'Xor'].includes(kind)) return 'bool';
  return a.type === 'float' || b.type === 'float' ? 'float' : a.type;
}

export function binaryFold(kind: string, a: Const, b: Const): Const {
  const shape = broadcastShapes(a.shape, b.shape);
  const x = expandTo(a, shape), y = expandTo(b, shape);
  const type = resultType(kind, a, b);
  const intDiv = type === 'int';
  const f: (p: number, q: number) => number = {
    Add: (p: number, q: number) => p + q, Sub: (p: number, q: number) => p - q, Mul: (p: number, q: number) => p * q,
    Div: (p: number, q: number) => (intDiv ? Math.trunc(p / q) : p / q), Pow: (p: number, q: number) => p ** q,
    Equal: (p: number, q: number) => +(p === q), Less: (p: number, q: number) => +(p < q), Greater: (p: number, q: number) => +(p > q),
    LessOrEqual: (p: number, q: number) => +(p <= q), GreaterOrEqual: (p: number, q: number) => +(p >= q),
    And: (p: number, q: number) => +(!!p && !!q), Or: (p: number, q: number) => +(!!p || !!q), Xor: (p: number, q: number) => +(!!p !== !!q),
    Max: Math.max, Min: Math.min, Mod: (p: number, q: number) => p - Math.floor(p / q) * q, Fmod: (p: number, q: number) => p % q,
  }[kind] ?? (() => { throw new FoldError(`cannot fold ${kind}`); });
  const data = new Float64Array(x.data.length);
  for (let i = 0; i < data.length; i++) data[i] = f(x.data[i], y.data[i]);
  return { type, shape, data: type === 'float' ? data.map(Math.fround) : data };
}

export function unaryFold(kind: string, a: Const): Const {
  const f: ((v: number) => number) | undefined = {
    Neg: (v: number) => -v, Sqrt: Math.sqrt, Tanh: Math.tanh, Relu: (v: number) => Math.max(v, 0), Exp: Math.exp, Log: Math.log,
    Abs: Math.abs, Not: (v: number) => +!v, Reciprocal: (v: number) => 1 / v, Floor: Math.floor, Ceil: Math.ceil,
    Sigmoid: (v: number) => 1 / (1 + Math.exp(-v)), Erf: erf,
  }[kind];
  if (!f) throw new FoldError(`cannot fold ${kind}`);
  return { type: a.type, shape: a.shape, data: a.data.map((v) => (a.type === 'float' ? Math.fround(f(v)) : f(v))) };
}

/** erf (Abramowitz-Stegun 7.1.26 is too coarse; this is a series/continued-fraction to ~1e-15). */
export function erf(x: number): number {
  const ax = Math.abs(x);
  if (ax < 2.5) {
    let sum = x, term = x;
    for (let n = 1; n < 200; n++) {
      term *= -x * x / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    return (2 / Math.sqrt(Math.PI)) * sum;
  }
  // erfc continued fraction
  let f = 0;
  for (let n = 60; n >= 1; n--) f = (n / 2) / (ax + f);
  const erfc = Math.exp(-ax * ax) / Math.sqrt(Math.PI) / (ax + f);
  return Math.sign(x) * (1 - erfc);
}

/** A cast; `half`: to FLOAT16 or BFLOAT16, rounded there (to nearest, ties to even) and held as float. */
export function castFold(a: Const, to: ConstType, half?: 'f16' | 'bf16'): Const {
  const round = half === 'f16' ? toF16 : half === 'bf16' ? toBf16 : Math.fround;
  const data = a.data.map((v) => (to === 'bool' ? +(v !== 0) : to === 'int' ? Math.trunc(v) : round(v)));
  return { type: to, shape: a.shape, data };
}

/** v rounded to IEEE half precision (to nearest, ties to even; past 65504 to infinity), as a number. */
export function toF16(v: number): number {
  if (!Number.isFinite(v) || v === 0) return v;
  const a = Math.abs(v);
  // the value's binade, no lower than the subnormals' (their spacing is 2^-24)
  let e = Math.max(Math.floor(Math.log2(a)), -14);
  if (e > -14 && 2 ** e > a) e--;
  if (2 ** (e + 1) <= a) e++;
  const ulp = 2 ** (e - 10), q = a / ulp, fl = Math.floor(q);
  const r = q - fl > 0.5 || (q - fl === 0.5 && fl % 2 === 1) ? fl + 1 : fl;
  const out = r * ulp;
  return Math.sign(v) * (out > 65504 ? Infinity : out);
}

/** v rounded to bfloat16 (fp32's top 16 bits; to nearest, ties to even), as a number. */
export function toBf16(v: number): number {
  if (!Number.isFinite(v)) return v;
  const f = new Float32Array([v]), u = new Uint32Array(f.buffer);
  u[0] = (u[0] + 0x7fff + ((u[0] >>> 16) & 1)) & 0xffff0000;
  return f[0];
}

export function reshapeFold(a: Const, shape: readonly number[]): Const {
  if (numelOf(shape) !== a.data.length) throw new FoldError(`cannot reshape [${a.shape.join(',')}] to [${shape.join(',')}]`);
  return { type: a.type, shape: [...shape], data: a.data };
}

export function transposeFold(a: Const, perm: readonly number[]): Const {
  const shape = perm.map((p) => a.shape[p]);
  const xs = strides(a.shape);
  const n = a.data.length;
  const data = new Float64Array(n);
  const idx = new Array<number>(shape.length).fill(0);
  for (let i = 0; i < n; i++) {
    let o = 0;
    for (let d = 0; d < shape.length; d++) o += idx[d] * xs[perm[d]];
    data[i] = a.data[o];
    for (let d = shape.length - 1; d >= 0; d--) { if (++idx[d] < shape[d]) break; idx[d] = 0; }
  }
  return { type: a.type, shape, data };
}

/** x[..., start:end:step, ...] on one axis (start/end already clamped, like ONNX Slice). */
export function sliceAxisFold(a: Const, axis: number, start: number, end: number, step: number): Const {
  const len = step > 0 ? Math.max(0, Math.ceil((end - start) / step)) : Math.max(0, Math.ceil((start - end) / -step));
  const shape = a.shape.map((d, i) => (i === axis ? len : d));
  const outer = numelOf(a.shape.slice(0, axis)), inner = numelOf(a.shape.slice(axis + 1)), dim = a.shape[axis];
  const data = new Float64Array(outer * len * inner);
  let k = 0;
  for (let o = 0; o < outer; o++)
    for (let j = 0; j < len; j++)
      for (let i = 0; i < inner; i++) data[k++] = a.data[(o * dim + start + j * step) * inner + i];
  return { type: a.type, shape, data };
}

/** ONNX Slice's clamping of one (start, end, step) against a dim. */
export function clampSlice(start: number, end: number, step: number, dim: number): [number, number] {
  if (step === 0) throw new FoldError('Slice step 0');
  const norm = (v: number) => (v < 0 ? v + dim : v);
  let s = norm(start), e = norm(end);
  // (a negative step clamps its start into [0, dim-1], as the ONNX spec and
  // onnxruntime do; [-1, dim-1] had made a start below -dim an empty slice)
  if (step > 0) { s = Math.min(Math.max(s, 0), dim); e = Math.min(Math.max(e, 0), dim); } else { s = Math.min(Math.max(s, 0), dim - 1); e = Math.min(Math.max(e, -1), dim - 1); }
  return [s, e];
}

export function concatFold(parts: readonly Const[], axis: number): Const {
  const r = parts[0].shape.length;
  for (const p of parts) if (p.shape.length !== r || p.shape.some((d, i) => i !== axis && d !== parts[0].shape[i])) throw new FoldError('Concat operands differ outside the axis');
  const outer = numelOf(parts[0].shape.slice(0, axis)), inner = numelOf(parts[0].shape.slice(axis + 1));
  const total = parts.reduce((s, p) => s + p.shape[axis], 0);
  const data = new Float64Array(outer * total * inner);
  let k = 0;
  for (let o = 0; o < outer; o++) for (const p of parts) {
    const len = p.shape[axis] * inner;
    for (let i = 0; i < len; i++) data[k++] = p.data[o * len + i];
  }
  const type: ConstType = parts.some((p) => p.type === 'float') ? 'float' : parts[0].type;
  return { type, shape: parts[0].shape.map((d, i) => (i === axis ? total : d)), data };
}

export function gatherFold(a: Const, indices: Const, axis: number): Const {
  const dim = a.shape[axis];
  const idx = ints(indices, 'Gather indices').map((i) => {
    const j = i < 0 ? i + dim : i;
    if (!(j >= 0 && j < dim)) throw new FoldError(`Gather index ${i} is outside [${-dim}, ${dim})`);
    return j;
  });
  const outer = numelOf(a.shape.slice(0, axis)), inner = numelOf(a.shape.slice(axis + 1));
  const shape = [...a.shape.slice(0, axis), ...indices.shape, ...a.shape.slice(axis + 1)];
  checkSize(shape, 'a Gather result');
  const data = new Float64Array(numelOf(shape));
  let k = 0;
  for (let o = 0; o < outer; o++) for (const j of idx) for (let i = 0; i < inner; i++) data[k++] = a.data[(o * dim + j) * inner + i];
  return { type: a.type, shape, data };
}

export function whereFold(c: Const, a: Const, b: Const): Const {
  const shape = broadcastShapes(c.shape, a.shape, b.shape);
  const cc = expandTo(c, shape), aa = expandTo(a, shape), bb = expandTo(b, shape);
  return { type: a.type === 'float' || b.type === 'float' ? 'float' : a.type, shape, data: cc.data.map((v, i) => (v ? aa.data[i] : bb.data[i])) };
}

export function triluFold(a: Const, k: number, upper: boolean): Const {
  const r = a.shape.length;
  if (r < 2) throw new FoldError('Trilu needs rank >= 2');
  const R = a.shape[r - 2], C = a.shape[r - 1];
  const data = a.data.slice();
  for (let i = 0; i < data.length; i++) {
    const col = i % C, row = Math.floor(i / C) % R;
    const keep = upper ? col - row >= k : col - row <= k;
    if (!keep) data[i] = 0;
  }
  return { type: a.type, shape: a.shape, data };
}

export function rangeFold(start: Const, limit: Const, delta: Const): Const {
  const s = start.data[0], l = limit.data[0], d = delta.data[0];
  if (d === 0) throw new FoldError('Range delta 0');
  const n = Math.max(Math.ceil((l - s) / d), 0);
  checkSize([n], 'a Range');
  return { type: start.type, shape: [n], data: Float64Array.from({ length: n }, (_, i) => s + i * d) };
}

export function reduceFold(kind: 'ReduceSum' | 'ReduceMean' | 'ReduceMax' | 'ReduceMin' | 'ReduceProd', a: Const, axes: readonly number[], keep: boolean): Const {
  let cur = a;
  for (const ax of [...axes].sort((x, y) => y - x)) {
    const outer = numelOf(cur.shape.slice(0, ax)), dim = cur.shape[ax], inner = numelOf(cur.shape.slice(ax + 1));
    const data = new Float64Array(outer * inner);
    for (let o = 0; o < outer; o++) for (let i = 0; i < inner; i++) {
      let acc = kind === 'ReduceMax' ? -Infinity : kind === 'ReduceMin' ? Infinity : kind === 'ReduceProd' ? 1 : 0;
      for (let j = 0; j < dim; j++) {
        const v = cur.data[(o * dim + j) * inner + i];
        acc = kind === 'ReduceMax' ? Math.max(acc, v) : kind === 'ReduceMin' ? Math.min(acc, v) : kind === 'ReduceProd' ? acc * v : acc + v;
      }
      data[o * inner + i] = kind === 'ReduceMean' ? acc / dim : acc;
    }
    cur = { type: cur.type, shape: cur.shape.map((d, i) => (i === ax ? 1 : d)), data };
  }
  const shape = keep ? cur.shape : cur.shape.filter((_, i) => !axes.includes(i));
  return { type: cur.type, shape, data: cur.data };
}
