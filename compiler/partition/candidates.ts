// Candidate placements beyond the LP roundings: each family takes the best
// plan so far (LpCandidates, built.ts), changes it in one way the LPs' family
// does not hold or rounds poorly, builds and retimes the changed placements,
// and keeps one where it simulates faster:
//  - lpTryStartup: the first forward op's parameter state on the GPU;
//  - lpTryChainHead: the head of the CPU's chain of updates on the GPU;
//  - lpTryStream: CPU updates streamed to the GPU (state copied up and home),
//    also from the best with its offloads recomputed one level; lpTryUnstream:
//    the kept plan's streamed updates back on the CPU where they do not pay;
//  - lpTrySplit: a group's state split by tensor (master32 in CPU memory,
//    the moments on NVMe);
//  - lpTryCheckpoints, lpTryKeptCheckpoints: activations recomputed through
//    chains (checkpoints.ts) instead of offloaded or kept;
//  - lpTryCasts: p16 cast on the GPU from master32 copied up;
//  - lpTryRingSpare: the CPU ring's spare bytes given back to NVMe moments;
//  - lpTryCastLead: the CPU's casts for the GPU drafted further ahead of its
//    updates (Placement.castLead);
//  - lpTrySwaps: two groups of one size exchange where their state rests, what
//    updates them and where their p16 is made and kept;
//  - lpTryEarlyOffloads: the offloaded activations of each kind those made
//    first;
//  - lpTryRerunHeld: a rerun's output kept for its next reader close behind
//    (Placement.rerunHeld), not made once more for it.
// A family whose plans leave the LPs' family calls `trying` first, so that
// the bound widened by that way (lp.ts wideBound) solves while its candidates
// are built. Keeps true: acc.best only gets faster, and every candidate kept
// fits the capacities (built.ts). Cost: a few builds and retimings a family.

import { copySeconds, opSeconds, type Tier } from '../cost/cost.js';
import type { HardwareProfile } from '../cost/profiles.js';
import type { Graph } from '../ir/types.js';
import { consumers, producers } from '../ir/graph.js';
import { checkpointed } from './checkpoints.js';
import { paramGroups, streamedUpdate, type ParamGroup, type Widening } from './lp.js';
import type { Placement } from './placement.js';
import { compactArenaBytes, readBuffersPeak } from '../schedule/arena.js';
import { buildProgram, REFETCH_GAP, type Program } from '../schedule/program.js';
import { simulate, simulateFloor } from '../simulate/simulate.js';
import { mark } from '../../src/timing.js';
import { build, fitsTiers, lpTryRounded, retimed, simulated, type Built, type LpCandidates } from './built.js';

/**
 * The step's first GPU op waits for its parameter's half copy when that
 * parameter's state is off the GPU: cast on the CPU and copied up before
 * anything else can start (gpt3-13b/h200: the embedding starts at 10.3 ms,
 * 13b/v100 at 43 ms), and in a CPU-bound step every CPU update waits with it
 * (the LPs' rows count that copy before its reader and the updates after their
 * gradients, not the two in one chain). Two more candidates:
 * the best with that group's state (and its p16) on the GPU, cast there; the
 * repair makes room as for any rounding (the least committed groups go to the
 * CPU); kept when one simulates faster.
 */
export function lpTryStartup(g: Graph, hw: HardwareProfile, acc: LpCandidates, keepParamsOnGpu: boolean): void {
  if (!acc.bestFrom) return;
  const { sol, r } = acc.bestFrom;
  const groups = sol.groups;
  const byP16 = new Map(groups.map((q, i) => [q.p16, i]));
  const first = g.ops.find((op) => op.phase === 'forward' && op.inputs.some((t) => byP16.has(t)));
  if (!first) return;
  const i = byP16.get(first.inputs.find((t) => byP16.has(t))!)!;
  if (r.stateTier[i] === 'gpu') return;
  // (fresh arrays and sets: the repair changes the rounding it is given; the
  // group's shares say GPU, so that the repair, which moves the least committed
  // groups first, does not move it back)
  const gpu = (shares: Float64Array[]) => shares.map((v, k) => (k === i ? Float64Array.of(1, 0, 0) : v));
  const pinned = { ...sol, stateShare: gpu(sol.stateShare), p16Share: gpu(sol.p16Share) };
  // its p16 resident on the GPU, or made again there for each use (no bytes
  // held between uses: the GPU takes less from the other groups; not where
  // parameters are kept on the GPU, the ZeRO-Offload setting): either wins
  // somewhere (gpt3-13b/a100 1.6544 against 1.6579 s, 13b/h200 0.3737 against 0.3664)
  for (const p16 of groups[i].remakeable && !keepParamsOnGpu ? ['gpu', 'nvme'] as const : ['gpu'] as const) {
    lpTryRounded(g, hw, pinned, {
      stateTier: r.stateTier.map((t, k) => (k === i ? 'gpu' : t)), p16Tier: r.p16Tier.map((t, k) => (k === i ? p16 : t)),
      offload: new Set(r.offload), recompute: new Set(r.recompute),
    }, acc);
  }
  mark('LP startup candidates');
}

/**
 * Where the best plan so far updates state on the CPU, its step is often the
 * CPU's chain: the GPU up to the first gradient of a group the CPU updates,
 * then the CPU's updates back to back to the end (gpt3-6.7b/h100: 51 ms, then
 * 125 ms; docs/BENCHMARKS.md, thirteenth session). More candidates, each the
 * best so far with the head of that chain — the CPU-updated group whose
 * gradient comes first — updated on the GPU (its state there): the chain then
 * starts at the next group's gradient with that update less. Where the GPU
 * overflows, the repair moves the least committed groups (by the LP's GPU
 * share) to the CPU, as for any rounding. Kept when it simulates faster; up to
 * CHAIN_HEAD_ROUNDS candidates, a group whose move does not pay passed over
 * for the next until CHAIN_HEAD_MISSES have not; none once the CPU is mostly
 * idle after the head's update (cpuChainFrom).
 */
const CHAIN_HEAD_ROUNDS = 8;
const CHAIN_HEAD_MISSES = 2;

export function lpTryChainHead(g: Graph, hw: HardwareProfile, acc: LpCandidates): void {
  const passed = new Set<number>();
  const made = producers(g);
  let misses = 0;
  for (let round = 0; round < CHAIN_HEAD_ROUNDS && misses < CHAIN_HEAD_MISSES && acc.bestFrom; round++) {
    const { sol, r } = acc.bestFrom;
    let head = -1;
    sol.groups.forEach((q, i) => { if (r.stateTier[i] === 'cpu' && !passed.has(i) && (head < 0 || made[q.grad] < made[sol.groups[head].grad])) head = i; });
    if (head < 0) break;
    const best = acc.best!;
    if (!cpuChainFrom(g, hw, best, sol.groups[head].adam)) break;
    // (its shares say GPU, so that the repair, which moves the least committed groups first, does not move it back)
    const pinned = { ...sol, stateShare: sol.stateShare.map((v, k) => (k === head ? Float64Array.of(1, 0, 0) : v)) };
    lpTryRounded(g, hw, pinned, { stateTier: r.stateTier.map((t, k) => (k === head ? 'gpu' : t)), p16Tier: [...r.p16Tier], offload: new Set(r.offload), recompute: new Set(r.recompute) }, acc);
    if (acc.best === best) { passed.add(head); misses++; }
  }
  mark('LP chain-head candidates');
}

