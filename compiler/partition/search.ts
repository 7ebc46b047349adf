// Placement search: Graph + HardwareProfile -> the placement of one training
// step, its scheduled program (Built) and its lower bound.
//
// Takes a training graph and a profile (and whether parameters stay on the
// GPU, the solver threads, a time limit, whether this is a probe, a placement
// the caller knows: compile's DPU steady step tries the plain one). Gives
// (place) everything on the GPU when it fits; else the min-cut when two tiers
// suffice and no capacity binds; else the fastest by simulation of the LP's
// roundings and of candidates.ts's families (and of the min-cut, when it
// fits too); with the bound LP's optimum, widened by the ways the plan leaves
// the LPs' family (boundOf). A model that cannot fit is a UserError saying
// what does not fit and by how many bytes; an LP that ends without an
// optimum, one saying so (its time limit, or its status). Keeps true: the placement returned fits every tier (its arenas
// are placed); its bound holds for it (the LPs' family, or widened to cover
// it). Cost: the LP solves (HiGHS, on solver threads) beside a few dozen
// builds on this thread.

import type { HardwareProfile } from '../cost/profiles.js';
import type { Graph } from '../ir/types.js';
import { tensorBytes } from '../ir/graph.js';
import { allGpu, partitionMinCut } from './mincut.js';
import { formatBytes as fmtBytes } from '../../src/sizes.js';
import { HEADROOM_SHARES, inLpFamily, LP_TIME_LIMIT_SECONDS, startLp, streamsUpdates, wideningOf, wideningWays, type LpSolution, type Widening } from './lp.js';
import { LpWorker } from './highs-worker.js';
import type { Placement } from './placement.js';
import { assignOffsets, compactArenaBytes } from '../schedule/arena.js';
import { stateOrder } from '../schedule/state-order.js';
import { buildProgram, liveBytesPeak, type Program } from '../schedule/program.js';
import { tierPeakEstimate } from '../schedule/liveness.js';
import { computeFloorSeconds, opCostFloorSeconds } from '../simulate/simulate.js';
import { diag, UserError } from '../../src/diagnostics.js';
import { mark } from '../../src/timing.js';
import { build, capacities, fitsTiers, lpTry, retimed, simulated, tryPlacement, type Built, type LpCandidates } from './built.js';
import { lpTryMoves } from './moves.js';
import { lpTryRoom } from './room.js';
import { lpTryCastLead, lpTryCasts, lpTryChainHead, lpTryCheckpoints, lpTryEarlyOffloads, lpTryKeptCheckpoints, lpTryRerunHeld, lpTryRingSpare, lpTrySplit, lpTryStartup, lpTryStream, lpTrySwaps, lpTryUnstream } from './candidates.js';

/** The min-cut path: two tiers, GPU capacity by a price on GPU bytes. Undefined when the CPU tier overflows. */
export function placeMinCut(g: Graph, hw: HardwareProfile): Placement | undefined {
  return minCutPrepared(g, hw)?.placement;
}

/** The min-cut's placement with its program, before the arenas (cutBuilt makes them). */
interface CutCandidate { placement: Placement; prog: Program; order: Float64Array }

/**
 * The min-cut placement and its program. Fragmentation can push the arena
 * above the live-bytes peak the search fits: then the target is tightened by
 * the overflow and the search runs again. Whether (and by how much) the arena
 * overflows is the compact placement's (compactArenaBytes: assignOffsets
 * returns it whenever it does not fit), so the other arena placements wait
 * for cutBuilt. Undefined when the state overflows GPU + CPU, the search
 * finds nothing that fits or the CPU arena overflows (then `overflow` gets
 * the CPU arena's bytes, for the message that nothing fits).
 */
function minCutPrepared(g: Graph, hw: HardwareProfile, overflow?: { cpuArenaBytes?: number }): CutCandidate | undefined {
  // two tiers cannot work when the state alone overflows them
  const state = tensorBytes(g, 'persistent');
  if (state > hw.gpu.capacityBytes + hw.cpu.capacityBytes) return undefined;
  const gpuPeak = (p: Placement) => tierPeakEstimate(g, p, 'gpu');
  let target = hw.gpu.capacityBytes;
  for (let attempt = 0; attempt < 4; attempt++) {
    let p: Placement;
    try { p = partitionMinCut(g, hw, { gpuPeakBytes: gpuPeak, capacityBytes: target }); } catch { return undefined; }
    mark('min-cut search');
    const prog = buildProgram(g, p);
    const order = stateOrder(g, prog);
    const arena = compactArenaBytes(prog, order);
    mark('min-cut program');
    if (arena.gpu <= hw.gpu.capacityBytes) {
      if (arena.cpu <= hw.cpu.capacityBytes) return { placement: p, prog, order };
      if (overflow) overflow.cpuArenaBytes = arena.cpu;
      return undefined;
    }
    target -= arena.gpu - hw.gpu.capacityBytes;
  }
  return undefined;
}

