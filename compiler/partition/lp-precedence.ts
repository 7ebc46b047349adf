// Precedence rows of the LPs in lp.ts: when work can happen, beside how much.
//
// Takes the LP being built, its epigraph column T (the step, in units of the
// GPU's work), the graph, the profile, the parameter groups and the columns
// lp.ts made (state and update shares, streamed shares, the last cluster's
// cast-up columns, master32's NVMe shares, the forward pass's fetches and
// offloads, the GPU work the placement puts before each gradient). Gives rows
// only (and the columns gpuWorkBefore sums into), plus a check of whether a
// solution breaks a row the LP only checks (its first solve). Keeps true:
// every row is a lower bound on the step of any schedule that runs the GPU's
// ops in program order (the scheduler's), so T stays one; deterministic (fixed
// row order). Cost: O(groups + ops) rows and terms, the suffix rows one per
// job after a sort.

import { opSeconds } from '../cost/cost.js';
import type { HardwareProfile } from '../cost/profiles.js';
import type { Graph } from '../ir/types.js';
import type { LinearProgram } from './lp-model.js';
import type { ParamGroup } from './lp.js';

/**
 * GPU work in program order (forward and backward ops, which run on the GPU in
 * every placement of this family, on one stream in program order: the
 * scheduler emits them so and the runtime and simulator run each stream in
 * order): before[o] = the least time at which o can end (o and every such op
 * before it), after[o] = the least GPU time from o's start to the end of the
 * step (o and every such op after it). Longest data-dependency chains gave a
 * bound for any order of the GPU's ops, looser: weight gradients (matmulGradB)
 * are off the chain to the input's gradient, so the chains let the
 * embedding's gradient exist well before the end of the backward pass (the
 * bounds rise 0.1-0.6 % with program order).
 */
function gpuProgramTimes(g: Graph, hw: HardwareProfile): { before: Float64Array; after: Float64Array } {
  const n = g.ops.length;
  const dur = Float64Array.from(g.ops, (op) => (op.phase === 'update' ? 0 : opSeconds(g, op, 'gpu', hw)));
  const before = new Float64Array(n), after = new Float64Array(n);
  let acc = 0;
  for (let o = 0; o < n; o++) { acc += dur[o]; before[o] = acc; }
  acc = 0;
  for (let o = n - 1; o >= 0; o--) { acc += dur[o]; after[o] = acc; }
  return { before, after };
}

