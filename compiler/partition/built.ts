// A placement scheduled: Placement -> its program, arenas and simulation
// (Built), and the LP roundings made into such placements.
//
// Takes a training graph, a hardware profile and a placement (or an LP's
// shares and a rounding of them). Gives a Built: the placement's program
// (schedule/program.ts), its state order and arenas (schedule/arena.ts) and,
// on demand, its simulation (simulate.ts), kept with it so that each
// candidate is scheduled and simulated once; retimed() places a candidate's
// arenas again (by when frees end, along memory-gated schedules) and keeps
// the fastest; lpBuilt() repairs a rounding until every arena fits (moving
// the least committed groups a tier down); lpTry/lpTryRounded keep the
// fastest of the candidates so far (LpCandidates), each rounding built once.
// Keeps true: a Built that lpBuilt or retimed returns fits the profile's
// capacities (build alone may overflow: its caller checks); a candidate
// replaces the best only when it simulates strictly faster (the first on
// ties), so the choice is deterministic.
// Cost: per build, the program, assignOffsets' placements and one
// simulation, O(instructions) each; retimed adds up to a dozen placements and
// simulations; lpBuilt up to 40 repairs (one build each).

import type { Tier } from '../cost/cost.js';
import type { HardwareProfile } from '../cost/profiles.js';
import type { Graph } from '../ir/types.js';
import { formatBytes as fmtBytes } from '../../src/sizes.js';
import type { LpSolution } from './lp.js';
import { castOnce, placementFrom, remakeOnGpu, roundSolution, type Rounded, type Rounding } from './lp-round.js';
import { PLAN_CAPACITY_SHARE } from './lp-memory.js';
import type { Placement } from './placement.js';
import { gatedSchedule } from '../schedule/gated.js';
import { assignInTime, assignOffsets, type Arenas, type ReuseTiming } from '../schedule/arena.js';
import { stateOrder } from '../schedule/state-order.js';
import { buildProgram, type Program } from '../schedule/program.js';
import { followedProducers, instructionSeconds, simulate, type Simulation } from '../simulate/simulate.js';
import { diag, UserError } from '../../src/diagnostics.js';
import { mark } from '../../src/timing.js';

export const fitsTiers = (a: Record<Tier, number>, hw: HardwareProfile) => a.gpu <= hw.gpu.capacityBytes && a.cpu <= hw.cpu.capacityBytes && a.nvme <= hw.nvme.capacityBytes;

/**
 * A placement with its scheduled program and arenas (and, once simulated, its
 * simulation): each candidate placement is scheduled once, and the one kept is
 * the plan's (planFor takes it as it is).
 */
export interface Built { placement: Placement; prog: Program; /** per buffer (state-order.ts) */ order: Float64Array; arenas: Arenas; sim?: { hw: HardwareProfile; result: Simulation } }

export const capacities = (hw: HardwareProfile): Record<Tier, number> => ({ gpu: hw.gpu.capacityBytes, cpu: hw.cpu.capacityBytes, nvme: hw.nvme.capacityBytes });

/**
 * Up to this many instructions, a program whose arenas put the buffers NVMe
 * reads fill in the ring (arena.ts) has them placed without it too, and keeps
 * the faster by simulation. The ring gave 8 of bench:compile's 31 plans
 * 5-25 % shorter steps and none a longer one; over 119 small NVMe plans
 * compiled for this VM's calibrated profile (the tiny models x precisions x
 * GPU shares, with and without DPU), 14 shorter (to -37 %) and 18 longer (to
 * +6.8 %: a tight CPU whose other buffers, kept below the ring, then wait for
 * the h2d copies that free the bytes they reuse); choosing per program, 12
 * shorter and 2 longer (+2.4 and +3.5 %: the candidates compile kept moved).
 * The choice costs a placement and a simulation per candidate: gpt3-175b's 11
 * candidates of ~19 000 instructions took 0.7-1.3 s more of its 10 s
 * target, and none of the 31 plans changed with it (docs/BENCHMARKS.md,
 * fifteenth session).
 */
const RING_CHOICE_MAX_INSTRUCTIONS = 10_000;