/**
 * Whether b's CPU is busy at least CHAIN_HEAD_MIN_BUSY of the time from
 * `adam`'s run on it to the step's end. Below that the step's tail is set by
 * something else (NVMe, the GPU) and moving the update cannot pay: so it was
 * on every case of bench/compile below 0.2 (gpt3-175b 0.16, where each such
 * candidate cost 0.4-0.6 s of scheduling), while the moves that paid ran from
 * 0.22 (gpt3-13b on an A100 with 64 GB of CPU) to 1 (gpt3-6.7b/h100).
 */
const CHAIN_HEAD_MIN_BUSY = 0.2;

function cpuChainFrom(g: Graph, hw: HardwareProfile, b: Built, adam: number): boolean {
  const sim = simulated(g, hw, b), ins = b.prog.instructions;
  const at = ins.findIndex((x) => x.kind === 'run' && x.op === adam && x.stream === 'cpu');
  if (at < 0) return false;
  const from = sim.start[at];
  let busy = 0;
  for (const x of ins) if (x.stream === 'cpu' && sim.start[x.id] >= from) busy += sim.end[x.id] - sim.start[x.id];
  return busy >= (sim.stepSeconds - from) * CHAIN_HEAD_MIN_BUSY;
}

/**
 * Where the best plan so far ends on the CPU's chain of updates (cpuChainFrom),
 * the GPU and both copy streams idle while the CPU updates group after group.
 * More candidates: the CPU groups whose gradients come last updated on the
 * GPU all the same (streamed: the state copied up, updated there once its
 * gradient exists and copied home; the gradient stays on the GPU), as Colossal-
 * AI's Gemini updates on the GPU the optimizer chunks its free memory holds.
 * Per byte of state a streamed update costs the copies' time where the CPU's
 * costs its update's, so the copy streams can take about a share f = C / (C +
 * P) of the CPU's state (C: the CPU's update seconds, P: the slower copy's
 * plus the GPU's update); the copies also carry the backward pass's fetches,
 * so the candidates stream the groups whose gradients come last for
 * STREAM_SHARES of f (where the fewest is the fastest, half as many while
 * that is faster), then one group more and one fewer than the fastest of
 * those, and on from the better of them (streamedFrom); the fastest kept when
 * it beats the best. Tried from the families' plans and once more on the
 * plan kept after the exchanges where it still streams some (search.ts).
 * Where the arena held back more streamed groups (a plan with more whose
 * simulation without the arena's waits beats the fastest), the same again
 * with the smallest groups first (the last gradient first among those of
 * one size): each holds less of the GPU at its update
 * (gpt3-13b/h100: 31 groups streamed, 1.1230 -> 1.1016 s; 1.0957 s as kept).
 */
const STREAM_SHARES = [0.25, 0.5, 0.75, 1];
/** The most groups streamedFrom's walk adds or takes away after its first three steps. */
const STREAM_WALK = 8;

/** The groups p updates on the CPU with all their state there, the last gradient first (lpTryStream, lpTrySplit, room.ts lpTryStreamMore). */
export function cpuUpdated(g: Graph, groups: readonly ParamGroup[], p: Placement): ParamGroup[] {
  const made = producers(g);
  return groups.filter((q) => p.opTier[q.adam] === 'cpu' && q.state.every((t) => p.home[t] === 'cpu'))
    .sort((a, b) => made[b.grad] - made[a.grad] || a.adam - b.adam);
}

export function lpTryStream(g: Graph, hw: HardwareProfile, acc: LpCandidates, saved: readonly number[], trying: () => void): void {
  if (!acc.best) return;
  const p = acc.best.placement, onCpu = cpuUpdated(g, paramGroups(g), p);
  if (onCpu.length === 0 || !cpuChainFrom(g, hw, acc.best, onCpu[onCpu.length - 1].adam)) return;
  trying();
  const beat = simulated(g, hw, acc.best).stepSeconds;
  const rec = recomputedOneLevel(g, hw, acc.best, saved);
  const keep = (win: Built | undefined) => { if (win && simulated(g, hw, win).stepSeconds < simulated(g, hw, acc.best!).stepSeconds) acc.best = win; };
  // (a stable sort: the last gradient first among groups of one size)
  const smallFirst = [...onCpu].sort((a, b) => a.stateBytes - b.stateBytes);
  for (const base of rec ? [p, rec] : [p]) {
    const { fastest, heldBack } = streamedFrom(g, hw, base, onCpu, beat);
    keep(fastest);
    if (heldBack) keep(streamedFrom(g, hw, base, smallFirst, beat).fastest);
  }
  mark('LP stream candidates');
}

/**
 * The fastest of base with the first k of `order` streamed, k by
 * STREAM_SHARES (lpTryStream, room.ts lpTryStreamMore), that fits, each
 * retimed to beat `beat`; and whether a plan with more streamed simulates
 * faster than it without the arena's waits.
 */
export function streamedFrom(g: Graph, hw: HardwareProfile, base: Placement, order: readonly ParamGroup[], beat: number): { fastest?: Built; heldBack: boolean } {
  let C = 0, P = 0;
  for (const q of order) {
    C += opSeconds(g, g.ops[q.adam], 'cpu', hw);
    P += Math.max(copySeconds(q.stateBytes, 'cpu', 'gpu', hw), copySeconds(q.stateBytes, 'gpu', 'cpu', hw)) + opSeconds(g, g.ops[q.adam], 'gpu', hw);
  }
  const total = order.reduce((sum, q) => sum + q.stateBytes, 0), f = C / (C + P);
  // the first k groups streamed
  const tried = new Map<number, Built>();
  const tryK = (k: number) => {
    if (k < 1 || k > order.length || tried.has(k)) return;
    const home = [...base.home], opTier = [...base.opTier];
    for (const q of order.slice(0, k)) { opTier[q.adam] = 'gpu'; home[q.grad] = 'gpu'; }
    tried.set(k, retimed(g, hw, build(g, hw, { ...base, home, opTier }), beat));
  };
  const groupsFor = (bytes: number) => { let k = 0, sum = 0; while (k < order.length && sum < bytes) sum += order[k++].stateBytes; return k; };
  for (const share of STREAM_SHARES) tryK(groupsFor(share * f * total));
  const fastest = () => [...tried].filter(([, b]) => fitsTiers(b.arenas.arenaBytes, hw)).sort(([ka, a], [kb, b]) => simulated(g, hw, a).stepSeconds - simulated(g, hw, b).stepSeconds || ka - kb)[0];
  // where the fewest tried is the fastest, half as many while that is faster:
  // f is the balance of a base that streams none, and one that streams many
  // already sits nearer its own (llama2-70b/h200, 94 groups streamed: 34
  // more by the first share 10.28 s, 16 more 9.73 s; the base 10.04)
  for (let k = fastest()?.[0]; k !== undefined && k > 1 && k === Math.min(...tried.keys()) && fastest()![0] === k;) { k >>= 1; tryK(k); }
  // then one group more and one fewer than the fastest; where one of those is
  // faster, on that way one group at a time while the fastest is at most two
  // behind (the retimed steps are not monotone in k: gpt3-13b/v100's went
  // 5.825 -> 5.852 -> 5.741 s from 16 to 18 groups)
  const from = fastest()?.[0];
  if (from === undefined) return { heldBack: false };
  tryK(from - 1); tryK(from + 1);
  const way = fastest()![0] - from;
  if (way !== 0) for (let k = from + 2 * way, n = 0; n < STREAM_WALK && Math.abs(k - fastest()![0]) <= 2; k += way, n++) tryK(k);
  const [at, best] = fastest()!, step = simulated(g, hw, best).stepSeconds;
  const heldBack = [...tried].some(([k, b]) => k > at && simulate(g, b.placement, b.arenas.buffers, b.prog.instructions, hw).stepSeconds < step);
  return { fastest: best, heldBack };
}