/**
 * Precedence rows: the bound T >= each resource's load ignores when work can
 * happen. Two facts every schedule of a placement in this family obeys:
 *  - released work: group i's update (CPU share), its gradient's d2h and its
 *    NVMe write-back cannot start before the gradient exists, at r_i =
 *    before[producer of the gradient] (0 for a delayed update, whose gradient
 *    is the previous step's); with the fetch-then-update rows, a CPU update
 *    also waits for its gradient's copy down (copyDelays);
 *  - work with a tail: the fp16/bf16 copy of a parameter is made anew each step
 *    (cast where the state is: on the CPU for the state's non-GPU share, then
 *    h2d; in fp32 a non-GPU parameter is copied in, read from NVMe first when
 *    it lives there) and must arrive before its first forward or backward
 *    reader, after whose start at least q_i = max after[reader] of GPU time remains.
 * On one resource serving jobs one at a time, for every threshold h: the step
 * >= h + (released work with r >= h), and >= (tailed work with q >= h) + h.
 * Sorted by r (or q), the sums are suffix sums: one column and one row each.
 * Plus one chain per group: r_i + d2h(grad) + CPU update, and the cast, h2d
 * before q_i. And the forward fetches (bound LP only): every parameter's first
 * fetch (h2d, one stream) is done before its first reader, in the forward
 * pass, so before the last such reader starts and before any gradient exists:
 * the step >= F + every CPU update this step's gradients release, and >= F +
 * the GPU's work from the last first reader on (+ its updates); and, as the
 * d2h stream also runs in program order, every gradient's copy down comes
 * after the forward pass's activation offloads and its copies home of p16
 * cast on the GPU (a CPU-homed p16 whose state is there): the step >= those
 * copies + every CPU update this step's gradients release. And on NVMe
 * (where the state needs it): this step's p16 is cast from master32, so the
 * share of every master32 on NVMe is read (one stream) before the forward
 * pass's last first reader, and every write-back waits for an update, so for
 * a gradient: the step >= those reads + every write-back this step's
 * gradients release (gpt3-175b on a100-80g with 1 TB of CPU: the bound
 * 257.6 -> 305.2 s, the plan's own 291.5 -> 345.7 s, its step 351.7). In the
 * placement LPs these rows moved plans both ways (gpt3-13b/h100 1.48 -> 1.82 s,
 * gpt2-1.5b on 16 GB 0.29 -> 0.35 s): left out there. Every row is a lower
 * bound on any schedule that runs the GPU's ops in program order
 * (gpuProgramTimes), so T stays one. With the fetch-then-update rows (the
 * bound LP's second solve, the widened LPs, placementBound), a gradient's release
 * also counts the GPU work the placement puts before it in program order
 * (gpuWorkBefore): the casts of the p16 remade on the GPU at each cluster of
 * reads before it, the casts at the step's start of the p16 not remade whose
 * state is on the GPU, and the GPU's updates of the groups before it (gpt3-
 * 13b/h200: ~14 ms of casts before its first CPU-updated gradient; the bound
 * 331.4 -> 335.3 ms, its plan's placement's 342.0 -> 354.6 ms). In the first
 * solve they are only checked, as the fetch-then-update rows are: added
 * there they moved the plans rounded from its vertex both ways (gpt3-6.7b/
 * h100 0.171 -> 0.182 s, 13b/h200 0.366 -> 0.368; docs/BENCHMARKS.md,
 * sixteenth session).
 */