/**
 * The bound of a model that stays on the GPU: over the plans that keep it
 * there, the GPU's own work (floorSeconds, computeFloorSeconds of the all-GPU
 * placement: every op runs on it, one at a time; the all-GPU program runs
 * just that, so its gap is 0), with the bound LP's optimum over every
 * placement beside it (`any`, when optimal; the status stays that LP's). It
 * was the bound LP with its choices fixed to the all-GPU placement's, solved
 * on a second solver thread: 0.02 % lower, and ~0.2 s of a 2-core machine's
 * CPU in a cold compile of gpt2-1.5b.
 */
function keptOnGpu(floorSeconds: number, any: LpSolution): LpSolution {
  return { ...any, lowerBoundSeconds: floorSeconds, keptOnGpu: true, ...(any.status === 'optimal' ? { anyPlacementSeconds: any.lowerBoundSeconds } : {}) };
}

/** The min-cut candidate with its arenas (the same as build's). */
function cutBuilt(hw: HardwareProfile, c: CutCandidate): Built {
  const b = { placement: c.placement, arenas: assignOffsets(c.prog, capacities(hw), c.order), prog: c.prog, order: c.order };
  mark('min-cut schedule');
  return b;
}


export interface Placed {
  placement: Placement;
  /**
   * The plan's bound (none for a probe). A model kept on the GPU gets it as
   * a promise, its LP (over every placement) still solving: planFor builds
   * and checks the plan meanwhile (gpt2-1.5b/a100: its ~0.09 s of assembly
   * and verification off a cold compile's wall time).
   */
  lp?: LpSolution | Promise<LpSolution>;
  /** the placement's program and arenas, when place built them */
  built?: Built;
}

/**
 * The candidate families build on the best plan so far, so what they find
 * depends on where they start, and the LP rounding that simulates fastest is
 * often not the best start: they run again from this many other roundings,
 * fastest first. Measured over bench/compile/plans.mjs's 31 plans
 * (docs/BENCHMARKS.md, twenty-seventh session; the fastest rounding's step,
 * the winning seed's, and the plan from each): llama2-13b on an H100 with 96
 * GB of CPU, 3.079 and 4.751 s (the third-fastest), 1.534 -> 1.421 s;
 * gpt3-6.7b/v100 with 48 GB of CPU, 6.219 and 9.627 s (the fourth), 4.652 ->
 * 4.325; gpt3-13b/v100 with 128 GB, 9.072 and 10.105 (the fourth), 8.426 ->
 * 8.199; gpt3-13b/h100, 1.364 and 1.406 (the third), 1.364 -> 1.185 (its
 * stream candidate); gpt3-13b/a100, 1.660 and 1.761 (the fourth), 1.654 ->
 * 1.627 (1.618 from the fifth); gpt2-124m fp16 on 1 GB, 0.476 and 1.276 (the
 * third), 0.422 -> 0.389; gpt3-6.7b/v100 and 13b on 64 GB of CPU from the
 * second (twenty-sixth session). A seed's step says little of where the
 * families take it (the winners were 3-168 % slower than the fastest), so
 * the seeds are the next three whatever their step; from every seed, the
 * one more plan (13b/a100's) cost 47 s more of the 31 compiles. Each pass
 * costs about what the first did (gpt2-1.5b on 16 GB: 1.7 s of main thread
 * for the three, which change nothing there).
 */
const SEED_PASSES = 3;

/**
 * Where lpTryRerunHeld wins on a plan whose GPU was busy at least this share
 * of the step, the single-group moves run again on it: llama2-7b/h100 (GPU
 * busy all of its 278.9 ms) 0.2789 -> 0.2755 s, two more groups streamed.
 * Elsewhere the GPU time freed was not what bound the step: gpt3-13b/h100
 * (GPU 26 % busy) found nothing, its compile 29.0 -> 38.7 s in two
 * bench:compile runs, and llama2-13b/a100 (62 %) 0.13 % (docs/BENCHMARKS.md,
 * fifty-fifth session).
 */
const RERUN_MOVES_GPU_BUSY_SHARE = 0.9;