/** recomputedOneLevel's least copy time saved, as a share of the step. */
const RECOMPUTE_MIN_COPIES = 0.01;

/**
 * p with every activation it offloads that can be made again one level deep
 * (its producer reading only what is there to read again, checkpoints.ts at
 * depth 1: the LPs' family) recomputed instead, or undefined where that
 * is not worth a try (below).
 * Each costs its producer's run on the GPU where the offload cost a copy down
 * and one up. Where the step is the forward pass's fetches and then the CPU's
 * updates (gpt3-13b on a V100) that alone gains nothing, but the copy streams
 * it frees carry more streamed updates (lpTryStream), as the stream-widened
 * bound LP's vertex does (it recomputes the attention, layer norms and GELUs).
 */
function recomputedOneLevel(g: Graph, hw: HardwareProfile, b: Built, saved: readonly number[]): Placement | undefined {
  const p = b.placement, remat = p.remat ?? g.tensors.map(() => false);
  const recompute = new Set(g.tensors.filter((t) => remat[t.id] && t.role === 'activation').map((t) => t.id));
  const offload = new Set(saved.filter((t) => p.home[t] === 'cpu' && !remat[t]));
  const more = checkpointed(g, saved, { stateTier: [], p16Tier: [], offload, recompute }, 1, false);
  // only where the copies it saves are worth a try (at least RECOMPUTE_MIN_COPIES
  // of the step: gpt3-13b/h100's best left two activations, whose streams
  // cost 7 s of builds to come out the same) and the GPU has room for the
  // reruns (gpt2-1.5b on 16 GB, whose GPU is near its step, has not)
  const sim = simulated(g, hw, b);
  const copies = copySeconds(more.freedBytes, 'gpu', 'cpu', hw) + copySeconds(more.freedBytes, 'cpu', 'gpu', hw);
  if (copies < RECOMPUTE_MIN_COPIES * sim.stepSeconds) return undefined;
  const made = producers(g), reruns = new Set<number>();
  for (const t of more.recompute) if (!remat[t]) reruns.add(made[t]);
  let rerun = 0;
  for (const op of reruns) rerun += opSeconds(g, g.ops[op], 'gpu', hw);
  if (sim.streamBusySeconds.gpu + rerun > sim.stepSeconds) return undefined;
  const again = [...remat];
  for (const t of more.recompute) again[t] = true;
  return { ...p, remat: again };
}

/**
 * The kept plan with its streamed updates back on the CPU, kept where it is
 * no slower: the families after lpTryStream (casts, exchanges) can leave the
 * streams nothing to gain, and a plan that streams none has the bound LP's
 * bound not widened by stream, higher (gpt3-6.7b/a100 on 24 GB of GPU and 64
 * GB of CPU: the same 1.3928 s step either way, bound 1.160 s streamed, 1.232
 * s not). Else the streamed groups whose gradients come first back on the
 * CPU, one more at a time while that is faster (at most UNSTREAM_HEAD_MAX):
 * a streamed group's state goes home on the in-order d2h stream right after
 * its update, ahead of the next gradient's copy down, so where the CPU's
 * first update follows it waits for those copies (gpt3-13b/v100: the first
 * CPU update 20 ms late behind h.39.attn.proj.w's state; with that group
 * updated on the CPU 5.6822 -> 5.6612 s, with the next one too 5.6725).
 */
export function lpTryUnstream(g: Graph, hw: HardwareProfile, acc: LpCandidates): void {
  const b = acc.best;
  if (!b) return;
  const p = b.placement, made = producers(g);
  const streamed = paramGroups(g).filter((q) => streamedUpdate(p, q)).sort((x, y) => made[x.grad] - made[y.grad]);
  if (streamed.length === 0) return;
  // (retimed in full: its floor can equal the step, which retimed(beat) would not try to reach)
  const unstreamed = (qs: readonly ParamGroup[]): Built => {
    const home = [...p.home], opTier = [...p.opTier];
    for (const q of qs) { opTier[q.adam] = 'cpu'; home[q.grad] = 'cpu'; }
    return retimed(g, hw, build(g, hw, { ...p, home, opTier }));
  };
  const all = unstreamed(streamed);
  if (fitsTiers(all.arenas.arenaBytes, hw) && simulated(g, hw, all).stepSeconds <= simulated(g, hw, b).stepSeconds) acc.best = all;
  else {
    for (let k = 1; k < streamed.length && k <= UNSTREAM_HEAD_MAX; k++) {
      const c = unstreamed(streamed.slice(0, k));
      if (!fitsTiers(c.arenas.arenaBytes, hw) || simulated(g, hw, c).stepSeconds >= simulated(g, hw, acc.best!).stepSeconds) break;
      acc.best = c;
    }
  }
  mark('LP unstreamed candidate');
}

/** The most streamed groups lpTryUnstream puts back on the CPU from the head of the backward pass. */
const UNSTREAM_HEAD_MAX = 4;

/**
 * A group's state moved onto the GPU and updated there (a placement's arrays,
 * changed in place): its gradient stays there, its cast runs there, and its
 * p16 is made again there for each use where `remade` (as placementFrom
 * does), else resident there.
 */
export function updatedOnGpu(q: ParamGroup, home: Tier[], opTier: Tier[], remat: boolean[], remade: boolean): void {
  for (const t of q.state) home[t] = 'gpu';
  home[q.grad] = 'gpu'; opTier[q.adam] = 'gpu';
  if (q.cast >= 0) opTier[q.cast] = 'gpu';
  remat[q.p16] = remade; home[q.p16] = remade ? 'cpu' : 'gpu';
}

/**
 * Where the split candidate wins, its ring (arena.ts) keeps 3 times the peak
 * of the read buffers alive at once (program order), else 4, and gives the
 * rest of its bytes to the state (fewer moments on NVMe). Each GB off NVMe
 * saves about its write-back, until the reads wait for room: gpt3-175b
 * (a100-80g, 1 TB CPU), a ring of 59.8 GB against a peak of 4.8; with the
 * state 35 / 40 / 45 / 50 GB more in the CPU, a ring 5.1 / 4.1 / 2.9 / 1.6
 * times the peak, 287.0 / 285.8 / 284.3 / 302.2 s against 295.8. A ring of 2
 * times as well changed none of bench:compile's plans and cost gpt3-175b
 * 0.3 s (docs/BENCHMARKS.md, sixteenth session).
 */
const RING_SPARE_KEEP = [3, 4] as const;

/**
 * With it, the share of the GPU's room (its capacity less the compact arena's
 * peak: the arenas spread into it for prefetch) that the state of CPU groups
 * whose gradients come first fills (their updates move to the GPU, and the
 * CPU bytes they free take moments back from NVMe). Tried with the ring's
 * spare first, then without, at each ring size; the first that wins is kept.
 * gpt3-175b: room 17.1 GB, 280.45 s at 0.5 and 0.7 (two groups), 282.75 at
 * 0.25, against 284.28 with the ring's spare alone; the groups whose
 * gradients come last instead: 282.58. gpt tiny fp16 on 400 kB of GPU and
 * 150 kB of CPU: 0.309 -> 0.178 ms (docs/BENCHMARKS.md, sixteenth session).
 */
const SPLIT_GPU_ROOM_SHARE = 0.5;