export function precedenceRows(lp: LinearProgram, T: number, unit: number, g: Graph, hw: HardwareProfile, groups: ParamGroup[], x2: number[][], upd: number[], streamed: number[] | undefined, upCastLast: number[], masterNvme: number[],
  link: Record<'h2d' | 'd2h' | 'nr' | 'nw', (bytes: number) => number>, prod: Int32Array, cons: number[][],
  forwardFetch: { terms: [number, number][]; c: number; lastReader: number; nr: [number, number][] }, forwardOffload: { terms: [number, number][]; c: number },
  fetchThenUpdate: boolean, follow: boolean, writesAfterFetch: boolean, gpuBefore: GpuItem[]): (x: Float64Array) => boolean {
  const { before, after } = gpuProgramTimes(g, hw);
  // the GPU's work before each gradient that the placement puts there (with
  // the fetch-then-update rows; without them, only checked: gpuWorkBefore)
  // (and before the last forward first reader: the fetch-then-update rows count the work between)
  const gradOps = groups.map((q) => prod[q.grad]).filter((gp, i) => gp >= 0 && gp < groups[i].adam);
  const L = forwardFetch.lastReader;
  const workBefore = fetchThenUpdate && gpuBefore.length ? gpuWorkBefore(lp, unit, gpuBefore, L >= 0 ? [...gradOps, L] : gradOps) : new Map<number, number>();
  const E = (gp: number): [number, number][] => { const c = workBefore.get(gp); return c === undefined ? [] : [[c, -1]]; };
  const half = g.precision !== 'fp32';
  // after the forward fetches (F, on h2d): every update released by this
  // step's gradient on the CPU, and the GPU's work from the last first reader on
  const cpuAfterF: [number, number][] = [], gpuAfterF: [number, number][] = [], nwAfterF: [number, number][] = [];
  let cpuAfterC = 0;
  groups.forEach((q, i) => {
    const gp = prod[q.grad];
    if (!(gp >= 0 && gp < q.adam)) return;
    const aC = opSeconds(g, g.ops[q.adam], 'cpu', hw), aG = opSeconds(g, g.ops[q.adam], 'gpu', hw);
    cpuAfterF.push([upd[i], -aC]); cpuAfterC += aC;
    gpuAfterF.push([upd[i], aG]);
    nwAfterF.push([x2[i][2], link.nw(q.stateBytes)]);
    if (!half) nwAfterF.push([x2[i][2], link.nw(q.p16Bytes)]); // fp32: the parameter is written back too (x1 = x2)
  });
  // the NVMe reads that make the forward pass's parameters (a p16 remade from
  // master32 on NVMe; fp32: the parameter read from NVMe) are done before any
  // gradient exists; every NVMe write-back of this step's updates comes after
  if (forwardFetch.nr.length) lp.row([[T, 1], ...[...forwardFetch.nr, ...nwAfterF].map(([c, v]): [number, number] => [c, -v * unit])], 0, Infinity);
  // the d2h stream runs in program order: every gradient's copy down (for a
  // CPU update) comes after the forward pass's activation offloads
  if (forwardOffload.terms.length) lp.row([[T, 1], ...forwardOffload.terms.map(([c, v]): [number, number] => [c, -v * unit]), ...cpuAfterF.map(([c, v]): [number, number] => [c, -v * unit])], (forwardOffload.c + cpuAfterC) * unit, Infinity);
  if (forwardFetch.terms.length) {
    const F = forwardFetch.terms.map(([c, v]): [number, number] => [c, -v * unit]);
    lp.row([[T, 1], ...F, ...cpuAfterF.map(([c, v]): [number, number] => [c, -v * unit])], (forwardFetch.c + cpuAfterC) * unit, Infinity);
    // (split: the NVMe write-backs too come after the forward fetches;
    // with master32 in CPU memory nothing else holds them back, and where the
    // moments rest on NVMe the writes are the step: gpt3-175b)
    if (writesAfterFetch && nwAfterF.length) lp.row([[T, 1], ...F, ...nwAfterF.map(([c, v]): [number, number] => [c, -v * unit])], forwardFetch.c * unit, Infinity);
    if (forwardFetch.lastReader >= 0) lp.row([[T, 1], ...F, ...gpuAfterF.map(([c, v]): [number, number] => [c, -v * unit])], (forwardFetch.c + after[forwardFetch.lastReader]) * unit, Infinity);
  }
  const violated = fetchThenUpdateRows(lp, T, unit, g, hw, groups, upd, prod, forwardFetch, before, follow ? () => 0 : link.d2h, fetchThenUpdate, gpuBefore, workBefore);
  const released: Record<'cpu' | 'd2h' | 'nw', Job[]> = { cpu: [], d2h: [], nw: [] };
  const chains: Job[] = []; // per group: its gradient, the copy down and the CPU update, one after the other
  const tailed: Record<'cpu' | 'h2d' | 'nr', Job[]> = { cpu: [], h2d: [], nr: [] };
  groups.forEach((q, i) => {
    const gpuShare = x2[i][0], nvmeShare = x2[i][2];
    const gp = prod[q.grad];
    const r = gp >= 0 && gp < q.adam ? before[gp] : 0;
    const aC = opSeconds(g, g.ops[q.adam], 'cpu', hw), down = link.d2h(q.gradBytes);
    const at = gp >= 0 && gp < q.adam ? gp : undefined;
    // (the copy down, then the update; one that follows its copy: the longer of the two, and no copy wait)
    const chain = follow ? Math.max(aC, down) : aC + down;
    chains.push({ h: r, c: chain, col: upd[i], k: -chain, at });
    released.cpu.push({ h: r, c: aC, col: upd[i], k: -aC, at, copy: at !== undefined && !follow ? down : undefined });
    released.d2h.push({ h: r, c: down, col: upd[i], k: -down, at });
    released.nw.push({ h: r, c: 0, col: nvmeShare, k: link.nw(q.stateBytes), at });
    lp.row([[T, 1], [upd[i], chain * unit], ...(at !== undefined ? E(at) : [])], (r + chain) * unit, Infinity);
    if (streamed) {
      // a streamed update: after the gradient, the update on the GPU, then
      // its state's copy home (the copy up may come before the gradient)
      const home = link.d2h(q.stateBytes), aG = opSeconds(g, g.ops[q.adam], 'gpu', hw);
      released.d2h.push({ h: r, c: 0, col: streamed[i], k: home, at });
      chains.push({ h: r, c: 0, col: streamed[i], k: aG + home, at });
      lp.row([[T, 1], [streamed[i], -(aG + home) * unit], ...(at !== undefined ? E(at) : [])], r * unit, Infinity);
    }
    let tail = -1;
    for (const c of cons[q.p16]) if (g.ops[c].phase !== 'update' && after[c] > tail) tail = after[c];
    if (tail < 0) return;
    const up = link.h2d(q.p16Bytes);
    const cast = q.cast >= 0 ? opSeconds(g, g.ops[q.cast], 'cpu', hw) : 0;
    // (cast: the share cast on the GPU instead for the last cluster of reads,
    // its master32 copied up, no less than p16's copy, left as that; castOff:
    // the shares whose p16 is not cast on the CPU for it, the state's GPU
    // share and that one)
    let castOff = gpuShare;
    if (upCastLast[i] >= 0) { castOff = lp.col(`castoff_${i}`); lp.row([[castOff, 1], [gpuShare, -1], [upCastLast[i], -1]], 0, 0); }
    tailed.h2d.push({ h: tail, c: up, col: gpuShare, k: -up });
    if (half) tailed.cpu.push({ h: tail, c: cast, col: castOff, k: -cast });
    const masterBytes = g.tensors[q.state[0]].sizeBytes; // fp16: master32 feeds the cast; fp32: the parameter itself
    tailed.nr.push({ h: tail, c: 0, col: masterNvme[i], k: link.nr(masterBytes) });
    lp.row([[T, 1], ...(castOff === gpuShare ? [[gpuShare, (up + cast) * unit] as [number, number]] : [[gpuShare, up * unit], [castOff, cast * unit]] as [number, number][])], (tail + up + cast) * unit, Infinity);
  });
  // (the CPU updates' copies down only with the fetch-then-update rows; without them, only checked)
  for (const [on, jobs] of Object.entries(released)) {
    if (jobs.some((j) => j.c > 0 || j.k !== 0)) suffixRows(lp, T, unit, on === 'cpu' && !fetchThenUpdate ? jobs.map(({ copy: _, ...j }) => j) : jobs, (j) => (j.at !== undefined ? E(j.at) : []));
  }
  for (const jobs of Object.values(tailed)) if (jobs.some((j) => j.c > 0 || j.k !== 0)) suffixRows(lp, T, unit, jobs);
  if (fetchThenUpdate) return violated;
  if (gpuBefore.length === 0) return (x) => violated(x) || suffixBroken(unit, released.cpu, x, T);
  // (without them: whether x breaks a released row once that work counts)
  const steps = workSteps(gpuBefore, gradOps);
  return (x) => {
    if (violated(x)) return true;
    const workAt = new Map<number, number>();
    let sum = 0;
    for (const [gp, items] of steps) { for (const it of items) sum += it.k * x[it.col] * unit; workAt.set(gp, sum); }
    const extra = (j: Job) => (j.at !== undefined ? workAt.get(j.at) ?? 0 : 0);
    return Object.values(released).some((jobs) => suffixBroken(unit, jobs, x, T, extra))
      || chains.some((j) => x[T] < (j.h + j.c + j.k * x[j.col]) * unit + extra(j) - 1e-7 * Math.max(1, x[T]));
  };
}

