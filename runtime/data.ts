// Step data: what the runtime writes into the data inputs before each step.
// Either bound by name from a safetensors file (a tensor of the input's shape,
// reused every step, or with one extra leading dimension consumed one slice per
// step), or synthetic: a learnable token stream (a fixed random successor table,
// so a model can learn the next token) or features with a learnable label.

import type { Graph, Tensor } from '../compiler/ir/types.js';
import type { Plan } from '../compiler/plan/types.js';
import { numel, shapeStr } from '../compiler/ir/types.js';
import { diag, oneLine } from '../src/diagnostics.js';
import { Rng } from './init.js';
import { FLOAT_DTYPES, readSafetensors, toFloat64 } from './safetensors.js';

export type StepData = (step: number) => Map<number, Float64Array>;

/** Integer bound of an i32 input: the rows of the table it indexes, or the classes it labels; undefined for neither. */
function indexBound(g: Graph, input: Tensor): number | undefined {
  for (const op of g.ops) {
    if (op.kind === 'embedding' && op.inputs[0] === input.id) return g.tensors[op.inputs[1]].shape[0];
    if (op.kind === 'crossEntropy' && op.inputs[1] === input.id) { const s = g.tensors[op.inputs[0]].shape; return s[s.length - 1]; }
  }
  return undefined;
}
const intBound = (g: Graph, input: Tensor): number => indexBound(g, input) ?? 2;

export function syntheticData(g: Graph, seed: number): StepData {
  const inputs = g.tensors.filter((t) => t.role === 'input');
  const rng = new Rng(seed, 'data');
  const values = new Map<number, Float64Array>();
  const tokens = inputs.find((t) => t.dtype === 'i32' && g.ops.some((o) => o.kind === 'embedding' && o.inputs[0] === t.id));
  const targets = inputs.find((t) => t.dtype === 'i32' && g.ops.some((o) => o.kind === 'crossEntropy' && o.inputs[1] === t.id));
  if (tokens && targets && shapeStr(tokens.shape) === shapeStr(targets.shape)) {
    // a token stream where each token mostly has one fixed successor
    const V = Math.min(intBound(g, tokens), intBound(g, targets));
    const next = Array.from({ length: V }, () => rng.int(V));
    const n = numel(tokens.shape);
    const stream = new Float64Array(n + 1);
    stream[0] = rng.int(V);
    for (let i = 1; i <= n; i++) stream[i] = rng.uniform() < 0.9 ? next[stream[i - 1]] : rng.int(V);
    values.set(tokens.id, stream.slice(0, n));
    values.set(targets.id, stream.slice(1, n + 1));
  }
  const floats = inputs.filter((t) => t.dtype !== 'i32' && !values.has(t.id));
  for (const t of floats) values.set(t.id, Float64Array.from({ length: numel(t.shape) }, () => rng.normal()));
  for (const t of inputs) {
    if (values.has(t.id)) continue;
    const bound = intBound(g, t);
    const feats = floats[0] ? values.get(floats[0].id)! : undefined;
    const perRow = feats ? feats.length / numel(t.shape) : 0;
    // labels: the argmax of the first `bound` features of each row (learnable), else random
    values.set(t.id, Float64Array.from({ length: numel(t.shape) }, (_, i) => {
      if (!feats || perRow < bound) return rng.int(bound);
      let best = 0;
      for (let k = 1; k < bound; k++) if (feats[i * perRow + k] > feats[i * perRow + best]) best = k;
      return best;
    }));
  }
  return () => values;
}

/**
 * Every value of a tensor read from `file` usable as given: an integer
 * input's in [0, bound) (I64 values past 2^31 had wrapped into range and
 * trained on other ids), a float's finite in fp32 (a NaN had surfaced as the
 * optimizer's error at that slice's step), and in `half` (f16, bf16: the
 * tensor's storage) finite once rounded there too (a weight past fp16's range
 * had failed step 1 as another tensor's gradient; data past it, and bf16's,
 * had been taken); --data's inputs and --weights' parameters.
 */
