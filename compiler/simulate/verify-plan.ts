// Plan verifier: the invariants a plan must keep before anything executes it.
//
// Takes a Plan (as read from disk: untrusted). Gives the list of violations,
// each naming the instruction or buffer. Checks:
//  0. the graph: the IR's invariants (compiler/ir/verify.ts: ids, one
//     producer, order, shapes against the op catalog), every tensor's bytes
//     its shape x dtype, every initialiser well formed (what the runtime's
//     kernels and initialisation trust);
//  1. structure: ids are indices, streams and kinds known, operands exist,
//     waits point to earlier instructions (so no step can deadlock), buffer
//     sizes match their tensors, every buffer fits inside its tier's arena and
//     every arena inside the tier's capacity; every data input and every state
//     tensor with a buffer has one that lives through the step (its home, which
//     the runtime fills), and the loss one that outlives it;
//  2. memory: two buffers of one tier whose live ranges overlap do not overlap
//     in address;
//  3. ordering: every read of a buffer happens after (same stream earlier, or
//     through a chain of waits) the write that made it valid; every write of a
//     buffer, and its free, after the reads of the value before and the write
//     before; and every first write of a reused address after the free of its
//     previous occupant;
//  4. values: every run (a recomputed op's too) reads each input as the
//     graph's order leaves it (no op run again after its input was rewritten).
// Happens-before by vector clocks over the six streams. Cost: O(I·S + B log B + B·L),
// L = buffers alive at once.

import type { Tier } from '../cost/cost.js';
import { verifyGraph } from '../ir/verify.js';
import { dtypeBytes, numel, type Graph, type Op, type Tensor } from '../ir/types.js';
import { encodeAttrs } from '../ir/ops.js';
import type { Plan, PlanBuffer } from '../plan/types.js';
import { LastOccupant } from '../schedule/intervals.js';
import { STREAMS } from '../plan/types.js';

const TIER_NAMES: readonly Tier[] = ['gpu', 'cpu', 'nvme'];

