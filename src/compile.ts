// compile: model file -> Plan. Wires the compiler passes in order and runs the
// verifiers between them (DESIGN.md, data flow).

import { autodiff } from '../compiler/autodiff/autodiff.js';
import { copySeconds, opSeconds, type Tier } from '../compiler/cost/cost.js';
import { loadProfile, type HardwareProfile } from '../compiler/cost/profiles.js';
import { importDsl } from '../compiler/import/dsl.js';
import type { AdamAttrs, Graph, Precision } from '../compiler/ir/types.js';
import { consumers, producers, tensorBytes } from '../compiler/ir/graph.js';
import { assertGraph } from '../compiler/ir/verify.js';
import { ADAM_DEFAULTS, lowerOptimizer } from '../compiler/lower/optimizer.js';
import { lowerPrecision } from '../compiler/lower/precision.js';
import { lowerDpu } from '../compiler/lower/dpu.js';
import { insertGradAllReduce } from '../compiler/lower/grad-allreduce.js';
import { lowerSequenceParallel, zigzagPositions, type SpSharding } from '../compiler/lower/sequence-parallel.js';
import { ringSendBytes, ringWorkspaceBytes } from '../compiler/ir/ops.js';
import { allGpu, partitionMinCut } from '../compiler/partition/mincut.js';
import { formatBytes as fmtBytes } from './sizes.js';
import { checkpointed } from '../compiler/partition/checkpoints.js';
import { castOnce, inLpFamily, LP_TIME_LIMIT_SECONDS, paramGroups, placementFrom, remakeOnGpu, roundSolution, startLp, wideningOf, wideningWays, type LpSolution, type ParamGroup, type Rounded, type Rounding, type Widening } from '../compiler/partition/lp.js';
import { PLAN_CAPACITY_SHARE } from '../compiler/partition/lp-memory.js';
import { LpWorker } from '../compiler/partition/highs-worker.js';
import type { Placement } from '../compiler/partition/placement.js';
import { FORMAT_VERSION, type Plan, type PlanSp, type Traffic } from '../compiler/plan/types.js';
import { gatedSchedule } from '../compiler/schedule/gated.js';
import { assignInTime, assignOffsets, compactArenaBytes, readBuffersPeak, type Arenas, type ReuseTiming } from '../compiler/schedule/arena.js';
import { stateOrder } from '../compiler/schedule/state-order.js';
import { buildProgram, liveBytesPeak, type Program } from '../compiler/schedule/program.js';
import { tierPeakEstimate } from '../compiler/schedule/liveness.js';
import { computeFloorSeconds, followedProducers, instructionSeconds, opCostFloorSeconds, simulate, type Simulation } from '../compiler/simulate/simulate.js';
import { verifyPlan } from '../compiler/simulate/verify-plan.js';
import { diag, UserError } from './diagnostics.js';
import { mark } from './timing.js';

export interface CompileOptions {
  model: string;
  preset?: string;
  hw?: string;
  gpuMemBytes?: number;
  cpuMemBytes?: number;
  nvmeBytes?: number;
  precision?: Precision;
  batch?: number;
  seq?: number;
  optimizer?: Partial<AdamAttrs>;
  /** Numeric preset fields to replace (DSL models), e.g. { layers: 60 }. */
  config?: Record<string, number>;
  /** Parameters stay resident on the GPU (the ZeRO-Offload setting; no parameter offload). */
  keepParamsOnGpu?: boolean;
  /** Delayed parameter update: also emit the steady-state step, run after this many plain steps. */
  dpuWarmupSteps?: number;
  /** ONNX models: initializers whose name matches stay fixed (no gradient, no update). */
  freeze?: RegExp;
  /** Sequence parallelism over this many ranks (1 or absent: none). */
  sp?: number;
  /** The LP solver's time limit per solve, seconds (default LP_TIME_LIMIT_SECONDS; the optional solves get at most OPTIONAL_TIME_LIMIT_SECONDS). */
  lpTimeLimitSeconds?: number;
  /**
   * fit's compiles, with no bound (plan.bound absent, no bound LP widened):
   * 'fits', the first placement that fits (fit's trials: it fits exactly when
   * the full compile's does, as the full compile's later candidates are all
   * made from a first one that fits; see place), its step no shorter than the
   * full compile's; 'step', the full compile's placement and step (fit's
   * answer).
   */
  probe?: 'fits' | 'step';
}