export const build = (g: Graph, hw: HardwareProfile, p: Placement, prog: Program = buildProgram(g, p)): Built => {
  const order = stateOrder(g, prog);
  const b: Built = { placement: p, arenas: assignOffsets(prog, capacities(hw), order), prog, order };
  if (!b.arenas.ring || prog.instructions.length > RING_CHOICE_MAX_INSTRUCTIONS) return b;
  const without: Built = { placement: p, arenas: assignOffsets(prog, capacities(hw), order, undefined, false), prog, order };
  return fitsTiers(without.arenas.arenaBytes, hw) && simulated(g, hw, without).stepSeconds < simulated(g, hw, b).stepSeconds ? without : b;
};
export const simulated = (g: Graph, hw: HardwareProfile, b: Built): Simulation => {
  if (b.sim?.hw !== hw) b.sim = { hw, result: simulate(g, b.placement, b.arenas.buffers, b.arenas.instructions, hw) };
  return b.sim.result;
};


/** The LP path: three tiers; the rounded plan is repaired until every arena fits. */
export function placeLp(g: Graph, hw: HardwareProfile, sol: LpSolution, how: Rounding = sol.rows === 'plan' ? 'largest' : 'bytes'): Placement {
  return lpBuilt(g, hw, sol, roundSolution(g, sol, how)).placement;
}

/**
 * The LP's plan: each placement LP's shares rounded both ways (the bound
 * LP's only keeping its bytes per tier), each repaired to fit and simulated;
 * the fastest (the first on ties; equal roundings are built once). Which LP
 * and which rounding win varies by case (docs/BENCHMARKS.md, issue 5); place
 * adds the bound LP's roundings (its first and second stages', and its
 * headroom variants') to the placement LPs'. Throws the first
 * rounding's does-not-fit when none fits.
 */
export function lpBest(g: Graph, hw: HardwareProfile, sols: LpSolution[]): Built {
  const acc: LpCandidates = { seen: new Set() };
  for (const sol of sols) lpTry(g, hw, sol, acc);
  if (!acc.best) throw acc.firstError;
  return acc.best;
}

/** lpBest's state, so that each LP's roundings can be tried as soon as its shares come. */
export interface LpCandidates {
  best?: Built; firstError?: unknown; seen: Set<string>; /** the best's shares and rounding (as repaired) */ bestFrom?: { sol: LpSolution; r: Rounded };
  /** lpTryCheckpoints' candidates that another of them beat: the split and kept-checkpoint candidates are made from them too */
  chainSeeds?: Built[];
}

/** An LP's roundings tried (lpTryRounded); gives those built, each with its shares and its rounding as repaired. */
export function lpTry(g: Graph, hw: HardwareProfile, sol: LpSolution, acc: LpCandidates): { b: Built; sol: LpSolution; r: Rounded }[] {
  const built: { b: Built; sol: LpSolution; r: Rounded }[] = [];
  for (const how of sol.rows === 'plan' ? ['largest', 'bytes'] as const : ['bytes'] as const) {
    const r = roundSolution(g, sol, how), b = lpTryRounded(g, hw, sol, r, acc);
    if (b) built.push({ b, sol, r });
  }
  return built;
}

/**
 * A placement made elsewhere (not an LP's rounding) built and retimed, kept
 * where it fits and beats the best; then the best has no rounding (bestFrom),
 * so the families that start from one skip (they had worked from the
 * rounding it beat).
 */
export function tryPlacement(g: Graph, hw: HardwareProfile, p: Placement, acc: LpCandidates): void {
  const beat = acc.best && simulated(g, hw, acc.best).stepSeconds;
  const b = retimed(g, hw, build(g, hw, p), beat);
  if (fitsTiers(b.arenas.arenaBytes, hw) && (beat === undefined || simulated(g, hw, b).stepSeconds < beat)) { acc.best = b; acc.bestFrom = undefined; }
}

