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
// Keeps true: deterministic (fixed edge order; ties go to the GPU). Cost: the
// network is built once (CutNetwork); each bisection step (~15) resets its
// capacities and runs one Dinic max-flow.

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

/**
 * The cut network of a graph, built once: every edge's capacity is
 * base + lambda * price, so each bisection step only resets capacities.
 */
export class CutNetwork {
  private readonly net: FlowNetwork;
  private readonly base: Float64Array;
  private readonly price: Float64Array;
  private readonly caps: Float64Array;
  private readonly cpuSeconds: Float64Array;
  private readonly gpuSeconds: Float64Array;
  private readonly s: number;
  private readonly t: number;

  constructor(private readonly g: Graph, private readonly hw: HardwareProfile) {
    const nOps = g.ops.length, nT = g.tensors.length;
    this.s = nOps + nT; this.t = this.s + 1;
    this.net = new FlowNetwork(nOps + nT + 2, 4 * (nOps + nT));
    this.cpuSeconds = Float64Array.from(g.ops, (op) => opSeconds(g, op, 'cpu', hw));
    this.gpuSeconds = Float64Array.from(g.ops, (op) => opSeconds(g, op, 'gpu', hw));
    const node = (x: number) => nOps + x;
    const w = lifetimeShare(g);
    const bases: number[] = [], prices: number[] = [];
    const edge = (u: number, v: number, base: number, price: number) => {
      if (!(base > 0) && !(price > 0)) return;
      this.net.addEdge(u, v, base, true);
      bases.push(base * NS); prices.push(price * NS);
    };
    for (const op of g.ops) {
      edge(this.s, op.id, this.cpuSeconds[op.id], 0);
      edge(op.id, this.t, this.gpuSeconds[op.id], 0);
      for (const x of op.inputs) {
        const tx = g.tensors[x], b = tx.sizeBytes;
        edge(node(x), op.id, copySeconds(b, 'gpu', 'cpu', hw), 0);
        const resident = (tx.persistent && tx.role !== 'input') || tx.role === 'param16' ? b * w[x] : 0;
        edge(op.id, node(x), copySeconds(b, 'cpu', 'gpu', hw), resident);
      }
      for (const x of op.outputs) {
        const b = g.tensors[x].sizeBytes;
        edge(op.id, node(x), copySeconds(b, 'gpu', 'cpu', hw), 0);
        edge(node(x), op.id, copySeconds(b, 'cpu', 'gpu', hw), 0);
      }
    }
    for (const x of g.tensors) if (x.role !== 'input') edge(node(x.id), this.t, 0, x.sizeBytes * w[x.id]);
    this.base = Float64Array.from(bases); this.price = Float64Array.from(prices);
    this.caps = new Float64Array(this.base.length);
  }

  /**
   * The minimum cut at price lambda (seconds per byte resident on the GPU for
   * the whole step); its cutSeconds only with `priced` (the bisection's trial
   * cuts need the placement alone: they give NaN).
   */
  at(lambda: number, priced = true): Placement {
    const { g, hw } = this;
    for (let k = 0; k < this.caps.length; k++) this.caps[k] = this.base[k] + lambda * this.price[k];
    this.net.setCapacities(this.caps);
    const { sinkSide } = this.net.minCut(this.s, this.t);
    const nOps = g.ops.length;
    const opTier = g.ops.map((op) => (sinkSide[op.id] ? 'cpu' : 'gpu') as 'gpu' | 'cpu');
    const home = g.tensors.map((x) => (sinkSide[nOps + x.id] ? 'cpu' : 'gpu') as Tier);
    const cut: Placement = { opTier, home, method: 'mincut', lambdaSecondsPerByte: lambda, cutSeconds: NaN };
    return priced ? this.priced(cut) : cut;
  }

  /** A cut of at() with its cutSeconds: the compute and transfer seconds it costs. */
  priced(cut: Placement): Placement {
    const { g, hw } = this;
    const { opTier, home } = cut;
    let base = 0;
    for (const op of g.ops) {
      base += opTier[op.id] === 'cpu' ? this.cpuSeconds[op.id] : this.gpuSeconds[op.id];
      for (const x of op.inputs) if (home[x] !== opTier[op.id]) base += copySeconds(g.tensors[x].sizeBytes, home[x], opTier[op.id], hw);
      for (const x of op.outputs) if (home[x] !== opTier[op.id]) base += copySeconds(g.tensors[x].sizeBytes, home[x], opTier[op.id], hw);
    }
    return { ...cut, cutSeconds: base };
  }
}

/** Per tensor: the share of the step (in program order) it is alive; 1 for persistent state. */
function lifetimeShare(g: Graph): Float64Array {
  const first = new Int32Array(g.tensors.length).fill(-1), last = new Int32Array(g.tensors.length).fill(-1);
  const touch = (x: number, at: number) => { if (first[x] < 0) first[x] = at; last[x] = at; };
  for (const op of g.ops) { for (const x of op.outputs) touch(x, op.id); for (const x of op.inputs) touch(x, op.id); }
  return Float64Array.from(g.tensors, (x) => (x.persistent ? 1 : (last[x.id] - first[x.id] + 1) / g.ops.length));
}

export interface MinCutOptions {
  /** GPU peak bytes of a placement (from the scheduler's liveness). */
  gpuPeakBytes(p: Placement): number;
  /** Bytes the GPU may hold. */
  capacityBytes: number;
}

export function partitionMinCut(g: Graph, hw: HardwareProfile, opts: MinCutOptions): Placement {
  const net = new CutNetwork(g, hw);
  const fits = (p: Placement) => opts.gpuPeakBytes(p) <= opts.capacityBytes;
  const free = net.at(0, false);
  if (fits(free)) return net.priced(free);
  // Bracket the price: lo does not fit, hi does. First guess: a byte resident
  // for the whole step priced like 1/64 of a transfer of it over the host link.
  let lo = 0;
  let hi = copySeconds(1e9, 'gpu', 'cpu', hw) / 1e9 / 64;
  if (fits(net.at(hi, false))) {
    for (let k = 0; k < 30 && lo === 0; k++) { const m = hi / 16; if (fits(net.at(m, false))) hi = m; else lo = m; }
  } else {
    // grow until it fits or stops changing (then nothing more can move)
    let lastPeak = Infinity;
    for (let k = 0; ; k++) {
      lo = hi;
      hi *= 16;
      const atHi = net.at(hi, false);
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
    if (fits(net.at(mid, false))) hi = mid; else lo = mid;
  }
  return net.at(hi * 1.001);
}