/** The whole training step of a model: forward, backward, optimizer, in the compute precision. */
export async function trainingGraph(opts: CompileOptions, onForward?: (forward: Graph) => void): Promise<{ graph: Graph; preset: string; config: Record<string, unknown>; sharding?: SpSharding }> {
  const P = opts.sp ?? 1;
  if (!(Number.isInteger(P) && P >= 1)) throw diag.spRanks(`--sp: expected a whole number of ranks >= 1, got ${P}`);
  if (P > 1 && opts.dpuWarmupSteps !== undefined) throw diag.usage('--sp and --dpu together are not supported yet');
  // the ONNX importer (and its protobuf decoder, ~0.1 s to load) only for ONNX models
  const imported = /\.onnx$/i.test(opts.model)
    ? (await import('../compiler/import/onnx.js')).importOnnx(opts.model, { batch: opts.batch, seq: opts.seq, freeze: opts.freeze })
    : await importDsl(opts.model, { preset: opts.preset, batch: opts.batch, seq: opts.seq, config: opts.config });
  mark('import');
  onForward?.(imported.graph);
  assertGraph(imported.graph, 'import');
  let forward = imported.graph, sharding: SpSharding | undefined;
  if (P > 1) {
    ({ graph: forward, sharding } = lowerSequenceParallel(forward, P, opts.model));
    assertGraph(forward, 'sequence-parallel lowering');
  }
  let withGrad = autodiff(forward);
  assertGraph(withGrad, 'autodiff');
  mark('autodiff');
  if (P > 1) {
    withGrad = insertGradAllReduce(withGrad, P);
    assertGraph(withGrad, 'gradient all-reduce');
  }
  const lowered = lowerPrecision(withGrad, opts.precision ?? 'fp32');
  assertGraph(lowered, 'precision lowering');
  const step = lowerOptimizer(lowered, { ...ADAM_DEFAULTS, ...opts.optimizer });
  assertGraph(step, 'optimizer lowering');
  mark('lowering');
  return { graph: step, preset: imported.preset, config: imported.config, ...(sharding ? { sharding } : {}) };
}

const fitsTiers = (a: Record<Tier, number>, hw: HardwareProfile) => a.gpu <= hw.gpu.capacityBytes && a.cpu <= hw.cpu.capacityBytes && a.nvme <= hw.nvme.capacityBytes;

/**
 * A placement with its scheduled program and arenas (and, once simulated, its
 * simulation): each candidate placement is scheduled once, and the one kept is
 * the plan's (planFor takes it as it is).
 */
export interface Built { placement: Placement; prog: Program; /** per buffer (state-order.ts) */ order: Float64Array; arenas: Arenas; sim?: { hw: HardwareProfile; result: Simulation } }

const capacities = (hw: HardwareProfile): Record<Tier, number> => ({ gpu: hw.gpu.capacityBytes, cpu: hw.cpu.capacityBytes, nvme: hw.nvme.capacityBytes });

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

const build = (g: Graph, hw: HardwareProfile, p: Placement): Built => {
  const prog = buildProgram(g, p), order = stateOrder(g, prog);
  const b: Built = { placement: p, arenas: assignOffsets(prog, capacities(hw), order), prog, order };
  if (!b.arenas.ring || prog.instructions.length > RING_CHOICE_MAX_INSTRUCTIONS) return b;
  const without: Built = { placement: p, arenas: assignOffsets(prog, capacities(hw), order, undefined, false), prog, order };
  return fitsTiers(without.arenas.arenaBytes, hw) && simulated(g, hw, without).stepSeconds < simulated(g, hw, b).stepSeconds ? without : b;
};
const simulated = (g: Graph, hw: HardwareProfile, b: Built): Simulation => {
  if (b.sim?.hw !== hw) b.sim = { hw, result: simulate(g, b.placement, b.arenas.buffers, b.arenas.instructions, hw) };
  return b.sim.result;
};

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
 * finds nothing that fits or the CPU arena overflows.
 */
function minCutPrepared(g: Graph, hw: HardwareProfile): CutCandidate | undefined {
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
    if (arena.gpu <= hw.gpu.capacityBytes) return arena.cpu <= hw.cpu.capacityBytes ? { placement: p, prog, order } : undefined;
    target -= arena.gpu - hw.gpu.capacityBytes;
  }
  return undefined;
}

/** The min-cut candidate with its arenas (the same as build's). */
function cutBuilt(hw: HardwareProfile, c: CutCandidate): Built {
  const b = { placement: c.placement, arenas: assignOffsets(c.prog, capacities(hw), c.order), prog: c.prog, order: c.order };
  mark('min-cut schedule');
  return b;
}

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
 * headroom variant's) to the placement LPs'. Throws the first
 * rounding's does-not-fit when none fits.
 */
function lpBest(g: Graph, hw: HardwareProfile, sols: LpSolution[]): Built {
  const acc: LpCandidates = { seen: new Set() };
  for (const sol of sols) lpTry(g, hw, sol, acc);
  if (!acc.best) throw acc.firstError;
  return acc.best;
}

/** lpBest's state, so that each LP's roundings can be tried as soon as its shares come. */
interface LpCandidates {
  best?: Built; firstError?: unknown; seen: Set<string>; /** the best's shares and rounding (as repaired) */ bestFrom?: { sol: LpSolution; r: Rounded };
  /** lpTryCheckpoints' candidates that another of them beat: the split and kept-checkpoint candidates are made from them too */
  chainSeeds?: Built[];
}

function lpTry(g: Graph, hw: HardwareProfile, sol: LpSolution, acc: LpCandidates): void {
  for (const how of sol.rows === 'plan' ? ['largest', 'bytes'] as const : ['bytes'] as const) lpTryRounded(g, hw, sol, roundSolution(g, sol, how), acc);
}

