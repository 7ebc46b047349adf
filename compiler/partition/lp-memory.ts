// Memory rows of the LPs in lp.ts: each tier's capacity, in two forms.
//
// Takes the LP being built, the graph, the profile, the segments and the
// columns lp.ts made (group shares, saved activations' choices, PG and PC).
// Gives rows only (no columns). The bound LP's rows count low and are valid for
// every placement of the family and every schedule the scheduler makes of it;
// the placement LP's count high and leave the schedule room to prefetch. Keeps
// true: deterministic (fixed row order). Cost: O(K x (groups + saved
// activations)) terms, and with streamed updates at most STREAM_ROW_TERMS more;
// O(ops + operands) to find the instants.

import type { HardwareProfile } from '../cost/profiles.js';
import type { Graph } from '../ir/types.js';
import { REFETCH_GAP } from '../schedule/program.js';
import type { LinearProgram } from './lp-model.js';
import type { ParamGroup } from './lp.js';

/**
 * Memory rows, valid for every placement of the family and every schedule
 * compiler/schedule/program.ts makes of it, so the LP's optimum stays a lower
 * bound at any number of segments over the placements that offload or
 * recompute only that count's saved activations (those alive across its
 * segments; fewer segments save fewer, and an activation not saved is kept:
 * gpt3-13b/h200's wide LP is 0.277 s at 48 segments, the plans' count, and
 * 0.331 s at 4, above its plan's 0.294 s step, which offloads activations
 * that 4 segments do not save): at one instant per segment (the run of the
 * op at which the most bytes are on the GPU whatever the placement), the bytes
 * certainly on each tier there <= its capacity. The scheduler keeps a home
 * buffer from its first write to its last use and an op's operands on its own
 * tier, so at the run of op o the GPU certainly holds:
 *  - the fixed working set: every tensor the LP does not place, from its first
 *    to its last access (the loss from when it is made on; the inputs and
 *    other persistent tensors all step);
 *  - o's own operands among the placed tensors, whole (the p16 it reads, the
 *    gradient it makes, the saved activations it makes or reads);
 *  - the placed groups' persistent state on the GPU (PG) and, in fp16/bf16, the
 *    GPU-resident share of every p16 between its first and last reader (it is
 *    made at the step start; small groups' only when parameters are kept on
 *    the GPU), and with `held` its share fetched (resting on the CPU, or made
 *    there and copied up) between two reads of a cluster (heldCopies; the
 *    bound LP's second solve, the widened LPs and placementBound: its first
 *    solve only checks them, as precedenceRows' fetch-then-update rows, so
 *    that the vertex the plans are rounded from stays where it was);
 *  - a saved activation's kept share from its producer to its last reader, and
 *    its offloaded share too after its reuse when fetched back there (the
 *    copy made was dropped across a gap before it): then it stays.
 * On the CPU: the persistent state there (PC) and, in fp16/bf16, a CPU-homed
 * p16 from its first reader until its last cluster of reads begins (its home
 * is read again for each fetch). Both tiers together: the two rows' terms and
 * every saved activation alive across o that is not recomputed, whatever its
 * share kept or offloaded (from its producer to its last reader it is on the
 * GPU, the CPU or both while copied; activations never go to NVMe), within
 * both capacities; added only where it can bind (a redundant row still moves
 * the LP's vertex, and with it the plans rounded from it). Whatever else a
 * schedule holds (prefetched copies, staging, fragmentation) only adds: a
 * plan that fits satisfies every row. The rounding meets the rest by repair
 * (built.ts lpBuilt).
 */