/**
 * Where the best plan holds state on NVMe (fp16/bf16), every step's forward
 * pass makes those groups' p16 from master32 read from NVMe, and every
 * write-back of updated state waits for those reads: gpt3-175b's step was 56 s
 * of NVMe reads, then 280 s of write-backs (docs/BENCHMARKS.md, fourteenth
 * session). One more candidate splits the state: each NVMe group's master32
 * moved into CPU memory, and for room the moments (m, v) of CPU-state groups
 * moved to NVMe, those whose gradients come last first, until they cover the
 * masters' bytes. The bytes on NVMe and the traffic of the updates stay about
 * as they were; the forward pass reads nothing from NVMe, so the write-backs
 * start sooner (gpt3-175b 336.4 -> 302.2 s). Kept when its arenas fit (no
 * repair) and it simulates faster; such a plan's bound is the bound LP's
 * widened by split (splitsState; `trying` starts its solve). Where it wins,
 * two more: fewer moments on NVMe where its ring is far larger than its reads need
 * (RING_SPARE_KEEP), then CPU groups onto the GPU's spare room
 * (SPLIT_GPU_ROOM_SHARE): gpt3-175b 295.8 -> 280.5 s.
 */
export function lpTrySplit(g: Graph, hw: HardwareProfile, acc: LpCandidates, trying: () => void): void {
  if (!acc.best || g.precision === 'fp32') return;
  const p = acc.best.placement, groups = paramGroups(g);
  const masters = groups.reduce((sum, q) => sum + (p.home[q.state[0]] === 'nvme' ? g.tensors[q.state[0]].sizeBytes : 0), 0);
  if (masters === 0) return;
  const onCpu = cpuUpdated(g, groups, p);
  // every NVMe master32 into the CPU; the state of CPU groups whose gradients
  // come first onto the GPU (updated there) for `gpuBytes`, their CPU bytes
  // taken from `room`; and moments out to NVMe until they cover `room` bytes
  const split = (room: number, gpuBytes = 0): Placement => {
    const home = p.home.map((t, id) => (t === 'nvme' && g.tensors[id].role === 'master32' ? 'cpu' : t));
    const opTier = [...p.opTier], remat = p.remat ? [...p.remat] : g.tensors.map(() => false);
    const up = new Set<ParamGroup>();
    for (let k = onCpu.length - 1; k >= 0 && gpuBytes > 0; k--) {
      const q = onCpu[k];
      updatedOnGpu(q, home, opTier, remat, q.remakeable);
      gpuBytes -= q.stateBytes; room -= q.stateBytes; up.add(q);
    }
    for (const q of onCpu) {
      if (room <= 0) break;
      if (up.has(q)) continue;
      for (const t of q.state.slice(1)) { home[t] = 'nvme'; room -= g.tensors[t].sizeBytes; }
    }
    return { ...p, home, opTier, ...(remat.some(Boolean) ? { remat } : {}) };
  };
  trying();
  const beat = simulated(g, hw, acc.best).stepSeconds;
  const wins = (b: Built) => fitsTiers(b.arenas.arenaBytes, hw) && simulated(g, hw, b).stepSeconds < simulated(g, hw, acc.best!).stepSeconds;
  // its arenas placed again (retimed) only where it does not win as it is:
  // gpt tiny fp16 on NVMe wins only so (0.2049 -> 0.1755 ms); gpt3-175b's won
  // as it was and gained nothing from it for 1.2-1.8 s of its 10 s target
  // (gpt2-124m fp16 on 1 GB would gain 0.5609 -> 0.5421 s)
  let b = build(g, hw, split(masters));
  if (!wins(b)) b = retimed(g, hw, b, beat);
  if (wins(b)) {
    acc.best = b;
    // where the ring (arena.ts) is far larger than the reads in flight need,
    // fewer moments on NVMe (the ring's spare bytes hold state instead), and
    // where the GPU's compact arena leaves room (its arenas spread into it
    // for prefetch), CPU groups' state onto the GPU for part of it
    const peak = readBuffersPeak(b.prog), ringBytes = b.arenas.ringBytes;
    const gpuBytes = Math.max(0, hw.gpu.capacityBytes - compactArenaBytes(b.prog, b.order).gpu) * SPLIT_GPU_ROOM_SHARE;
    // (both, then the ring's alone, at each ring size; the first that wins)
    const tries = RING_SPARE_KEEP.flatMap((times) => [gpuBytes, 0].map((up) => [Math.max(0, ringBytes - times * peak), up]));
    const seen = new Set<string>();
    for (const [spare, up] of tries) {
      if ((spare === 0 && up === 0) || seen.has(`${spare} ${up}`)) continue;
      seen.add(`${spare} ${up}`);
      const more = build(g, hw, split(masters - spare, up));
      if (wins(more)) { acc.best = more; break; }
    }
  }
  mark('LP split candidate');
}

/**
 * Where the best plan's CPU ring (arena.ts: the bytes NVMe reads fill) is
 * more than RING_SPARE_KEEP[0] times what its reads hold at once while
 * moments rest on NVMe (a plan lpTryKeptCheckpoints made, whose freed CPU
 * bytes the ring took), one more candidate: the ring's spare bytes given back
 * to those moments, the groups whose gradients come first first (the reverse
 * of the order lpTrySplit sends them down in); kept when it fits and is
 * faster.
 */
export function lpTryRingSpare(g: Graph, hw: HardwareProfile, acc: LpCandidates): void {
  if (!acc.best || !acc.best.arenas.ring) return;
  const b = acc.best, p = b.placement, peak = readBuffersPeak(b.prog);
  let spare = b.arenas.ringBytes - RING_SPARE_KEEP[0] * peak;
  if (peak <= 0 || spare <= 0) return;
  const made = producers(g);
  const down = paramGroups(g).filter((q) => p.opTier[q.adam] === 'cpu' && p.home[q.state[0]] === 'cpu' && q.state.slice(1).every((t) => p.home[t] === 'nvme'))
    .sort((x, y) => made[x.grad] - made[y.grad] || x.adam - y.adam);
  if (down.length === 0) return;
  const home = [...p.home];
  for (const q of down) {
    if (spare <= 0) break;
    for (const t of q.state.slice(1)) { home[t] = 'cpu'; spare -= g.tensors[t].sizeBytes; }
  }
  const c = build(g, hw, { ...p, home });
  if (fitsTiers(c.arenas.arenaBytes, hw) && simulated(g, hw, c).stepSeconds < simulated(g, hw, b).stepSeconds) acc.best = c;
  mark('LP ring-spare candidate');
}

/**
 * Where the best plan so far holds state on NVMe and keeps activations on the
 * GPU from the forward pass to their reuse: more candidates with those kept
 * activations made again in the backward pass through chains (checkpoints.ts,
 * CHECKPOINT_CHAINS, as lpTryCheckpoints does for offloaded ones) and the GPU
 * bytes they held given to state: the NVMe groups whose gradients come last
 * moved onto the GPU (updated there), for all the bytes freed, or half where
 * that overflows (KEPT_CHAIN_SHARES), and the CPU bytes a split group's
 * master32 so frees given to the NVMe moments of the groups left (else the
 * CPU's ring takes them); the fastest kept when its arenas fit and it beats
 * the best. Where the GPU idles beside the NVMe's traffic the recompute costs
 * little and each GB off NVMe saves its reads and write-back: llama2-7b on an
 * A100 with 24 GB of GPU and 32 GB of CPU 11.97 -> 8.64 s, gpt3-13b on a V100
 * with 128 GB of CPU 9.00 -> 8.65, on an A100 with 64 GB 6.62 -> 6.30,
 * gpt3-6.7b on a V100 with 48 GB 5.79 -> 5.60, gpt3-175b 280.45 -> 279.29.
 * The NVMe groups whose gradients come first stay: their write-backs start
 * the NVMe's chain (moved first instead: gpt3-6.7b 5.91 s). Tried last: tried
 * before the stream candidates, a plan of these that won moved what they
 * built from (gpt2-124m fp16 on 1 GB of GPU and 600 MB of CPU 0.4244 ->
 * 0.4283 s). Such a plan's bound is over chains (`trying`; docs/
 * BENCHMARKS.md, nineteenth session).
 */