/** GPU work a placement puts on the GPU stream at op `at` (in program order): k seconds x column col (the share that runs there). */
export type GpuItem = { at: number; col: number; k: number };

/** Per op of `at` in increasing order, the items in (the op before, that op]: the steps of a prefix sum of the items by program order. */
function workSteps(items: readonly GpuItem[], at: readonly number[]): [number, GpuItem[]][] {
  const sorted = [...items].sort((a, b) => a.at - b.at || a.col - b.col);
  let k = 0;
  return [...new Set(at)].sort((x, y) => x - y).map((a) => {
    const step: GpuItem[] = [];
    for (; k < sorted.length && sorted[k].at <= a; k++) step.push(sorted[k]);
    return [a, step];
  });
}

/**
 * Per op of `at` (gradient producers), a column at least the GPU work of the
 * items at or before it (time units): E_a = E_prev + the items in (prev, a].
 */
function gpuWorkBefore(lp: LinearProgram, unit: number, items: GpuItem[], at: number[]): Map<number, number> {
  const out = new Map<number, number>();
  let prev = -1;
  for (const [a, step] of workSteps(items, at)) {
    const c = lp.col(`gpubefore_${a}`);
    lp.row([[c, 1], ...(prev >= 0 ? [[prev, -1] as [number, number]] : []), ...step.map((it): [number, number] => [it.col, -it.k * unit])], 0, 0);
    out.set(a, c);
    prev = c;
  }
  return out;
}