export function verifyPlan(plan: Plan): string[] {
  const errors: string[] = [];
  const { buffers, instructions: ins, graph } = plan;
  const push = (m: string) => { if (errors.length < 50) errors.push(m); };

  for (const m of graphProblems(graph)) push(`graph: ${m}`);
  if (errors.length) return errors; // the checks below index the graph by its ids
  // (an empty opTier or home had crashed report's scheduler)
  const pl = plan.placement;
  if (pl.opTier.length !== graph.ops.length) push(`placement.opTier: ${pl.opTier.length} entries for ${graph.ops.length} ops`);
  if (pl.home.length !== graph.tensors.length) push(`placement.home: ${pl.home.length} entries for ${graph.tensors.length} tensors`);
  if (pl.remat && pl.remat.length !== graph.tensors.length) push(`placement.remat: ${pl.remat.length} entries for ${graph.tensors.length} tensors`);
  if (pl.forwardCastOnCpu && pl.forwardCastOnCpu.length !== graph.ops.length) push(`placement.forwardCastOnCpu: ${pl.forwardCastOnCpu.length} entries for ${graph.ops.length} ops`);
  if (errors.length) return errors;

  for (const tier of TIER_NAMES) {
    const t = plan.tiers[tier];
    if (t.peakBytes > t.capacityBytes) push(`tiers.${tier}: peak ${t.peakBytes} bytes exceeds capacity ${t.capacityBytes} bytes`);
  }
  // (messages name their buffer or instruction inline: text is made only for a message)
  buffers.forEach((b, i) => {
    if (b.id !== i) push(`buffers[${i}]: id ${b.id} at index ${i}`);
    const t = graph.tensors[b.tensor];
    if (!t) { push(`buffers[${i}]: tensor ${b.tensor} does not exist`); return; }
    if (!TIER_NAMES.includes(b.tier)) { push(`buffers[${i}]: unknown tier '${b.tier}'`); return; }
    if (b.sizeBytes !== t.sizeBytes) push(`buffers[${i}]: size ${b.sizeBytes} bytes, but tensor ${t.name} has ${t.sizeBytes}`);
    if (!(b.offsetBytes >= 0) || b.offsetBytes + b.sizeBytes > plan.tiers[b.tier].peakBytes)
      push(`buffers[${i}] (${t.name}): arena offset ${b.offsetBytes} + size ${b.sizeBytes} is outside the ${b.tier} arena of ${plan.tiers[b.tier].peakBytes} bytes`);
    if (b.allocAt >= ins.length || b.freeAt >= ins.length) push(`buffers[${i}]: live range [${b.allocAt}, ${b.freeAt}] outside the step`);
  });
  // homes: what the runtime writes before a step (data inputs, state) and reads after it (the loss)
  const lifelong = new Uint8Array(graph.tensors.length), kept = new Uint8Array(graph.tensors.length), buffered = new Uint8Array(graph.tensors.length);
  for (const b of buffers) {
    if (!graph.tensors[b.tensor]) continue;
    buffered[b.tensor] = 1;
    if (b.freeAt < 0) { kept[b.tensor] = 1; if (b.allocAt < 0) lifelong[b.tensor] = 1; }
  }
  graph.tensors.forEach((t) => {
    if ((t.role === 'input' || (t.persistent && buffered[t.id])) && !lifelong[t.id]) push(`tensor ${t.id} (${t.name}, ${t.role === 'input' ? 'a data input' : 'state'}): no buffer lives through the step (allocAt -1, freeAt -1) to hold it between steps`);
    // (a tensor that is not made by an op cannot be made again: remat of a data input had crashed report's scheduler)
    if (pl.remat?.[t.id] && (t.role === 'input' || t.persistent || lifelong[t.id])) push(`placement.remat[${t.id}]: ${t.name} is ${t.role === 'input' ? 'a data input' : 'state'}, which no op makes again`);
  });
  // (a home that is not where the plan keeps the tensor: report had said all state rested on the GPU)
  for (const b of buffers) if (b.allocAt < 0 && b.freeAt < 0 && graph.tensors[b.tensor] && pl.home[b.tensor] !== b.tier) push(`placement.home[${b.tensor}]: ${pl.home[b.tensor]}, but the buffer that keeps ${graph.tensors[b.tensor].name} through the step is on ${b.tier}`);
  if (graph.tensors[graph.loss] && !kept[graph.loss]) push(`the loss (tensor ${graph.loss}): no buffer keeps it after the step (freeAt -1)`);
  ins.forEach((x, i) => {
    if (x.id !== i) push(`instructions[${i}]: id ${x.id} at index ${i}`);
    if (!STREAMS.includes(x.stream)) push(`instructions[${i}]: unknown stream '${x.stream}'`);
    if (x.kind !== 'run' && x.kind !== 'copy' && x.kind !== 'free') push(`instructions[${i}]: unknown kind '${x.kind}'`);
    for (const b of x.inputs) if (!(b >= 0 && b < buffers.length)) push(`instructions[${i}]: buffer ${b} does not exist`);
    for (const b of x.outputs) if (!(b >= 0 && b < buffers.length)) push(`instructions[${i}]: buffer ${b} does not exist`);
    for (const w of x.waits) if (!(Number.isInteger(w) && w >= 0 && w < i)) push(`instructions[${i}]: waits on ${w}, which is not an earlier instruction`);
    if (x.kind === 'run') {
      const op = graph.ops[x.op];
      if (!op) push(`instructions[${i}]: op ${x.op} does not exist`);
      else if (op.inputs.length !== x.inputs.length || op.outputs.length !== x.outputs.length) push(`instructions[${i}]: operand count differs from op ${x.op} (${op.kind})`);
      else {
        op.inputs.forEach((t, k) => { const b = buffers[x.inputs[k]]; if (b && b.tensor !== t) push(`instructions[${i}]: input ${k} is a buffer of tensor ${b.tensor}, op ${x.op} reads tensor ${t}`); });
        op.outputs.forEach((t, k) => { const b = buffers[x.outputs[k]]; if (b && b.tensor !== t) push(`instructions[${i}]: output ${k} is a buffer of tensor ${b.tensor}, op ${x.op} writes tensor ${t}`); });
      }
    }
    // (a copy or free naming an op, an NVMe copy straight to the GPU, a copy or a run on another's
    // stream: each had passed here, the runtime then refused or ran it, and report's costs crashed)
    if (x.kind !== 'run' && x.op !== -1) push(`instructions[${i}]: op ${x.op} on a ${x.kind} (expected -1)`);
    if (x.kind === 'copy' && x.inputs.length === 1 && x.outputs.length === 1 && buffers[x.inputs[0]] && buffers[x.outputs[0]]) {
      const from = buffers[x.inputs[0]].tier, to = buffers[x.outputs[0]].tier;
      const stream = from === 'cpu' && to === 'gpu' ? 'h2d' : from === 'gpu' && to === 'cpu' ? 'd2h' : from === 'nvme' && to === 'cpu' ? 'nvmeRead' : from === 'cpu' && to === 'nvme' ? 'nvmeWrite' : undefined;
      if (!stream) push(`instructions[${i}]: a copy from ${from} to ${to} (copies go between the GPU and the CPU, or the CPU and NVMe)`);
      else if (x.stream !== stream) push(`instructions[${i}]: a copy from ${from} to ${to} on the ${x.stream} stream (it goes on ${stream})`);
    }
    if (x.kind === 'run') {
      if (x.stream !== 'gpu' && x.stream !== 'cpu') push(`instructions[${i}]: a run on the ${x.stream} stream (runs go on gpu or cpu)`);
      else for (const b of [...x.inputs, ...x.outputs]) if (buffers[b] && buffers[b].tier !== x.stream) { push(`instructions[${i}]: a run on the ${x.stream} stream touches buffers[${b}] on ${buffers[b].tier}`); break; }
    }
    if (x.kind === 'copy' && (x.inputs.length !== 1 || x.outputs.length !== 1)) push(`instructions[${i}]: a copy has one source and one destination`);
    if (x.kind === 'copy' && x.inputs.length === 1 && x.outputs.length === 1 && buffers[x.inputs[0]] && buffers[x.outputs[0]] && buffers[x.inputs[0]].tensor !== buffers[x.outputs[0]].tensor) push(`instructions[${i}]: a copy from a buffer of tensor ${buffers[x.inputs[0]].tensor} to one of tensor ${buffers[x.outputs[0]].tensor}`);
    if (x.kind === 'free' && (x.inputs.length !== 1 || x.outputs.length !== 0)) push(`instructions[${i}]: a free names one buffer`);
  });
  if (errors.length) return errors; // the checks below assume a well-formed plan

  // 1b. each buffer's live range is where the instructions use it: allocAt its
  // first write, freeAt its free, nothing outside (a freeAt moved early had let
  // two live buffers share bytes past the overlap sweep below: a wrong loss)
  const first = new Int32Array(buffers.length).fill(-1), last = new Int32Array(buffers.length).fill(-1);
  ins.forEach((x, i) => { for (const b of [...x.inputs, ...x.outputs]) { if (first[b] < 0) first[b] = i; last[b] = i; } });
  buffers.forEach((b, i) => {
    if (b.allocAt >= 0 && !ins[b.allocAt].outputs.includes(i)) push(`buffers[${i}]: allocAt ${b.allocAt} is not an instruction that writes it`);
    else if (b.allocAt >= 0 && first[i] < b.allocAt) push(`buffers[${i}]: used by instruction ${first[i]} before its first write at ${b.allocAt}`);
    if (b.freeAt >= 0 && (ins[b.freeAt].kind !== 'free' || ins[b.freeAt].inputs[0] !== i)) push(`buffers[${i}]: freeAt ${b.freeAt} is not its free instruction`);
    else if (b.freeAt >= 0 && last[i] > b.freeAt) push(`buffers[${i}]: used by instruction ${last[i]} after its free at ${b.freeAt}`);
  });
  if (errors.length) return errors;

  // 2. no two live buffers share bytes: sweep by start time over an address-ordered active set
  for (const tier of TIER_NAMES) {
    const start = (b: { allocAt: number }) => (b.allocAt < 0 ? -1 : b.allocAt);
    const end = (b: { freeAt: number }) => (b.freeAt < 0 ? Infinity : b.freeAt);
    const mine = buffers.filter((b) => b.tier === tier).sort((a, b) => start(a) - start(b) || a.id - b.id);
    const byEnd = [...mine].sort((a, b) => end(a) - end(b) || a.id - b.id);
    const active: PlanBuffer[] = []; // sorted by offset, pairwise disjoint
    const where = (x: PlanBuffer) => { let lo = 0, hi = active.length; while (lo < hi) { const m = (lo + hi) >> 1; if (active[m].offsetBytes < x.offsetBytes || (active[m].offsetBytes === x.offsetBytes && active[m].id < x.id)) lo = m + 1; else hi = m; } return lo; };
    let e = 0;
    for (const b of mine) {
      for (; e < byEnd.length && end(byEnd[e]) < start(b); e++) { const k = where(byEnd[e]); if (active[k] === byEnd[e]) active.splice(k, 1); }
      const lo = where(b);
      const clash = [active[lo - 1], active[lo]].find((a) => a && a.offsetBytes < b.offsetBytes + b.sizeBytes && b.offsetBytes < a.offsetBytes + a.sizeBytes);
      if (clash) {
        const [a, c] = clash.id < b.id ? [clash, b] : [b, clash];
        push(`buffers[${a.id}] and buffers[${c.id}] (${tier}): live at the same time and overlapping at bytes ${Math.max(a.offsetBytes, c.offsetBytes)}..${Math.min(a.offsetBytes + a.sizeBytes, c.offsetBytes + c.sizeBytes)}`);
        continue;
      }
      active.splice(lo, 0, b);
    }
  }
  if (errors.length) return errors;

  // 4. values: every run of an op (a recomputed one included) reads each input
  // as the graph's order leaves it there: the last op writing that tensor
  // before it in the graph is the last run writing it before it in the program
  // (a cast run again after the update that rewrote its master32 would not)
  const graphWriter = new Map<number, number>(), expected = graph.ops.map((op) => { const w = op.inputs.map((t) => graphWriter.get(t) ?? -1); for (const t of op.outputs) graphWriter.set(t, op.id); return w; });
  const written = new Map<number, number>();
  for (const x of ins) {
    if (x.kind !== 'run') continue;
    const op = graph.ops[x.op];
    op.inputs.forEach((t, k) => {
      const got = written.get(t) ?? -1;
      const by = (o: number) => (o < 0 ? 'the step\'s start' : `op ${o} (${graph.ops[o].kind})`);
      if (got !== expected[op.id][k]) push(`instructions[${x.id}]: op ${op.id} (${op.kind}) reads ${graph.tensors[t].name} as ${by(got)} left it; in the graph's order it reads it as ${by(expected[op.id][k])} left it`);
    });
    for (const t of op.outputs) written.set(t, op.id);
  }
  if (errors.length) return errors;

  // 3. happens-before by vector clocks
  const S = STREAMS.length;
  const sIndex = new Map(STREAMS.map((s, k) => [s, k]));
  const streamOf = Int8Array.from(ins, (x) => sIndex.get(x.stream)!);
  const clock = new Int32Array(ins.length * S).fill(-1);
  const lastOn = new Int32Array(S).fill(-1);
  ins.forEach((x, i) => {
    const s = streamOf[i];
    const row = i * S;
    if (lastOn[s] >= 0) for (let k = 0; k < S; k++) clock[row + k] = clock[lastOn[s] * S + k];
    for (const w of x.waits) for (let k = 0; k < S; k++) clock[row + k] = Math.max(clock[row + k], clock[w * S + k]);
    clock[row + s] = i;
    lastOn[s] = i;
  });
  const before = (w: number, i: number) => clock[i * S + streamOf[w]] >= w;

  // and every write of a buffer (an in-place update's, a copy's over it) and
  // its free happen after the reads of its value before, and after the write
  // before (a cast moved to another stream had raced the update rewriting its
  // master32: a different loss from run to run, accepted)
  const lastWrite = new Int32Array(buffers.length).fill(-1);
  const readers: number[][] = buffers.map(() => []);
  const afterReads = (i: number, b: number, what: string) => {
    for (const r of readers[b]) if (r !== i && !before(r, i)) { push(`instructions[${i}] (${ins[i].stream} ${ins[i].kind}): ${what} buffers[${b}] without waiting for instruction ${r} that reads it`); break; }
  };
  ins.forEach((x, i) => {
    for (const b of x.inputs) {
      const w = lastWrite[b];
      if (w < 0 && buffers[b].allocAt >= 0 && x.kind !== 'free') push(`instructions[${i}]: reads buffers[${b}] before anything writes it`);
      if (w >= 0 && !before(w, i)) push(`instructions[${i}] (${x.stream} ${x.kind}): reads buffers[${b}] without waiting for instruction ${w} that writes it`);
      if (x.kind === 'free') afterReads(i, b, 'frees');
      else readers[b].push(i);
    }
    for (const b of x.outputs) {
      afterReads(i, b, 'writes');
      const w = lastWrite[b];
      if (w >= 0 && w !== i && !before(w, i)) push(`instructions[${i}] (${x.stream} ${x.kind}): writes buffers[${b}] without waiting for instruction ${w} that wrote it before`);
      lastWrite[b] = i;
      readers[b] = [];
    }
  });
  // reused bytes: the first write of a buffer happens after the free of the last occupant of its bytes
  for (const tier of TIER_NAMES) {
    const mine = buffers.filter((b) => b.tier === tier && b.allocAt >= 0).sort((a, b) => a.allocAt - b.allocAt || a.id - b.id);
    const frees = buffers.filter((b) => b.tier === tier && b.freeAt >= 0).sort((a, b) => a.freeAt - b.freeAt || a.id - b.id);
    const last = new LastOccupant();
    let f = 0;
    for (const b of mine) {
      for (; f < frees.length && frees[f].freeAt < b.allocAt; f++) last.set(frees[f].offsetBytes, frees[f].offsetBytes + frees[f].sizeBytes, frees[f].freeAt);
      for (const w of last.take(b.offsetBytes, b.offsetBytes + b.sizeBytes)) {
        if (!before(w, b.allocAt)) push(`instructions[${b.allocAt}]: writes buffers[${b.id}] over bytes freed by instruction ${w} before that free has happened`);
      }
    }
  }
  return errors;
}