const KEPT_CHAIN_SHARES = [1, 0.5];

export function lpTryKeptCheckpoints(g: Graph, hw: HardwareProfile, acc: LpCandidates, saved: readonly number[], keepParamsOnGpu: boolean, trying: () => void): void {
  if (!acc.best) return;
  const p = acc.best.placement, made = producers(g);
  const onNvme = paramGroups(g).filter((q) => q.state.some((t) => p.home[t] === 'nvme')).sort((a, b) => made[b.grad] - made[a.grad] || a.adam - b.adam);
  const remat = p.remat ?? g.tensors.map(() => false);
  const kept = saved.filter((t) => p.home[t] === 'gpu' && !remat[t]);
  if (onNvme.length === 0 || kept.length === 0) return;
  trying();
  const beat = simulated(g, hw, acc.best).stepSeconds;
  const recomputed = new Set(g.tensors.filter((t) => remat[t.id] && t.role === 'activation').map((t) => t.id));
  let win: Built | undefined;
  for (const { maxDepth, viaIntermediates } of CHECKPOINT_CHAINS) {
    // (only the kept ones: an offloaded one made again would free CPU bytes the CPU's ring, not state, then takes)
    const { recompute } = checkpointed(g, saved, { stateTier: [], p16Tier: [], offload: new Set(kept), recompute: recomputed }, maxDepth, viaIntermediates);
    const freed = kept.reduce((sum, t) => sum + (recompute.has(t) ? g.tensors[t].sizeBytes : 0), 0);
    if (freed === 0) continue;
    for (const share of KEPT_CHAIN_SHARES) {
      const home = [...p.home], opTier = [...p.opTier], again = [...remat];
      for (const t of recompute) again[t] = true;
      let room = freed * share, cpuRoom = 0;
      const moved = new Set<ParamGroup>();
      for (const q of onNvme) {
        if (q.stateBytes > room) continue;
        moved.add(q);
        // (a split group's master32 leaves CPU room)
        for (const t of q.state) if (home[t] === 'cpu') cpuRoom += g.tensors[t].sizeBytes;
        // (its p16 resident on the GPU where parameters stay there)
        updatedOnGpu(q, home, opTier, again, q.remakeable && !keepParamsOnGpu);
        room -= q.stateBytes;
      }
      // and the CPU room so freed to the NVMe state left, rather than to the CPU's ring
      for (const q of onNvme) {
        if (moved.has(q)) continue;
        const back = q.state.filter((t) => home[t] === 'nvme'), bytes = back.reduce((sum, t) => sum + g.tensors[t].sizeBytes, 0);
        if (bytes > cpuRoom) continue;
        for (const t of back) home[t] = 'cpu';
        cpuRoom -= bytes;
      }
      // (retimed only where it does not win as it is; the next share only where this one overflows)
      const wins = (b: Built) => fitsTiers(b.arenas.arenaBytes, hw) && simulated(g, hw, b).stepSeconds < simulated(g, hw, win ?? acc.best!).stepSeconds;
      let b = build(g, hw, { ...p, home, opTier, remat: again });
      if (!wins(b) && fitsTiers(b.arenas.arenaBytes, hw)) b = retimed(g, hw, b, beat);
      if (wins(b)) win = b;
      if (fitsTiers(b.arenas.arenaBytes, hw)) break;
    }
  }
  if (win) acc.best = win;
  mark('LP kept-checkpoint candidates');
}

/**
 * Where the CPU is the best plan's busiest stream and it makes p16 again for
 * each cluster of reads from master32 resting on the CPU (cast there, the
 * half copy sent up), more candidates: those casts on the GPU instead, each
 * fetching master32 (4 bytes a parameter where p16 is 2; the cast itself is
 * ~1000 times faster there), for the backward pass's reads only (the CPU,
 * idle in the forward pass, still casts for it: Placement.forwardCastOnCpu)
 * or for all. The CPU, which also runs the updates, loses its backward casts
 * to the h2d stream: llama2-13b on an H100 with 96 GB of CPU, its 111 such
 * groups (of 150 whose state rests on the CPU; the other 39 keep p16 on the
 * CPU, cast once) 2.153 -> 1.534 s (all casts on the GPU: 1.755, the h2d
 * stream then the step; half the groups 1.975); the 120B GPT of
 * scale.test.ts (h200-141g, 1.5 TB of CPU) 27.33 -> 23.81 s. Elsewhere
 * measured another stream is the busier (no such group, or slower: gpt3-13b
 * on an A100 with 64 GB of CPU 6.30 -> 6.50-6.77 s). CAST_SHARES of those
 * groups, the first read first, each both ways; the first share with one
 * that fits and beats the best keeps the faster. Such a plan's bound is the
 * bound LP's widened by cast (castsUp; `trying` starts its solve; started
 * beside the other candidates instead, it slowed the 120B GPT's compile
 * 134 -> 173 s: docs/BENCHMARKS.md, twentieth session).
 */
const CAST_SHARES = [1, 0.5];

/** The groups whose casts lpTryCasts moves (the first read first): none unless the CPU is b's busiest stream. */
function castsOnCpu(g: Graph, hw: HardwareProfile, b: Built | undefined): ParamGroup[] {
  if (!b || g.precision === 'fp32' || !b.placement.remat) return [];
  const p = b.placement, remat = b.placement.remat, busy = simulated(g, hw, b).streamBusySeconds;
  if (Object.values(busy).some((s) => s > busy.cpu)) return [];
  const readers = consumers(g), firstRead = (q: ParamGroup) => readers[q.p16].find((o) => g.ops[o].phase !== 'update') ?? g.ops.length;
  return paramGroups(g).filter((q) => q.cast >= 0 && remat[q.p16] && p.opTier[q.cast] === 'cpu' && q.state.every((t) => p.home[t] === 'cpu'))
    .sort((a, b) => firstRead(a) - firstRead(b) || a.adam - b.adam);
}

export function lpTryCasts(g: Graph, hw: HardwareProfile, acc: LpCandidates, trying: () => void): void {
  const onCpu = castsOnCpu(g, hw, acc.best);
  if (onCpu.length === 0) return;
  trying();
  const p = acc.best!.placement, beat = simulated(g, hw, acc.best!).stepSeconds;
  for (const share of CAST_SHARES) {
    const opTier = [...p.opTier], forwardCastOnCpu = p.forwardCastOnCpu ? [...p.forwardCastOnCpu] : g.ops.map(() => false);
    for (const q of onCpu.slice(0, Math.max(1, Math.round(share * onCpu.length)))) { opTier[q.cast] = 'gpu'; forwardCastOnCpu[q.cast] = true; }
    // the forward pass's casts left on the CPU, else all on the GPU: the faster that fits
    let win: Built | undefined;
    for (const q of [{ ...p, opTier, forwardCastOnCpu }, { ...p, opTier }]) {
      const b = retimed(g, hw, build(g, hw, q), win ? simulated(g, hw, win).stepSeconds : beat);
      if (fitsTiers(b.arenas.arenaBytes, hw) && simulated(g, hw, b).stepSeconds < (win ? simulated(g, hw, win).stepSeconds : beat)) win = b;
    }
    if (win) { acc.best = win; break; }
  }
  mark('LP cast candidates');
}