/**
 * A job on one resource: work c + k * x[col] seconds at threshold h (e.g. a
 * CPU update: c = its seconds, k = -c on the share updated on the GPU); copy:
 * seconds after h before it can start where it runs there at all (its
 * gradient's copy down; none where the job runs elsewhere).
 */
export type Job = { h: number; c: number; col: number; k: number; at?: number; copy?: number };

/**
 * Per job in threshold order, how much later than its own threshold the jobs
 * from it on can start if it runs on the resource: every one of them that
 * runs there waits for its copy, so none starts before the least h + copy
 * among them (0 for a job without a copy). suffixRows counts it times the
 * opening job's share on the resource, a linear part of "some job of the
 * suffix runs there": where none does, nothing is copied and nothing waits
 * (a row that counted it whole put the bound above the all-GPU plan of
 * gpt2-124m, where no gradient leaves the GPU). The LP's fractional shares
 * take much of it back: gpt3-13b/a100 1.5573 s with it, 1.5552 without.
 */
export function copyDelays(sorted: readonly Job[]): Float64Array {
  const delay = new Float64Array(sorted.length);
  let least = Infinity;
  for (let k = sorted.length - 1; k >= 0; k--) {
    const j = sorted[k];
    least = Math.min(least, j.h + (j.copy ?? 0));
    delay[k] = j.copy !== undefined && j.c > 0 ? least - j.h : 0;
  }
  return delay;
}

/**
 * For every threshold h of `jobs` (on one resource, one at a time): T >= h +
 * the work of the jobs at or after h (+ `extraOf`'s terms for the job that
 * opens the row: a start later than h by an LP expression). Sorted by h, the sums are suffix sums: one column
 * and one row each.
 */
function suffixRows(lp: LinearProgram, T: number, unit: number, jobs: Job[], extraOf?: (j: Job) => [number, number][]): void {
  jobs.sort((a, b) => a.h - b.h || (a.at ?? 0) - (b.at ?? 0));
  const delay = copyDelays(jobs);
  let next = -1; // S_{k+1}
  for (let k = jobs.length - 1; k >= 0; k--) {
    const j = jobs[k];
    // S_k = c_k + k_k x + S_{k+1} (in time units; every job's work is >= 0)
    const S = lp.col(`pre_${lp.numCols}`);
    lp.row(next >= 0 ? [[S, 1], [j.col, -j.k * unit], [next, -1]] : [[S, 1], [j.col, -j.k * unit]], j.c * unit, j.c * unit);
    // T >= h + S + the copy delay x the opening job's share on the resource, (c + k x) / c
    const d = delay[k];
    if (k === 0 || jobs[k - 1].h !== j.h) lp.row([[T, 1], ...(extraOf ? extraOf(j) : []), [S, -1], ...(d > 0 ? [[j.col, -d * (j.k / j.c) * unit] as [number, number]] : [])], (j.h + d) * unit, Infinity);
    next = S;
  }
}

/** Whether x breaks a row of suffixRows(jobs) by more than HiGHS's feasibility tolerance; `extraOf`: the value of a job's row's extra terms at x (time units). */
function suffixBroken(unit: number, jobs: Job[], x: Float64Array, T: number, extraOf?: (j: Job) => number): boolean {
  const sorted = [...jobs].sort((a, b) => a.h - b.h || (a.at ?? 0) - (b.at ?? 0));
  const delay = copyDelays(sorted);
  const tol = 1e-7 * Math.max(1, x[T]);
  let S = 0;
  for (let k = sorted.length - 1; k >= 0; k--) {
    const j = sorted[k];
    S += (j.c + j.k * x[j.col]) * unit;
    const late = delay[k] > 0 ? delay[k] * ((j.c + j.k * x[j.col]) / j.c) * unit : 0;
    if ((k === 0 || sorted[k - 1].h !== j.h) && x[T] < (extraOf ? extraOf(j) : 0) + j.h * unit + late + S - tol) return true;
  }
  return false;
}

