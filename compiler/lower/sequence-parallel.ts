// Sequence parallelism: the forward Graph at full sequence length T -> the
// forward Graph of one of P ranks, each holding T/P tokens (ring attention,
// as Colossal-AI's sequence parallelism; native/ring/README.md).
//
// Takes a forward Graph (from import) and P >= 2. Gives the rank-local forward
// Graph, the same for every rank, and the sharding the runtime needs:
//  - data inputs [B,T,...] become [B,T/P,...]: the rank's zigzag chunks r and
//    2P-1-r (the sequence cut into 2P chunks), which the runtime slices out;
//  - causalAttention(qkv) becomes ringAttention(qkv): the rank's queries against
//    every rank's keys, k/v blocks passed around the ring; it keeps the log-sum-exp
//    per row for the backward pass instead of the T x T attention matrix;
//  - a parameter broadcast along the sequence (GPT's wpe [T,C] added to the
//    [B,T,C] embedding) becomes a gather of the rank's rows, embedding(positions,
//    wpe), where positions [T/P] is a new i32 input the runtime fills with the
//    rank's token positions;
//  - token-wise ops (norms, matmuls with a parameter, elementwise math,
//    embedding lookups, the cross-entropy) just get the smaller shape, so the
//    loss is the mean over the rank's tokens; the mean of the P rank losses is
//    the loss of the whole sequence (every rank holds as many tokens).
// Rejects, as UserErrors: T not divisible by 2P; a model without a
// causalAttention op; an op that mixes sequence positions which this pass cannot
// shard (named with its model line); a loss that is not a cross-entropy over
// the sequence.
// Keeps true: parameters (names, shapes, init) and op locations unchanged;
// program order; the loss is still one scalar. Cost: O(ops + tensors).

import { GraphBuilder, producers } from '../ir/graph.js';
import { inferOutputs, ringSendBytes, ringWorkspaceBytes } from '../ir/ops.js';
import type { Graph, OpKind, Tensor } from '../ir/types.js';
import type { PlanInstruction } from '../plan/types.js';
import { formatLoc, shapeStr } from '../ir/types.js';
import { diag } from '../../src/diagnostics.js';

/** How the runtime fills a rank's data inputs (tensor ids of the rank-local graph). */
export interface SpSharding {
  readonly ranks: number;
  /** The whole sequence length T. */
  readonly seq: number;
  /** Inputs cut along `axis` (the sequence axis); fullShape is the unsharded input. */
  readonly inputs: readonly { readonly tensor: number; readonly name: string; readonly axis: number; readonly fullShape: readonly number[] }[];
  /** The i32 input [T/P] holding the rank's positions (absent when no parameter is broadcast along the sequence). */
  readonly positions?: number;
}

/** The most ranks a ring of threads takes (the native createRingGroup's limit). */
export const MAX_SP_RANKS = 1024;

/** Positions of chunk c of the 2P zigzag chunks of T tokens (T divisible by 2P). */
function chunkPositions(T: number, P: number, c: number): number[] {
  const len = T / (2 * P);
  return Array.from({ length: len }, (_, i) => c * len + i);
}

/** The token positions rank r holds, in its local order: chunk r, then chunk 2P-1-r. */
export function zigzagPositions(T: number, P: number, r: number): number[] {
  return [...chunkPositions(T, P, r), ...chunkPositions(T, P, 2 * P - 1 - r)];
}

/** Ops that act on each token alone, so they can run on any subset of tokens. */
const TOKEN_WISE: ReadonlySet<OpKind> = new Set<OpKind>([
  'matmul', 'add', 'mul', 'sub', 'div', 'gelu', 'layerNorm', 'rmsNorm', 'softmax', 'logSoftmax', 'embedding',
  'crossEntropy', 'affine', 'powScalar', 'unary', 'silu', 'where', 'cast',
]);

/** Of those, the ones that combine the elements of their first operand's last axis (which must not be the sequence). */
const ACROSS_LAST_AXIS: ReadonlySet<OpKind> = new Set<OpKind>(['matmul', 'layerNorm', 'rmsNorm', 'softmax', 'logSoftmax', 'crossEntropy']);