/**
 * Placement: everything on the GPU when it fits; else the min-cut when two
 * tiers suffice, no capacity binds (the cut's price is zero) and the cut
 * computes on the GPU (exact then); else the LP over three tiers (its
 * candidates, then the best of them with the first forward op's parameter
 * state on the GPU: lpTryStartup; with activations recomputed through chains:
 * lpTryCheckpoints; with the head of the CPU's update chain on the GPU:
 * lpTryChainHead; with master32 of NVMe state in CPU memory: lpTrySplit;
 * updates streamed to the GPU, also after its offloads are recomputed one
 * level: lpTryStream; kept activations made again
 * through chains: lpTryKeptCheckpoints; the split and kept-checkpoint
 * candidates again from each checkpoint candidate another beat; casts on
 * the GPU from master32 copied up: lpTryCasts; with the CPU ring's spare
 * bytes given back to NVMe moments: lpTryRingSpare; with the CPU's casts
 * drafted further ahead of its updates: lpTryCastLead; all of these again from
 * each of the SEED_PASSES next-fastest roundings while the best is still
 * above the bound LP's optimum; then groups of one size exchanging their
 * configurations: lpTrySwaps; then its streamed updates back on the CPU
 * where they no longer pay, or those whose gradients come first: lpTryUnstream;
 * then its offloads moved to the activations of their kind made first:
 * lpTryEarlyOffloads, and where that wins the exchanges again; then one
 * group changed at a time: lpTryMoves; then streamed updates moved to sooner
 * gradients and cheap kept activations made again for state's room:
 * lpTryRoom; then its reruns' outputs kept for their next readers:
 * lpTryRerunHeld), or, when the cut also fits, whichever of
 * the two the simulator finds faster. The LP runs in every case: its optimum
 * is the plan's lower bound (boundOf). Each candidate is scheduled once; the
 * kept one's program, arenas and simulation come back with it.
 */
