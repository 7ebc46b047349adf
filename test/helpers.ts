// Shared test helpers: an f64 interpreter of IR graphs over the native kernels
// (runOp), and tolerance checks that print the max difference.
import { expect } from 'vitest';
import { nativeAddon } from '../runtime/binding.js';
import { OP_CODES, encodeAttrs } from '../compiler/ir/ops.js';
import type { Graph } from '../compiler/ir/types.js';
import { numel } from '../compiler/ir/types.js';

/** Runs ops of `g` in program order in float64; `values` holds inputs and receives every output. */
export function interpret(g: Graph, values: Map<number, Float64Array | Int32Array>, ops = g.ops): void {
  const addon = nativeAddon();
  for (const op of ops) {
    const { iattr, fattr } = encodeAttrs(op.kind, op.attrs);
    const inputs = op.inputs.map((t) => {
      const v = values.get(t);
      if (!v) throw new Error(`interpret: ${g.tensors[t].name} has no value`);
      return { shape: [...g.tensors[t].shape], data: v };
    });
    const outs = addon.runOp(OP_CODES[op.kind], 'f64', iattr, fattr, inputs, op.outputs.map((t) => ({ shape: [...g.tensors[t].shape] })));
    op.outputs.forEach((t, k) => values.set(t, outs[k] as Float64Array));
  }
}

export function randomValues(n: number, seed: number, scale = 1): Float64Array {
  let s = seed >>> 0 || 1;
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    out[i] = ((s / 4294967296) * 2 - 1) * scale;
  }
  return out;
}

/** |a - b| <= abs + rel * |b| elementwise; reports the worst element. */
export function expectClose(name: string, got: ArrayLike<number>, want: ArrayLike<number>, abs: number, rel = 0): number {
  expect(got.length, `${name}: length`).toBe(want.length);
  let worst = 0, at = -1;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i] - want[i]);
    const excess = d - (abs + rel * Math.abs(want[i]));
    if (!(excess <= 0) && (at < 0 || excess > worst)) { worst = excess; at = i; }
  }
  let maxDiff = 0;
  for (let i = 0; i < want.length; i++) maxDiff = Math.max(maxDiff, Math.abs(got[i] - want[i]));
  console.log(`${name}: max |diff| = ${maxDiff.toExponential(3)} over ${want.length} values`);
  expect(at, `${name}: element ${at} got ${got[at]}, want ${want[at]} (abs ${abs}, rel ${rel})`).toBe(-1);
  return maxDiff;
}

export const count = (shape: readonly number[]) => numel(shape);
