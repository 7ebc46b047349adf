// Rounding the LPs' shares (lp.ts) to an integral Placement.
//
// Takes an LP's solution (its groups' state and p16 shares per tier, its saved
// activations' keep / offload / recompute shares) or tier choices made some
// other way. Gives the tiers per group and the activations offloaded or
// recomputed (roundSolution: each to its largest share, or keeping the LP's
// bytes per tier), the two repairs of a rounding (castOnce, remakeOnGpu) and
// the Placement they make (placementFrom). Keeps true: deterministic (ties by
// index); a recomputed activation reads no recomputed input (one level, as the
// LP's family). Cost: O(groups log groups + activations + ops).

import type { Tier } from '../cost/cost.js';
import type { Graph } from '../ir/types.js';
import { graphFacts, type LpSolution, type ParamGroup } from './lp.js';
import type { Placement } from './placement.js';

const TIER_ORDER: Tier[] = ['gpu', 'cpu', 'nvme'];
const argmax = (v: Float64Array): Tier => { let k = 0; for (let i = 1; i < 3; i++) if (v[i] > v[k] + 1e-9) k = i; return TIER_ORDER[k]; };

/** Integral placement from tier choices per group and keep choices per saved activation. */
export function placementFrom(g: Graph, groups: readonly ParamGroup[], p16Tier: Tier[], stateTier: Tier[], offload: Set<number>, lowerBound: number, recompute: Set<number> = new Set(), streamed?: readonly boolean[]): Placement {
  const opTier: ('gpu' | 'cpu')[] = g.ops.map(() => 'gpu');
  const home: Tier[] = g.tensors.map(() => 'gpu');
  const remat = g.tensors.map(() => false);
  groups.forEach((q, i) => {
    const onGpu = stateTier[i] === 'gpu';
    opTier[q.adam] = onGpu ? 'gpu' : 'cpu';
    if (q.cast >= 0) opTier[q.cast] = onGpu ? 'gpu' : 'cpu';
    // the third p16 share: rematerialised in half precision (no home; where
    // it may not be, homed where its state's cast runs), NVMe in fp32
    const again = q.cast >= 0 && p16Tier[i] === 'nvme' && q.remakeable;
    remat[q.p16] = again;
    home[q.p16] = again ? 'cpu' : q.cast >= 0 && p16Tier[i] === 'nvme' ? (onGpu ? 'gpu' : 'cpu') : p16Tier[i];
    for (const t of q.state) home[t] = stateTier[i];
    if (g.precision === 'fp32') home[q.p16] = stateTier[i];
    home[q.grad] = onGpu ? 'gpu' : 'cpu';
    // an update streamed to the GPU (state on the CPU): updated there, its gradient stays there
    if (streamed?.[i] && stateTier[i] === 'cpu') { opTier[q.adam] = 'gpu'; home[q.grad] = 'gpu'; }
  });
  for (const t of offload) home[t] = 'cpu';
  for (const t of recompute) remat[t] = true; // home stays on the GPU, where it is made (twice)
  return { opTier, home, method: 'lp', lambdaSecondsPerByte: 0, cutSeconds: lowerBound, ...(remat.some(Boolean) ? { remat } : {}) };
}

/**
 * Tiers of the groups, keeping the LP's bytes per tier: the GPU takes the
 * groups with the largest GPU shares while their bytes stay within (half a
 * group of) the LP's GPU bytes, then NVMe likewise among the rest, and the CPU
 * the others. Rounding each group to its largest share alone can put every
 * half-GPU group on the GPU at once, far over the capacity the LP kept to.
 * Small groups (not placed by the LP) stay on the GPU.
 */
function roundShares(shares: Float64Array[], bytes: number[], small: Uint8Array): Tier[] {
  const tier: Tier[] = shares.map(() => 'cpu');
  const open = new Set(shares.map((_, i) => i).filter((i) => !small[i]));
  small.forEach((s, i) => { if (s) tier[i] = 'gpu'; });
  for (const [k, name] of [[0, 'gpu'], [2, 'nvme']] as const) {
    let budget = 0;
    for (const i of open) budget += shares[i][k] * bytes[i];
    const order = [...open].sort((a, b) => shares[b][k] - shares[a][k] || a - b);
    let used = 0;
    for (const i of order) {
      if (shares[i][k] < 1e-9 || used + bytes[i] / 2 > budget) break;
      tier[i] = name; used += bytes[i]; open.delete(i);
    }
  }
  return tier;
}