export async function place(g: Graph, hw: HardwareProfile, opts: { keepParamsOnGpu?: boolean; solver?: LpWorker; second?: LpWorker; lpTimeLimitSeconds?: number; probe?: 'fits' | 'step'; known?: Placement } = {}): Promise<Placed> {
  const persistentBytes = tensorBytes(g, 'persistent');
  if (persistentBytes > hw.gpu.capacityBytes + hw.cpu.capacityBytes + hw.nvme.capacityBytes) throw diag.doesNotFit(doesNotFitMessage(g, hw, opts.keepParamsOnGpu ?? false));
  // an op reads and writes its operands whole on its own tier, GPU or CPU:
  // one larger than both cannot be placed (batch 1e13 had reached HiGHS with
  // coefficients past its range: an internal error and a stack trace)
  const tierMax = Math.max(hw.gpu.capacityBytes, hw.cpu.capacityBytes);
  const big = g.tensors.find((t) => t.role !== 'master32' && t.role !== 'adamM' && t.role !== 'adamV' && t.sizeBytes > tierMax);
  if (big) throw diag.doesNotFit(`does not fit: tensor '${big.name}' [${big.shape.join(',')}] takes ${fmtBytes(big.sizeBytes)}, and the op that makes or reads it holds it whole on the GPU (${fmtBytes(hw.gpu.capacityBytes)}) or the CPU (${fmtBytes(hw.cpu.capacityBytes)}); lower --batch/--seq or raise --gpu-mem/--cpu-mem`);
  // NVMe is read and written through CPU buffers, a whole tensor at a time:
  // the state the GPU and the CPU cannot hold rests there, so the CPU stages
  // at least the largest of the tensors that hold it, no less than the
  // smallest tensors that add up to it (gpt3-13b on a V100 with 100 MB of CPU
  // had ended in the rounding's "no proof that no placement does")
  const spill = persistentBytes - hw.gpu.capacityBytes - hw.cpu.capacityBytes;
  if (spill > 0) {
    const sizes = g.tensors.filter((t) => t.persistent).map((t) => t.sizeBytes).sort((a, b) => a - b);
    let held = 0, staged = 0;
    for (const b of sizes) { if (held >= spill) break; held += b; staged = b; }
    if (staged > hw.cpu.capacityBytes) throw diag.doesNotFit(`does not fit: ${fmtBytes(spill)} of the state (${fmtBytes(persistentBytes)}) is more than the GPU (${fmtBytes(hw.gpu.capacityBytes)}) and the CPU hold, so it rests on NVMe, which is read and written through CPU buffers a whole tensor at a time; the smallest tensors that make up those bytes include one of ${fmtBytes(staged)}, and the CPU has ${fmtBytes(hw.cpu.capacityBytes)} (short by ${fmtBytes(staged - hw.cpu.capacityBytes)}); raise --cpu-mem`);
  }
  // parameters kept on the GPU (ZeRO-Offload's setting): their half copies
  // alone must fit there; refused before any LP is built (fit's probes of
  // models too deep for it each built and solved one to learn so)
  if (opts.keepParamsOnGpu && tensorBytes(g, 'param16') > hw.gpu.capacityBytes) throw diag.doesNotFit(doesNotFitMessage(g, hw, true));
  // a model that fits stays on the GPU with no traffic (issue 5): its bound
  // is over those plans (keptOnGpu: the GPU's own work); the bound LP's over
  // every placement goes beside it (offloading the update can beat it by a
  // few per cent: gpt2-124m/v100 72.1 against 75.1 ms). Known before any LP
  // is posted, so that the bound LP, whose vertex is then never rounded, is
  // built and solved for its optimum alone (startLp's numberOnly); a probe
  // needs no LP at all. Where the step's liveness estimate fits the GPU, that
  // LP is posted before the all-GPU program and its arenas are built, which
  // then overlap its solve (gpt2-1.5b/a100: posted ~0.13 s sooner); the
  // arenas have the last word, and where they do not fit after all (they hold
  // a little more than the estimate: alignment, order), that solve is wasted
  // and the LPs below queue behind it
  const lpOptions = { keepParamsOnGpu: opts.keepParamsOnGpu, solver: opts.solver, second: opts.second, refineAtOnce: persistentBytes > hw.gpu.capacityBytes, timeLimitSeconds: opts.lpTimeLimitSeconds };
  const allOnGpu = persistentBytes <= hw.gpu.capacityBytes ? allGpu(g) : undefined;
  const early = allOnGpu && !opts.probe && tierPeakEstimate(g, allOnGpu, 'gpu') <= hw.gpu.capacityBytes ? startLp(g, hw, { ...lpOptions, numberOnly: true }) : undefined;
  if (early) mark('LP build (kept on the GPU?)');
  const whole = allOnGpu && build(g, hw, allOnGpu);
  const stays = whole !== undefined && fitsTiers(whole.arenas.arenaBytes, hw);
  if (stays && opts.probe) return { placement: whole.placement, built: whole };
  // the LPs solve on worker threads while this thread searches a placement;
  // when the state cannot all stay on the GPU, the placement LPs' shares are
  // almost always wanted: they are queued at once, before the bound LP
  const lp = stays && early ? early : startLp(g, hw, { ...lpOptions, numberOnly: stays });
  mark('LP build');
  try {
    if (stays) {
      const floor = computeFloorSeconds(g, whole.placement, hw);
      // (its caller may fail before it awaits this: a failed solve is then no unhandled rejection)
      const bound = lp.firstVertex.then((any) => keptOnGpu(floor, any));
      bound.catch(() => {});
      return { placement: whole.placement, lp: bound, built: whole };
    }
    const cutOverflow: { cpuArenaBytes?: number } = {};
    const cutC = minCutPrepared(g, hw, cutOverflow);
    const cutOk = cutC && (!opts.keepParamsOnGpu || g.tensors.every((t) => t.role !== 'param16' || cutC.placement.home[t.id] === 'gpu'));
    // no capacity binds (the cut's price is zero): the cut is exact for two
    // tiers, where it computes on the GPU; one that runs ops on the CPU (a
    // profile whose emulated GPU is no faster) is weighed against the LP's
    // plans below, which run the CPU's work beside the GPU's
    if (cutC && cutOk && cutC.placement.lambdaSecondsPerByte === 0 && inLpFamily(g, cutC.placement)) {
      const cut = cutBuilt(hw, cutC);
      return { placement: cut.placement, lp: opts.probe ? undefined : await boundOf(g, hw, lp, await lp.bound, cut), built: cut };
    }
    // the placement LPs' shares come before the bound (refineAtOnce queues
    // them first): round, schedule and simulate them while the bound LP
    // solves; they are kept only when the bound LP has a solution too
    // (each LP's roundings as soon as its shares come, while the next solves)
    const acc: LpCandidates = { seen: new Set() };
    const tried: ReturnType<typeof lpTry> = []; // the LPs' roundings built (the second pass's seed is one)
    const earlyEach = lp.earlyEach();
    if (!opts.probe) void lp.bound; // (its second solve, where it needs one, queued as soon as the first is done)
    if (opts.probe !== 'fits') {
      for (const share of HEADROOM_SHARES) lp.headroom(share); // queued on the second solver thread, behind its placement LP
      lp.boundLeanest(); // and the bound LP's second stage, behind the bound LP
    }
    for (const shares of await earlyEach) {
      const s = await shares;
      mark('LP placement solved (awaited)');
      if (s) tried.push(...lpTry(g, hw, s, acc));
      // a probe of whether it fits: the first placement LP's rounding that
      // fits, no candidate that would only be faster
      if (opts.probe === 'fits' && acc.best) return { placement: acc.best.placement, built: acc.best };
    }
    // and the bound LP's shares, kept to its bytes per tier, once it is solved
    // (its rows see the forward pass's fetches and offloads: gpt3-13b/h200
    // 0.558 -> 0.419 s, gpt2-1.5b on 16 GB 0.290 -> 0.259 with castOnce);
    // where neither placement LP gave a plan (stopped at their time limit on a
    // graph of 10^5 ops, infeasible at the edge of what fits: their rows count
    // high), the search starts from these instead (it had been skipped, and
    // the plan was the bound LP's rounding alone: gpt3-13b of 58 layers on an
    // A100 with 32 GB of CPU and 128 GB of NVMe 48.80 -> 35.76 s, a GPT of 10^5
    // ops 101.1 -> 41.7 s; docs/BENCHMARKS.md, sixty-first session)
    const boundSol = opts.probe === 'fits' ? undefined : await lp.firstVertex;
    if (boundSol && (acc.best || boundSol.status === 'optimal')) {
      if (boundSol.status === 'optimal') tried.push(...lpTry(g, hw, boundSol, acc));
      mark('LP bound candidate');
      // and the bound LP's over 98 % of the GPU (its rounding leaves the
      // schedule room to prefetch), then over 97.5 %: a start for the first
      // pass of the families only, not one of the later passes' seeds
      // (HEADROOM_SHARES)
      for (const [k, share] of HEADROOM_SHARES.entries()) {
        const roomy = await lp.headroom(share);
        if (roomy.status !== 'optimal') continue;
        const built = lpTry(g, hw, roomy, acc);
        if (k === 0) tried.push(...built);
      }
      // and the bound LP's vertex with the least total load (its first stage's
      // vertex is any of its optima: either rounds better in some cells;
      // tried last, so that it does not change the others' retiming)
      const lean = await lp.boundLeanest();
      if (lean) tried.push(...lpTry(g, hw, lean, acc));
      mark('LP bound-row candidates');
      // and a placement the caller brings (compile's DPU steady step: the
      // plain step's, for this graph), which the families then build on
      if (opts.known) { tryPlacement(g, hw, opts.known, acc); mark('known placement'); }
    }
    // (none fits where the bound LP's roundings did not either)
    if (boundSol && acc.best) {
      const saved = boundSol.saved;
      // the other LP roundings (each fits: lpTryRounded keeps no other), fastest first (the later passes' seeds, below; each is
      // built once: lpTryRounded skips a rounding tried before)
      const first = acc.best;
      const seeds = tried.filter((t) => t.b !== first)
        .sort((x, y) => simulated(g, hw, x.b).stepSeconds - simulated(g, hw, y.b).stepSeconds).slice(0, SEED_PASSES);
      tried.length = 0;
      // the families, each made from the best so far; `request`: the bounds
      // their plans will need are asked for as they are tried (such a plan's
      // bound is the bound LP's widened by the ways it leaves the family, those
      // of the best it is made from and its own: solved meanwhile; boundOf asks
      // for the kept plan's in any case)
      const families = (request: boolean) => {
        const wider = (own: Widening) => () => {
          if (opts.probe || !request) return;
          const w = { ...(acc.best && wideningOf(g, acc.best.placement, saved)), ...own };
          if (wideningWays(w).length) void lp.wideBound(w);
        };
        lpTryStartup(g, hw, acc, opts.keepParamsOnGpu ?? false);
        lpTryCheckpoints(g, hw, acc, (w) => { if (!opts.probe && request) void lp.wideBound(w); });
        lpTryChainHead(g, hw, acc);
        lpTrySplit(g, hw, acc, wider({ split: true }));
        // (and the best's own, where neither guess was it: gpt3-6.7b on a V100
        // with 48 GB of CPU, whose checkpoint plan keeps NVMe state but does not split)
        wider({})();
        lpTryStream(g, hw, acc, saved, wider({ stream: true }));
        lpTryKeptCheckpoints(g, hw, acc, saved, opts.keepParamsOnGpu ?? false, wider({ chains: true }));
        // and both from each checkpoint candidate another beat: the cheaper
        // chain may leave the later ones less to gain (llama2-7b on 24 + 32 GB:
        // 8.96 s from the winner's, 8.64 from the other's)
        for (const seed of acc.chainSeeds ?? []) {
          const best: Built = acc.best!;
          acc.best = seed;
          lpTrySplit(g, hw, acc, wider({ split: true }));
          lpTryKeptCheckpoints(g, hw, acc, saved, opts.keepParamsOnGpu ?? false, wider({ chains: true }));
          if (simulated(g, hw, acc.best).stepSeconds >= simulated(g, hw, best).stepSeconds) acc.best = best;
        }
        lpTryCasts(g, hw, acc, wider({ cast: true }));
        lpTryRingSpare(g, hw, acc);
        lpTryCastLead(g, hw, acc);
      };
      families(true);
      // and all of them again from each of the SEED_PASSES next-fastest
      // roundings, the fastest outcome kept, while the best is still above
      // the bound LP's optimum (over the LPs' family; a plan below it has
      // gained by leaving the family more than any rounding could). No bound
      // is asked for meanwhile: boundOf asks for the kept plan's.
      for (const seed of seeds) {
        if (boundSol.status !== 'optimal' || simulated(g, hw, acc.best!).stepSeconds <= boundSol.lowerBoundSeconds) break;
        const best: Built = acc.best!, bestFrom = acc.bestFrom;
        acc.best = seed.b; acc.bestFrom = { sol: seed.sol, r: seed.r }; acc.chainSeeds = undefined;
        families(false);
        if (simulated(g, hw, acc.best).stepSeconds >= simulated(g, hw, best).stepSeconds) { acc.best = best; acc.bestFrom = bestFrom; }
        mark('LP next-seed families');
      }
      // and, on the plan kept, groups of one size exchanging their
      // configurations (whether or not it beats the bound LP's optimum: a
      // plan that leaves the family, as gpt3-13b/h200's streamed one, can;
      // in a probe of the step too, whose plan is the full compile's)
      if (opts.probe !== 'fits') lpTrySwaps(g, hw, acc);
      // and the kept plan without its streamed updates, where they no longer pay;
      // where it still streams some, with more of them (the exchanges and later
      // families moved it from the plan the families streamed from:
      // llama2-70b/h200 10.04 -> 9.69 s; a plan that streams none was weighed
      // against streaming by the families already)
      const streamMore = () => { if (acc.best && streamsUpdates(g, acc.best.placement)) lpTryStream(g, hw, acc, saved, () => {}); };
      if (opts.probe !== 'fits') { lpTryUnstream(g, hw, acc); streamMore(); }
      // and its offloads moved to the activations of their kind made first;
      // where that wins, the exchanges again from it (gpt3-13b/h200 0.2999 ->
      // 0.2987 s; the other plans the same)
      if (opts.probe !== 'fits' && lpTryEarlyOffloads(g, hw, acc, saved)) lpTrySwaps(g, hw, acc);
      // and one group's configuration changed at a time, any group (moves.ts)
      if (opts.probe !== 'fits') lpTryMoves(g, hw, acc);
      // and its streamed updates moved to sooner gradients, its cheap kept activations made again for state's room (room.ts)
      if (opts.probe !== 'fits') lpTryRoom(g, hw, acc, saved, opts.keepParamsOnGpu ?? false);
      // and its reruns' outputs kept for their next readers close behind;
      // where that wins on a plan whose GPU is busy most of the step, the
      // moves again: the GPU time it frees can take more streamed updates
      if (opts.probe !== 'fits') {
        const gpuBound = acc.best !== undefined && simulated(g, hw, acc.best).streamBusySeconds.gpu >= RERUN_MOVES_GPU_BUSY_SHARE * simulated(g, hw, acc.best).stepSeconds;
        if (lpTryRerunHeld(g, hw, acc) && gpuBound) lpTryMoves(g, hw, acc);
        // and, where it streams updates, more of them once more: the moves and
        // room moved it too (llama2-13b/h100 1.1174 -> 1.1083 s; run here
        // alone, llama2-13b/h100 on 96 GB keeps 1.2590 s, which the call
        // above takes to 1.2543)
        streamMore();
      }
    }
    const alt = acc.best;
    if (alt && cutC && cutOk) { simulated(g, hw, alt); mark('LP placement simulate'); }
    // (a probe reports no bound: the placement LPs' shares stand as solved,
    // and the bound's second solve, which only sets the bound they carry, is
    // neither started nor awaited; a 97-layer BERT tiny's, 26 s, had been
    // the last thing fit's answer waited for)
    const shares = opts.probe ? await lp.early() : [];
    const sols = shares.length ? shares : await lp.placements();
    const sol = sols[0];
    mark('LP solved (awaited)');
    // the placement's cutSeconds is the bound (placementFrom); the shares' placement was made before it was known
    const lpPlan = (): Built => {
      // (the bound LP's, where no placement LP has a solution: the roundings
      // of the solution it reports its bound from too, beside the search's
      // best, the fastest kept; a rounding tried before is not built again)
      if (sol.rows === 'bound') for (const s of sols) lpTry(g, hw, s, acc);
      const kept = acc.best;
      if (!kept) throw acc.firstError; // (the first rounding did not fit)
      kept.placement = { ...kept.placement, cutSeconds: sol.lowerBoundSeconds };
      return kept;
    };
    let chosen: Built;
    if (cutC && cutOk) {
      // a capacity binds: the priced cut is a heuristic there; keep the LP's
      // placement when it simulates faster. The cut's step is at least its
      // busiest compute stream's work (computeFloorSeconds): when that is
      // above the LP's simulated step, the cut cannot win, and its arenas and
      // simulation are not made (the same choice, for less work)
      let lpB: Built | undefined;
      if (sol.status === 'optimal') {
        try { lpB = lpPlan(); } catch (e) { if (!(e instanceof UserError)) throw e; } // the LP's rounding did not fit: the cut stands
      }
      if (lpB && computeFloorSeconds(g, cutC.placement, hw) > simulated(g, hw, lpB).stepSeconds) {
        mark('min-cut left out (its compute alone is slower)');
        chosen = lpB;
      } else {
        const cut = retimed(g, hw, cutBuilt(hw, cutC), lpB && simulated(g, hw, lpB).stepSeconds);
        mark('min-cut simulate');
        chosen = lpB && simulated(g, hw, lpB).stepSeconds < simulated(g, hw, cut).stepSeconds ? lpB : cut;
      }
    } else {
      if (sol.status === 'infeasible') throw diag.doesNotFit(doesNotFitMessage(g, hw, opts.keepParamsOnGpu ?? false, cutOverflow.cpuArenaBytes));
      if (sol.status === 'timeLimit') throw diag.lpTimeLimit(`the LP that places this step ran past its time limit of ${opts.lpTimeLimitSeconds ?? LP_TIME_LIMIT_SECONDS} s without an optimal placement; raise --lp-time-limit (seconds, default ${LP_TIME_LIMIT_SECONDS})`);
      if (sol.status !== 'optimal') throw diag.doesNotFit(`the LP solver stopped without an optimal placement (status ${sol.status}); please report the model and profile`);
      chosen = lpPlan();
    }
    const bound = opts.probe ? undefined : await boundOf(g, hw, lp, sol, chosen); // (it may set the placement's cutSeconds: read after)
    return { placement: chosen.placement, lp: bound, built: chosen };
  } finally {
    lp.close();
  }
}

