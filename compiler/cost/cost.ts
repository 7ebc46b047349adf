// Roofline cost of ops and transfers on a hardware profile.
//
// time(op, tier) = max(flops / peak flops for the op's dtype, bytes touched /
// memory bandwidth); time(transfer) = bytes / link bandwidth. Pure functions of
// the IR and the profile: no latency terms, so costs scale exactly with size
// (which is what lets the min-cut treat every parameter alike).
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

export function opSeconds(g: Graph, op: Op, tier: 'gpu' | 'cpu', hw: HardwareProfile): number {
  const dev = hw[tier];
  const dt = computeDtype(g, op);
  const peak = dt === 'f16' ? dev.peakFlops.f16 : dt === 'bf16' ? dev.peakFlops.bf16 : dev.peakFlops.f32;
  const ring = ringSendBytes(op.kind, op.inputs.map((t) => g.tensors[t]), op.attrs);
  return Math.max(op.flops / peak, (op.bytesTouched + ring) / dev.memBandwidthBytesPerSec);
}

export function copySeconds(bytes: number, from: Tier, to: Tier, hw: HardwareProfile): number {
  if (from === to) return 0;
  if (from === 'cpu' && to === 'gpu') return bytes / hw.h2dBytesPerSec;
  if (from === 'gpu' && to === 'cpu') return bytes / hw.d2hBytesPerSec;
  if (from === 'nvme' && to === 'cpu') return bytes / hw.nvme.readBytesPerSec;
  if (from === 'cpu' && to === 'nvme') return bytes / hw.nvme.writeBytesPerSec;
  throw new Error(`no direct link ${from} -> ${to}: NVMe is reached through CPU staging`);
}