/**
 * Where the best plan so far holds optimizer state on NVMe and activations
 * offloaded into the CPU: two more candidates with those activations made
 * again in the backward pass through chains of recomputation
 * (partition/checkpoints.ts), and NVMe state moved into the CPU room they
 * held (the groups with the largest CPU share first; the repair moves state
 * back to NVMe where the CPU overflows). The LPs' one-level recompute cannot
 * find these: llama2-13b on an H100 with 96 GB of CPU 4.46 -> 2.19 s (its
 * 25 NVMe groups all in the CPU), gpt3-175b on an A100 with 1 TB 351.2 ->
 * 336.4 s. Chains of saved activations only, up to 8 deep (llama2-13b's
 * win), and chains also through the activations the LP does not save, up to
 * 4 deep (gpt3-175b, gpt3-13b on an A100 with 64 GB, llama2-7b's: a GPT's
 * attention and MLP inputs are a matmul's output plus a bias); deeper chains
 * recompute more and won nowhere (docs/BENCHMARKS.md, ninth session).
 */
const CHECKPOINT_CHAINS = [{ maxDepth: 8, viaIntermediates: false }, { maxDepth: 4, viaIntermediates: true }];

export function lpTryCheckpoints(g: Graph, hw: HardwareProfile, acc: LpCandidates, trying: (w: Widening) => void): void {
  if (!acc.bestFrom) return;
  const { sol, r } = acc.bestFrom;
  if (r.offload.size === 0 || !r.stateTier.includes('nvme')) return;
  let started = false;
  const built: Built[] = [];
  for (const { maxDepth, viaIntermediates } of CHECKPOINT_CHAINS) {
    const { offload, recompute, freedBytes } = checkpointed(g, sol.saved, r, maxDepth, viaIntermediates);
    if (freedBytes === 0) continue;
    const stateTier = [...r.stateTier];
    let room = freedBytes;
    for (const i of sol.groups.map((_, i) => i).sort((a, b) => sol.stateShare[b][1] - sol.stateShare[a][1] || a - b)) {
      if (room <= 0) break;
      if (stateTier[i] === 'nvme') { stateTier[i] = 'cpu'; room -= sol.groups[i].stateBytes; }
    }
    // (the bound of such a plan: over chains, and over split state too where
    // state stays on NVMe, as the split candidate then follows and mostly
    // wins: gpt3-175b; else chains alone: llama2-13b on 96 GB)
    if (!started) trying({ chains: true, split: g.precision !== 'fp32' && stateTier.includes('nvme') });
    started = true;
    const b = lpTryRounded(g, hw, sol, { stateTier, p16Tier: [...r.p16Tier], offload, recompute }, acc);
    if (b) built.push(b);
  }
  acc.chainSeeds = built.filter((b) => b !== acc.best && fitsTiers(b.arenas.arenaBytes, hw));
  mark('LP checkpoint candidates');
}

/**
 * The CPU runs its stream in order, and schedule/program.ts hoistCasts drafts
 * the casts of remade p16 that the GPU reads next before each CPU update, but
 * only those up to the CPU's next op: where an update waits for its moments
 * from NVMe, the cast the GPU's backward wants next waits behind it, and the
 * GPU, h2d and the gradients' copies down with it (gpt3-13b on a V100 with
 * 128 GB of CPU: the CPU idle 0.32 s before h.24's update while h.23's cast
 * waited behind it; docs/BENCHMARKS.md, twenty-eighth session). Drafted
 * further ahead, a cast holds its CPU bytes longer. So: the best with the
 * casts drafted past CAST_LEADS more CPU updates, each built and retimed; the
 * fastest kept where it beats the best. Only where some remade p16 is cast on
 * the CPU and some update runs there.
 */
const CAST_LEADS = [2, 4, 8];

export function lpTryCastLead(g: Graph, hw: HardwareProfile, acc: LpCandidates): void {
  const b = acc.best;
  if (!b || !b.placement.remat) return;
  const p = b.placement, remat = p.remat!, groups = paramGroups(g);
  if (!groups.some((q) => q.cast >= 0 && remat[q.p16] && p.opTier[q.cast] === 'cpu') || !groups.some((q) => p.opTier[q.adam] === 'cpu')) return;
  keptFastest(g, hw, acc, CAST_LEADS.filter((castLead) => castLead !== (p.castLead ?? 0)).map((castLead) => ({ placement: { ...p, castLead } })));
  mark('LP cast-lead candidates');
}

/**
 * The variants of the best plan built in turn, each retimed to beat the
 * fastest so far (the best, or a variant before it); the fastest that fits
 * kept where it beats the best. Says whether one was.
 */
function keptFastest(g: Graph, hw: HardwareProfile, acc: LpCandidates, variants: readonly { placement: Placement; prog?: Program }[]): boolean {
  const b = acc.best!;
  let win: Built | undefined;
  for (const v of variants) {
    const beat = simulated(g, hw, win ?? b).stepSeconds;
    const c = retimed(g, hw, build(g, hw, v.placement, v.prog), beat);
    if (fitsTiers(c.arenas.arenaBytes, hw) && simulated(g, hw, c).stepSeconds < beat) win = c;
  }
  if (win) acc.best = win;
  return win !== undefined;
}

/**
 * Gaps (ops) within which lpTryRerunHeld keeps a rerun's output for its next
 * reader: 4 covers an attention's two backward readers (its output projection's
 * weight gradient, then its own backward, 5 instructions apart); REFETCH_GAP
 * as far as a copy is kept.
 */
const RERUN_HELD_GAPS = [4, REFETCH_GAP];

/**
 * A recomputed activation (or a remade p16) has no home: each reader that
 * finds no copy runs its producer again, so an attention recomputed for the
 * backward pass ran twice there, once for its output projection's weight
 * gradient and once for its own backward (llama2-7b/h100, GPU-bound: reruns
 * 8.8 ms against the forward's 4.4; its norms 3.2 against 1.3). The LPs count
 * one run per producer. Kept for the next reader, the output holds its bytes
 * until then, which costs plans that fill the GPU (gpt2-1.5b on 8 GB of GPU and
 * 6 GB of CPU overflowed, gpt3-6.7b/v100 slowed: docs/BENCHMARKS.md,
 * fifty-fourth session), so it is a field of the placement, tried last: the
 * best built with each of RERUN_HELD_GAPS, retimed; the fastest that fits
 * kept where it beats the best. Only where it changes the program. Says
 * whether it was kept.
 */
export function lpTryRerunHeld(g: Graph, hw: HardwareProfile, acc: LpCandidates): boolean {
  const b = acc.best;
  if (!b || !b.placement.remat || b.placement.rerunHeld !== undefined) return false;
  const variants = RERUN_HELD_GAPS.map((rerunHeld) => { const placement = { ...b.placement, rerunHeld }; return { placement, prog: buildProgram(g, placement) }; })
    .filter((v) => v.prog.instructions.length !== b.prog.instructions.length);
  const won = keptFastest(g, hw, acc, variants);
  mark('LP rerun-held candidates');
  return won;
}