/** Section 0: the graph's invariants and what the runtime reads of each tensor. */
function graphProblems(g: Graph): string[] {
  const out: string[] = [];
  g.tensors.forEach((t, i) => {
    if (t.sizeBytes !== numel(t.shape) * dtypeBytes(t.dtype)) out.push(`tensors[${i}] (${t.name}): ${t.sizeBytes} bytes, but ${t.dtype} [${t.shape.join(',')}] is ${numel(t.shape) * dtypeBytes(t.dtype)}`);
    // (init null had been read as an init: a TypeError with a stack trace)
    const problem = t.init === undefined ? undefined : t.init === null || typeof t.init !== 'object' || Array.isArray(t.init) ? `is ${JSON.stringify(t.init)}, not an object` : initProblem(t.init as unknown as Record<string, unknown>, numel(t.shape), t.dtype);
    if (problem) out.push(`tensors[${i}] (${t.name}): init ${problem}`);
  });
  // the precision the tensors are stored in, and one tensor per parameter of each
  // role: the session reads a checkpoint's values by them (an fp32 plan labelled
  // fp16 had saved an empty checkpoint; two parameters of one name, one of them)
  const half = g.precision === 'fp16' ? 'f16' : g.precision === 'bf16' ? 'bf16' : g.precision === 'fp32' ? 'f32' : undefined;
  if (!half) return [`precision ${JSON.stringify(g.precision)} is not one of fp32, fp16, bf16`];
  const named = new Map<string, number>();
  g.tensors.forEach((t, i) => {
    if (t.role !== 'param16' && t.role !== 'master32') return;
    if (t.role === 'master32' && half === 'f32') out.push(`tensors[${i}] (${t.name}): a master32 copy in an fp32 graph`);
    // (frozen state may stay f32: BatchNorm's running statistics)
    if (t.role === 'param16' && !t.frozen && t.dtype !== half && t.dtype !== 'i32') out.push(`tensors[${i}] (${t.name}): a param16 of ${t.dtype} in a graph of precision ${g.precision}`);
    const key = `${t.role} ${t.param ?? t.name}`, other = named.get(key);
    if (other !== undefined) out.push(`tensors[${other}] and tensors[${i}]: two ${t.role} tensors of the parameter '${t.param ?? t.name}'`);
    named.set(key, i);
  });
  out.push(...sliceProblems(g.tensors));
  // (the count the builder gives: 123 had been printed as the model's size)
  let params = 0;
  for (const t of g.tensors) if (t.role === 'param16' && !t.frozen) params += numel(t.shape);
  if (g.paramCount !== params) out.push(`paramCount ${g.paramCount}, but its trainable param16 tensors hold ${params} values`);
  for (const t of g.tensors) if (t.frozen !== undefined && typeof t.frozen !== 'boolean') { out.push(`tensors[${t.id}] (${t.name}): frozen ${JSON.stringify(t.frozen)} is not a boolean`); break; }
  for (const op of g.ops) {
    const problem = attrProblem(op);
    if (problem) { out.push(`op ${op.id} (${op.kind}): attrs: ${problem}`); break; }
  }
  if (out.length) return out;
  try {
    return verifyGraph(g);
  } catch (e) {
    // (a graph the verifier cannot even walk: attributes of the wrong type)
    return [`cannot be checked: ${(e as Error).message}`];
  }
}

