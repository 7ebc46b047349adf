// Min-cut partition between the GPU and the CPU (two tiers, GPU capacity).
//
// Takes a training-step Graph, a hardware profile and a function that measures
// the GPU peak bytes of a placement (the scheduler's liveness). Gives a
// Placement. Method (ZeRO-Offload's dataflow view, solved instead of argued):
// one node per op and per tensor; source side = GPU, sink side = CPU.
//   op o:      s->o = cpu seconds of o (paid when o is on the CPU), o->t = gpu seconds
//   tensor x:  x->t = lambda * bytes(x) * w(x) (a Lagrangian price on GPU memory)
//   o writes x: o->x = d2h(x), x->o = h2d(x);  o reads x: x->o = d2h(x), o->x = h2d(x)
// so every cut edge is a compute, a transfer or a memory price. w(x) is the
// share of the step x is alive (1 for state that persists across steps), so a
// short-lived gradient is cheap to keep and a saved activation is not. A
// parameter (or other state) the GPU reads occupies GPU memory while it is
// read: a GPU reader of one homed on the CPU also pays lambda * bytes * w (so,
// at equal traffic, parameters stay resident, as in ZeRO-Offload). lambda is found by
// bisection: the smallest price at which the GPU peak fits the capacity, raised
// by 0.1% so that groups whose costs agree up to rounding move together.
// Data inputs carry no price (the loader writes them straight to their home).
// Keeps true: deterministic (fixed edge order; ties go to the GPU). Cost: one
// Dinic max-flow per bisection step (~15 steps).

import type { HardwareProfile } from '../cost/profiles.js';
import { copySeconds, opSeconds, type Tier } from '../cost/cost.js';
import type { Graph } from '../ir/types.js';
import { FlowNetwork } from './dinic.js';
import type { Placement } from './placement.js';
import { diag } from '../../src/diagnostics.js';
import { formatBytes as fmtBytes } from '../../src/sizes.js';

/** Everything on the GPU (the placement when the whole step fits). */
export function allGpu(g: Graph): Placement {
  return { opTier: g.ops.map(() => 'gpu'), home: g.tensors.map(() => 'gpu'), method: 'all-gpu', lambdaSecondsPerByte: 0, cutSeconds: 0 };
}

const NS = 1e9; // capacities in nanoseconds keep the numbers well scaled

export function cutAt(g: Graph, hw: HardwareProfile, lambda: number): Placement {
  const nOps = g.ops.length, nT = g.tensors.length;
  const s = nOps + nT, t = s + 1;
  const net = new FlowNetwork(nOps + nT + 2, 4 * (nOps + nT));
  const tensorNode = (x: number) => nOps + x;
  const w = lifetimeShare(g);
  let base = 0;
  for (const op of g.ops) {
    net.addEdge(s, op.id, opSeconds(g, op, 'cpu', hw) * NS);
    net.addEdge(op.id, t, opSeconds(g, op, 'gpu', hw) * NS);
    for (const x of op.inputs) {
      const b = g.tensors[x].sizeBytes;
      net.addEdge(tensorNode(x), op.id, copySeconds(b, 'gpu', 'cpu', hw) * NS);
      const resident = (g.tensors[x].persistent && g.tensors[x].role !== 'input') || g.tensors[x].role === 'param16' ? lambda * b * w[x] : 0;
      net.addEdge(op.id, tensorNode(x), (copySeconds(b, 'cpu', 'gpu', hw) + resident) * NS);
    }
    for (const x of op.outputs) {
      const b = g.tensors[x].sizeBytes;
      net.addEdge(op.id, tensorNode(x), copySeconds(b, 'gpu', 'cpu', hw) * NS);
      net.addEdge(tensorNode(x), op.id, copySeconds(b, 'cpu', 'gpu', hw) * NS);
    }
  }
  for (const x of g.tensors) if (x.role !== 'input') net.addEdge(tensorNode(x.id), t, lambda * x.sizeBytes * w[x.id] * NS);
  const { sinkSide } = net.minCut(s, t);
  const opTier = g.ops.map((op) => (sinkSide[op.id] ? 'cpu' : 'gpu') as 'gpu' | 'cpu');
  const home = g.tensors.map((x) => (sinkSide[tensorNode(x.id)] ? 'cpu' : 'gpu') as Tier);
  for (const op of g.ops) base += opSeconds(g, op, opTier[op.id], hw);
  for (const op of g.ops) {
    for (const x of [...op.inputs, ...op.outputs]) if (home[x] !== opTier[op.id]) base += copySeconds(g.tensors[x].sizeBytes, home[x], opTier[op.id], hw);
  }
  return { opTier, home, method: 'mincut', lambdaSecondsPerByte: lambda, cutSeconds: base };
}

/** Per tensor: the share of the step (in program order) it is alive; 1 for persistent state. */
function lifetimeShare(g: Graph): Float64Array {
  const first = new Int32Array(g.tensors.length).fill(-1), last = new Int32Array(g.tensors.length).fill(-1);
  for (const op of g.ops) for (const x of [...op.outputs, ...op.inputs]) { if (first[x] < 0) first[x] = op.id; last[x] = op.id; }
  return Float64Array.from(g.tensors, (x) => (x.persistent ? 1 : (last[x.id] - first[x.id] + 1) / g.ops.length));
}

export interface MinCutOptions {
  /** GPU peak bytes of a placement (from the scheduler's liveness). */
  gpuPeakBytes(p: Placement): number;
  /** Bytes the GPU may hold. */
  capacityBytes: number;
}

export function partitionMinCut(g: Graph, hw: HardwareProfile, opts: MinCutOptions): Placement {
  const fits = (p: Placement) => opts.gpuPeakBytes(p) <= opts.capacityBytes;
  const free = cutAt(g, hw, 0);
  if (fits(free)) return free;
  // Bracket the price: lo does not fit, hi does. First guess: a byte resident
  // for the whole step priced like 1/64 of a transfer of it over the host link.
  let lo = 0;
  let hi = copySeconds(1e9, 'gpu', 'cpu', hw) / 1e9 / 64;
  if (fits(cutAt(g, hw, hi))) {
    for (let k = 0; k < 30 && lo === 0; k++) { const m = hi / 16; if (fits(cutAt(g, hw, m))) hi = m; else lo = m; }
  } else {
    // grow until it fits or stops changing (then nothing more can move)
    let lastPeak = Infinity;
    for (let k = 0; ; k++) {
      lo = hi;
      hi *= 16;
      const atHi = cutAt(g, hw, hi);
      if (fits(atHi)) break;
      const peak = opts.gpuPeakBytes(atHi);
      if (k > 30 || (hi > 1e-3 && peak >= lastPeak)) {
        throw diag.doesNotFit(`does not fit: the GPU needs at least ${fmtBytes(peak)} with everything movable on the CPU, capacity is ${fmtBytes(opts.capacityBytes)} (short by ${fmtBytes(peak - opts.capacityBytes)}); raise --gpu-mem or lower --batch/--seq`);
      }
      lastPeak = peak;
    }
  }
  // bisect on log(lambda) down to a ratio of 1.001, the step the result is raised by
  for (let i = 0; i < 40 && lo > 0 && hi / lo > 1.001; i++) {
    const mid = Math.sqrt(lo * hi);
    if (fits(cutAt(g, hw, mid))) hi = mid; else lo = mid;
  }
  return cutAt(g, hw, hi * 1.001);
}