/**
 * The LPs count an offloaded activation by its bytes at each instant, so they
 * are indifferent to which layer's activation of a kind goes to the CPU, and
 * their roundings spread the offloads over the layers. But one offloaded in a
 * late layer is copied down just before the forward pass ends, while the GPU
 * needs its bytes, and back just after the backward pass begins; one of an
 * early layer has the whole forward pass to go down in and most of the
 * backward to come back. So one more candidate: the best with, per kind of
 * activation (its name with the digits masked, its size and its producer's
 * kind), as many offloaded as before, those made first (gpt3-13b/h200:
 * the GPU waited 40.7 ms in the forward pass for the copies down that free
 * its bytes; docs/BENCHMARKS.md, thirty-ninth session). Kept where it
 * simulates faster; says whether it was.
 */
export function lpTryEarlyOffloads(g: Graph, hw: HardwareProfile, acc: LpCandidates, saved: readonly number[]): boolean {
  const b = acc.best;
  const home = b && offloadsMadeFirst(g, b.placement, saved);
  if (!b || !home) return false;
  const beat = simulated(g, hw, b).stepSeconds;
  const c = retimed(g, hw, build(g, hw, { ...b.placement, home }), beat);
  const won = fitsTiers(c.arenas.arenaBytes, hw) && simulated(g, hw, c).stepSeconds < beat;
  if (won) acc.best = c;
  mark('LP early-offload candidates');
  return won;
}

/**
 * p's homes with, per kind of saved activation (the LPs' `saved`, each kept,
 * offloaded or made again; by its name with the digits masked, its size, its
 * producer's kind; those made again left as they are), as many offloaded to
 * the CPU as in p, those made first, the others kept on the GPU; undefined
 * where that moves none. Only saved ones move: the bound LP's rows hold
 * every other activation on the GPU from its first access to its last.
 */
export function offloadsMadeFirst(g: Graph, p: Placement, saved: readonly number[]): Tier[] | undefined {
  const made = producers(g);
  const kinds = new Map<string, number[]>();
  for (const id of saved) {
    const t = g.tensors[id];
    if (p.remat?.[id] || (p.home[id] !== 'cpu' && p.home[id] !== 'gpu')) continue;
    const key = `${t.name.replace(/\d+/g, '#')}|${t.sizeBytes}|${g.ops[made[id]].kind}`;
    const list = kinds.get(key);
    if (list) list.push(id); else kinds.set(key, [id]);
  }
  const home = [...p.home];
  let moved = false;
  for (const list of kinds.values()) {
    const offloaded = list.filter((t) => p.home[t] === 'cpu').length;
    if (offloaded === 0 || offloaded === list.length) continue;
    list.sort((x, y) => made[x] - made[y] || x - y);
    list.forEach((t, k) => { home[t] = k < offloaded ? 'cpu' : 'gpu'; if (home[t] !== p.home[t]) moved = true; });
  }
  return moved ? home : undefined;
}

/**
 * The LP is symmetric in the layers of one kind, and its rounding settles
 * which layer's group of a kind rests off the GPU by where the vertex lay, not
 * by when its gradient comes: gpt3-13b/h200's streamed groups held their
 * state on the GPU where its memory binds most (its arena 4.8 % above its
 * program without the arena's waits); gpt3-6.7b/a100's plan updated
 * h.2.attn.qkv.w on the GPU from state on the CPU, its state's 25 ms copy
 * home the step's last work. So, last: the best with two groups of the same
 * bytes exchanging their whole configuration (exchanged), for each group
 * whose state is off the GPU, latest gradient first, with the SWAP_PARTNERS
 * groups of its size configured otherwise whose updates are nearest in
 * program order; each exchange's program is simulated without the arena's
 * waits first (retimed's floor) and built and retimed only where that beats
 * the best; the first at least SWAP_MIN_GAIN faster is kept and the next
 * group tried on it; at most SWAP_TRIES exchanges, none on programs of more
 * than SWAP_MAX_INSTRUCTIONS. The plan keeps the same set of configurations,
 * so the same widening of its bound. Over bench/compile/plans.mjs's 31 plans
 * (docs/BENCHMARKS.md, thirtieth session): 9 faster, none slower;
 * gpt3-13b/h200 0.3130 -> 0.3083 s, gpt3-13b/a100 on 64 GB of CPU 5.210 ->
 * 5.075, gpt tiny fp16 on NVMe 0.1755 -> 0.1660 ms. More partners (6) or
 * tries (24-48) gained on one or two plans and lost on others or cost 1-4 s
 * of the 13b compiles; 6.7b/a100's gain (0.3956 -> 0.3917, a script in
 * /tmp) needs partners ten layers away. Then, at most SWAP_HEAD_MOVES times,
 * the head of the CPU's chain of updates (the CPU-updated group whose
 * gradient comes first) with the SWAP_PARTNERS groups of its size configured
 * otherwise whose gradients come just before it: the chain starts sooner
 * (gpt3-13b/a100: h.39.mlp.proj.w updated on the CPU in h.39.mlp.fc.w's
 * place, 1.5975 -> 1.5911 s; the 16 tries above, latest gradients first,
 * never reach the head).
 * Last, at most SWAP_TAIL_MOVES times, the chain's tail (the CPU-updated
 * group whose gradient comes last: its update after the backward pass is
 * the step's last work) with the SWAP_PARTNERS groups of its size configured
 * otherwise whose gradients come first (gpt3-6.7b/a100: h.2.attn.qkv.w's
 * state onto the GPU and h.31.attn.qkv.w updated on the CPU in its place,
 * 0.3951 -> 0.3928 s; gpt3-13b/v100 5.6612 -> 5.6482 s; the first tries'
 * nearest partners are a few layers away, and the gain needs a partner
 * twenty or more layers away). Last, where state rests on NVMe, the tail of
 * its write-backs (NVME_TAIL_PARTNERS).
 */
const SWAP_PARTNERS = 3;
const SWAP_TRIES = 16;
/** lpTrySwaps leaves out the groups more than this many times smaller than the largest. */
const SWAP_SMALLEST = 64;
/** A swap is kept only where it shortens the step by this share (and retimed only where its schedule without the arena's waits does): smaller gains were float noise or 0.001 %. */
const SWAP_MIN_GAIN = 1e-3;
/**
 * Not tried on programs longer than this: a build of gpt3-175b's (~19 000
 * instructions) takes ~0.15 s, its 16 cost 1-2 s of its 10 s compile target,
 * and none gained SWAP_MIN_GAIN (at 40 builds, 0.001 %).
 */
const SWAP_MAX_INSTRUCTIONS = 12_000;

/** Whether r may take q's configuration and q r's (exchanged): another group of q's size and shape (a p16 made again for each use needs a group whose update comes after its last reader: remakeable alike). */
export const exchangeable = (q: ParamGroup, r: ParamGroup): boolean => r !== q && r.stateBytes === q.stateBytes && r.state.length === q.state.length && (r.cast >= 0) === (q.cast >= 0) && r.remakeable === q.remakeable;

/** The placement with groups q and r (of one size) exchanging their configurations: state homes, gradient home, update and cast tiers, p16 home and whether it is made again. */
export function exchanged(p: Placement, q: ParamGroup, r: ParamGroup): Placement {
  const home = [...p.home], opTier = [...p.opTier], remat = p.remat ? [...p.remat] : undefined, fwdCpu = p.forwardCastOnCpu ? [...p.forwardCastOnCpu] : undefined;
  const onto = (from: ParamGroup, to: ParamGroup) => {
    from.state.forEach((t, i) => { home[to.state[i]] = p.home[t]; });
    home[to.grad] = p.home[from.grad]; opTier[to.adam] = p.opTier[from.adam];
    if (from.cast >= 0 && to.cast >= 0) { opTier[to.cast] = p.opTier[from.cast]; if (fwdCpu) fwdCpu[to.cast] = p.forwardCastOnCpu![from.cast]; }
    home[to.p16] = p.home[from.p16];
    if (remat) remat[to.p16] = p.remat![from.p16];
  };
  onto(q, r); onto(r, q);
  return { ...p, home, opTier, ...(remat ? { remat } : {}), ...(fwdCpu ? { forwardCastOnCpu: fwdCpu } : {}) };
}