/**
 * The rounding with every remade p16 whose state is on the CPU kept on the
 * CPU instead (fp16/bf16): cast there once, not again for each read cluster,
 * so the casts for the backward pass do not queue behind the CPU's updates
 * (the LPs price a remade p16 as cast where its state's GPU share is, which
 * the rounding undoes). Only while the bytes homed on the CPU (state and p16)
 * stay within `cpuBytes`: where the CPU is nearly full the repair has to
 * push state to NVMe for them (gpt3-175b: 352 -> 499 s when always applied).
 * Undefined when no group changes.
 */
export function castOnce(g: Graph, groups: readonly ParamGroup[], r: Rounded, cpuBytes: number): Rounded | undefined {
  if (g.precision === 'fp32') return undefined;
  const again = groups.map((_, i) => r.p16Tier[i] === 'nvme' && r.stateTier[i] === 'cpu');
  if (!again.some(Boolean)) return undefined;
  let homed = 0;
  groups.forEach((q, i) => { if (r.stateTier[i] === 'cpu') homed += q.stateBytes; if (r.p16Tier[i] === 'cpu' || again[i]) homed += q.p16Bytes; });
  if (homed > cpuBytes) return undefined;
  return { ...r, p16Tier: r.p16Tier.map((t, i) => (again[i] ? 'cpu' : t)) };
}

/**
 * The rounding with every p16 homed on the CPU while its state is on the GPU
 * made again on the GPU for each use instead (fp16/bf16, remakeable groups):
 * homed on the CPU, the forward's cast on the GPU is copied down and copied up
 * again for the backward, two transfers of its bytes where a cast on the GPU
 * (reading master32 there) does, and the copy down queues behind the forward's
 * offloaded activations (gpt3-6.7b/a100: the backward's first prefetch waited
 * 15 ms for such a copy to free its bytes). Neither holds the p16 on the GPU
 * between uses; the CPU holds it no longer. The LPs' shares and the repair
 * (which moves a p16 off a full GPU to the CPU) both give such groups.
 */
export function remakeOnGpu(g: Graph, groups: readonly ParamGroup[], r: Rounded): Tier[] {
  if (g.precision === 'fp32') return r.p16Tier;
  return r.p16Tier.map((t, i) => (t === 'cpu' && r.stateTier[i] === 'gpu' && groups[i].remakeable ? 'nvme' : t));
}

export type Rounding = 'largest' | 'bytes';
export interface Rounded { p16Tier: Tier[]; stateTier: Tier[]; offload: Set<number>; recompute: Set<number> }

/**
 * Rounds the LP's shares: each group's to its largest tier ('largest') or
 * keeping the LP's bytes per tier (roundShares, 'bytes'); each activation to
 * its largest choice (ties: keep, offload, recompute). The bound LP's NVMe
 * state shares count as CPU ones where the state does not need NVMe (the
 * placement LPs' second stage keeps state off an idle NVMe; the bound LP, one
 * stage, may rest it there for nothing: gpt2-1.5b on 16 GB 0.259 -> 0.239 s).
 */
export function roundSolution(g: Graph, sol: LpSolution, how: Rounding): Rounded {
  const p16Tier = how === 'largest' ? sol.p16Share.map(argmax) : roundShares(sol.p16Share, sol.groups.map((q) => q.p16Bytes), sol.small);
  // the bound LP (one stage: any optimal vertex) may rest state on an idle
  // NVMe for nothing; where GPU and CPU hold the state, that share rounds to the CPU
  const stateShare = sol.rows === 'bound' && !sol.nvmeNeeded ? sol.stateShare.map((s) => Float64Array.of(s[0], s[1] + s[2], 0)) : sol.stateShare;
  const stateTier = how === 'largest' ? stateShare.map(argmax) : roundShares(stateShare, sol.groups.map((q) => q.stateBytes), sol.small);
  const offload = new Set<number>(), recompute = new Set<number>();
  sol.saved.forEach((t, j) => {
    const k = sol.keepShare[j], r = sol.recomputeShare[j], o = 1 - k - r;
    if (k + 1e-9 >= o && k + 1e-9 >= r) return;
    if (o + 1e-9 >= r) offload.add(t); else recompute.add(t);
  });
  // a recomputed activation reads its inputs again: none of them may be recomputed too
  const { prod } = graphFacts(g);
  for (const t of [...recompute]) for (const u of g.ops[prod[t]].inputs) if (recompute.has(u)) recompute.delete(t);
  return { p16Tier, stateTier, offload, recompute };
}