const BOOLEAN_ATTRS = ['transA', 'transB', 'erf', 'causal', 'inverse', 'ceilMode', 'countIncludePad'] as const;

/**
 * What is wrong with an op's attributes as the runtime takes them (its
 * integer and float arguments, encodeAttrs): integers where it reads
 * integers, finite numbers, booleans, eps >= 0 and at least one head or rank
 * (a fill of "7" had reached the runtime as program.ops[9].fattr[0]; eps -1
 * stopped the run on a NaN blamed on a gradient; heads 0 reached the kernel).
 */
function attrProblem(op: Op): string | undefined {
  const a = op.attrs as Record<string, unknown>;
  if (typeof a !== 'object' || a === null || Array.isArray(a)) return 'not an object';
  for (const k of BOOLEAN_ATTRS) if (a[k] !== undefined && typeof a[k] !== 'boolean') return `${k} ${JSON.stringify(a[k])} is not a boolean`;
  for (const k of ['perm', 'shape', 'strides', 'pads', 'dilations', 'kernel']) if (a[k] !== undefined && !(Array.isArray(a[k]) && (a[k] as unknown[]).every((v) => Number.isSafeInteger(v)))) return `${k} is not a list of integers`;
  if (op.kind === 'adam' && (typeof a.adam !== 'object' || a.adam === null)) return 'adam needs its hyperparameters';
  let enc: { iattr: number[]; fattr: number[] };
  try { enc = encodeAttrs(op.kind, op.attrs); } catch (e) { return (e as Error).message; }
  const i = enc.iattr.findIndex((v) => !Number.isSafeInteger(v)), f = enc.fattr.findIndex((v) => typeof v !== 'number' || !Number.isFinite(v));
  if ((op.kind === 'unary' || op.kind === 'unaryBackward') && !(enc.iattr[0] >= 0)) return `fn ${JSON.stringify(a.fn)} is not one the runtime has`;
  if (i >= 0) return `expected integers, got ${JSON.stringify(enc.iattr)}`;
  if (f >= 0) return `expected finite numbers, got ${JSON.stringify(enc.fattr)}`;
  if (a.eps !== undefined && !((a.eps as number) >= 0)) return `eps ${a.eps} is below 0`;
  for (const k of ['heads', 'kvHeads', 'ranks'] as const) if (a[k] !== undefined && !((a[k] as number) >= 1)) return `${k} ${a[k]} is below 1`;
  return undefined;
}