/** The rounding r built (repaired to fit) and retimed, kept where it beats the best; undefined where it was tried before or does not fit. */
export function lpTryRounded(g: Graph, hw: HardwareProfile, sol: LpSolution, r: Rounded, acc: LpCandidates): Built | undefined {
  // (the sets sorted: one rounding filled in another order is the same rounding)
  const key = JSON.stringify([r.p16Tier, r.stateTier, [...r.offload].sort((x, y) => x - y), [...r.recompute].sort((x, y) => x - y)]);
  if (acc.seen.has(key)) return undefined;
  acc.seen.add(key);
  try {
    const b = retimed(g, hw, lpBuilt(g, hw, sol, r), acc.best && simulated(g, hw, acc.best).stepSeconds);
    if (!acc.best || simulated(g, hw, b).stepSeconds < simulated(g, hw, acc.best).stepSeconds) { acc.best = b; acc.bestFrom = { sol, r }; }
    return b;
  } catch (e) {
    if (!(e instanceof UserError)) throw e;
    acc.firstError ??= e;
    return undefined;
  }
}

/**
 * The candidate with its arenas placed again, the fastest kept (the first on
 * ties): along the schedule gated by memory over the whole GPU, then by when
 * frees end (arena.ts ReuseTiming: in the program's schedule without the
 * arena's waits, or in an estimate made as it places), then along schedules
 * gated by memory at smaller GPU shares (GATED_GPU_SHARES,
 * RESERVING_BISECTIONS). The schedule without the arena's waits is a floor
 * under every placement of the program (NVMe batches aside): unless it is at
 * least RETIME_MIN_GAIN below the candidate's own step, and below `beat` (the
 * best so far), none is made, and the next is not tried once one comes within
 * RETIME_MIN_GAIN of that floor. (Requiring the floor RETIME_MIN_GAIN below `beat` too lost
 * gains under 2 %: gpt3-13b/a100 1.660 -> 1.680 s once an earlier candidate
 * came within 2 % of the winner.) Measured (docs/BENCHMARKS.md): gpt3-13b/h200
 * 0.751 -> 0.557 s (the estimate), gpt2-1.5b on 16 GB 0.313 -> 0.290 s (the
 * ideal schedule); gpt3-175b's candidates are within 1.6 % of their floor
 * (placed again, they were 40 % slower).
 */
const RETIME_MIN_GAIN = 0.02;
/**
 * The shares of the GPU at which the plain gate (schedule/gated.ts) is tried,
 * its lifetimes placed by arena.ts assignInTime (in time order, else largest
 * first); less than the whole GPU leaves room for fragmentation:
 * gpt3-13b/h200 0.425 -> 0.402 s, gpt2-1.5b on 16 GB 0.230 -> 0.224 s; with
 * 99 % and largest first, 0.400 -> 0.382 s and 0.221 -> 0.207 s, gpt3-13b/v100
 * 6.490 -> 6.270 s (docs/BENCHMARKS.md); with 99.5 and 96 % too, since every
 * gated schedule is placed (not only those whose makespan beat the best),
 * gpt3-13b/a100 1.6266 -> 1.6224 s, bert tiny on 300 kB 0.196 -> 0.183 ms,
 * the other 29 plans the same.
 */
const GATED_GPU_SHARES = [1, 0.995, 0.99, 0.98, 0.96];
/**
 * The reserving gate (gated.ts) where the whole GPU does not place: bisection
 * steps over [0.96, 1] (the plain gate's smallest share up) for the largest share that does. Its schedule leaves a
 * working set that fits at once, but fragmentation can still overflow by
 * 0.1-0.3 GB; the nearer the share to 1, the shorter its schedule
 * (gpt3-6.7b/a100: 0.4256 s with the reserving gate at 1/0.99/0.98 as the
 * plain one, 0.4192 after 3 steps, 0.4162 after 5; docs/BENCHMARKS.md).
 */
const RESERVING_BISECTIONS = 5;

