// Checkpoints instead of offloads: a rounding's offloaded activations made
// again in the backward pass, through chains of recomputation.
//
// Takes a Graph, the LP's saved activations (those alive across its
// segments) and a rounding (lp.ts Rounded). Gives the rounding's offload and
// recompute sets with every offloaded activation that can be made again by a
// chain of at most `maxDepth` producers moved to recompute, and the bytes the
// offloads held on the CPU. The LP lets an activation be recomputed only from
// inputs that are there to read again (one level: a recomputed input is not),
// so where host memory binds its roundings offload 20-25 GB of activations
// into a CPU that then pushes optimizer state to NVMe (llama2-13b on an H100
// with 96 GB: 24.8 GB offloaded, 25 groups' state on NVMe, while the GPU is
// busy 0.47 s of a 4.46 s step). The program builder already reruns chains
// (program.ts rerun: an input that is itself rematerialised is made first).
//
// A chain starts at the activation and goes back through its producer's
// inputs: parameters, data and activations kept or offloaded end it (depth
// 0); a recomputed saved activation adds its own depth; an activation that
// is not saved (read only close to where it is made, e.g. a matmul's output
// before its bias add) can be made again only when `viaIntermediates`, and is
// then marked recomputed too (it has no copy left to read). Activations are
// taken in producer order, so a chain never goes through one decided later;
// one that would exceed `maxDepth` stays offloaded and ends the chains after
// it (a checkpoint, as in layer-wise activation checkpointing, found rather
// than declared). An activation the rounding already recomputes lengthens
// the chains of those that read it: one whose readers would then pass
// maxDepth stays offloaded (at depth 1 this keeps a plan in the LPs'
// one-level family, whose bound is far above the one over chains: llama2-7b
// on a V100 had left it by its embedding and first norm alone).
// Keeps true: every recomputed tensor's producer reads only tensors that are
// persistent, inputs, parameters, kept or offloaded, or recomputed; a chain
// through an activation this call recomputes stays within maxDepth; the
// rounding given is not changed. Cost: O(saved x maxDepth x op inputs).

import { producers } from '../ir/graph.js';
import type { Graph } from '../ir/types.js';
import type { Rounded } from './lp-round.js';

export interface Checkpointed { offload: Set<number>; recompute: Set<number>; /** bytes no longer offloaded */ freedBytes: number }

export function checkpointed(g: Graph, saved: readonly number[], r: Rounded, maxDepth: number, viaIntermediates: boolean): Checkpointed {
  const prod = producers(g); // (as the LP's: its saved activations and their producers)
  const isSaved = new Set(saved);
  const recompute = new Set(r.recompute), offload = new Set(r.offload);
  const depth = new Map<number, number>(); // of every tensor in `recompute` whose chain is known
  // x's chain depth (0: there to read); the intermediates it passes through
  // go into `via` with theirs; Infinity when x cannot be made within maxDepth
  const chain = (x: number, via: Map<number, number>): number => {
    const tx = g.tensors[x];
    if (tx.persistent || tx.role === 'input' || tx.role === 'param16') return 0;
    if (isSaved.has(x) && !recompute.has(x)) return 0;
    const known = depth.get(x) ?? via.get(x);
    if (known !== undefined) return known;
    const op = prod[x] >= 0 ? g.ops[prod[x]] : undefined;
    if (!op || tx.role !== 'activation' || op.inputs.includes(x) || (!isSaved.has(x) && !viaIntermediates)) return Infinity;
    let d = 0;
    for (const u of op.inputs) { d = Math.max(d, chain(u, via)); if (d >= maxDepth) return Infinity; }
    via.set(x, d + 1);
    return d + 1;
  };
  // the recomputed activations that read x through their producer: an
  // activation recomputed before this call (the rounding's) whose input is
  // made again now is one link deeper, which must stay within maxDepth too
  const before = new Set(recompute), readers = new Map<number, number[]>();
  for (const c of before) for (const u of g.ops[prod[c]]?.inputs ?? []) readers.set(u, [...(readers.get(u) ?? []), c]);
  const deeper = (x: number, d: number): boolean => d > maxDepth || (readers.get(x) ?? []).some((c) => deeper(c, d + 1));
  let freedBytes = 0;
  for (const t of [...saved].sort((a, b) => prod[a] - prod[b])) {
    if (!offload.has(t) && !recompute.has(t)) continue;
    const was = recompute.has(t);
    recompute.add(t); // (so that chain goes through its producer)
    const via = new Map<number, number>();
    const lengthens = () => [...via].some(([u, du]) => !before.has(u) && (readers.get(u) ?? []).some((c) => deeper(c, du + 1)));
    if (chain(t, via) === Infinity || lengthens()) {
      if (!was) recompute.delete(t);
      continue;
    }
    for (const [u, d] of via) { depth.set(u, d); recompute.add(u); }
    if (!was) { offload.delete(t); freedBytes += g.tensors[t].sizeBytes; }
  }
  return { offload, recompute, freedBytes };
}