/**
 * Fetch-then-update rows (the bound LP): the released rows above count a
 * gradient as made after the GPU's work before it, as if the forward pass
 * never waited for a parameter. It does: the op reading the last of the
 * forward pass's first fetches starts after the h2d stream has done all of
 * them (F, one at a time), and the GPU runs its ops in program order, so a
 * gradient made at op p exists no sooner than F + the GPU's work from the
 * last forward first reader L (itself included) to p, and the work the
 * placement puts on the GPU between them (gpuWorkBefore's columns at p and at
 * L: casts, the GPU's updates); every CPU update released at or after it
 * comes later still, and after its gradient's copy down (copyDelays). So for
 * each gradient in order, T >= F + before[p] - before[L - 1] + that work +
 * the CPU's update work released from p on (a suffix sum, as in suffixRows).
 * Where the forward pass is h2d-bound and the CPU's updates decide the step
 * (gpt3-13b on a V100 or an A100, gpt2-1.5b on 16 GB) the bound rises 0.8-1.2
 * % (docs/BENCHMARKS.md, tenth session); L, the work between and the copies,
 * 0.1-0.2 % more (thirty-fifth session).
 * Added only when `add`; returns whether a solution of the LP without them
 * breaks one (then the LP with them has a higher optimum; else the same).
 */
function fetchThenUpdateRows(lp: LinearProgram, T: number, unit: number, g: Graph, hw: HardwareProfile, groups: ParamGroup[], upd: number[], prod: Int32Array,
  forwardFetch: { terms: [number, number][]; c: number; lastReader: number }, before: Float64Array, d2h: (bytes: number) => number, add: boolean,
  gpuBefore: readonly GpuItem[], workBefore: ReadonlyMap<number, number>): (x: Float64Array) => boolean {
  const L = forwardFetch.lastReader;
  if (forwardFetch.terms.length === 0 || L < 0) return () => false;
  // the CPU's share of each update released by this step's gradient, from F
  // on: L starts there, the GPU runs L to p (and the work the placement puts
  // between: gpuWorkBefore's columns at p and at L), the gradient is copied down
  const startL = L > 0 ? before[L - 1] : 0;
  const jobs: Job[] = [];
  groups.forEach((q, i) => {
    const p = prod[q.grad], aC = opSeconds(g, g.ops[q.adam], 'cpu', hw);
    if (p > L && p < q.adam) jobs.push({ h: before[p] - startL, c: aC, col: upd[i], k: -aC, at: p, copy: d2h(q.gradBytes) });
  });
  if (add) {
    // (F in one column, so that each row names it once)
    const Fc = lp.col(`fetchfwd_${lp.numCols}`);
    lp.row([[Fc, 1], ...forwardFetch.terms.map(([c, v]): [number, number] => [c, -v * unit])], forwardFetch.c * unit, forwardFetch.c * unit);
    const atL = workBefore.get(L);
    suffixRows(lp, T, unit, jobs, (j) => {
      const atP = workBefore.get(j.at!);
      return atP === undefined || atL === undefined ? [[Fc, -1]] : [[Fc, -1], [atP, -1], [atL, 1]];
    });
  }
  // (only checked: the work between L and each gradient, at x)
  const between = (x: Float64Array, j: Job) => { let w = 0; for (const it of gpuBefore) if (it.at > L && it.at <= j.at!) w += it.k * x[it.col] * unit; return w; };
  return (x) => {
    let f = forwardFetch.c * unit;
    for (const [c, v] of forwardFetch.terms) f += v * unit * x[c];
    return suffixBroken(unit, jobs, x, T, (j) => f + between(x, j));
  };
}