/**
 * What is wrong with an initialiser, if anything: its numbers finite in f32
 * (1e39 had become inf, and a gradient elsewhere was then blamed for the NaN),
 * and within f16's range where the tensor is f16.
 */
function initProblem(init: Record<string, unknown>, count: number, dtype: string): string | undefined {
  // (f16: the runtime reads the value as f32, then rounds it to f16: under
  // 65520 it is at most 65504, its largest; 65520 and past it, inf)
  const fits = (v: number) => Number.isFinite(v) && (dtype === 'f16' ? Math.abs(Math.fround(v)) < 65520 : Number.isFinite(dtype === 'i32' ? v : Math.fround(v)));
  const num = (k: string, optional = false) => (optional && init[k] === undefined) || (typeof init[k] === 'number' && fits(init[k] as number));
  switch (init.kind) {
    case 'normal': return num('std') && num('mean', true) ? undefined : `normal needs a finite std (and mean) within ${dtype}`;
    case 'constant': return num('value') ? undefined : `constant needs a finite value within ${dtype}`;
    case 'onnx': return typeof init.initializer === 'string' ? undefined : 'onnx needs an initializer name';
    case 'data': {
      if (typeof init.f32Base64 !== 'string') return 'data needs f32Base64';
      const bytes = Buffer.from(init.f32Base64, 'base64');
      if (bytes.length !== count * 4) return `data holds ${bytes.length} bytes, the tensor ${count} f32 values`;
      // (a constant, not a trained value: infinities are a mask's; NaN is no value)
      const vals = new Float32Array(count);
      new Uint8Array(vals.buffer).set(bytes);
      const bad = vals.findIndex((v) => Number.isNaN(v));
      return bad < 0 ? undefined : `data value NaN at index ${bad}`;
    }
    default: return `kind ${JSON.stringify(init.kind)} is not one of normal, constant, onnx, data`;
  }
}