export interface MemoryColumns {
  allGroups: readonly ParamGroup[]; small: Uint8Array; groups: ParamGroup[];
  x1: number[][]; x2: number[][]; remat: number[]; saved: number[]; keep: number[]; again: number[];
  PG: number; PC: number; keepParams: boolean;
  /** The wide bound LP with streamed updates: per placed group, the share of its update streamed to the GPU (lp.ts). */
  streamed?: number[];
  /**
   * Per placed group (fp16/bf16), the columns whose sum is the share of its
   * p16 that reaches the GPU as a copy (resting on the CPU, or made again on
   * the CPU and copied up), which the scheduler keeps across a cluster of
   * reads; a p16 made again on the GPU is made anew for each read. None
   * where recompute runs through chains (a remade activation's producers
   * then read a p16 wherever the chain reaches).
   */
  fetched: number[][];
  /** Per tensor, 1 for the groups' tensors (p16, state, gradient), small groups' too. */
  inGroup: Uint8Array;
}

/** The starts of the clusters of forward/backward reads of a tensor: reads closer than REFETCH_GAP ops share one copy (program.ts). */
export function readClusters(g: Graph, readers: readonly number[]): number[] {
  const starts: number[] = [];
  let prev = -Infinity;
  for (const r of readers) {
    if (g.ops[r].phase === 'update') continue;
    if (r - prev > REFETCH_GAP) starts.push(r);
    prev = r;
  }
  return starts;
}

/**
 * Where the scheduler (program.ts) certainly holds a copy of a parameter it
 * fetched to the GPU (a p16 resting on the CPU, or made there and copied up):
 * from a forward/backward read to the next within REFETCH_GAP ops, unless a
 * recompute reads it before (the producer of a saved activation, run again
 * at a reader of it, drops the copies it fetched): then to the first reader
 * of such an activation. Per tensor, the spans (a, b): held at every op
 * strictly between. A copy made on the GPU (a p16 cast there) is made anew
 * for each read; recompute through chains (checkpoints.ts) reruns producers
 * these spans do not see.
 */
export function heldCopies(g: Graph, prod: Int32Array, cons: number[][], saved: readonly number[], inGroup: Uint8Array): (t: number) => [number, number][] {
  const drops = new Map<number, number[]>();
  for (const t of saved) for (const x of g.ops[prod[t]].inputs) if (inGroup[x]) { const d = drops.get(x) ?? []; d.push(...cons[t]); drops.set(x, d); }
  return (t) => {
    const r = cons[t].filter((o) => g.ops[o].phase !== 'update');
    const d = drops.get(t) ?? [];
    const held: [number, number][] = [];
    for (let k = 1; k < r.length; k++) {
      if (r[k] - r[k - 1] > REFETCH_GAP) continue;
      const end = Math.min(r[k], ...d.filter((c) => c > r[k - 1]));
      if (end - r[k - 1] > 1) held.push([r[k - 1], end]);
    }
    return held;
  };
}

/**
 * The nonzeros the update rows of a streamed bound LP may take: each such row
 * names about every placed group and saved activation, so one per group is
 * quadratic (a 100 821-op GPT, 7200 groups: ~10^9 terms, past the heap;
 * llama3-405b's 884 groups, the most of any preset, ~3.4 x 10^6).
 */
const STREAM_ROW_TERMS = 4e6;

/**
 * Which placed groups (indices, in order) get a memory row at their update's
 * run in a streamed bound LP: every one while their terms stay within
 * STREAM_ROW_TERMS, else that many spread evenly over the groups (a row left
 * out only relaxes the LP: its optimum is still a bound).
 */
export function streamRowGroups(groups: number, saved: number): number[] {
  const most = Math.max(1, Math.floor(STREAM_ROW_TERMS / (groups + saved + 1)));
  if (groups <= most) return Array.from({ length: groups }, (_, i) => i);
  return Array.from({ length: most }, (_, k) => Math.floor(((k + 0.5) * groups) / most));
}

/** A GPU memory row of the bound LP: at op `at`, sum of terms <= hi. */
export type GpuMemoryRow = { at: number; terms: [number, number][]; hi: number };