export function retimed(g: Graph, hw: HardwareProfile, b: Built, beat = Infinity): Built {
  const { prog, order } = b;
  const own = simulated(g, hw, b).stepSeconds;
  const ideal = simulate(g, b.placement, b.arenas.buffers, prog.instructions, hw);
  if (ideal.stepSeconds >= own * (1 - RETIME_MIN_GAIN) || ideal.stepSeconds >= beat) return b;
  const seconds = (i: number) => instructionSeconds(g, b.placement, b.arenas.buffers, prog.instructions[i], hw);
  const follows = followedProducers(g, b.arenas.buffers, prog.instructions);
  let best = b;
  const quiet = (timing: ReuseTiming) => () => assignOffsets(prog, capacities(hw), order, timing);
  // a gated schedule placed; even where the gate's own makespan (the
  // simulator's rule without overheads and NVMe batches) cannot beat the best
  // so far, since the arena it places can: the reserving gate holds back
  // prefetches that the placed arena then runs ahead (gpt3-13b/h100, at 99.5 %
  // of the GPU: makespan 1.644 s, the placement simulated 1.150 s)
  const gated = (share: number, reserving: boolean) => (): Arenas | { overflows: Tier } => {
    const s = gatedSchedule(prog, seconds, follows, { ...capacities(hw), gpu: hw.gpu.capacityBytes * share }, reserving);
    return assignInTime(prog, capacities(hw), order, s.start, s.end);
  };
  const near = () => simulated(g, hw, best).stepSeconds <= ideal.stepSeconds * (1 + RETIME_MIN_GAIN); // near the floor: nothing left to gain
  // the candidate kept when its arenas place and it is faster; what they overflow, if they do
  const keep = (arenas: Arenas | { overflows: Tier }): Tier | undefined => {
    if ('overflows' in arenas) return arenas.overflows;
    const c: Built = { placement: b.placement, arenas, prog, order };
    if (simulated(g, hw, c).stepSeconds < simulated(g, hw, best).stepSeconds) best = c;
    return undefined;
  };
  // the plain gate over the whole GPU first: where memory does not bind, its
  // schedule is the floor's, and once placed the quiet placements (each an
  // assignOffsets and a simulation) are not made (gpt2-1.5b on 16 GB: it
  // reached the floor in every candidate retimed, after both quiet ones)
  const hostOver = (over: Tier | undefined) => over === 'cpu' || over === 'nvme';
  let hostOverflows = hostOver(keep(gated(GATED_GPU_SHARES[0], false)()));
  for (const place of [quiet({ start: ideal.start, end: ideal.end }), quiet({ seconds, follows })]) { if (near()) break; keep(place()); }
  // the plain gate at each smaller share; once its arenas overflow the CPU or
  // NVMe, neither a smaller GPU share nor the reserving gate is tried (a GPU
  // budget is not what makes host bytes fit: bench/compile/plans.mjs's 31
  // plans are the same without them, and gpt3-175b's bound-LP candidate,
  // whose gate overflows the CPU, retimes in 0.8-1.0 s against 1.8-1.9)
  for (const share of GATED_GPU_SHARES.slice(1)) {
    if (near() || hostOverflows) break;
    hostOverflows = hostOver(keep(gated(share, false)()));
  }
  // reserving: the whole GPU, else the largest share down to the plain gate's
  // smallest that places (bisection over the GPU's budget: only while the GPU
  // is what overflows)
  if (!hostOverflows && !near() && keep(gated(1, true)()) === 'gpu') {
    let lo = GATED_GPU_SHARES[GATED_GPU_SHARES.length - 1], hi = 1;
    for (let k = 0; k < RESERVING_BISECTIONS && !near(); k++) {
      const mid = (lo + hi) / 2;
      const over = keep(gated(mid, true)());
      if (over === 'gpu') hi = mid; else if (over === undefined) lo = mid; else break;
    }
  }
  mark('LP placement retimed');
  return best;
}