export function checkValues(file: string, name: string, data: Float64Array, bound?: number, half?: 'f16' | 'bf16'): void {
  const i = badValue(data, bound, half);
  if (i >= 0) throw diag.data(file, `tensor '${name}' value ${data[i]} at index ${i} is ${valueWant(bound, half, data[i])}`);
}

/** The index of the first value that is not an integer in [0, bound) (with a bound) or finite in fp32 and in `half`, else -1. */
export function badValue(data: ArrayLike<number>, bound?: number, half?: 'f16' | 'bf16'): number {
  const inf = half === 'f16' ? HALF_ROUNDS_TO_INF : half === 'bf16' ? BF16_ROUNDS_TO_INF : Infinity;
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (bound !== undefined ? !(Number.isInteger(v) && v >= 0 && v < bound) : !(Math.abs(Math.fround(v)) < inf && Number.isFinite(Math.fround(v)))) return i;
  }
  return -1;
}

/** What a value badValue found should have been. */
export function valueWant(bound: number | undefined, half: 'f16' | 'bf16' | undefined, v: number): string {
  if (bound !== undefined) return `not an integer in [0, ${bound})`;
  if (!Number.isFinite(Math.fround(v))) return 'not finite in fp32';
  return half === 'f16' ? 'not finite in fp16 (the plan trains in fp16, whose largest value is 65504)' : 'not finite in bf16 (the plan trains in bf16, whose largest value is 3.3895e38)';
}

/** fp16's largest finite magnitude once rounded: a value at or past 65520 becomes inf. */
const HALF_ROUNDS_TO_INF = 65520;
/** bf16's: the f32 0x7f7f8000, halfway past its largest (0x7f7f), rounds to even: inf. */
const BF16_ROUNDS_TO_INF = new Float32Array(new Uint32Array([0x7f7f8000]).buffer)[0];

/** `note`: told of a tensor of the file no input takes, and that the data wraps around where `steps` is more than the file holds. */
export function fileData(g: Graph, file: string, opts: { steps?: number; note?: (message: string) => void } = {}): StepData {
  const note = opts.note;
  const tensors = readSafetensors(file);
  const slices = new Map<number, { data: Float64Array; count: number }>();
  for (const t of g.tensors.filter((x) => x.role === 'input')) {
    const st = tensors.get(t.name);
    if (!st) throw diag.data(file, `no tensor named '${t.name}' for the model input ${t.name}${shapeStr(t.shape)} (the file has: ${[...tensors.keys()].join(', ') || 'nothing'})`);
    const same = shapeStr(st.shape) === shapeStr(t.shape);
    const batched = st.shape.length === t.shape.length + 1 && shapeStr(st.shape.slice(1)) === shapeStr(t.shape);
    if (!same && !batched) throw diag.data(file, `tensor '${t.name}' has shape ${shapeStr(st.shape)}; the model input needs ${shapeStr(t.shape)} or [N,${t.shape.join(',')}]`);
    if (t.dtype === 'i32' && !['I32', 'I64'].includes(st.dtype)) throw diag.data(file, `tensor '${t.name}' is ${st.dtype}; the model input needs integers (I32 or I64)`);
    if (t.dtype !== 'i32' && !FLOAT_DTYPES.includes(st.dtype)) throw diag.data(file, `tensor '${t.name}' is ${st.dtype}; the model input needs floats`);
    const data = toFloat64(st), count = same ? 1 : st.shape[0];
    if (count < 1) throw diag.data(file, `tensor '${t.name}' has shape ${shapeStr(st.shape)}: no step's data (its leading dimension, the steps, is 0)`);
    checkValues(file, t.name, data, t.dtype === 'i32' ? indexBound(g, t) ?? 2 ** 31 : undefined, t.dtype === 'f16' || t.dtype === 'bf16' ? t.dtype : undefined);
    slices.set(t.id, { data, count });
  }
  // (inputs with different step counts had cycled apart: tokens of one step beside another's targets)
  const counts = [...slices].filter(([, v]) => v.count > 1);
  const byName = (id: number) => g.tensors[id].name;
  for (const [id, v] of counts) if (v.count !== counts[0][1].count) throw diag.data(file, `tensors '${byName(counts[0][0])}' and '${byName(id)}' hold ${counts[0][1].count} and ${v.count} steps of data; every input's must be the same`);
  // (both had gone unsaid: a tensor of the file no input took, and that step k reads slice (k - 1) mod N)
  const inputs = new Set(g.tensors.filter((x) => x.role === 'input').map((x) => x.name));
  const unused = [...tensors.keys()].filter((n) => !inputs.has(n));
  if (note && unused.length) note(`--data: ${unused.length} tensor${unused.length > 1 ? 's' : ''} of ${file} ${unused.length > 1 ? 'are' : 'is'} no input of the model and ${unused.length > 1 ? 'were' : 'was'} not read (${unused.slice(0, 3).map((n) => `'${oneLine(n)}'`).join(', ')}${unused.length > 3 ? ', …' : ''})`);
  const held = counts.length ? counts[0][1].count : 1;
  if (note && opts.steps !== undefined && opts.steps > held) note(`--data: ${file} holds ${held} step${held > 1 ? 's' : ''} of data for ${opts.steps} steps; step k reads its step ((k - 1) mod ${held}) + 1`);
  return (step: number) => {
    const m = new Map<number, Float64Array>();
    for (const [id, { data, count }] of slices) {
      const n = data.length / count;
      const k = (step - 1) % count;
      m.set(id, data.subarray(k * n, (k + 1) * n));
    }
    return m;
  };
}

