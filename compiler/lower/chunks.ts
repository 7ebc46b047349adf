// Parameter groups in chunks: a forward Graph -> the same function with each
// block's MLP and attention as K parallel parts, so that every large parameter
// group is K smaller ones the partitioner can place apart (issue 5: "large
// tensors may be split into chunks"; docs/BENCHMARKS.md, forty-ninth session:
// bench/compile/gpt-chunked.ts written so by hand took gpt3-13b/h100's gap
// 2.42 -> 1.85 %).
//
// Takes a forward Graph (from import) and K >= 2. Finds two patterns, every op
// of them reading only what the pattern names and its intermediates read by the
// next op alone, each weight and bias a trained parameter read by this op only:
//  - MLP: y = matmul(f(matmul(x, W1 [C,H]) + b1 [H]), W2 [H,D]), f an
//    elementwise gelu: split along H, part k the columns kH/K..(k+1)H/K of W1
//    and b1 and the same rows of W2; y = the sum of the parts;
//  - attention: y = matmul(causalAttention(matmul(x, Wqkv [C,3C]) + bqkv, NH),
//    Wp [C,D]): split by heads, part k heads kNH/K..(k+1)NH/K: of Wqkv and bqkv
//    the q, k and v columns of those heads (three ranges), of Wp their rows;
//    causalAttention(., NH/K) of the part.
// Gives the new forward Graph: each part's parameters are new param16 tensors
// named `${name}#${k}` (param the same), their init the whole one's spec and
// their `slice` the ranges of the whole parameter they hold, which the
// optimizer's lowering gives their state too and by which the runtime makes
// their first values and reads and writes checkpoints as the whole's.
// src/compile.ts tries it (chunksMayPay) and keeps the faster plan.
// Keeps true: the function (the sum of the parts is the whole's output, up to
// the order of floating-point sums); every other op and tensor as it was, in
// program order; op locations. Cost: O(ops + tensors).

import { consumers, GraphBuilder, producers } from '../ir/graph.js';
import type { Graph, Op, Tensor } from '../ir/types.js';

interface Pattern {
  kind: 'mlp' | 'attention';
  /** first matmul, bias add, the function or attention, second matmul */
  ops: [Op, Op, Op, Op];
  w1: Tensor; b1: Tensor; w2: Tensor;
}