/** The rounding r built (repaired to fit) and retimed, kept where it beats the best; undefined where it was tried before or does not fit. */
function lpTryRounded(g: Graph, hw: HardwareProfile, sol: LpSolution, r: Rounded, acc: LpCandidates): Built | undefined {
  const key = JSON.stringify([r.p16Tier, r.stateTier, [...r.offload], [...r.recompute]]);
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
function lpTryStartup(g: Graph, hw: HardwareProfile, acc: LpCandidates, keepParamsOnGpu: boolean): void {
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

function lpTryChainHead(g: Graph, hw: HardwareProfile, acc: LpCandidates): void {
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
 * STREAM_SHARES of f, then one group more and one fewer than the fastest of
 * those; the fastest kept when it beats the best.
 */
const STREAM_SHARES = [0.25, 0.5, 0.75, 1];

/** The groups p updates on the CPU with all their state there, the last gradient first (lpTryStream, lpTrySplit). */
function cpuUpdated(g: Graph, groups: readonly ParamGroup[], p: Placement): ParamGroup[] {
  const made = producers(g);
  return groups.filter((q) => p.opTier[q.adam] === 'cpu' && q.state.every((t) => p.home[t] === 'cpu'))
    .sort((a, b) => made[b.grad] - made[a.grad] || a.adam - b.adam);
}

function lpTryStream(g: Graph, hw: HardwareProfile, acc: LpCandidates, trying: () => void): void {
  if (!acc.best) return;
  const p = acc.best.placement, onCpu = cpuUpdated(g, paramGroups(g), p);
  if (onCpu.length === 0 || !cpuChainFrom(g, hw, acc.best, onCpu[onCpu.length - 1].adam)) return;
  trying();
  let C = 0, P = 0;
  for (const q of onCpu) {
    C += opSeconds(g, g.ops[q.adam], 'cpu', hw);
    P += Math.max(copySeconds(q.stateBytes, 'cpu', 'gpu', hw), copySeconds(q.stateBytes, 'gpu', 'cpu', hw)) + opSeconds(g, g.ops[q.adam], 'gpu', hw);
  }
  const total = onCpu.reduce((sum, q) => sum + q.stateBytes, 0), f = C / (C + P);
  // the first k groups streamed
  const tried = new Map<number, Built>();
  const tryK = (k: number) => {
    if (k < 1 || k > onCpu.length || tried.has(k)) return;
    const home = [...p.home], opTier = [...p.opTier];
    for (const q of onCpu.slice(0, k)) { opTier[q.adam] = 'gpu'; home[q.grad] = 'gpu'; }
    const b = retimed(g, hw, build(g, hw, { ...p, home, opTier }), simulated(g, hw, acc.best!).stepSeconds);
    tried.set(k, b);
  };
  const groupsFor = (bytes: number) => { let k = 0, sum = 0; while (k < onCpu.length && sum < bytes) sum += onCpu[k++].stateBytes; return k; };
  for (const share of STREAM_SHARES) tryK(groupsFor(share * f * total));
  const fastest = () => [...tried].filter(([, b]) => fitsTiers(b.arenas.arenaBytes, hw)).sort(([ka, a], [kb, b]) => simulated(g, hw, a).stepSeconds - simulated(g, hw, b).stepSeconds || ka - kb)[0];
  const first = fastest();
  if (first) { tryK(first[0] - 1); tryK(first[0] + 1); }
  const win = fastest();
  if (win && simulated(g, hw, win[1]).stepSeconds < simulated(g, hw, acc.best).stepSeconds) acc.best = win[1];
  mark('LP stream candidates');
}

/**
 * A group's state moved onto the GPU and updated there (a placement's arrays,
 * changed in place): its gradient stays there, its cast runs there, and its
 * p16 is made again there for each use where `remade` (as placementFrom
 * does), else resident there.
 */
function updatedOnGpu(q: ParamGroup, home: Tier[], opTier: Tier[], remat: boolean[], remade: boolean): void {
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
function lpTrySplit(g: Graph, hw: HardwareProfile, acc: LpCandidates, trying: () => void): void {
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

function lpTryKeptCheckpoints(g: Graph, hw: HardwareProfile, acc: LpCandidates, saved: readonly number[], keepParamsOnGpu: boolean, trying: () => void): void {
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

function lpTryCasts(g: Graph, hw: HardwareProfile, acc: LpCandidates, trying: () => void): void {
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

function lpTryCheckpoints(g: Graph, hw: HardwareProfile, acc: LpCandidates, trying: (w: Widening) => void): void {
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
 * The candidate with its arenas placed again, the fastest kept (the first on
 * ties): by when frees end (arena.ts ReuseTiming: in the program's schedule
 * without the arena's waits, or in an estimate made as it places), then along
 * schedules gated by memory (GATED_GPU_SHARES, RESERVING_BISECTIONS). The
 * schedule without the arena's waits is a floor under every placement of the
 * program (NVMe batches aside): unless it is at least RETIME_MIN_GAIN below
 * the candidate's own step, and below `beat` (the best so far), none is
 * made, and the next is not tried once one comes within RETIME_MIN_GAIN of
 * that floor. (Requiring the floor RETIME_MIN_GAIN below `beat` too lost
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
 * 6.490 -> 6.270 s (docs/BENCHMARKS.md).
 */
const GATED_GPU_SHARES = [1, 0.99, 0.98];
/**
 * The reserving gate (gated.ts) where the whole GPU does not place: bisection
 * steps over [0.98, 1] for the largest share that does. Its schedule leaves a
 * working set that fits at once, but fragmentation can still overflow by
 * 0.1-0.3 GB; the nearer the share to 1, the shorter its schedule
 * (gpt3-6.7b/a100: 0.4256 s with the reserving gate at 1/0.99/0.98 as the
 * plain one, 0.4192 after 3 steps, 0.4162 after 5; docs/BENCHMARKS.md).
 */
const RESERVING_BISECTIONS = 5;

function retimed(g: Graph, hw: HardwareProfile, b: Built, beat = Infinity): Built {
  const { prog, order } = b;
  const own = simulated(g, hw, b).stepSeconds;
  const ideal = simulate(g, b.placement, b.arenas.buffers, prog.instructions, hw);
  if (ideal.stepSeconds >= own * (1 - RETIME_MIN_GAIN) || ideal.stepSeconds >= beat) return b;
  const seconds = (i: number) => instructionSeconds(g, b.placement, b.arenas.buffers, prog.instructions[i], hw);
  const follows = followedProducers(g, b.arenas.buffers, prog.instructions);
  let best = b;
  const quiet = (timing: ReuseTiming) => () => assignOffsets(prog, capacities(hw), order, timing);
  // a gated schedule placed, unless its makespan (the simulator's rule without
  // overheads and NVMe batches) already says it cannot beat the best so far: 'slow'
  const gated = (share: number, reserving: boolean) => (): Arenas | { overflows: Tier } | 'slow' => {
    const s = gatedSchedule(prog, seconds, follows, { ...capacities(hw), gpu: hw.gpu.capacityBytes * share }, reserving);
    let makespan = 0;
    for (const e of s.end) if (e > makespan) makespan = e;
    if (makespan >= simulated(g, hw, best).stepSeconds) return 'slow';
    return assignInTime(prog, capacities(hw), order, s.start, s.end);
  };
  const near = () => simulated(g, hw, best).stepSeconds <= ideal.stepSeconds * (1 + RETIME_MIN_GAIN); // near the floor: nothing left to gain
  // the candidate kept when its arenas place and it is faster; what they overflow, if they do ('slow': not placed)
  const keep = (arenas: Arenas | { overflows: Tier } | 'slow'): Tier | 'slow' | undefined => {
    if (arenas === 'slow' || 'overflows' in arenas) return arenas === 'slow' ? arenas : arenas.overflows;
    const c: Built = { placement: b.placement, arenas, prog, order };
    if (simulated(g, hw, c).stepSeconds < simulated(g, hw, best).stepSeconds) best = c;
    return undefined;
  };
  for (const place of [quiet({ start: ideal.start, end: ideal.end }), quiet({ seconds, follows })]) { keep(place()); if (near()) break; }
  // the plain gate at each share; once its arenas overflow the CPU or NVMe,
  // neither a smaller GPU share nor the reserving gate is tried (a GPU budget
  // is not what makes host bytes fit: bench/compile/plans.mjs's 31 plans are
  // the same without them, and gpt3-175b's bound-LP candidate, whose gate
  // overflows the CPU, retimes in 0.8-1.0 s against 1.8-1.9)
  let hostOverflows = false;
  for (const share of GATED_GPU_SHARES) {
    if (near()) break;
    const over = keep(gated(share, false)());
    if (over === 'cpu' || over === 'nvme') { hostOverflows = true; break; }
  }
  // reserving: the whole GPU, else the largest share down to the plain gate's
  // smallest that places (bisection over the GPU's budget: only while the GPU
  // is what overflows; a smaller share's schedule is no shorter, so one too
  // slow sends it up)
  if (!hostOverflows && !near() && keep(gated(1, true)()) === 'gpu') {
    let lo = GATED_GPU_SHARES[GATED_GPU_SHARES.length - 1], hi = 1;
    for (let k = 0; k < RESERVING_BISECTIONS && !near(); k++) {
      const mid = (lo + hi) / 2;
      const over = keep(gated(mid, true)());
      if (over === 'gpu') hi = mid; else if (over === undefined || over === 'slow') lo = mid; else break;
    }
  }
  mark('LP placement retimed');
  return best;
}

function lpBuilt(g: Graph, hw: HardwareProfile, sol: LpSolution, r: Rounded): Built {
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
  throw diag.doesNotFit(`does not fit: no placement over gpu ${fmtBytes(hw.gpu.capacityBytes)}, cpu ${fmtBytes(hw.cpu.capacityBytes)}, nvme ${fmtBytes(hw.nvme.capacityBytes)} holds this step; raise a capacity or lower --batch/--seq`);
}

export interface Placed { placement: Placement; /** the plan's bound (none for a probe) */ lp?: LpSolution; /** the placement's program and arenas, when place built them */ built?: Built }

/**
 * Placement: everything on the GPU when it fits; else the min-cut when two
 * tiers suffice, no capacity binds (the cut's price is zero) and the cut
 * computes on the GPU (exact then); else the LP over three tiers (its
 * candidates, then the best of them with the first forward op's parameter
 * state on the GPU: lpTryStartup; with activations recomputed through chains:
 * lpTryCheckpoints; with the head of the CPU's update chain on the GPU:
 * lpTryChainHead; with master32 of NVMe state in CPU memory: lpTrySplit;
 * updates streamed to the GPU: lpTryStream; kept activations made again
 * through chains: lpTryKeptCheckpoints; the split and kept-checkpoint
 * candidates again from each checkpoint candidate another beat; casts on
 * the GPU from master32 copied up: lpTryCasts),
 * or, when the cut also fits, whichever of
 * the two the simulator finds faster. The LP runs in every case: its optimum
 * is the plan's lower bound (boundOf). Each candidate is scheduled once; the
 * kept one's program, arenas and simulation come back with it.
 */
export async function place(g: Graph, hw: HardwareProfile, opts: { keepParamsOnGpu?: boolean; solver?: LpWorker; second?: LpWorker; lpTimeLimitSeconds?: number; probe?: 'fits' | 'step' } = {}): Promise<Placed> {
  const persistentBytes = tensorBytes(g, 'persistent');
  if (persistentBytes > hw.gpu.capacityBytes + hw.cpu.capacityBytes + hw.nvme.capacityBytes) throw diag.doesNotFit(doesNotFitMessage(g, hw, opts.keepParamsOnGpu ?? false));
  // parameters kept on the GPU (ZeRO-Offload's setting): their half copies
  // alone must fit there; refused before any LP is built (fit's probes of
  // models too deep for it each built and solved one to learn so)
  if (opts.keepParamsOnGpu && tensorBytes(g, 'param16') > hw.gpu.capacityBytes) throw diag.doesNotFit(doesNotFitMessage(g, hw, true));
  // the LPs solve on worker threads while this thread searches a placement;
  // when the state cannot all stay on the GPU, the placement LPs' shares are
  // almost always wanted: they are queued at once, before the bound LP
  const lp = startLp(g, hw, { keepParamsOnGpu: opts.keepParamsOnGpu, solver: opts.solver, second: opts.second, refineAtOnce: persistentBytes > hw.gpu.capacityBytes, timeLimitSeconds: opts.lpTimeLimitSeconds });
  mark('LP build');
  try {
    if (persistentBytes <= hw.gpu.capacityBytes) {
      // a model that fits stays on the GPU with no traffic (issue 5): its
      // bound is over those plans (the bound LP with its choices fixed to
      // this placement's); the bound over every placement goes beside it
      // (offloading the update can beat it by a few per cent: gpt2-124m/v100
      // 72.1 against 75.1 ms)
      const whole = build(g, hw, allGpu(g));
      if (fitsTiers(whole.arenas.arenaBytes, hw)) return { placement: whole.placement, lp: opts.probe ? undefined : await lp.kept(whole.placement), built: whole };
    }
    const cutC = minCutPrepared(g, hw);
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
    const earlyEach = lp.earlyEach();
    if (opts.probe !== 'fits') {
      void lp.bound; // (its second solve, where it needs one, queued as soon as the first is done)
      lp.headroom(); // queued on the second solver thread, behind its placement LP
      lp.boundLeanest(); // and the bound LP's second stage, behind the bound LP
    }
    for (const shares of await earlyEach) {
      const s = await shares;
      mark('LP placement solved (awaited)');
      if (s) lpTry(g, hw, s, acc);
      // a probe of whether it fits: the first placement LP's rounding that
      // fits, no candidate that would only be faster
      if (opts.probe === 'fits' && acc.best) return { placement: acc.best.placement, built: acc.best };
    }
    // and the bound LP's shares, kept to its bytes per tier, once it is solved
    // (its rows see the forward pass's fetches and offloads: gpt3-13b/h200
    // 0.558 -> 0.419 s, gpt2-1.5b on 16 GB 0.290 -> 0.259 with castOnce)
    if (acc.best) {
      const boundSol = await lp.firstVertex;
      if (boundSol.status === 'optimal') lpTry(g, hw, boundSol, acc);
      mark('LP bound candidate');
      // and the bound LP's over 98 % of the GPU (its rounding leaves the schedule room to prefetch)
      const roomy = await lp.headroom();
      if (roomy.status === 'optimal') lpTry(g, hw, roomy, acc);
      // and the bound LP's vertex with the least total load (its first stage's
      // vertex is any of its optima: either rounds better in some cells;
      // tried last, so that it does not change the others' retiming)
      const lean = await lp.boundLeanest();
      if (lean) lpTry(g, hw, lean, acc);
      mark('LP bound-row candidates');
      lpTryStartup(g, hw, acc, opts.keepParamsOnGpu ?? false);
      // (such a plan's bound is the bound LP's widened by the ways it leaves
      // the family, those of the best it is made from and its own: solved
      // meanwhile)
      const saved = boundSol.saved;
      const wider = (own: Widening) => () => {
        if (opts.probe) return;
        const w = { ...(acc.best && wideningOf(g, acc.best.placement, saved)), ...own };
        if (wideningWays(w).length) void lp.wideBound(w);
      };
      lpTryCheckpoints(g, hw, acc, (w) => { if (!opts.probe) void lp.wideBound(w); });
      lpTryChainHead(g, hw, acc);
      lpTrySplit(g, hw, acc, wider({ split: true }));
      // (and the best's own, where neither guess was it: gpt3-6.7b on a V100
      // with 48 GB of CPU, whose checkpoint plan keeps NVMe state but does not split)
      wider({})();
      lpTryStream(g, hw, acc, wider({ stream: true }));
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
    }
    const alt = acc.best, altError = acc.firstError; // altError: the LP's rounding did not fit
    if (alt && cutC && cutOk) { simulated(g, hw, alt); mark('LP placement simulate'); }
    const sols = await lp.placements();
    const sol = sols[0];
    mark('LP solved (awaited)');
    // the placement's cutSeconds is the bound (placementFrom); the shares' placement was made before it was known
    const lpPlan = (): Built => {
      if (sol.rows === 'bound') return lpBest(g, hw, sols);
      if (!alt) throw altError;
      alt.placement = { ...alt.placement, cutSeconds: sol.lowerBoundSeconds };
      return alt;
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
      if (sol.status === 'infeasible') throw diag.doesNotFit(doesNotFitMessage(g, hw, opts.keepParamsOnGpu ?? false));
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
 * The bound reported with a plan: the bound LP's, which holds for the plans
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
  if (!w) return sol;
  const wide = await lp.wideBound(w);
  if (wide.status !== 'optimal') return { ...sol, status: wide.status };
  b.placement = { ...b.placement, cutSeconds: wide.lowerBoundSeconds };
  return { ...sol, lowerBoundSeconds: wide.lowerBoundSeconds, size: wide.size, widenedBy: wideningWays(w) };
}

function doesNotFitMessage(g: Graph, hw: HardwareProfile, keepParams: boolean): string {
  let state = 0, p16 = 0;
  for (const t of g.tensors) {
    if (t.role === 'master32' || t.role === 'adamM' || t.role === 'adamV') state += t.sizeBytes;
    if (t.role === 'param16') p16 += t.sizeBytes;
  }
  const total = hw.gpu.capacityBytes + hw.cpu.capacityBytes + hw.nvme.capacityBytes;
  const need = state + p16;
  // the GPU's own minimum: every op on it, with all state and saved activations elsewhere
  const lean: Placement = { ...allGpu(g), home: g.tensors.map((t) => (t.persistent || t.role === 'activation' || t.role === 'param16' || t.role === 'grad16' ? 'cpu' : 'gpu')) };
  const gpuMin = liveBytesPeak(buildProgram(g, lean)).gpu;
  if (gpuMin > hw.gpu.capacityBytes) return `does not fit: the GPU needs at least ${fmtBytes(gpuMin)} for the working set of one op at a time, capacity is ${fmtBytes(hw.gpu.capacityBytes)} (short by ${fmtBytes(gpuMin - hw.gpu.capacityBytes)}); raise --gpu-mem or lower --batch/--seq`;
  const short = keepParams ? p16 - hw.gpu.capacityBytes : need - total;
  const head = `does not fit: the model state needs ${fmtBytes(need)} (${fmtBytes(p16)} parameters${keepParams ? ' kept on the GPU' : ''}, ${fmtBytes(state)} optimizer state) plus working memory; gpu ${fmtBytes(hw.gpu.capacityBytes)} + cpu ${fmtBytes(hw.cpu.capacityBytes)} + nvme ${fmtBytes(hw.nvme.capacityBytes)}`;
  return short > 0 ? `${head} is short by at least ${fmtBytes(short)}` : `${head} hold the state but not the working memory beside it at its peak (activations, fetched parameters, staging); raise a capacity or lower --batch/--seq`;
}

/** The plan of a placement; `built` (from place) is its program, arenas and simulation, when already made for this graph and placement. */
export function planFor(g: Graph, hw: HardwareProfile, p: Placement, model: Plan['model'], optimizer: AdamAttrs, lp?: LpSolution, built?: Built): Plan {
  const b = built && built.placement === p ? built : build(g, hw, p);
  const arenas = b.arenas;
  const sim = simulated(g, hw, b);
  const traffic = { h2dBytes: 0, d2hBytes: 0, nvmeReadBytes: 0, nvmeWriteBytes: 0, inputBytes: 0 };
  for (const x of arenas.instructions) {
    if (x.kind !== 'copy') continue;
    const bytes = arenas.buffers[x.inputs[0]].sizeBytes;
    if (x.stream === 'h2d') traffic.h2dBytes += bytes;
    if (x.stream === 'd2h') traffic.d2hBytes += bytes;
    if (x.stream === 'nvmeRead') traffic.nvmeReadBytes += bytes;
    if (x.stream === 'nvmeWrite') traffic.nvmeWriteBytes += bytes;
  }
  for (const t of g.tensors) if (t.role === 'input') traffic.inputBytes += t.sizeBytes;
  const tiers = Object.fromEntries((['gpu', 'cpu', 'nvme'] as Tier[]).map((t) => [t, { capacityBytes: hw[t].capacityBytes, peakBytes: arenas.arenaBytes[t] }])) as Plan['tiers'];
  // the bound holds for every plan of the family: a plan simulated below it
  // means the solver's "optimal" was wrong or a row of the bound LP is not
  // valid (seen with a trial row: HiGHS answered 1.42 s where a plan of the
  // family ran 0.44 s) — never reported as a negative gap
  const bounded = lp && (lp.status === 'optimal' || lp.opCostFloor);
  if (bounded && sim.stepSeconds < lp.lowerBoundSeconds * (1 - 1e-6))
    throw new Error(`internal: the ${lp.opCostFloor ? 'op-cost floor' : "LP's lower bound"} (${lp.lowerBoundSeconds} s) lies above this plan's simulated step (${sim.stepSeconds} s): the solver's optimum is wrong or a bound row is not valid; please report the model and profile`);
  for (const t of ['cpu', 'nvme'] as Tier[]) {
    if (tiers[t].peakBytes > tiers[t].capacityBytes) throw diag.doesNotFit(`does not fit: the ${t} tier needs ${fmtBytes(tiers[t].peakBytes)}, capacity is ${fmtBytes(tiers[t].capacityBytes)} (short by ${fmtBytes(tiers[t].peakBytes - tiers[t].capacityBytes)}); raise --${t === 'cpu' ? 'cpu-mem' : 'nvme'}`);
  }
  const plan: Plan = {
    formatVersion: FORMAT_VERSION, generator: 'tiercut 0.1.0', model, hardware: hw, optimizer, graph: g, placement: p,
    tiers, buffers: arenas.buffers, instructions: arenas.instructions, traffic: traffic as Traffic,
    predicted: { stepSeconds: sim.stepSeconds, streamBusySeconds: sim.streamBusySeconds, peakBytes: arenas.arenaBytes },
    ...(bounded ? {
      bound: {
        lowerBoundSeconds: lp.lowerBoundSeconds,
        // (a step below the bound within the tolerance above is rounding: gap 0, not '-0.0 %')
        gapPercent: Math.max(0, (100 * (sim.stepSeconds - lp.lowerBoundSeconds)) / lp.lowerBoundSeconds),
        lp: { ...lp.size, status: lp.status },
        ...(lp.anyPlacementSeconds !== undefined ? { keptOnGpu: true, anyPlacementLowerBoundSeconds: lp.anyPlacementSeconds } : {}),
        ...(lp.opCostFloor ? { opCostFloor: true } : {}),
        ...(lp.widenedBy ? { widenedBy: lp.widenedBy } : {}),
      },
    } : {}),
  };
  mark('plan assembled');
  const problems = verifyPlan(plan);
  mark('plan verified');
  if (problems.length) throw new Error(`internal: the emitted plan fails verification:\n  ${problems.slice(0, 8).join('\n  ')}`);
  return plan;
}

/**
 * From this many ops in the forward graph on, HiGHS's code is made by V8's
 * optimising compiler (LpWorker.load; below, by its baseline compiler alone):
 * the LPs grow with the graph, and their solves with them. When a compile
 * solved three LPs, gpt2-1.5b (677 forward ops) took 0.9 s at the baseline
 * tier against 2.1 s optimised; it now solves eight, and optimised code wins
 * (fresh processes, 6 interleaved pairs: 4.0–5.3 s against 4.7–6.9 s);
 * gpt2-124m (173) still loses 0.35–0.5 s to it. gpt3-175b (1349) 2.6–2.9 s
 * against 2.0–2.3 s. The flags are V8's, so process-wide (a function already
 * compiled keeps its code); either compiler gives the same vertices, so the
 * plans are the same either way (docs/BENCHMARKS.md; only a switch in the
 * middle of a solve did not: highs-worker.ts).
 */
const OPTIMISED_SOLVER_MIN_FORWARD_OPS = 300;

export async function compile(opts: CompileOptions): Promise<Plan> {
  const hw = loadProfile(opts.hw ?? 'local', { gpuMemBytes: opts.gpuMemBytes, cpuMemBytes: opts.cpuMemBytes, nvmeBytes: opts.nvmeBytes });
  // the LP's solver thread starts now; HiGHS loads once the forward graph is
  // imported (while this thread builds the rest), optimised for large models
  // (in fp16/bf16 a second thread solves the second placement LP beside the first)
  const solver = new LpWorker({ deferLoad: true });
  const second = (opts.precision ?? 'fp32') !== 'fp32' ? new LpWorker({ deferLoad: true }) : undefined;
  mark('compile start');
  try {
    const { graph, preset, config, sharding } = await trainingGraph(opts, (forward) => {
      for (const w of [solver, second]) w?.load(forward.ops.length > OPTIMISED_SOLVER_MIN_FORWARD_OPS);
    });
    // sequence parallelism: the ring buffers of the largest collective sit beside the arenas; place within what they leave
    const { placement, lp, built } = await place(graph, sharding ? withoutRingBuffers(graph, hw) : hw, { keepParamsOnGpu: opts.keepParamsOnGpu, solver, second, lpTimeLimitSeconds: opts.lpTimeLimitSeconds, probe: opts.probe });
    const optimizer = { ...ADAM_DEFAULTS, ...opts.optimizer };
    const model = { source: opts.model, preset, config };
    const plan = planFor(graph, hw, placement, model, optimizer, lp, built);
    if (sharding) {
      checkRingWorkspace(plan);
      return { ...plan, sp: spSection(plan, sharding) };
    }
    if (opts.dpuWarmupSteps === undefined) return plan;
    const steadyGraph = lowerDpu(graph);
    assertGraph(steadyGraph, 'dpu lowering');
    const steadyPlace = await place(steadyGraph, hw, { keepParamsOnGpu: opts.keepParamsOnGpu, solver, second, lpTimeLimitSeconds: opts.lpTimeLimitSeconds, probe: opts.probe });
    const steady = planFor(steadyGraph, hw, steadyPlace.placement, model, optimizer, steadyPlace.lp, steadyPlace.built);
    return { ...plan, dpu: { warmupSteps: opts.dpuWarmupSteps, steady } };
  } finally {
    solver.close();
    second?.close();
  }
}

/** The profile with the largest collective op's ring buffers taken off the GPU and CPU capacities (placement only). */
function withoutRingBuffers(g: Graph, hw: HardwareProfile): HardwareProfile {
  let most = 0;
  for (const op of g.ops) most = Math.max(most, ringWorkspaceBytes(op.kind, op.inputs.map((t) => g.tensors[t]), op.attrs));
  for (const tier of ['gpu', 'cpu'] as const) {
    if (hw[tier].capacityBytes <= most)
      throw diag.doesNotFit(`does not fit: the ring buffers of one attention call need ${fmtBytes(most)}, the ${tier} tier holds ${fmtBytes(hw[tier].capacityBytes)}; raise --${tier === 'gpu' ? 'gpu-mem' : 'cpu-mem'}, use more ranks or lower --batch`);
  }
  return { ...hw, gpu: { ...hw.gpu, capacityBytes: hw.gpu.capacityBytes - most }, cpu: { ...hw.cpu, capacityBytes: hw.cpu.capacityBytes - most } };
}

/**
 * A collective op's ring buffers and scratch live beside its tier's arena, not
 * in it (the ring kernels allocate them per call): the arena plus the largest
 * of them must still fit the tier, or the plan would run out of memory that its
 * peaks do not show.
 */
function checkRingWorkspace(plan: Plan): void {
  const g = plan.graph;
  for (const tier of ['gpu', 'cpu'] as const) {
    let most = 0;
    for (const op of g.ops) if (plan.placement.opTier[op.id] === tier) most = Math.max(most, ringWorkspaceBytes(op.kind, op.inputs.map((t) => g.tensors[t]), op.attrs));
    const { peakBytes, capacityBytes } = plan.tiers[tier];
    if (peakBytes + most > capacityBytes)
      throw diag.doesNotFit(`does not fit: the ${tier} tier needs ${fmtBytes(peakBytes)} for the step plus ${fmtBytes(most)} of ring buffers beside it, capacity is ${fmtBytes(capacityBytes)} (short by ${fmtBytes(peakBytes + most - capacityBytes)}); raise --${tier === 'gpu' ? 'gpu-mem' : 'cpu-mem'}, use more ranks or lower --batch`);
  }
}

/**
 * The plan's sequence-parallel section: one step shared by every rank (the
 * rank-local graphs are identical), and per rank the token positions it holds,
 * the bytes it sends over the ring each step (per run instruction: a
 * collective whose output is recomputed runs, and sends, again) and the
 * largest collective's memory outside the arenas.
 */
function spSection(plan: Plan, s: SpSharding): PlanSp {
  const g = plan.graph;
  const perRank = Array.from({ length: s.ranks }, (_, rank) => {
    let attentionBytes = 0, allReduceBytes = 0, workspace = 0;
    for (const x of plan.instructions) {
      if (x.kind !== 'run') continue;
      const op = g.ops[x.op];
      const ins = op.inputs.map((t) => g.tensors[t]);
      const bytes = ringSendBytes(op.kind, ins, op.attrs, rank);
      if (op.kind === 'allReduce') allReduceBytes += bytes; else attentionBytes += bytes;
      workspace = Math.max(workspace, ringWorkspaceBytes(op.kind, ins, op.attrs));
    }
    return {
      rank, positions: zigzagPositions(s.seq, s.ranks, rank),
      ringSendBytes: { attention: attentionBytes, allReduce: allReduceBytes }, ringWorkspaceBytes: workspace,
    };
  });
  return { ranks: s.ranks, seq: s.seq, inputs: s.inputs.map((i) => ({ ...i, fullShape: [...i.fullShape] })), ...(s.positions !== undefined ? { positions: s.positions } : {}), perRank };
}
