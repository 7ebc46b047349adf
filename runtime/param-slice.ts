// A parameter's parts (compiler/lower/chunks.ts: ParamSlice) cut from its whole
// values and pasted back: what initial values, --weights and --save do for a
// plan whose parameters are in parts. Flat f32 arrays in row-major order.

import type { ParamSlice } from '../compiler/ir/types.js';

/** Calls f(wholeIndex, partIndex, count) for each run of contiguous elements the part holds. */
function runs(s: ParamSlice, f: (at: number, to: number, count: number) => void): void {
  const outer = s.whole.slice(0, s.axis).reduce((a, d) => a * d, 1);
  const inner = s.whole.slice(s.axis + 1).reduce((a, d) => a * d, 1);
  const len = s.whole[s.axis];
  let to = 0;
  for (let o = 0; o < outer; o++) for (const [start, end] of s.ranges) { f((o * len + start) * inner, to, (end - start) * inner); to += (end - start) * inner; }
}

/** The part's values out of the whole's. */
export function cutSlice(whole: Float32Array, s: ParamSlice): Float32Array {
  let n = 0;
  runs(s, (_, __, c) => { n += c; });
  const out = new Float32Array(n);
  runs(s, (at, to, c) => out.set(whole.subarray(at, at + c), to));
  return out;
}

/** The part's values written into the whole's. */
export function pasteSlice(whole: Float32Array, part: Float32Array, s: ParamSlice): void {
  runs(s, (at, to, c) => whole.set(part.subarray(to, to + c), at));
}