// ---------------------------------------------------------------------------
// Sequence parallelism (plan.sp): every rank's graph is the rank-local one; the
// data is made (or read) at the whole sequence's shapes, then each rank gets its
// zigzag positions of it.

/** The plan's graph with its cut inputs at their whole shapes and the positions input hidden (what the data sources see). */
export function spFullGraph(plan: Plan): Graph {
  const sp = plan.sp;
  if (!sp) throw diag.usage('spFullGraph: the plan has no sp section (compile it with --sp P)');
  const full = new Map(sp.inputs.map((i) => [i.tensor, i.fullShape]));
  const tensors = plan.graph.tensors.map((t): Tensor => {
    const shape = full.get(t.id);
    if (shape) return { ...t, shape, sizeBytes: (t.sizeBytes / numel(t.shape)) * numel(shape) };
    return t.id === sp.positions ? { ...t, role: 'activation' } : t;
  });
  return { ...plan.graph, tensors };
}

/** Each rank's data: its positions along the sequence axis of every cut input, and its positions input. */
export function spRankData(plan: Plan, whole: StepData): (step: number) => Map<number, Float64Array>[] {
  const sp = plan.sp!;
  // (data at a rank's shapes had trained, half of each rank's tokens zeros; none at all failed inside the step)
  if (typeof whole !== 'function') throw diag.usage(`SequenceParallelSession: expected the data as a function of the step giving the whole sequence's inputs (syntheticData or fileData of spFullGraph(plan)), got ${whole === null ? 'null' : typeof whole}`);
  return (step) => {
    const data = whole(step);
    if (!(data instanceof Map)) throw diag.runtime(`step ${step}: the data function gave ${data === null ? 'null' : typeof data}, not a Map of tensor id to values`);
    return sp.perRank.map((rank) => {
      const m = new Map<number, Float64Array>();
      for (const input of sp.inputs) {
        const v = data.get(input.tensor);
        const shape = input.fullShape;
        if (!v || v.length !== numel(shape)) throw diag.runtime(`step ${step}: input ${input.name} needs ${numel(shape)} values at its whole shape ${shapeStr(shape)} (the data of spFullGraph(plan)), got ${v ? v.length : 'none'}`);
        const outer = numel(shape.slice(0, input.axis)), T = shape[input.axis], inner = numel(shape.slice(input.axis + 1));
        const R = rank.positions.length;
        const out = new Float64Array(outer * R * inner);
        for (let o = 0; o < outer; o++)
          for (let i = 0; i < R; i++) out.set(v.subarray((o * T + rank.positions[i]) * inner, (o * T + rank.positions[i] + 1) * inner), (o * R + i) * inner);
        m.set(input.tensor, out);
      }
      if (sp.positions !== undefined) m.set(sp.positions, Float64Array.from(rank.positions));
      return m;
    });
  };
}