/**
 * The bound reported with a plan: the bound LP's with the fetch-then-update
 * rows and its CPU updates following their gradients' copies down, as the
 * executor runs them (lp.ts wideBound, widened by no way or more), which holds for the plans
 * that recompute one level deep and rest each group's state in one place (the
 * LPs' family); for one that recomputes through chains (checkpoints.ts),
 * splits a group's state (lpTrySplit), streams updates to the GPU
 * (lpTryStream) or casts on the GPU from master32 copied up (lpTryCasts),
 * the bound LP's widened by just those ways (wideningOf,
 * named in the plan's bound.widenedBy), lower (gpt3-175b: 317.9 -> 305.2 s
 * over chains, tenth session; a split plan of it simulated at 302.2 s, under
 * the bound LP's 305.2: docs/BENCHMARKS.md, fourteenth session); none when
 * that LP has no optimum. For a plan that runs ops on the CPU (the
 * min-cut's, where the profile's GPU is emulated on this CPU and no faster),
 * which neither LP's family holds, the floor over every placement
 * (opCostFloorSeconds): the bound LP's optimum had been reported for it, and
 * once lay above its step.
 */
async function boundOf(g: Graph, hw: HardwareProfile, lp: ReturnType<typeof startLp>, sol: LpSolution, b: Built): Promise<LpSolution> {
  if (!inLpFamily(g, b.placement)) {
    // (whether or not the LP had an optimum: the cut may run a model on the
    // CPU whose working set no GPU-computing plan fits)
    const floor = opCostFloorSeconds(g, hw);
    b.placement = { ...b.placement, cutSeconds: floor };
    return { ...sol, lowerBoundSeconds: floor, opCostFloor: true };
  }
  if (sol.status !== 'optimal') return sol;
  const w = wideningOf(g, b.placement, (await lp.firstVertex).saved);
  const wide = await lp.wideBound(w ?? {});
  if (wide.status !== 'optimal') return { ...sol, status: wide.status };
  b.placement = { ...b.placement, cutSeconds: wide.lowerBoundSeconds };
  return { ...sol, lowerBoundSeconds: wide.lowerBoundSeconds, size: wide.size, ...(w ? { widenedBy: wideningWays(w) } : {}), ...(wide.relaxed ? { relaxed: true } : {}) };
}