/** The P values 2P divides T for (what --sp accepts for this sequence length), up to `limit`. */
function validRanks(T: number, limit = 64): number[] {
  const out: number[] = [];
  for (let p = 2; p <= limit && 2 * p <= T; p++) if (T % (2 * p) === 0) out.push(p);
  return out;
}

export function lowerSequenceParallel(g: Graph, P: number, source: string): { graph: Graph; sharding: SpSharding } {
  const attention = g.ops.filter((op) => op.kind === 'causalAttention');
  if (attention.length === 0) {
    const other = g.ops.find((op) => op.kind === 'attention');
    throw diag.spModel(other
      ? `${formatLoc(other.loc)}: --sp shards causalAttention (fused qkv, as models/gpt.ts); this model's attention op (separate q, k, v) is not supported yet`
      : `${source}: --sp needs a causalAttention op to shard along the sequence; this model has none`);
  }
  const T = g.tensors[attention[0].inputs[0]].shape[1];
  if (T % (2 * P) !== 0) {
    const ok = validRanks(T);
    throw diag.spRanks(`--sp ${P}: the sequence of ${T} tokens does not cut into ${2 * P} zigzag chunks of equal length (2P must divide seq)${ok.length ? `; try --sp ${ok.slice(0, 6).join(', ')}` : ''}`);
  }
  const R = T / P;

  const b = new GraphBuilder(g.name);
  const map = new Int32Array(g.tensors.length).fill(-1);
  const seqAxis = new Int32Array(g.tensors.length).fill(-1); // of the original tensor; -1: not along the sequence
  const cut = (shape: readonly number[], axis: number) => shape.map((d, i) => (i === axis ? R : d));
  const inputs: { tensor: number; name: string; axis: number; fullShape: number[] }[] = [];
  let positions: Tensor | undefined;

  // inputs and parameters first, in tensor order (ids of the forward tensors stay in order)
  const producer = producers(g);
  for (const t of g.tensors) {
    if (producer[t.id] >= 0) continue;
    if (t.role === 'input') {
      if (t.shape.length < 2 || t.shape[1] !== T)
        throw diag.spOp(`${source}: input ${t.name}${shapeStr(t.shape)} has no sequence axis of ${T} tokens at axis 1; --sp cuts every data input along it`);
      seqAxis[t.id] = 1;
      const nt = b.tensor({ ...t, shape: cut(t.shape, 1) });
      inputs.push({ tensor: nt.id, name: nt.name, axis: 1, fullShape: [...t.shape] });
      map[t.id] = nt.id;
    } else {
      map[t.id] = b.tensor({ ...t }).id;
    }
  }

  for (const op of g.ops) {
    const where = `${formatLoc(op.loc)}: --sp cannot shard ${op.kind}`;
    const sharded = op.inputs.filter((t) => seqAxis[t] >= 0);
    let ins = op.inputs.map((t) => map[t]);
    let kind = op.kind;
    let attrs = op.attrs;
    let outAxis = -1;
    if (sharded.length > 0) {
      const axis = seqAxis[sharded[0]];
      if (op.kind === 'causalAttention') {
        if (axis !== 1) throw diag.spOp(`${where}: its qkv is cut along axis ${axis}, not the sequence axis 1`);
        kind = 'ringAttention';
        attrs = { heads: op.attrs.heads, ranks: P };
        outAxis = 1;
      } else if (TOKEN_WISE.has(op.kind)) {
        const a = g.tensors[op.inputs[0]];
        if (seqAxis[a.id] < 0) throw diag.spOp(`${where}: its first operand ${a.name}${shapeStr(a.shape)} holds every position while another is cut along the sequence (it mixes sequence positions)`);
        if (axis >= a.shape.length - 1 && ACROSS_LAST_AXIS.has(op.kind))
          throw diag.spOp(`${where} along the sequence axis ${axis} of ${a.name}${shapeStr(a.shape)}: it works across the last axis (it mixes sequence positions)`);
        ins = op.inputs.map((t, k) => {
          if (k === 0 || seqAxis[t] >= 0) {
            if (seqAxis[t] >= 0 && seqAxis[t] - g.tensors[t].shape.length !== axis - a.shape.length && op.kind !== 'embedding' && op.kind !== 'crossEntropy')
              throw diag.spOp(`${where}: its operands are cut along different axes (it mixes sequence positions)`);
            return map[t];
          }
          const x = g.tensors[t];
          // a replicated operand aligned right against a: does it reach the sequence axis?
          const reaches = x.shape.length >= a.shape.length - axis;
          if (!reaches || op.kind === 'matmul' || op.kind === 'embedding') return map[t];
          const gather = x.role === 'param16' && x.shape.length === a.shape.length - axis && x.shape.length === 2 && x.shape[0] === T;
          if (!gather) throw diag.spOp(`${where}: operand ${x.name}${shapeStr(x.shape)} is broadcast along the sequence axis of ${a.name}${shapeStr(a.shape)} and is not a [T,C] parameter whose rows can be gathered`);
          positions ??= b.tensor({ name: 'sp.positions', shape: [R], dtype: 'i32', role: 'input' });
          return b.op('embedding', [positions.id, map[t]], {}, { names: [`${x.name}.rows`], role: 'activation' }, 'forward', op.loc)[0].id;
        });
        outAxis = op.kind === 'crossEntropy' ? -1 : axis;
      } else {
        // (rope acts token by token but needs each token's absolute position, which a rank's slice does not carry)
        if (kind === 'rope') throw diag.spOp(`${where}: rope needs each token's absolute position, which --sp does not give a rank's tokens yet (--sp shards causalAttention and token-wise ops only)`);
        throw diag.spOp(`${where}: it mixes sequence positions (--sp shards causalAttention and token-wise ops only)`);
      }
    }
    const specs = inferOutputs(kind, ins.map((t) => b.tensors[t]), attrs);
    const outs = specs.map((s, k) => {
      const old = g.tensors[op.outputs[k]];
      const name = kind === 'ringAttention' && k === 1 ? `${g.tensors[op.outputs[0]].name}.lse` : old.name;
      return b.tensor({ name, shape: s.shape, dtype: s.dtype, role: old.role });
    });
    op.outputs.forEach((t, k) => { map[t] = outs[k].id; if (outAxis >= 0) seqAxis[t] = outAxis; });
    b.opWith(kind, ins, outs.map((t) => t.id), attrs, op.phase, op.loc);
  }

  const lossOp = producer[g.loss] >= 0 ? g.ops[producer[g.loss]] : undefined;
  if (!lossOp || lossOp.kind !== 'crossEntropy' || !lossOp.inputs.every((t) => seqAxis[t] >= 0))
    throw diag.spOp(`${lossOp ? formatLoc(lossOp.loc) : source}: --sp needs the loss to be a crossEntropy over the sequence (the mean over each rank's tokens), got ${lossOp?.kind ?? 'no op'}`);
  const graph = b.build(map[g.loss], g.precision);
  return { graph, sharding: { ranks: P, seq: T, inputs, ...(positions ? { positions: positions.id } : {}) } };
}

/**
 * What rank `rank` sends around the ring per step and the largest collective's
 * memory outside the arenas (a plan's sp.perRank numbers, which the plan
 * reader recomputes: 0 had been taken, and run then reported "plan 0").
 */
export function rankRingNumbers(g: Graph, instructions: readonly PlanInstruction[], rank: number): { ringSendBytes: { attention: number; allReduce: number }; ringWorkspaceBytes: number } {
  let attention = 0, allReduce = 0, workspace = 0;
  for (const x of instructions) {
    if (x.kind !== 'run') continue;
    const op = g.ops[x.op];
    const ins = op.inputs.map((t) => g.tensors[t]);
    const bytes = ringSendBytes(op.kind, ins, op.attrs, rank);
    if (op.kind === 'allReduce') allReduce += bytes; else attention += bytes;
    workspace = Math.max(workspace, ringWorkspaceBytes(op.kind, ins, op.attrs));
  }
  return { ringSendBytes: { attention, allReduce }, ringWorkspaceBytes: workspace };
}
