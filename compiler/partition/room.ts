// GPU room for optimizer state: the kept plan's cheap activations made again,
// and its streamed updates moved to gradients that come sooner.
//
// Takes the best plan so far (LpCandidates) after the families and the
// single-group moves, and the bound LP's saved activations. Gives, where one
// wins, a faster plan, in three steps, each kept only where it wins:
//  - streams sooner (lpTryStreamsSooner): in each set of groups of one size
//    and shape (exchangeable), ordered by when their gradients are made, every
//    streamed group exchanged with the group STREAM_SHIFT of the set's length
//    sooner where that one's state rests on the GPU. A streamed update copies
//    its state home after its gradient; where those gradients come last (the
//    first layers') the copies are the step's tail: llama2-13b on an H200,
//    9.8 GB of the first eleven layers' attention state going home on d2h in
//    the step's last 195 ms;
//  - cheap recompute (lpTryCheapRecompute): every activation the plan keeps
//    on the GPU or offloads whose producer runs there in at most CHEAP_SHARE of the time
//    its bytes take to copy (an elementwise op: LLaMA's SiLU, 13824 x 4096
//    halves a layer in ~50 us against ~2.3 ms on PCIe 5) and reads only what
//    is there to read again (parameters, inputs, activations kept or
//    offloaded: one level, so a plan in the LPs' family stays there and its
//    bound is not widened) made again in the backward pass (an offloaded
//    one's copies down and up saved), and the GPU bytes so freed
//    (ROOM_SHARES of them) given to the state of CPU-updated groups,
//    those whose gradients come last first (their updates end the CPU's
//    chain, and their p16 is the forward pass's first fetch);
//  - then streams sooner again, from that plan;
//  - cheap recompute through chains: the same, where the activation reads
//    activations the plan makes again and the chain's GPU time (its run and
//    theirs, in turn) is at most each of CHEAP_CHAIN_SHARES of its copy
//    (LLaMA's SwiGLU product silu(gate) x up, the SiLU output made again;
//    at the larger share its projections too), the room given to the
//    CPU-updated groups or to the streamed ones first (their state crosses
//    both links each step), the faster; such a plan leaves the LPs' family
//    by chains, so its bound is widened by them (lower: any saved activation
//    then costs one run of its producer and of the activations not saved it
//    reads);
//  - where that won, more CPU-updated groups streamed (lpTryStreamMore): the
//    copies its offloads made again no longer take carry their state; then
//    streams sooner again.
// The families round activations and state apart and keep what their LP
// keeps; these take bytes the LP's rounding left kept (llama2-13b/h200: 4.5
// GB of SiLU outputs, while 30 GB of state is updated on the CPU and its p16
// fetched twice a step; docs/BENCHMARKS.md, fifty-fourth session).
// Keeps true: acc.best only gets faster and every plan kept fits its
// capacities; a plan's widening (lp.ts wideningOf) is extended by chains at
// most, and only by the chain steps (the first recompute is one level, its
// inputs parameters, data or saved activations the plan does not make again;
// exchanges keep the set of configurations; and a candidate that would leave
// the family by another way is not built);
// deterministic (groups and activations in program order). Cost: at most
// 3 + (1 + 2 CHEAP_CHAIN_SHARES.length) ROOM_SHARES.length builds, and
// streamedFrom's where a chain plan won, each retimed where it fits and does
// not win as built; not tried past ROOM_MAX_INSTRUCTIONS or where state rests on
// NVMe (lpTryKeptCheckpoints gives such room to NVMe groups).

import { copySeconds, opSeconds } from '../cost/cost.js';
import type { HardwareProfile } from '../cost/profiles.js';
import type { Graph } from '../ir/types.js';
import { producers } from '../ir/graph.js';
import { paramGroups, streamedUpdate, wideningOf, wideningWays, type ParamGroup } from './lp.js';
import type { Placement } from './placement.js';
import { cpuUpdated, exchangeable, exchanged, streamedFrom, updatedOnGpu } from './candidates.js';
import { mark } from '../../src/timing.js';
import { build, fitsTiers, retimed, simulated, type Built, type LpCandidates } from './built.js';

/** A streamed group moves this share of its set's length toward sooner gradients (llama2-13b/h200: 10 layers of 40). */
const STREAM_SHIFT = 0.25;
/** An activation is cheap to make again where its producer's GPU time is at most this share of its copy down. */
const CHEAP_SHARE = 0.05;
/**
 * Through chains (an activation made again from others made again), the
 * chain's GPU time may be up to each of these shares of the copy, each tried
 * from the same plan (the step takes every activation under it, so a larger
 * share is not a superset that wins more). 0.1: LLaMA's SwiGLU product
 * silu(gate) x up, 113 MB a layer at 4096 tokens, made again with its SiLU
 * in ~0.12 ms against a 2.3 ms copy (llama2-13b/h200: 4.3 GB freed for
 * state, 0.5558 -> 0.5090 s; fifty-sixth session). 1: the projections too,
 * where the GPU idles more than half the step (llama2-13b/h100, CPU-bound:
 * 1.218 -> 1.117 s; 0.1 and then 1 from its plan 1.153; docs/BENCHMARKS.md,
 * fifty-seventh session).
 */