/**
 * What is wrong with the tensors' parameter slices (compiler/lower/chunks.ts),
 * if anything: each well formed (of a name; its whole's dims positive
 * integers; the axis one of them; ranges in order, not overlapping, within
 * it; the tensor's shape the whole's with that axis their total; a parameter
 * or its state), not also a whole parameter's name, and the param16 slices of
 * one parameter cover its axis exactly once, with one whole shape (the
 * session cuts a part out of the whole's values and pastes it back: a range
 * past the whole had read outside it).
 */
function sliceProblems(tensors: readonly Tensor[]): string[] {
  const out: string[] = [];
  const parts = new Map<string, { whole: string; axis: number; ranges: [number, number][] }>();
  const plain = new Set(tensors.filter((t) => t.role === 'param16' && !t.slice).map((t) => t.param ?? t.name));
  for (const t of tensors) {
    const sl = t.slice as unknown;
    if (sl === undefined) continue;
    const at = `tensors[${t.id}] (${t.name}): slice`;
    if (sl === null || typeof sl !== 'object' || Array.isArray(sl)) { out.push(`${at} is ${JSON.stringify(sl)}, not an object`); continue; }
    const { of, whole, axis, ranges } = sl as Record<string, unknown>;
    if (!['param16', 'master32', 'adamM', 'adamV'].includes(t.role)) { out.push(`${at} on a ${t.role}: only a parameter and its state are cut`); continue; }
    if (typeof of !== 'string' || of === '') { out.push(`${at}: of must name the whole parameter`); continue; }
    if (!Array.isArray(whole) || whole.length !== t.shape.length || !whole.every((d) => Number.isSafeInteger(d) && d > 0)) { out.push(`${at}: whole must be the dims of the whole parameter (${t.shape.length} positive integers)`); continue; }
    if (!Number.isSafeInteger(axis) || (axis as number) < 0 || (axis as number) >= whole.length) { out.push(`${at}: axis must be one of the ${whole.length} axes`); continue; }
    const ax = axis as number, len = whole[ax] as number;
    if (!Array.isArray(ranges) || ranges.length === 0 || !ranges.every((r) => Array.isArray(r) && r.length === 2 && r.every((v) => Number.isSafeInteger(v)))) { out.push(`${at}: ranges must be [start, end] pairs of integers`); continue; }
    const rs = ranges as [number, number][];
    if (rs.some(([a, b], k) => !(a >= 0 && a < b && b <= len) || (k > 0 && a < rs[k - 1][1]))) { out.push(`${at}: ranges ${JSON.stringify(rs)} must be in order, not overlapping, within 0..${len}`); continue; }
    const held = rs.reduce((a, [x, y]) => a + y - x, 0);
    if (t.shape.some((d, k) => d !== (k === ax ? held : whole[k]))) { out.push(`${at}: shape ${JSON.stringify(t.shape)} is not the whole ${JSON.stringify(whole)} with axis ${ax} of ${held}`); continue; }
    if (plain.has(of)) { out.push(`${at}: '${of}' is also a whole parameter's name`); continue; }
    if (t.role !== 'param16') continue;
    const key = JSON.stringify(whole), p = parts.get(of);
    if (p && (p.whole !== key || p.axis !== ax)) { out.push(`${at}: another part of '${of}' has whole ${p.whole}, axis ${p.axis}`); continue; }
    if (p) p.ranges.push(...rs); else parts.set(of, { whole: key, axis: ax, ranges: [...rs] });
  }
  for (const [of, p] of parts) {
    const len = (JSON.parse(p.whole) as number[])[p.axis];
    const sorted = [...p.ranges].sort((a, b) => a[0] - b[0]);
    let at = 0;
    for (const [a, b] of sorted) { if (a !== at) break; at = b; }
    if (at !== len) out.push(`the parts of parameter '${of}' do not cover its axis ${p.axis} (0..${len}) exactly once: ${JSON.stringify(sorted)}`);
  }
  return out;
}