/** (gpuRows: where given, each GPU row at a segment's instant is handed back too, for the turn rows, lp.ts.) */
export function boundMemoryRows(lp: LinearProgram, g: Graph, hw: HardwareProfile, seg: Int32Array, K: number, prod: Int32Array, cons: number[][], m: MemoryColumns, held: boolean, gpuRows?: GpuMemoryRow[]): (x: Float64Array) => boolean {
  const n = g.ops.length;
  const half = g.precision !== 'fp32';
  const first = new Int32Array(g.tensors.length).fill(-1), last = new Int32Array(g.tensors.length).fill(-1);
  for (const op of g.ops) for (const t of [...op.inputs, ...op.outputs]) { if (first[t] < 0) first[t] = op.id; last[t] = op.id; }
  const placed = Uint8Array.from(m.inGroup);
  for (const t of m.saved) placed[t] = 1;
  // the constant bytes at each op's run: the fixed working set and the op's own placed operands
  const atOp = new Float64Array(n + 1);
  let always = 0;
  for (const t of g.tensors) {
    if (placed[t.id]) continue;
    if (t.persistent || t.role === 'input') always += t.sizeBytes;
    else if (first[t.id] >= 0) { atOp[first[t.id]] += t.sizeBytes; atOp[t.role === 'loss' ? n : last[t.id] + 1] -= t.sizeBytes; } // the loss stays once made
  }
  for (let o = 1; o <= n; o++) atOp[o] += atOp[o - 1];
  const isGpuOp = (o: number) => g.ops[o].phase !== 'update'; // forward and backward: on the GPU in every placement of the family
  const operand = (o: number, t: number) => isGpuOp(o) && (g.ops[o].inputs.includes(t) || g.ops[o].outputs.includes(t));
  for (const op of g.ops) if (isGpuOp(op.id)) for (const t of new Set([...op.inputs, ...op.outputs])) if (placed[t]) atOp[op.id] += g.tensors[t].sizeBytes;
  // the instant of each segment: its op with the most constant bytes
  const instant = new Int32Array(K).fill(-1);
  for (let o = 0; o < n; o++) { const s = seg[o]; if (instant[s] < 0 || atOp[o] > atOp[instant[s]]) instant[s] = o; }
  // per placed p16: its forward/backward readers (first, last, start of the last cluster)
  const span = (q: ParamGroup) => {
    const r = cons[q.p16].filter(isGpuOp);
    if (r.length === 0) return { lo: -1, hi: -2, lastCluster: -1 };
    const starts = readClusters(g, r);
    return { lo: r[0], hi: r[r.length - 1], lastCluster: starts[starts.length - 1] };
  };
  const spans = m.groups.map(span);
  // and where a copy of it fetched is held (heldCopies; fp16/bf16, where p16 is not state)
  const heldOf = heldCopies(g, prod, cons, m.saved, m.inGroup);
  const heldSpans = m.groups.map((q) => (half ? heldOf(q.p16) : []));
  const heldAt = (i: number, o: number) => heldSpans[i].some(([a, b]) => a < o && o < b);
  const smallSpans = m.keepParams && half ? m.allGroups.filter((_, i) => m.small[i]).map((q) => ({ q, ...span(q) })) : [];
  // a saved activation's offloaded share is back on the GPU from its reuse to
  // its last read when its copy was dropped before the reuse (a gap of more
  // than REFETCH_GAP ops): fetched back, it stays. Otherwise the first copy
  // may last to the reuse and be dropped after it, so only the kept share counts
  const savedSpans = m.saved.map((t) => {
    const p = prod[t];
    const reuse = cons[t].find((c) => seg[c] > seg[p] + 1)!;
    const before = Math.max(p, ...cons[t].filter((c) => c < reuse));
    return { p, reuse, last: last[t], fetchedBack: reuse - before > REFETCH_GAP };
  });
  lp.row([[m.PC, 1]], -Infinity, hw.cpu.capacityBytes);
  // the most the groups' terms of a GPU and a CPU row can add up to: all their state and p16
  const placedMost = m.groups.reduce((a, q) => a + q.stateBytes + q.p16Bytes, 0);
  type Row = { terms: [number, number][]; hi: number };
  // the rows, with the held copies or without
  const rowsOf = (withHeld: boolean): Row[] => {
    // at each segment's instant; and at each update's run where the LP may
    // stream it (m.streamed: its state copied up and updated on the GPU, which
    // holds that state then beside all else alive across the update)
    const at: [number, [number, number][]][] = [...instant].filter((o) => o >= 0).map((o) => [o, []]);
    if (m.streamed) for (const i of streamRowGroups(m.groups.length, m.saved.length)) at.push([m.groups[i].adam, [[m.streamed[i], m.groups[i].stateBytes]]]);
    const rows: Row[] = [];
    for (const [o, extra] of at) {
      let c = always + atOp[o];
      const gpu: [number, number][] = [[m.PG, 1], ...extra], cpu: [number, number][] = [[m.PC, 1]];
      m.groups.forEach((q, i) => {
        const { lo, hi, lastCluster } = spans[i];
        const reads = operand(o, q.p16);
        // fp32: the resident share is in PG and the op's operand is counted whole
        if (!half) { if (reads) gpu.push([m.x1[i][0], -q.p16Bytes]); return; }
        if (lo <= o && o <= hi && !reads) gpu.push([m.x1[i][0], q.p16Bytes]);
        // (and the shares fetched: held between two reads of a cluster around o)
        if (withHeld && !reads && heldAt(i, o)) for (const col of m.fetched[i]) gpu.push([col, q.p16Bytes]);
        if (lo <= o && o < lastCluster) cpu.push([m.x1[i][1], q.p16Bytes]);
      });
      for (const { q, lo, hi } of smallSpans) if (lo <= o && o <= hi && !operand(o, q.p16)) c += q.p16Bytes;
      // (both tiers together: a saved activation not recomputed is on one of
      // them, or both, from its producer to its last reader, whatever the copies)
      const both: [number, number][] = [];
      const ownTerms = gpu.length, cOwn = c;
      let cBoth = 0;
      m.saved.forEach((t, j) => {
        const { p, reuse, last: end, fetchedBack } = savedSpans[j];
        if (o <= p || o >= end || operand(o, t)) return;
        const b = g.tensors[t].sizeBytes;
        if (o < reuse || !fetchedBack) gpu.push([m.keep[j], b]);
        else { c += b; gpu.push([m.again[j], -b]); }
        cBoth += b; both.push([m.again[j], -b]);
      });
      rows.push({ terms: gpu, hi: hw.gpu.capacityBytes - c });
      if (gpuRows && withHeld === held && extra.length === 0) gpuRows.push({ at: o, terms: gpu, hi: hw.gpu.capacityBytes - c });
      if (cpu.length > 1) rows.push({ terms: cpu, hi: hw.cpu.capacityBytes });
      // (only where it can bind: a redundant row still moves the LP's vertex)
      if (both.length && placedMost > hw.gpu.capacityBytes + hw.cpu.capacityBytes - cOwn - cBoth) {
        // the GPU's own terms but an activation's, the CPU's, and each such activation's share not recomputed
        rows.push({ terms: [...gpu.slice(0, ownTerms), ...cpu, ...both], hi: hw.gpu.capacityBytes + hw.cpu.capacityBytes - cOwn - cBoth });
      }
    }
    return rows;
  };
  for (const r of rowsOf(held)) lp.row(r.terms, -Infinity, r.hi);
  if (held) return () => false;
  // (without them: whether x breaks a row once the held copies count)
  let tight: Row[] | undefined;
  return (x) => (tight ??= rowsOf(true)).some((r) => r.terms.reduce((a, [c, v]) => a + v * x[c], 0) > r.hi + 1e-7 * Math.max(1, Math.abs(r.hi)));
}