const CHEAP_CHAIN_SHARES = [0.1, 1];
/** Shares of the GPU bytes freed given to state (0: the recompute alone). */
const ROOM_SHARES = [1, 0.6, 0];
/** A plan is kept only where it shortens the step by this share. */
const ROOM_MIN_GAIN = 1e-3;
/** Not tried on longer programs (as moves.ts). */
const ROOM_MAX_INSTRUCTIONS = 12_000;

export function lpTryRoom(g: Graph, hw: HardwareProfile, acc: LpCandidates, saved: readonly number[], keepParamsOnGpu: boolean): void {
  const b = acc.best;
  if (!b || b.prog.instructions.length > ROOM_MAX_INSTRUCTIONS || b.placement.home.includes('nvme')) return;
  // (the ways the best leaves the LPs' family: a candidate may leave it by no other)
  const ways = new Set(wideningWays(wideningOf(g, b.placement, saved) ?? {}));
  const within = (p: Placement) => wideningWays(wideningOf(g, p, saved) ?? {}).every((w) => ways.has(w));
  lpTryStreamsSooner(g, hw, acc, within);
  if (lpTryCheapRecompute(g, hw, acc, saved, keepParamsOnGpu, within, CHEAP_SHARE, false, acc.best!.placement)) lpTryStreamsSooner(g, hw, acc, within);
  // (through chains: the plan may then leave the family by chains too)
  const withChains = (p: Placement) => wideningWays(wideningOf(g, p, saved) ?? {}).every((w) => ways.has(w) || w === 'chains');
  // (each share from the same plan: the step takes every activation under it)
  const from = acc.best!.placement;
  for (const share of CHEAP_CHAIN_SHARES) lpTryCheapRecompute(g, hw, acc, saved, keepParamsOnGpu, withChains, share, true, from);
  if (acc.best!.placement !== from) {
    lpTryStreamMore(g, hw, acc, withChains);
    lpTryStreamsSooner(g, hw, acc, withChains);
  }
  mark('LP room candidates');
}

type Within = (p: Placement) => boolean;

/** Whether p, within the best's widening, beats the best by ROOM_MIN_GAIN, built as it is or retimed (then kept). */
function keepIfFaster(g: Graph, hw: HardwareProfile, acc: LpCandidates, p: Placement, within: Within): boolean {
  if (!within(p)) return false;
  const beat = simulated(g, hw, acc.best!).stepSeconds * (1 - ROOM_MIN_GAIN);
  let c: Built = build(g, hw, p);
  if (!fitsTiers(c.arenas.arenaBytes, hw)) return false;
  if (simulated(g, hw, c).stepSeconds >= beat) c = retimed(g, hw, c, beat);
  if (!fitsTiers(c.arenas.arenaBytes, hw) || simulated(g, hw, c).stepSeconds >= beat) return false;
  acc.best = c;
  return true;
}

/**
 * More of the CPU-updated groups streamed (candidates.ts streamedFrom, the
 * last gradient first): the copies that offloads made again no longer take
 * carry state (as lpTryStream after recomputedOneLevel), where that is faster
 * and within the widening.
 */
function lpTryStreamMore(g: Graph, hw: HardwareProfile, acc: LpCandidates, within: Within): void {
  const onCpu = cpuUpdated(g, paramGroups(g), acc.best!.placement);
  if (onCpu.length === 0) return;
  const beat = simulated(g, hw, acc.best!).stepSeconds;
  const { fastest } = streamedFrom(g, hw, acc.best!.placement, onCpu, beat);
  if (fastest && within(fastest.placement) && simulated(g, hw, fastest).stepSeconds < beat) acc.best = fastest; // (it fits: streamedFrom keeps only those)
}

function lpTryStreamsSooner(g: Graph, hw: HardwareProfile, acc: LpCandidates, within: Within): boolean {
  let p = acc.best!.placement;
  const made = producers(g);
  const groups = paramGroups(g);
  const onGpu = (q: ParamGroup) => q.state.every((t) => p.home[t] === 'gpu');
  const sets: ParamGroup[][] = [];
  for (const q of groups) {
    const set = sets.find((s) => exchangeable(s[0], q));
    if (set) set.push(q); else sets.push([q]);
  }
  let moved = 0;
  for (const set of sets) {
    if (!set.some((q) => streamedUpdate(p, q))) continue;
    set.sort((a, b) => made[a.grad] - made[b.grad] || a.adam - b.adam);
    const shift = Math.round(set.length * STREAM_SHIFT);
    if (shift === 0) continue;
    // the sooner ones first, so that each lands on a group not yet moved
    for (let i = shift; i < set.length; i++) {
      const q = set[i], r = set[i - shift];
      if (streamedUpdate(p, q) && onGpu(r)) { p = exchanged(p, q, r); moved++; }
    }
  }
  return moved > 0 && keepIfFaster(g, hw, acc, p, within);
}