export function chunkBlocks(g: Graph, K: number): Graph {
  if (!(Number.isInteger(K) && K >= 2)) throw new Error(`chunkBlocks: K must be an integer >= 2, got ${K}`);
  const cons = consumers(g), prod = producers(g);
  const trained = (t: number, by: number) => { const x = g.tensors[t]; return x.role === 'param16' && !x.frozen && prod[t] < 0 && cons[t].length === 1 && cons[t][0] === by; };
  const only = (t: number, kind: Op['kind']) => { const c = cons[t]; return c.length === 1 && g.ops[c[0]].kind === kind ? g.ops[c[0]] : undefined; };
  const patterns = new Map<number, Pattern>(); // by the first matmul's id
  const used = new Set<number>();
  for (const m1 of g.ops) {
    if (m1.kind !== 'matmul' || m1.attrs.transB || m1.phase !== 'forward') continue;
    const w1 = m1.inputs[1];
    if (!trained(w1, m1.id) || g.tensors[w1].shape.length !== 2) continue;
    const a1 = only(m1.outputs[0], 'add');
    if (!a1 || a1.inputs[0] !== m1.outputs[0] || !trained(a1.inputs[1], a1.id) || g.tensors[a1.inputs[1]].shape.length !== 1) continue;
    const H = g.tensors[w1].shape[1];
    const f = cons[a1.outputs[0]].length === 1 ? g.ops[cons[a1.outputs[0]][0]] : undefined;
    if (!f) continue;
    let kind: Pattern['kind'];
    if (f.kind === 'gelu' && H % K === 0) kind = 'mlp';
    else if (f.kind === 'causalAttention' && H % 3 === 0 && (f.attrs.heads ?? 0) % K === 0) kind = 'attention';
    else continue;
    const y = f.outputs[0];
    // (the attention's second output is its saved probabilities, which only its backward reads)
    if (f.outputs.slice(1).some((t) => cons[t].length > 0)) continue;
    const m2 = only(y, 'matmul');
    if (!m2 || m2.attrs.transB || m2.inputs[0] !== y || !trained(m2.inputs[1], m2.id)) continue;
    // (patterns do not overlap: an MLP of three matmuls is one pattern and a matmul, not two sharing one)
    if ([m1, a1, f, m2].some((o) => used.has(o.id))) continue;
    for (const o of [m1, a1, f, m2]) used.add(o.id);
    patterns.set(m1.id, { kind, ops: [m1, a1, f, m2], w1: g.tensors[w1], b1: g.tensors[a1.inputs[1]], w2: g.tensors[m2.inputs[1]] });
  }

  const b = new GraphBuilder(g.name);
  const map = new Int32Array(g.tensors.length).fill(-1); // old tensor -> new
  const inPattern = new Set<number>();
  for (const p of patterns.values()) for (const o of p.ops.slice(1)) inPattern.add(o.id);
  const copy = (t: number): number => {
    if (map[t] < 0) {
      const x = g.tensors[t];
      map[t] = b.tensor({ name: x.name, shape: x.shape, dtype: x.dtype, role: x.role, persistent: x.persistent, param: x.param, init: x.init, frozen: x.frozen }).id;
    }
    return map[t];
  };
  /** A part of parameter x: the given ranges of its axis. */
  const part = (x: Tensor, k: number, axis: number, ranges: [number, number][]): number => {
    const shape = [...x.shape];
    shape[axis] = ranges.reduce((a, [s, e]) => a + e - s, 0);
    const t = b.tensor({ name: `${x.name}#${k}`, shape, dtype: x.dtype, role: x.role, persistent: x.persistent, param: `${x.param ?? x.name}#${k}`, init: x.init, slice: { of: x.param ?? x.name, whole: x.shape, axis, ranges } });
    return t.id;
  };
  // inputs and persistent tensors keep their ids' order as far as they are copied first
  for (const op of g.ops) {
    if (inPattern.has(op.id)) continue;
    const p = patterns.get(op.id);
    if (!p) {
      const ins = op.inputs.map(copy);
      const outs = op.outputs.map(copy);
      b.opWith(op.kind, ins, outs, op.attrs, op.phase, op.loc);
      continue;
    }
    const [m1, a1, f, m2] = p.ops;
    const x = copy(m1.inputs[0]);
    const H = p.w1.shape[1];
    let sum = -1;
    for (let k = 0; k < K; k++) {
      let cols: [number, number][], rows: [number, number][];
      if (p.kind === 'mlp') { const h = H / K; cols = [[k * h, (k + 1) * h]]; rows = cols; }
      else { const C = H / 3, h = C / K; cols = [0, 1, 2].map((q): [number, number] => [q * C + k * h, q * C + (k + 1) * h]); rows = [[k * h, (k + 1) * h]]; }
      const w1 = part(p.w1, k, 1, cols), b1 = part(p.b1, k, 0, cols);
      const [t1] = b.op('matmul', [x, w1], m1.attrs, { names: [`${g.tensors[m1.outputs[0]].name}#${k}`], role: 'activation' }, m1.phase, m1.loc);
      const [t2] = b.op('add', [t1.id, b1], a1.attrs, { names: [`${g.tensors[a1.outputs[0]].name}#${k}`], role: 'activation' }, a1.phase, a1.loc);
      const fAttrs = p.kind === 'attention' ? { ...f.attrs, heads: (f.attrs.heads ?? 0) / K } : f.attrs;
      const fOut = b.op(f.kind, [t2.id], fAttrs, { names: f.outputs.map((t) => `${g.tensors[t].name}#${k}`), role: 'activation' }, f.phase, f.loc);
      const w2 = part(p.w2, k, 0, rows);
      const last = k === K - 1;
      const [t4] = b.op('matmul', [fOut[0].id, w2], m2.attrs, { names: [`${g.tensors[m2.outputs[0]].name}#${k}`], role: 'activation' }, m2.phase, m2.loc);
      if (sum < 0) { sum = t4.id; continue; }
      // (the last sum is the whole's output tensor, so its readers read it as before)
      if (last) { const y = copy(m2.outputs[0]); b.opWith('add', [sum, t4.id], [y], {}, m2.phase, m2.loc); sum = y; }
      else sum = b.op('add', [sum, t4.id], {}, { names: [`${g.tensors[m2.outputs[0]].name}#sum${k}`], role: 'activation' }, m2.phase, m2.loc)[0].id;
    }
  }
  return b.build(copy(g.loss), g.precision);
}