export function lpTrySwaps(g: Graph, hw: HardwareProfile, acc: LpCandidates): void {
  const b0 = acc.best;
  if (!b0 || b0.prog.instructions.length > SWAP_MAX_INSTRUCTIONS) return;
  const groups = paramGroups(g);
  let p = b0.placement;
  const config = (q: ParamGroup) => JSON.stringify([q.state.map((t) => p.home[t]), p.home[q.grad], p.opTier[q.adam], q.cast >= 0 ? [p.opTier[q.cast], p.forwardCastOnCpu?.[q.cast] ?? false] : [], p.home[q.p16], p.remat?.[q.p16] ?? false]);
  // (not the groups far smaller than the largest, biases and norms, whose exchanges move little: they
  // took the tries before gpt tiny fp16's h.0.mlp.fc.w and h.1.mlp.fc.w on NVMe, 0.1756 -> 0.1647 ms)
  const largest = Math.max(0, ...groups.map((q) => q.stateBytes));
  const offGpu = groups.filter((q) => q.stateBytes * SWAP_SMALLEST >= largest && q.state.some((t) => p.home[t] !== 'gpu')).sort((a, b) => b.adam - a.adam);
  const nvme = p.home.includes('nvme');
  /** q and r exchanged, where that beats the best by SWAP_MIN_GAIN (not kept yet). */
  const exchange = (q: ParamGroup, r: ParamGroup): Built | undefined => {
    const beat = simulated(g, hw, acc.best!).stepSeconds * (1 - SWAP_MIN_GAIN);
    const x = exchanged(p, q, r), prog = buildProgram(g, x);
    // its program without the arena's waits first (retimed's floor): where it
    // does not beat the best, neither does any placement of its arenas. (Its
    // buffers' offsets do not change that simulation without NVMe: a copy
    // follows a producer on another tier.)
    if (!nvme && simulateFloor(g, x, prog, hw).stepSeconds >= beat) return undefined;
    const c = retimed(g, hw, build(g, hw, x, prog), beat);
    return fitsTiers(c.arenas.arenaBytes, hw) && simulated(g, hw, c).stepSeconds < beat ? c : undefined;
  };
  const keep = (c: Built) => { acc.best = c; p = c.placement; };
  /** Whether q and r exchanged beat the best by SWAP_MIN_GAIN (then kept). */
  const tryExchange = (q: ParamGroup, r: ParamGroup): boolean => {
    const c = exchange(q, r);
    if (c) keep(c);
    return c !== undefined;
  };
  let tries = 0;
  exchanges: for (const q of offGpu) {
    const mine = config(q);
    const partners = groups.filter((r) => exchangeable(q, r) && config(r) !== mine)
      .sort((a, b) => Math.abs(a.adam - q.adam) - Math.abs(b.adam - q.adam) || a.adam - b.adam).slice(0, SWAP_PARTNERS);
    for (const r of partners) {
      if (tries++ >= SWAP_TRIES) break exchanges;
      if (tryExchange(q, r)) break;
    }
  }
  // then an end of the CPU's chain of updates, at most `moves` times while
  // that wins: its head (the CPU-updated group whose gradient comes first)
  // with the groups of its size configured otherwise whose gradients come
  // just before it; its tail (whose gradient comes last: its update is the
  // step's last work) with those whose gradients come first
  const made = producers(g);
  const chainEnd = (tail: boolean, moves: number) => {
    for (let k = 0; k < moves; k++) {
      const cpu = groups.filter((q) => p.opTier[q.adam] === 'cpu').sort((a, b) => made[a.grad] - made[b.grad]);
      const end = tail ? cpu[cpu.length - 1] : cpu[0];
      if (!end) return;
      const mine = config(end);
      const partners = groups.filter((r) => exchangeable(end, r) && config(r) !== mine && made[r.grad] < made[end.grad])
        .sort((a, b) => (tail ? made[a.grad] - made[b.grad] : made[b.grad] - made[a.grad])).slice(0, SWAP_PARTNERS);
      if (!partners.some((r) => tryExchange(end, r))) return;
    }
  };
  chainEnd(false, SWAP_HEAD_MOVES);
  chainEnd(true, SWAP_TAIL_MOVES);
  // then, where state rests on NVMe, the tail of its write-backs: the
  // CPU-updated group on NVMe whose gradient comes last (each group once)
  // with the CPU groups of its size whose gradients come first, the faster
  // exchange kept, until NVME_TAIL_MISSES groups in a row gain nothing (at
  // most SWAP_TRIES built here too: many NVMe groups, each a small win, stay bounded)
  const tried = new Set<ParamGroup>();
  for (let misses = 0, builds = 0; misses < NVME_TAIL_MISSES && builds < SWAP_TRIES;) {
    const last = groups.filter((q) => !tried.has(q) && p.opTier[q.adam] === 'cpu' && q.state.some((t) => p.home[t] === 'nvme'))
      .reduce<ParamGroup | undefined>((a, q) => (!a || made[q.grad] > made[a.grad] ? q : a), undefined);
    if (!last) break;
    tried.add(last);
    const partners = cpuUpdated(g, groups, p).filter((r) => exchangeable(last, r) && made[r.grad] < made[last.grad]).reverse()
      .slice(0, Math.min(NVME_TAIL_PARTNERS, SWAP_TRIES - builds));
    builds += partners.length;
    const won = partners.map((r) => exchange(last, r)).reduce<Built | undefined>((a, c) => (c && (!a || simulated(g, hw, c).stepSeconds < simulated(g, hw, a).stepSeconds) ? c : a), undefined);
    if (won) keep(won);
    misses = won ? 0 : misses + 1;
  }
  mark('LP swap candidates');
}

/**
 * Where moments rest on NVMe, each such group's update is read in before it
 * and written back after it, on NVMe's write stream in program order; where
 * those groups' gradients come late, the write-backs are the step's last work
 * (gpt3-6.7b/v100 on 48 GB of CPU: its last 1.14 s, of 2.35 s of writes in a
 * 3.52 s step) and the write stream idles until the first of them. So
 * lpTrySwaps last exchanges the CPU-updated NVMe group whose gradient comes
 * last with the NVME_TAIL_PARTNERS groups of its size whose state rests on
 * the CPU and is updated there, gradients first (its write-back can then
 * start early in the backward pass), keeping the faster of the two where both
 * win (13b/v100 on 128 GB 7.589 s, 7.698 with the first that wins);
 * after a miss the next NVMe group, until
 * NVME_TAIL_MISSES in a row gain nothing (docs/BENCHMARKS.md, forty-second
 * session: gpt3-6.7b/v100 on 48 GB 3.517 -> 3.347 s, its first exchange
 * h.7.mlp.proj.w with h.31.mlp.proj.w; 3.298 s after the families that follow).
 */
const NVME_TAIL_PARTNERS = 2;
const NVME_TAIL_MISSES = 2;

/** The most exchanges lpTrySwaps keeps that move the head of the CPU's chain of updates sooner. */
const SWAP_HEAD_MOVES = 2;
/** The most exchanges lpTrySwaps keeps that move the tail of the CPU's chain of updates to a gradient that comes first. */
const SWAP_TAIL_MOVES = 2;