/**
 * p with its activations made again where their run (one level), or their
 * chain's (chains), takes at most `share` of their copy, the bytes freed
 * given to state; kept in acc where faster and within (keepIfFaster).
 */
function lpTryCheapRecompute(g: Graph, hw: HardwareProfile, acc: LpCandidates, saved: readonly number[], keepParamsOnGpu: boolean, within: Within, share: number, chains: boolean, p: Placement): boolean {
  const made = producers(g);
  const remat = p.remat ? [...p.remat] : g.tensors.map(() => false);
  const again = (u: number) => remat[u] && g.tensors[u].role === 'activation';
  // (what is there to read again: parameters, data, saved activations; lp.ts oneLevel)
  const isSaved = new Set(saved);
  const there = (u: number) => { const tu = g.tensors[u]; return tu.persistent || tu.role === 'input' || tu.role === 'param16' || isSaved.has(u); };
  // (a tensor read by an activation the plan makes again must stay: that one's chain would lengthen)
  const readByAgain = new Uint8Array(g.tensors.length);
  g.tensors.forEach((t) => { if (again(t.id) && made[t.id] >= 0) for (const u of g.ops[made[t.id]].inputs) readByAgain[u] = 1; });
  // (through chains: a run's GPU seconds with those of the activations made
  // again it reads, theirs in turn; Infinity where it reads a tensor that is
  // not there to read and not made again)
  const chainSeconds = new Map<number, number>();
  const chainOf = (t: number): number => {
    const known = chainSeconds.get(t);
    if (known !== undefined) return known;
    const op = g.ops[made[t]];
    let sec = opSeconds(g, op, 'gpu', hw);
    for (const u of op.inputs) sec += again(u) && made[u] >= 0 ? chainOf(u) : there(u) ? 0 : Infinity;
    chainSeconds.set(t, sec);
    return sec;
  };
  const home0 = [...p.home];
  let freed = 0, offloads = 0, chained = false;
  for (const t of [...saved].sort((a, b) => made[a] - made[b])) {
    const op = g.ops[made[t]], bytes = g.tensors[t].sizeBytes;
    if (remat[t]) continue;
    if (!chains && (readByAgain[t] || op.inputs.some(again) || !op.inputs.every(there))) continue;
    const seconds = chains ? chainOf(t) : opSeconds(g, op, 'gpu', hw);
    if (seconds > share * copySeconds(bytes, 'gpu', 'cpu', hw)) continue;
    if (op.inputs.some(again)) chained = true;
    remat[t] = true;
    chainSeconds.clear(); // (t is made again now: chains through it cost more)
    for (const u of op.inputs) readByAgain[u] = 1;
    // (an offloaded one frees its copies down and up; a kept one, its GPU bytes)
    if (home0[t] === 'gpu') freed += bytes; else { home0[t] = 'gpu'; offloads++; }
  }
  if (freed === 0 && offloads === 0) return false;
  // (through chains, none read an activation made again: the one-level step's
  // candidates, tried before; gpt3-13b/h100 built its 2 offloads once more)
  if (chains && !chained) return false;
  // the room goes to the CPU-updated groups, and (through chains) also to
  // the streamed ones first, whose state crosses both links each step
  // (llama2-13b/h200, h2d-bound: 0.5429 s the CPU's first, 0.5090 the streamed)
  const groups = paramGroups(g);
  const offGpu = (q: ParamGroup) => q.state.length > 0 && q.state.every((t) => p.home[t] === 'cpu');
  const cpu = cpuUpdated(g, groups, p).filter((q) => q.state.length > 0);
  const orders = [cpu];
  if (chains) orders.push(groups.filter((q) => offGpu(q) && (p.opTier[q.adam] === 'cpu' || streamedUpdate(p, q)))
    .sort((a, b) => Number(streamedUpdate(p, b)) - Number(streamedUpdate(p, a)) || made[b.grad] - made[a.grad] || a.adam - b.adam));
  let won = false;
  // (with no GPU bytes freed, every share is the recompute alone: built once)
  for (const order of orders) for (const share of freed > 0 ? ROOM_SHARES : [0]) {
    if (order !== cpu && share === 0) continue; // (the recompute alone: built with the first order)
    const home = [...home0], opTier = [...p.opTier], rm = [...remat], fwdCpu = p.forwardCastOnCpu ? [...p.forwardCastOnCpu] : undefined;
    let room = freed * share;
    for (const q of order) {
      if (q.stateBytes > room) continue;
      updatedOnGpu(q, home, opTier, rm, q.remakeable && !keepParamsOnGpu);
      if (fwdCpu && q.cast >= 0) fwdCpu[q.cast] = false;
      room -= q.stateBytes;
    }
    if (keepIfFaster(g, hw, acc, { ...p, home, opTier, remat: rm, ...(fwdCpu ? { forwardCastOnCpu: fwdCpu } : {}) }, within)) won = true;
  }
  return won;
}
