// Roofline cost of ops and transfers on a hardware profile.
//
// roofline(op, tier) = max(flops / peak flops for the op's dtype, bytes touched /
// memory bandwidth); time(op, tier) = roofline, or, when the profile has a
// measured kernel cost for the op's kernel (opKernelKey: its kind, flags and half
// dtype; else the same in fp32; else its kind; `hw calibrate`),
// fixedSeconds + rooflineFactor x roofline. time(transfer) = bytes / link
// bandwidth, plus the request latency on an NVMe link when the profile has one.
// Pure functions of the IR and the profile. Built-in profiles have no fixed
// terms, so there costs scale exactly with size (which is what lets the
// min-cut treat every parameter alike). The executor's own overheads (per
// instruction, per wake-up, per step) are the simulator's business, not here.
// Collective ops (ring attention, all-reduce) also move their ring traffic
// through the tier's memory: the ranks are threads of one process, so a send is
// a copy between two ranks' buffers (ringSendBytes, compiler/ir/ops.ts).

import { ringSendBytes } from '../ir/ops.js';
import type { DType, Graph, Op } from '../ir/types.js';
import type { HardwareProfile } from './profiles.js';

export type Tier = 'gpu' | 'cpu' | 'nvme';
export const TIERS: readonly Tier[] = ['gpu', 'cpu', 'nvme'];

function computeDtype(g: Graph, op: Op): DType {
  for (const t of op.inputs) {
    const d = g.tensors[t].dtype;
    if (d === 'f16' || d === 'bf16') return d;
  }
  return 'f32';
}

export function rooflineSeconds(g: Graph, op: Op, tier: 'gpu' | 'cpu', hw: HardwareProfile): number {
  const dev = hw[tier];
  const dt = computeDtype(g, op);
  const peak = dt === 'f16' ? dev.peakFlops.f16 : dt === 'bf16' ? dev.peakFlops.bf16 : dev.peakFlops.f32;
  const ring = ringSendBytes(op.kind, op.inputs.map((t) => g.tensors[t]), op.attrs);
  return Math.max(op.flops / peak, (op.bytesTouched + ring) / dev.memBandwidthBytesPerSec);
}

/**
 * The kernel an op runs, as `hw calibrate` keys its costs: the op kind, plus its
 * flag and name attributes when it has any ("gelu" is the tanh form,
 * "gelu[erf]" the exact one; "unary[fn=exp]"; "matmul[transB]"): those pick
 * different code, numeric attributes only size it; and "@f16" / "@bf16" when an
 * operand is in half precision ("gelu[erf]@f16"): the runtime's kernels compute
 * in float and widen and round those operands around the kernel, so the same
 * kernel costs differently against a roofline that counts half the bytes.
 */
export function kernelKey(op: Op, half?: 'f16' | 'bf16'): string {
  const flags = Object.entries(op.attrs ?? {})
    .filter(([, v]) => v === true || typeof v === 'string')
    .map(([k, v]) => (v === true ? k : `${k}=${v}`))
    .sort();
  const base = flags.length > 0 ? `${op.kind}[${flags.join(',')}]` : op.kind;
  return half ? `${base}@${half}` : base;
}

/** kernelKey with the half dtype of the op's operands (inputs or outputs), if any. */
export function opKernelKey(g: Graph, op: Op): string {
  for (const t of [...op.inputs, ...op.outputs]) {
    const d = g.tensors[t].dtype;
    if (d === 'f16' || d === 'bf16') return kernelKey(op, d);
  }
  return kernelKey(op);
}

// opSeconds per graph, profile and tier, by op id: the partitioners, the LP and
// every simulation ask for the same ops' times (~10^5 calls for gpt2-1.5b).
// Graphs and profiles are immutable, so a value, once computed, stays right.
const opTimes = new WeakMap<Graph, WeakMap<HardwareProfile, { gpu: Float64Array; cpu: Float64Array }>>();

export function opSeconds(g: Graph, op: Op, tier: 'gpu' | 'cpu', hw: HardwareProfile): number {
  if (g.ops[op.id] !== op) return opSecondsOf(g, op, tier, hw); // an op not (or no longer) in g: not remembered
  let byHw = opTimes.get(g);
  if (!byHw) opTimes.set(g, (byHw = new WeakMap()));
  let times = byHw.get(hw);
  if (!times) byHw.set(hw, (times = { gpu: new Float64Array(g.ops.length).fill(NaN), cpu: new Float64Array(g.ops.length).fill(NaN) }));
  const known = times[tier][op.id];
  if (!Number.isNaN(known)) return known;
  return (times[tier][op.id] = opSecondsOf(g, op, tier, hw));
}

function opSecondsOf(g: Graph, op: Op, tier: 'gpu' | 'cpu', hw: HardwareProfile): number {
  const roofline = rooflineSeconds(g, op, tier, hw);
  // the op's own kernel, else the same kernel's fp32 cost (a profile calibrated
  // before half kernels were keyed apart), else its kind's
  const k = hw.kernels?.[opKernelKey(g, op)] ?? hw.kernels?.[kernelKey(op)] ?? hw.kernels?.[op.kind];
  return k ? k.fixedSeconds + k.rooflineFactor * roofline : roofline;
}

export function copySeconds(bytes: number, from: Tier, to: Tier, hw: HardwareProfile): number {
  if (from === to) return 0;
  if (from === 'cpu' && to === 'gpu') return bytes / hw.h2dBytesPerSec;
  if (from === 'gpu' && to === 'cpu') return bytes / hw.d2hBytesPerSec;
  if (from === 'nvme' && to === 'cpu') return (hw.nvme.readLatencySeconds ?? 0) + bytes / hw.nvme.readBytesPerSec;
  if (from === 'cpu' && to === 'nvme') return (hw.nvme.writeLatencySeconds ?? 0) + bytes / hw.nvme.writeBytesPerSec;
  throw new Error(`no direct link ${from} -> ${to}: NVMe is reached through CPU staging`);
}