export function lpBuilt(g: Graph, hw: HardwareProfile, sol: LpSolution, r: Rounded): Built {
  mark('LP rounding');
  const groups = sol.groups;
  const byShare = (tierIndex: number, shares: Float64Array[]) => groups.map((_, i) => i).sort((a, b) => shares[a][tierIndex] - shares[b][tierIndex] || a - b);
  for (let attempt = 0; attempt < 40; attempt++) {
    // a remade p16 whose state is (or was moved) on the CPU: kept there while it has room
    r.p16Tier = castOnce(g, groups, r, hw.cpu.capacityBytes / 2)?.p16Tier ?? r.p16Tier;
    // and one whose state is on the GPU, homed on the CPU: made again on the GPU
    r.p16Tier = remakeOnGpu(g, groups, r);
    const p = placementFrom(g, groups, r.p16Tier, r.stateTier, r.offload, sol.lowerBoundSeconds, r.recompute);
    const b = build(g, hw, p);
    mark('LP placement schedule');
    const arena = b.arenas.arenaBytes;
    if (fitsTiers(arena, hw)) return b;
    // move the least-committed groups one tier down until the overflow is covered
    const spill = (over: number, from: Tier, to: Tier) => {
      const k = from === 'gpu' ? 0 : 1;
      let moved = 0;
      const moveState = (i: number) => { if (r.stateTier[i] === from) { r.stateTier[i] = to; moved += groups[i].stateBytes; } };
      const moveP16 = () => { for (const i of byShare(k, sol.p16Share)) { if (moved >= over) return; if (r.p16Tier[i] === from && !(from === 'gpu' && keepParams) && (to !== 'nvme' || groups[i].remakeable || groups[i].cast < 0)) { r.p16Tier[i] = to; moved += groups[i].p16Bytes; } } };
      // where NVMe has no room for what the CPU sheds (moved there, it would
      // overflow NVMe and end the repair): CPU-homed p16 first (made again
      // from master32 instead, it takes no NVMe bytes), then state up into
      // the GPU's free bytes, the groups with the largest GPU share first
      if (to === 'nvme' && over > hw.nvme.capacityBytes - arena.nvme) {
        if (g.precision !== 'fp32') moveP16();
        let room = (hw.gpu.capacityBytes - arena.gpu) * PLAN_CAPACITY_SHARE;
        for (const i of byShare(0, sol.stateShare).reverse()) {
          if (moved >= over) return moved;
          if (r.stateTier[i] === 'cpu' && !sol.small[i] && groups[i].stateBytes <= room) { r.stateTier[i] = 'gpu'; room -= groups[i].stateBytes; moved += groups[i].stateBytes; }
        }
      }
      // the LP's small groups last: moving them frees little and adds copies
      for (const i of byShare(k, sol.stateShare)) { if (moved >= over) return moved; if (!sol.small[i]) moveState(i); }
      for (const id of sol.saved) { if (moved >= over || from !== 'gpu') break; if (!r.offload.has(id) && !r.recompute.has(id)) { r.offload.add(id); moved += g.tensors[id].sizeBytes; } }
      moveP16();
      for (const i of byShare(k, sol.stateShare)) { if (moved >= over) return moved; if (sol.small[i]) moveState(i); }
      return moved;
    };
    const keepParams = sol.p16Share.every((s) => s[0] > 0.999) && groups.length > 0;
    let moved = 0;
    if (arena.gpu > hw.gpu.capacityBytes) moved += spill(Math.max(arena.gpu - hw.gpu.capacityBytes, 1), 'gpu', 'cpu');
    if (arena.cpu > hw.cpu.capacityBytes) moved += spill(Math.max(arena.cpu - hw.cpu.capacityBytes, 1), 'cpu', 'nvme');
    if (moved === 0) break;
  }
  // (not a proof that none exists: it had said "no placement ... holds this step" where a smaller GPU's plan, which fits this one too, was found)
  throw new RoundingFailed(hw);
}

/** The LP's rounded placement that its repair could not make fit: no proof that nothing fits (compile then places for a smaller GPU: src/compile.ts placeWithin). */
export class RoundingFailed extends UserError {
  constructor(hw: HardwareProfile) {
    super(diag.doesNotFit('').code, `does not fit: the LP's placement, rounded and repaired, does not fit gpu ${fmtBytes(hw.gpu.capacityBytes)}, cpu ${fmtBytes(hw.cpu.capacityBytes)}, nvme ${fmtBytes(hw.nvme.capacityBytes)} (its repair moved all it could; this is no proof that no placement does); raise a capacity or lower --batch/--seq`);
  }
}
