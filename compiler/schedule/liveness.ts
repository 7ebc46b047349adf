// Fast liveness estimate of one tier's peak, over op indices, for the
// partitioners' inner loops (the bisection of the min-cut calls it ~50 times).
// It follows the scheduler's rules (compiler/schedule/program.ts): a tensor
// rests on its home tier from its first write to its last use (the whole step
// when persistent); elsewhere a copy lives over each cluster of uses closer
// than REFETCH_GAP ops. The exact peak comes from the scheduler and the arena;
// callers confirm with them. Cost: O(ops + operands), typed arrays only.

import type { Tier } from '../cost/cost.js';
import type { Graph } from '../ir/types.js';
import type { Placement } from '../partition/placement.js';
import { REFETCH_GAP } from './program.js';

/** Per graph, what tierPeakEstimate needs that no placement changes: each op's operands (inputs then outputs) flattened, and each tensor's first and last touching op. */
interface GraphUses { opStart: Int32Array; operands: Int32Array; first: Int32Array; last: Int32Array }
const usesOf = new WeakMap<Graph, GraphUses>();

function graphUses(g: Graph): GraphUses {
  const known = usesOf.get(g);
  if (known) return known;
  const opStart = new Int32Array(g.ops.length + 1);
  for (const op of g.ops) opStart[op.id + 1] = op.inputs.length + op.outputs.length;
  for (let i = 0; i < g.ops.length; i++) opStart[i + 1] += opStart[i];
  const operands = new Int32Array(opStart[g.ops.length]);
  const first = new Int32Array(g.tensors.length).fill(-1);
  const last = new Int32Array(g.tensors.length).fill(-1);
  for (const op of g.ops) {
    let k = opStart[op.id];
    for (const t of op.inputs) { operands[k++] = t; if (first[t] < 0) first[t] = op.id; last[t] = op.id; }
    for (const t of op.outputs) { operands[k++] = t; if (first[t] < 0) first[t] = op.id; last[t] = op.id; }
  }
  const uses = { opStart, operands, first, last };
  usesOf.set(g, uses);
  return uses;
}

export function tierPeakEstimate(g: Graph, p: Placement, tier: Tier): number {
  const n = g.ops.length, nT = g.tensors.length;
  const { opStart, operands, first, last } = graphUses(g);
  const delta = new Float64Array(n + 2);
  // per tensor, the ops on `tier` touching it, in order (flattened lists)
  const count = new Int32Array(nT + 1);
  for (let o = 0; o < n; o++) if (p.opTier[o] === tier) for (let k = opStart[o]; k < opStart[o + 1]; k++) count[operands[k] + 1]++;
  for (let i = 1; i <= nT; i++) count[i] += count[i - 1];
  const uses = new Int32Array(count[nT]);
  const fill = count.slice(0, nT);
  for (let o = 0; o < n; o++) if (p.opTier[o] === tier) for (let k = opStart[o]; k < opStart[o + 1]; k++) uses[fill[operands[k]]++] = o;
  let base = 0;
  const span = (lo: number, hi: number, bytes: number) => { delta[lo] += bytes; delta[hi + 1] -= bytes; };
  for (const t of g.tensors) {
    const b = t.sizeBytes;
    if (p.home[t.id] === tier) {
      if (t.persistent || t.role === 'input' || t.role === 'loss') base += b;
      else if (first[t.id] >= 0) span(first[t.id], last[t.id], b);
      continue;
    }
    let lo = -1, hi = -1;
    for (let k = count[t.id]; k < count[t.id + 1]; k++) {
      const u = uses[k];
      if (lo < 0) { lo = hi = u; continue; }
      if (u - hi > REFETCH_GAP) { span(lo, hi, b); lo = u; }
      hi = u;
    }
    if (lo >= 0) span(lo, hi, b);
  }
  let cur = base, peak = base;
  for (let i = 0; i <= n; i++) { cur += delta[i]; if (cur > peak) peak = cur; }
  return peak;
}