/**
 * Why nothing fits, in one line: the state against every tier together; or
 * the GPU's own working set where every op runs there (the LPs' placements),
 * then, where the min-cut found a placement that fits the GPU by running ops
 * on the CPU (cutCpuArenaBytes: its CPU arena, over the CPU's capacity), that
 * shortfall too.
 */
function doesNotFitMessage(g: Graph, hw: HardwareProfile, keepParams: boolean, cutCpuArenaBytes?: number): string {
  let state = 0, p16 = 0;
  for (const t of g.tensors) {
    if (t.role === 'master32' || t.role === 'adamM' || t.role === 'adamV') state += t.sizeBytes;
    if (t.role === 'param16') p16 += t.sizeBytes;
  }
  const total = hw.gpu.capacityBytes + hw.cpu.capacityBytes + hw.nvme.capacityBytes;
  const need = state + p16;
  // (--keep-params-on-gpu: the GPU alone must hold them; the sum of every tier had been said to be short)
  if (keepParams && p16 > hw.gpu.capacityBytes) return `does not fit: the GPU (${fmtBytes(hw.gpu.capacityBytes)}) cannot hold the ${fmtBytes(p16)} of parameters --keep-params-on-gpu keeps there (short by ${fmtBytes(p16 - hw.gpu.capacityBytes)}); raise --gpu-mem or let parameters leave the GPU`;
  // the GPU's own minimum: every forward and backward op on it, the updates on
  // the CPU (as the LP's placements may put them: with the updates on the GPU,
  // an embedding's master32, m, v and gradient had been called the GPU's
  // minimum, 515 MiB for gpt2-124m, which then fitted 250 MB), with all state
  // and saved activations elsewhere
  const lean: Placement = { ...allGpu(g), opTier: g.ops.map((op) => (op.phase === 'update' ? 'cpu' : 'gpu')), home: g.tensors.map((t) => (t.persistent || t.role === 'activation' || t.role === 'param16' || t.role === 'grad16' ? 'cpu' : 'gpu')) };
  const gpuMin = liveBytesPeak(buildProgram(g, lean)).gpu;
  // (a bound for the LP's placements, which run every forward and backward op
  // on the GPU, not for the min-cut's, which may run some on the CPU: on the
  // local profile tiny did not fit 1 KB so, but fitted 150 KB, under this 182 KB)
  if (gpuMin > hw.gpu.capacityBytes) {
    const gpuShort = `with every op on the GPU, the working set of one op at a time needs at least ${fmtBytes(gpuMin)} there, capacity is ${fmtBytes(hw.gpu.capacityBytes)} (short by ${fmtBytes(gpuMin - hw.gpu.capacityBytes)})`;
    if (cutCpuArenaBytes === undefined) return `does not fit: ${gpuShort}; raise --gpu-mem or lower --batch/--seq`;
    return `does not fit: ${gpuShort}; with ops on the CPU the GPU suffices, but the CPU then needs ${fmtBytes(cutCpuArenaBytes)}, capacity is ${fmtBytes(hw.cpu.capacityBytes)} (short by ${fmtBytes(cutCpuArenaBytes - hw.cpu.capacityBytes)}); raise --cpu-mem or --gpu-mem or lower --batch/--seq`;
  }
  const short = keepParams ? p16 - hw.gpu.capacityBytes : need - total;
  const head = `does not fit: the model state needs ${fmtBytes(need)} (${fmtBytes(p16)} parameters${keepParams ? ' kept on the GPU' : ''}, ${fmtBytes(state)} optimizer state) plus working memory; gpu ${fmtBytes(hw.gpu.capacityBytes)} + cpu ${fmtBytes(hw.cpu.capacityBytes)} + nvme ${fmtBytes(hw.nvme.capacityBytes)}`;
  return short > 0 ? `${head} is short by at least ${fmtBytes(short)}` : `${head} hold the state but not the working memory beside it at its peak (activations, fetched parameters, staging); raise a capacity or lower --batch/--seq`;
}