/**
 * Memory rows of the placement LP: per segment, every tensor alive anywhere in
 * it at once (the fixed working set, the fetched copies of every parameter the
 * segment reads, the kept activations across it, the NVMe state staged for the
 * updates in it), within PLAN_CAPACITY_SHARE of each capacity. They count high
 * (not valid for the bound: a plan that fits can break them), and that is what
 * the placement needs: the bytes they overcount are the room the schedule
 * prefetches into, so the rounded plan overlaps its copies with compute.
 * Placing by the bound's rows, which count only what must be there, filled
 * the GPU to the brim and serialised the copies (gpt2-1.5b on 16 GB: 0.31 ->
 * 0.56 s; docs/BENCHMARKS.md).
 */
export const PLAN_CAPACITY_SHARE = 0.97;

export function planMemoryRows(lp: LinearProgram, g: Graph, hw: HardwareProfile, seg: Int32Array, K: number, prod: Int32Array, cons: number[][], m: MemoryColumns): void {
  const half = g.precision !== 'fp32';
  const savedIndex = new Map(m.saved.map((t, j) => [t, j]));
  type Terms = [number, number][];
  const memG = Array.from({ length: K }, () => ({ terms: [[m.PG, 1]] as Terms, c: 0 }));
  const memC = Array.from({ length: K }, () => ({ terms: [[m.PC, 1]] as Terms, c: 0 }));
  for (const t of g.tensors) {
    if (m.inGroup[t.id]) continue;
    if (t.persistent || t.role === 'input' || t.role === 'loss') { for (let s = 0; s < K; s++) memG[s].c += t.sizeBytes; continue; }
    const p = prod[t.id];
    if (p < 0 || cons[t.id].length === 0) { if (p >= 0) memG[seg[p]].c += t.sizeBytes; continue; }
    const ps = seg[p], last = seg[cons[t.id][cons[t.id].length - 1]];
    const j = savedIndex.get(t.id);
    if (j === undefined) { for (let s = ps; s <= last; s++) memG[s].c += t.sizeBytes; continue; }
    // a saved activation: whole where made and read nearby, and its fetched copy from its reuse on
    const useSegs = cons[t.id].map((c) => seg[c]);
    const reuse = Math.min(...useSegs.filter((s) => s > ps + 1));
    for (const s of new Set([ps, ...useSegs.filter((u) => u <= ps + 1)])) memG[s].c += t.sizeBytes;
    for (let s = reuse; s <= last; s++) memG[s].c += t.sizeBytes;
    // across the gap: the kept share on the GPU, the offloaded share on the CPU
    for (let s = ps + 1; s < reuse; s++) {
      memG[s].terms.push([m.keep[j], t.sizeBytes]);
      memC[s].terms.push([m.keep[j], -t.sizeBytes], [m.again[j], -t.sizeBytes]); memC[s].c += t.sizeBytes;
    }
  }
  // small groups: the gradient where made, p16 where read (everywhere when kept on the GPU)
  m.allGroups.forEach((q, i) => {
    if (!m.small[i]) return;
    memG[seg[prod[q.grad]]].c += q.gradBytes;
    const useSegs = m.keepParams ? Array.from({ length: K }, (_, s) => s) : new Set(cons[q.p16].filter((c) => c !== q.adam).map((c) => seg[c]));
    for (const s of useSegs) memG[s].c += q.p16Bytes;
  });
  m.groups.forEach((q, i) => {
    memC[seg[q.adam]].terms.push([m.x2[i][2], q.stateBytes]); // NVMe state staged in CPU memory while updated
    memG[seg[prod[q.grad]]].c += q.gradBytes;
    // each segment reading p16 fetches its non-resident share (staged on the CPU when made again)
    for (const s of new Set(cons[q.p16].filter((c) => c !== q.adam).map((c) => seg[c]))) {
      memG[s].terms.push([m.x1[i][0], -q.p16Bytes]); memG[s].c += q.p16Bytes;
      memC[s].terms.push([m.x1[i][2], q.p16Bytes]);
      if (m.remat[i] >= 0) memC[s].terms.push([m.remat[i], g.tensors[q.state[0]].sizeBytes]);
    }
  });
  for (let s = 0; s < K; s++) {
    lp.row(memG[s].terms, -Infinity, hw.gpu.capacityBytes * PLAN_CAPACITY_SHARE - memG[s].c);
    lp.row(memC[s].terms, -Infinity, hw.cpu.capacityBytes * PLAN_CAPACITY_SHARE - memC[s].c);
  }
}
