// LP partition over GPU, CPU and NVMe, solved by HiGHS, with a lower bound.
//
// Takes a training-step Graph (fp32, fp16 or bf16), a hardware profile and
// capacities. Gives the LP's optimal value (a lower bound on the step time of
// every placement in this model family) and its fractional shares, which
// lp-round.ts rounds to an integral Placement (its rows: lp-memory.ts, the
// capacities; lp-precedence.ts, when work can happen).
// Model (the form FlexGen uses for inference, here for a training step):
//  - program order is cut into K segments of equal GPU time;
//  - per parameter group (one adam op): shares of its optimizer state
//    (master32 + m + v) on each tier, and of its compute copy p16: resident on
//    the GPU, resident on the CPU, or (fp16/bf16, where p16 is not state) made
//    again from master32 for each use (rematerialised; in fp32 the third share
//    is NVMe, as p16 is the parameter itself); each set of shares sums to 1;
//    the update runs on the GPU for the state's GPU share and on the CPU for
//    the rest (NVMe state is read into CPU staging and written back); the
//    smallest groups (at most 1e-3 of the state together) are left out, a
//    relaxation, and live on the GPU (smallGroups);
//  - per saved activation (alive across segments): kept on the GPU, offloaded
//    to the CPU (d2h after it is made, h2d before its next use), or recomputed
//    before its next use (its producer runs again on the GPU; allowed when the
//    producer's inputs are parameters, data or saved activations that are
//    themselves not recomputed);
//  - the step's load per resource (gpu, cpu, h2d, d2h, nvme read, nvme write)
//    in seconds; an epigraph variable T >= every load and >= every precedence
//    row (lp-precedence.ts precedenceRows: work released by a gradient, work due before a
//    parameter's first reader; the bound LP again with fetch-then-update
//    rows, CPU updates after the forward's fetches and the GPU's work up to
//    their gradient, and a gradient after the casts and updates the
//    placement puts on the GPU before it, where its first vertex breaks
//    one); minimise T (a bound no schedule of the
//    placement can beat: the scheduler runs the GPU's ops in program order),
//    then, with T held within 1e-6 of its optimum, the total load, every
//    term with its sign (so the chosen placement wastes no work: an
//    activation is kept rather than offloaded, an update stays on the GPU,
//    where the rows allow); times are in units of the GPU's work, so the
//    model is well scaled at every size;
//  - capacity of every tier, in two forms, so two LPs: the bound LP's rows
//    count, at one instant per segment, only the bytes every schedule holds
//    there, per tier and on the GPU and CPU together (an offloaded activation
//    is on one or the other) (boundMemoryRows: valid, so its optimum is a
//    lower bound and its infeasibility a proof that nothing fits); the
//    placement LP's rows count every tensor alive anywhere in a segment at
//    once within 97 % of the capacity (planMemoryRows: high, which leaves the
//    schedule room to prefetch); remade p16 is charged where its cast runs in
//    the bound LP (a McCormick column), the CPU cast and copy in the
//    placement LP.
//  - recompute one level deep (a recomputed activation's producer reads only
//    parameters, data and saved activations not recomputed): the family the
//    bound holds for, each group's state resting in one place. A plan that
//    recomputes through chains (checkpoints.ts) or splits a group's state
//    (master32 on the CPU, its moments on NVMe: compile's split candidate)
//    or updates on the GPU a group whose state rests on the CPU (compile's
//    stream candidates) or casts on the GPU a p16 made again from master32
//    resting on the CPU (compile's cast candidates) gets the bound LP's
//    widened by just those ways
//    (wideBound(wideningOf(...)), each a relaxation of every such plan:
//    lower): any saved activation may be recomputed, at the cost of one run
//    of its producer and of those of the activations not saved it reads,
//    in turn; master32 may rest apart from its moments; per group a
//    streamed share of the CPU's, whose state goes up (h2d), is updated on
//    the GPU after its gradient and goes home (d2h), its bytes on the GPU
//    counted at its update's run (at a spread subset of the updates where
//    a row at each would pass lp-memory.ts STREAM_ROW_TERMS); per group a
//    share of a remade p16 whose state rests on the CPU cast on the GPU
//    (master32 copied up for each cluster of reads in place of p16, the
//    cast's GPU time in place of the CPU's; master32's bytes on the GPU not
//    counted), one share for the forward pass's clusters and one for the
//    backward's;
//  - the bound LP's products of a group's two choices (p16 choice x state
//    tier) are at least the group's pair shares (pair columns, whose margins
//    are the two sets of shares): exact products where the envelopes alone
//    let two half choices cancel (the bound rose 10-20 % on gpt3-13b and
//    6.7b; HiGHS's MIP bound with every group integral is at most 0.02 %
//    above it on gpt3-13b/a100, 13b/h200 and 6.7b/v100).
// Rounding (lp-round.ts): the placement LPs' shares each to its largest tier or keeping
// their bytes per tier, each activation to its largest choice; the bound LP's
// (its first stage's vertex, its second stage's — least total load within
// its optimum — and the same LP's over HEADROOM_SHARES of the GPU) keeping its
// bytes per tier (roundShares); castOnce keeps on the CPU a
// remade p16 whose state rounds there, remakeOnGpu remakes on the GPU a p16
// homed on the CPU whose state is on the GPU; the caller verifies the rounded plans
// with the scheduler and simulator, repairs overflows and keeps the fastest.
// Keeps true: deterministic (fixed row/column order). Cost: LPs with
// O(groups + activations) columns and O(K + groups) rows, solved on worker
// threads (highs-worker.ts) while compile searches the min-cut: the bound LP
// always; the placement LPs, the bound LP's second stage and its headroom
// variants only when compile needs placements.

import { copySeconds, opSeconds, type Tier } from '../cost/cost.js';
import type { HardwareProfile } from '../cost/profiles.js';
import type { Graph } from '../ir/types.js';
import { consumers, producers, tensorBytes } from '../ir/graph.js';
import { LpWorker, type HighsModelData, type HighsResult } from './highs-worker.js';
import { LinearProgram } from './lp-model.js';
import { boundMemoryRows, planMemoryRows, PLAN_CAPACITY_SHARE, readClusters, type GpuMemoryRow } from './lp-memory.js';
import { precedenceRows, type GpuItem } from './lp-precedence.js';
import type { Placement } from './placement.js';

export interface LpOptions {
  /** Parameters (p16) stay resident on the GPU (the ZeRO-Offload setting). */
  keepParamsOnGpu?: boolean;
  segments?: number;
  /** Per solve (default LP_TIME_LIMIT_SECONDS). */
  timeLimitSeconds?: number;
  /** Share of the optimizer state that the smallest groups may hold and be left out of the LP (see smallGroups); default 1e-3. */
  smallGroupsShare?: number;
  /** A solver thread to use (started early, so HiGHS loads while the graph is built); its owner closes it. Default: a new one, closed by close(). */
  solver?: LpWorker;
  /** A second solver thread for the second placement LP (fp16/bf16), solved beside the first; its owner closes it. Default: the first. */
  second?: LpWorker;
  /**
   * Queue the placement LPs (both stages each) on the solver thread now,
   * before the bound LP (the caller will call early(), placements() or
   * refine()): their shares come first, so the caller rounds, schedules and
   * simulates them while the bound LP solves.
   */
  refineAtOnce?: boolean;
  /** placementBound, boundWith: the bound LP widened so (wideBound(w)'s LP). */
  widen?: Widening;
  /**
   * Only the bound LP's optimum is wanted (firstVertex's), never its vertex
   * (a model kept on the GPU: search.ts keptOnGpu). So:
   * - it is built without its memory rows, a relaxation (its optimum is still
   *   a bound over every placement) that the capacities do not tighten where
   *   the model fits in the GPU: the same optimum to 1e-14 on every model
   *   kept there of the gap grid and the tiny ones;
   * - over one segment: without memory rows the segments only decide which
   *   activations get a keep / offload / recompute choice, and keeping costs
   *   no load where the others cost copies or GPU work, so every segment
   *   count has the same optimum (to 1e-15 on those models) (gpt2-1.5b/a100:
   *   8441 -> 6802 rows, 4266 -> 2920 simplex iterations);
   * - without the choices no solution then needs (buildLp's `dominated`: state
   *   on NVMe, p16 resting on the CPU; 1772 iterations);
   * - solved with HiGHS's strongest scaling and its primal simplex
   *   (gpt2-1.5b/v100: 4042 simplex iterations against 5052 with that
   *   scaling; the primal simplex 0.17-0.23 s against 0.23-0.29 s for the
   *   dual on gpt2-1.5b over the four GPUs, 0.11 against 0.18 s on
   *   gpt3-6.7b/h200, 33 ms either way on gpt2-124m, the same optimum).
   * Elsewhere its vertex is rounded into candidates, and another vertex of
   * the same optimum makes other plans (gpt3-6.7b/a100, whose state fits in
   * 80 GB and arenas do not: 0.3956 -> 0.4033 s).
   */
  numberOnly?: boolean;
}

/**
 * HiGHS's time limit per solve. The largest bound LP of the tests (a 120B GPT,
 * 381 layers, on h200-141g) takes ~12 s alone on this 2-core VM and passed 30 s
 * under the test suite's load (the suite failed on it); a time-out is an
 * error (compile says so and exits 2), so the limit is generous.
 */
export const LP_TIME_LIMIT_SECONDS = 120;
/**
 * The time limit of the solves compile can do without (the placement LPs and
 * their second stages, the bound LP's second stage and its headroom variants:
 * without them compile rounds the bound LP's shares). gpt-1t's finer placement
 * LP (384 segments) runs past any limit; at 30 s, as before, the 1T test took
 * 38 s, at 120 s it took 129.
 */
export const OPTIONAL_TIME_LIMIT_SECONDS = 30;
/**
 * The bound LP's second stage (its least-load vertex, one more candidate) gets
 * its first stage's simplex iterations + 2000, and runs only when that stays
 * within 7500 (stage 1 at most 5500, as with the limit of twice + 1000 it had
 * before). Over bench/compile/plans.mjs's 31 cases it took at most stage 1's
 * + 1800 (gpt3-13b on a100-80g with 64 GB CPU: 1015 -> 2819; gpt3-13b/h100
 * 2386 -> 4035; gpt2-1.5b on 16 GB 3735 -> 4779), except gpt3-175b's, which
 * ends at every limit tried without an answer (at twice its 3054 + 1000, 4 s
 * of a solver thread that compile then waited for; now at 5054, ~1 s sooner:
 * docs/BENCHMARKS.md, twenty-fifth session); on a 120B GPT (26000 in stage 1)
 * it ran past 46000 and 30 s without an answer (the 120B compile 20 -> 54 s).
 */
export const LEAN_LIMIT = { factor: 1, plus: 2000, max: 7500 };

export interface ParamGroup {
  adam: number;
  /** fp16/bf16: the op casting master32 into param16 (runs where the state is); -1 in fp32. */
  cast: number;
  p16: number;
  state: number[];
  grad: number;
  p16Bytes: number;
  stateBytes: number;
  gradBytes: number;
  /**
   * fp16/bf16: p16 may be made again from master32 at each use (the cast run
   * again there): the update writes master32 only after p16's last reader. Not
   * in a DPU steady step, whose update comes first: a cast run again would read
   * the updated master32, and that group would not be delayed.
   */
  remakeable: boolean;
}

export interface LpSolution {
  status: 'optimal' | 'infeasible' | 'timeLimit' | 'other';
  lowerBoundSeconds: number;
  solveSeconds: number;
  /** Which LP's shares these are: the bound LP's or the placement LP's. */
  rows: 'bound' | 'plan';
  /** Whether the state needs NVMe (more of it than the GPU and CPU hold). */
  nvmeNeeded: boolean;
  size: { rows: number; cols: number; nonzeros: number };
  groups: readonly ParamGroup[];
  /** Per group, 1 when the LP left it out (smallGroups): its shares say GPU. */
  small: Uint8Array;
  p16Share: Float64Array[];   // per group [gpu, cpu, nvme]
  stateShare: Float64Array[];
  saved: number[];            // activation tensor ids with a keep/offload/recompute decision
  keepShare: Float64Array;
  recomputeShare: Float64Array;
  /**
   * Set where a model that fits stays on the GPU (search.ts keptOnGpu):
   * lowerBoundSeconds is then over the plans that keep it there, the GPU's
   * own work (computeFloorSeconds: every op runs there, one at a time), and
   * the LP's is over every placement (anyPlacementSeconds, where optimal).
   */
  keptOnGpu?: boolean;
  /** With keptOnGpu: the bound LP's optimum over every placement, which may move state or work off the GPU. */
  anyPlacementSeconds?: number;
  /**
   * Set where lowerBoundSeconds is opCostFloorSeconds (compiler/simulate): the
   * plan runs ops on the CPU, outside the LPs' family (inLpFamily), so the
   * bound LP's optimum is no bound for it.
   */
  opCostFloor?: boolean;
  /**
   * Set where lowerBoundSeconds is the bound LP's widened (wideBound): the
   * ways the plan leaves the LPs' family, whose widening it is over.
   */
  widenedBy?: readonly WideningWay[];
  /**
   * Set where the wide LP (LpRun.wideBound) ended without an optimum and
   * lowerBoundSeconds is the same LP's without its fetch-then-update rows: a
   * relaxation, lower, still a bound over the same plans.
   */
  relaxed?: boolean;
}

/** Per graph, its parameter groups (the graph is read-only data: made once, shared, frozen). */
const groupsOf = new WeakMap<Graph, readonly ParamGroup[]>();

/** One group per Adam op, in program order (made once per graph; the array is frozen). */
export function paramGroups(g: Graph): readonly ParamGroup[] {
  let groups = groupsOf.get(g);
  if (!groups) groupsOf.set(g, groups = Object.freeze(groupsIn(g)));
  return groups;
}

function groupsIn(g: Graph): ParamGroup[] {
  const half = g.precision !== 'fp32';
  const castOf = new Map<number, number>(); // master32 -> cast op
  for (const o of g.ops) if (o.kind === 'reshape' && o.phase === 'update') castOf.set(o.inputs[0], o.id);
  const lastRead = new Int32Array(g.tensors.length).fill(-1);
  for (const o of g.ops) for (const t of o.inputs) lastRead[t] = o.id;
  return g.ops.filter((o) => o.kind === 'adam').map((u) => {
    const [p, grad, m, v] = u.inputs;
    const cast = half ? castOf.get(p) ?? -1 : -1;
    const p16 = cast >= 0 ? g.ops[cast].outputs[0] : p;
    const state = half ? [p, m, v] : [m, v];
    const bytes = (ids: number[]) => ids.reduce((s, t) => s + g.tensors[t].sizeBytes, 0);
    return { adam: u.id, cast, p16, state, grad, p16Bytes: g.tensors[p16].sizeBytes, stateBytes: bytes(state), gradBytes: g.tensors[grad].sizeBytes, remakeable: cast >= 0 && lastRead[p16] < u.id };
  });
}

/** Segment of every op: K slices of equal cumulative GPU time in program order. */
function segmentsOf(g: Graph, hw: HardwareProfile, K: number): Int32Array {
  const t = g.ops.map((op) => opSeconds(g, op, 'gpu', hw));
  const total = t.reduce((a, b) => a + b, 0) || 1;
  const seg = new Int32Array(g.ops.length);
  let acc = 0;
  for (const op of g.ops) { seg[op.id] = Math.min(K - 1, Math.floor((acc / total) * K)); acc += t[op.id]; }
  return seg;
}

/** LPs being solved: the bound LP at once; the placement LPs at once or on demand. */
export interface LpRun {
  /**
   * The bound LP's optimum, with the shares of some optimal solution:
   * firstVertex's, or, where that breaks a fetch-then-update row
   * (fetchThenUpdateRows), the bound LP's with those rows too (solved then,
   * on the second solver thread when there is one: a higher optimum).
   * That second solve starts when bound is first read. Its rows count a CPU
   * update after its gradient's copy down (compile's search rounds and
   * retimes from it); the bound reported with a plan is wideBound's.
   */
  readonly bound: Promise<LpSolution>;
  /** The bound LP's first solution, without the fetch-then-update rows (its optimum is a bound too, at most bound's). */
  readonly firstVertex: Promise<LpSolution>;
  /**
   * The bound LP widened, with the fetch-then-update rows and each CPU update
   * following its gradient's copy down (BoundExtras.follow): the bound
   * reported with a plan, widened as far as `w` says it leaves the family
   * (wideningOf; {}: not at all),
   * each way a relaxation of its own (at most bound's): chains, over
   * recompute through chains (any saved activation may be recomputed, at the
   * cost of one run of its producer and of those of the activations not
   * saved it reads, in turn: a chain plan runs each at least once, as no
   * copy of those is left: checkpoints.ts's and room.ts's plans); split,
   * over state split by tensor (master32's NVMe share a column of its own:
   * the split candidate's); stream, over
   * updates streamed to the GPU (the stream candidates'). Each left out where
   * the plan does not need it, as each lowers the bound: gpt2-1.5b's
   * streamed plan on 16 GB 176.4 ms with stream alone against 157.8 with all
   * three; gpt3-175b 279.8 s with split alone, 269.2 with chains too (its
   * plan recomputes through chains: the second is its bound, the first lies
   * above its 279.3 s step; docs/BENCHMARKS.md, nineteenth session).
   * Each widening solved on its first call (on the second solver thread when there is one).
   * Where it ends without an optimum, the same LP without its
   * fetch-then-update rows (LpSolution.relaxed), lower, still a bound.
   */
  wideBound(w: Widening): Promise<LpSolution>;
  /** The placement LP's shares (the least traffic and work within its optimum), with the bound; the bound LP's shares when it has none. */
  refine(): Promise<LpSolution>;
  /** Every placement LP's shares (refine's first), with the bound; the bound LP's when none has a solution. */
  placements(): Promise<LpSolution[]>;
  /**
   * The placement LPs' shares as soon as they are solved, before the bound
   * may be known: placements()' solutions when those are the placement LPs',
   * except lowerBoundSeconds, which is each placement LP's own optimum (not a
   * bound). Empty when placements() falls back to the bound LP's shares.
   */
  early(): Promise<LpSolution[]>;
  /** early()'s shares one placement LP at a time, each as soon as it is solved (undefined: that LP has none); empty as early() is. */
  earlyEach(): Promise<Promise<LpSolution | undefined>[]>;
  /**
   * The bound LP's rows over `share` of the GPU (one of HEADROOM_SHARES;
   * each queued on its first call, on the second solver thread when there is
   * one): shares to round, as the bound LP's are, for a plan that leaves the
   * schedule some room to prefetch. Its optimum is no bound.
   */
  headroom(share: number): Promise<LpSolution>;
  /** The bound LP's shares with the least total load within its optimum (a second stage, queued on the first call behind what the solver thread has); undefined when that stage fails. */
  boundLeanest(): Promise<LpSolution | undefined>;
  /** Ends the solver thread (unless the caller passed its own). */
  close(): void;
}

/**
 * The bound LP's rows count only what every schedule must hold, so the bound
 * LP's rounding fills the GPU to the brim and its prefetches wait for room
 * (gpt3-13b/a100: the ideal schedule 1.67 s, the arena's 3.26 s); the same rows
 * over 98 % of the GPU leave room (docs/BENCHMARKS.md). How much room rounds
 * best varies by cell and erratically (gpt3-6.7b/a100's roundings at 100,
 * 98, 97.5, 97, 96 and 95 %: 451, 407, 394, 414, 401 and 415 ms retimed), so
 * compile rounds two: 98 %, whose rounding may also seed the families' later
 * passes, and 97.5 %, a start for their first pass only (as a seed too it
 * displaced the seed gpt3-6.7b/v100 on 48 GB of CPU had won from: 3.52 ->
 * 3.96 s). Over bench/compile/plans.mjs's 31 plans the second made one
 * faster (gpt3-6.7b/a100 0.3911 -> 0.3847 s: 97.5 %'s rounding, own bound
 * 383.0 ms, is the first pass's start) and none slower; five shares (down to
 * 95 %) made the same one faster and gpt3-175b 0.4 % slower
 * (docs/BENCHMARKS.md, thirty-eighth session).
 */
export const HEADROOM_SHARES = [0.98, 0.975] as const;

/**
 * LPs with the same columns and loads, solved on worker threads. The bound LP
 * has memory rows that count only what every schedule must hold
 * (boundMemoryRows): its optimum is the lower bound, and infeasible means no
 * placement of the family fits. The placement LPs (refine, placements) have
 * rows that count high and leave room to prefetch (planMemoryRows): their
 * solutions are the ones rounded into the plan, the least traffic and work
 * within their optimum. When none has one (their rows are stricter than the
 * capacity, or they stop at their time limit), the bound LP's solution is
 * rounded instead, and place's search starts from that (search.ts).
 */
export function startLp(g: Graph, hw: HardwareProfile, opts: LpOptions = {}): LpRun {
  const solver = opts.solver ?? new LpWorker();
  const timeLimit = opts.timeLimitSeconds ?? LP_TIME_LIMIT_SECONDS;
  const optionalLimit = Math.min(timeLimit, OPTIONAL_TIME_LIMIT_SECONDS);
  // an LP's stage 2 on its solver thread right behind stage 1 (solve `id`):
  // least total load with T within 1e-6 of stage 1's optimum, at most twice its
  // iterations + 1000 (or `limit`'s; none when that passes its max), HiGHS's strongest scaling
  const secondStage = (on: LpWorker, id: number, built: BuiltLp, limit: { factor: number; plus: number; max?: number } = { factor: 2, plus: 1000 }) =>
    on.solveAfter(id, { ...built.data, colCost: built.secondaryCost }, optionalLimit, { col: built.T, relTol: 1e-6, absTol: 1e-12, iterationsFactor: limit.factor, iterationsPlus: limit.plus, iterationsMax: limit.max }, { simplex_scale_strategy: 4 });
  const segments = opts.segments ?? 48;
  const t0 = performance.now();
  // a solve the caller may never await: its failure (the solver thread closed
  // when compile stops early, e.g. on "does not fit") must not end the process
  // as an unhandled rejection; awaited, it still throws
  const quiet = <T>(p: Promise<T>): Promise<T> => { p.catch(() => {}); return p; };
  // The placement LPs: two in fp16/bf16, differing only in what a remade p16
  // costs: the CPU's cast and a copy (the first), or a cast where the state
  // is, as in the bound LP (the second, rematCast 'gpu'). Neither's plans win
  // everywhere (docs/BENCHMARKS.md: gpt3-6.7b/h100 0.324 vs 0.213 s,
  // gpt2-1.5b/16 GB 0.313 vs 0.446 s): compile simulates the roundings of
  // both. Each is its stage 1, then stage 2 chained behind it on its solver
  // thread (the second LP on opts.second when given) with T held within 1e-6
  // of stage 1's optimum, twice its simplex iterations, HiGHS's strongest
  // scaling (stage 2 can be far harder than stage 1, degenerate at the
  // optimum, and its costs span many decades; with the default scaling the
  // simplex failed or ran out of iterations on several GPT presets). Posted
  // at once with refineAtOnce (before the bound LP, so that the caller works
  // on their shares while the bound solves), else when asked for (behind the
  // bound LP). With `checkFirst`, each is first solved with no
  // objective, and only where that finds it feasible, solved (and refined) as
  // above: the finer segments' LPs come only where the coarse ones are
  // infeasible, near the edge of what fits, and there HiGHS's dual simplex
  // took 28-59 s to prove one of them infeasible that it proves so without an
  // objective in 1.8 s (gpt3-13b of 58 layers on a100-80g with 32 GB CPU and
  // 128 GB NVMe, fit's last probe there); a feasible one costs ~2 s more.
  // The finer segments' first LP (the CPU's cast) is solved by the
  // interior-point method, then crossover to a vertex (as the simplex's
  // solution is): on gpt-1t (a100-80g, 28 TB NVMe) HiGHS's dual simplex made
  // ~6000 iterations of ~10 ms each in 30-60 s, far from its optimum, and was
  // cut by the optional limit (so the plan depended on the machine's load),
  // while the interior point solves it in 9.4-12.7 s; the second LP's
  // simplex solves in 2.5 s (the interior point: 10.6 s, and a vertex whose
  // roundings made the plan 0.13 % slower), so it keeps the simplex.
  // gpt-1t compiles in 31.1-31.5 s instead of 54.6, to the same plan; no plan of
  // bench/compile/plans.mjs solves a finer LP (docs/BENCHMARKS.md, sixty-fourth session)
  type PlanRun = { lp: BuiltLp; first: Promise<HighsResult>; second: Promise<HighsResult | undefined> };
  let plans: PlanRun[] | undefined;
  const postPlans = (K: number, checkFirst = false) => {
    plans = (g.precision === 'fp32' ? ['cpu'] as const : ['cpu', 'gpu'] as const).map((remat, k) => {
      const lp = buildLp(g, hw, opts, K, 'plan', remat);
      const on = k > 0 && opts.second ? opts.second : solver;
      const interiorPoint = checkFirst && remat === 'cpu' ? { solver: 'ipm', run_crossover: 'on' } : undefined;
      const post = () => {
        const id = on.nextSolveId;
        return { first: on.solve(lp.data, optionalLimit, undefined, interiorPoint, true), second: secondStage(on, id, lp) };
      };
      if (!checkFirst) { const p = post(); return { lp, first: quiet(p.first), second: quiet(p.second) }; }
      const posted = on.solve({ ...lp.data, colCost: new Float64Array(lp.data.numCols) }, optionalLimit).then((r) => (r.status === 'infeasible' ? r : post()));
      return { lp, first: quiet(posted.then((p) => ('first' in p ? p.first : p))), second: quiet(posted.then((p) => ('second' in p ? p.second : undefined))) };
    });
  };
  if (opts.refineAtOnce) postPlans(segments);
  // (numberOnly: no memory rows, so one segment: see LpOptions.numberOnly)
  const model = buildLp(g, hw, opts, opts.numberOnly ? 1 : segments, 'bound', 'gpu', { noMemory: opts.numberOnly });
  const boundId = solver.nextSolveId;
  const boundFirst = solver.solve(model.data, timeLimit, undefined, opts.numberOnly ? { simplex_scale_strategy: 4, simplex_strategy: 4 } : undefined, true);
  const firstVertex = quiet((async () => {
    const first = await boundFirst;
    return model.solution(first.status, first.objective, first.x, (performance.now() - t0) / 1e3);
  })());
  // the same LP with the fetch-then-update rows, only where its first vertex
  // breaks one (else its optimum is the same: that vertex is feasible there);
  // without an optimum of its own, the first one's bound stands
  // (started on first use: a model kept on the GPU reports only firstVertex's bound beside its own)
  let tightened: Promise<LpSolution> | undefined;
  const bound = () => (tightened ??= quiet((async () => {
    const first = await boundFirst, loose = await firstVertex;
    if (first.status !== 'optimal' || !model.breaksFetchThenUpdate(first.x)) return loose;
    const tight = buildLp(g, hw, opts, segments, 'bound', 'gpu', { fetchThenUpdate: true });
    const r = await (opts.second ?? solver).solve(tight.data, optionalLimit);
    // (its optimum is at least the first's, up to HiGHS's tolerances)
    return r.status === 'optimal' && r.objective * tight.seconds >= loose.lowerBoundSeconds ? tight.solution('optimal', r.objective, r.x, (performance.now() - t0) / 1e3) : loose;
  })()));
  // the bound LP widened (each widening, none too, started on first use)
  const widened = new Map<string, Promise<LpSolution>>();
  const wideBound = (w: Widening) => {
    const key = wideningWays(w).join();
    let solving = widened.get(key);
    if (!solving) widened.set(key, solving = widenedBound(w));
    return solving;
  };
  const widenedBound = (w: Widening) => quiet((async () => {
    const wide = await solvedBound(wideBoundLp(g, hw, { ...opts, segments, widen: w }));
    // without an optimum, the same LP without its fetch-then-update rows
    // (relaxedBoundLp): fewer rows, so a lower optimum, still a bound over
    // the same plans (a 100 821-op GPT's wide LP aborted HiGHS, likely past
    // the 2 GiB heap of its WebAssembly build, and the plan reported no
    // bound). After a time limit only where it is not widened: then it is
    // the first bound LP's size, which solved within it (widened through
    // chains it can take longer still: that GPT's, widened by chains and
    // split, ran past 400 s, and a second limit spent on it gave nothing;
    // the note says to raise --lp-time-limit)
    if (wide.status === 'optimal' || (wide.status === 'timeLimit' && wideningWays(w).length > 0)) return wide;
    const relaxed = await solvedBound(relaxedBoundLp(g, hw, { ...opts, segments, widen: w }));
    return relaxed.status === 'optimal' ? { ...relaxed, relaxed: true } : wide;
  })());
  /** A bound LP solved on the second thread (where there is one), with HiGHS's strongest scaling (gpt3-175b's widened LP 1.3-1.6 s against 4.3 s with its default). */
  const solvedBound = async (lp: BuiltLp): Promise<LpSolution> => {
    const r = await (opts.second ?? solver).solve(lp.data, timeLimit, undefined, { simplex_scale_strategy: 4 });
    return lp.solution(r.status, r.objective, r.x, (performance.now() - t0) / 1e3);
  };
  // the bound LP's stage 2 (as the placement LPs'): least total load within 1e-6 of its optimum
  let leanest: Promise<LpSolution | undefined> | undefined;
  const boundLeanest = () => (leanest ??= quiet((async () => {
    const second = await secondStage(solver, boundId, model, LEAN_LIMIT);
    const first = await boundFirst;
    return second?.status === 'optimal' ? model.solution('optimal', first.objective, second.x, (performance.now() - t0) / 1e3) : undefined;
  })()));
  const roomy = new Map<number, Promise<LpSolution>>(); // per share of the GPU
  const headroom = (share: number) => {
    let sol = roomy.get(share);
    if (!sol) {
      const lp = buildLp(g, { ...hw, gpu: { ...hw.gpu, capacityBytes: hw.gpu.capacityBytes * share } }, opts, segments, 'bound');
      const solving = (opts.second ?? solver).solve(lp.data, optionalLimit);
      roomy.set(share, sol = quiet((async () => { const r = await solving; return lp.solution(r.status, r.objective, r.x, (performance.now() - t0) / 1e3); })()));
    }
    return sol;
  };
  const solved = async (run: PlanRun): Promise<LpSolution | undefined> => {
    const first = await run.first;
    if (first.status !== 'optimal') return undefined;
    // stage 2 only refines: when it fails (infeasible within the tolerance, or
    // HiGHS ends 'unknown' on a badly scaled model), stage 1's optimum stands
    const second = await run.second;
    const x = second?.status === 'optimal' ? second.x : first.x;
    return run.lp.solution('optimal', first.objective, x, (performance.now() - t0) / 1e3);
  };
  let each: Promise<Promise<LpSolution | undefined>[]> | undefined;
  const earlyEach = () => (each ??= (async () => {
    if (!plans) {
      // not queued at once: only when the bound LP has a solution (as then the placement LPs may)
      if ((await firstVertex).status !== 'optimal') return [];
      postPlans(segments);
    }
    // coarse segments first; when they make the first LP infeasible (a
    // segment's working set counts every parameter it reads at once), finer
    // ones, if anything fits at all (the bound LP has a solution)
    if ((await plans![0].first).status === 'infeasible' && opts.segments === undefined) {
      if ((await firstVertex).status !== 'optimal') return [];
      postPlans(384, true);
    }
    return plans!.map((run) => quiet(solved(run)));
  })());
  let shares: Promise<LpSolution[]> | undefined;
  const early = () => (shares ??= (async () => {
    const out: LpSolution[] = [];
    for (const s of await earlyEach()) { const sol = await s; if (sol) out.push(sol); }
    return out;
  })());
  let refined: Promise<LpSolution[]> | undefined;
  const placements = () => (refined ??= (async () => {
    const out = await early();
    const sol = await bound();
    if (sol.status !== 'optimal' || !out.length) return [sol];
    return out.map((p) => ({ ...p, lowerBoundSeconds: sol.lowerBoundSeconds, solveSeconds: (performance.now() - t0) / 1e3, size: sol.size }));
  })());
  return { get bound() { return bound(); }, firstVertex, wideBound, boundLeanest, headroom, refine: async () => (await placements())[0], placements, early, earlyEach, close: () => { if (!opts.solver) solver.close(); } };
}

interface BuiltLp {
  data: HighsModelData;
  /** The T column (the bound). */
  T: number;
  /** Stage 2's objective: every load's coefficients (so no work or traffic is wasted), T free. */
  secondaryCost: Float64Array;
  solution(status: LpSolution['status'], objective: number, x: Float64Array, solveSeconds: number): LpSolution;
  /** Column bounds that fix the LP's choices to those of an integral placement of the family. */
  fixedTo(p: Placement): { colLower: Float64Array; colUpper: Float64Array };
  /** Seconds per unit of T. */
  seconds: number;
  /** Per column, its name (lp-model.ts). */
  colNames: readonly string[];
  /** Whether a solution of this LP breaks a fetch-then-update row (fetchThenUpdateRows) or a memory row once the p16 copies held across a cluster count (boundMemoryRows); never true when the LP has them. */
  breaksFetchThenUpdate(x: Float64Array): boolean;
}

/**
 * The bound LP's optimum with its choices fixed to those of one placement of
 * the family (forward and backward on the GPU, each update where its state
 * is): a lower bound on that placement's step under any schedule the
 * scheduler makes (GPU ops in program order), so never
 * above its simulated step. Tests check the LP's rows with it, one placement
 * at a time; 'infeasible' means the rows reject the placement (which, if it
 * fits, is a row that is not valid).
 */
export async function placementBound(g: Graph, hw: HardwareProfile, p: Placement, solver: LpWorker, opts: LpOptions = {}): Promise<number | 'infeasible'> {
  const model = wideBoundLp(g, hw, opts);
  const r = await solver.solve({ ...model.data, ...model.fixedTo(p) }, opts.timeLimitSeconds ?? LP_TIME_LIMIT_SECONDS);
  if (r.status === 'infeasible') return 'infeasible';
  if (r.status !== 'optimal') throw new Error(`placementBound: HiGHS ended ${r.status}`);
  return r.objective * model.seconds;
}

/**
 * The bound LP (widened by opts.widen) as HiGHS model data, with its column
 * names, seconds per unit of its objective, its solutions' reader and the
 * column bounds that fix it to a placement: for measurements that solve it
 * otherwise (bench/compile/gaps.mjs solves it with the groups' columns
 * integral, to see whether the bound is loose for being a relaxation; the
 * probes of docs/BENCHMARKS.md solve it fixed to a plan, or in part).
 */
export function boundModel(g: Graph, hw: HardwareProfile, opts: LpOptions = {}): Pick<BuiltLp, 'data' | 'colNames' | 'seconds' | 'solution' | 'fixedTo'> {
  const { data, colNames, seconds, solution, fixedTo } = wideBoundLp(g, hw, opts);
  return { data, colNames, seconds, solution, fixedTo };
}

/**
 * LpRun.wideBound's relaxation where it has no optimum: the wide LP without
 * its fetch-then-update rows (and the copies held across a cluster they
 * bring to the memory rows), each CPU update still following its gradient's
 * copy down, so its optimum bounds the same plans. Not the first bound LP:
 * its chain rows count a gradient's copy down and its update one after the
 * other, longer than a plan whose updates follow their copies need take, so
 * not a valid row for it (on six cells, gpt2-124m to gpt3-13b, the first
 * LP's optimum and this one's unwidened are the same: a matter of validity,
 * not of the value). Its model data: relaxedBoundModel.
 */
const relaxedBoundLp = (g: Graph, hw: HardwareProfile, opts: LpOptions): BuiltLp => buildLp(g, hw, opts, opts.segments ?? 48, 'bound', 'gpu', { follow: true, ...opts.widen });

/** The relaxed bound LP (widened by opts.widen) as HiGHS model data: what a compile solves where the wide LP (boundModel's) has no optimum. */
export const relaxedBoundModel = (g: Graph, hw: HardwareProfile, opts: LpOptions = {}): HighsModelData => relaxedBoundLp(g, hw, opts).data;

/** The bound LP with the fetch-then-update rows and the updates following their copies down, widened by opts.widen (placementBound's and boundModel's). */
const wideBoundLp = (g: Graph, hw: HardwareProfile, opts: LpOptions): BuiltLp => buildLp(g, hw, opts, opts.segments ?? 48, 'bound', 'gpu', { fetchThenUpdate: true, follow: true, ...opts.widen });


/**
 * The bound LP's optimum solved with other HiGHS options (e.g. its interior
 * point solver, { solver: 'ipm' }). HiGHS's simplex has answered "optimal"
 * with a value above the true optimum on some row sets (a trial NVMe
 * write-back row; a trial copy-down column: 0.415 s where the interior point
 * solver and every fixed placement said 0.374): tests cross-check the
 * simplex's bound with this on every case, so a row that trips it shows.
 */
export async function boundWith(g: Graph, hw: HardwareProfile, solver: LpWorker, options: Readonly<Record<string, number | string>>, opts: LpOptions = {}): Promise<number | 'infeasible'> {
  const model = buildLp(g, hw, opts, opts.segments ?? 48, 'bound', 'gpu', { fetchThenUpdate: true, follow: true, ...opts.widen });
  const r = await solver.solve(model.data, opts.timeLimitSeconds ?? LP_TIME_LIMIT_SECONDS, undefined, options);
  if (r.status === 'infeasible') return 'infeasible';
  if (r.status !== 'optimal') throw new Error(`boundWith: HiGHS ended ${r.status}`);
  return r.objective * model.seconds;
}

/**
 * The bound LP's optional rows: fetchThenUpdate (fetchThenUpdateRows);
 * chains: recompute through chains instead of one level; split: a group's
 * master32 may rest apart from its moments (fp16/bf16; compile's split
 * candidate); stream: a group whose state rests on the CPU may be updated on
 * the GPU (compile's stream candidates); cast: a p16 made again from master32
 * resting on the CPU may be cast on the GPU, master32 copied up for it
 * (compile's cast candidates). The last four widen the bound LP (wideBound),
 * each on its own.
 */
interface BoundExtras extends Widening {
  fetchThenUpdate?: boolean;
  /**
   * A CPU update follows its gradient's copy down chunk by chunk, as the
   * executor and simulator run one: a group's chain is its gradient and
   * then the longer of the copy and the update, and no update waits for a
   * copy to end (precedenceRows). The bound reported with a plan (wideBound,
   * with fetchThenUpdate; relaxedBoundLp, without); the bound LP's first solve and its
   * second (LpRun.bound), which compile rounds and retimes from, keep the
   * sum and the copy waits (the same rows there moved plans both ways:
   * docs/BENCHMARKS.md, thirty-sixth session).
   */
  follow?: boolean;
  /** no memory rows (LpOptions.numberOnly) */ noMemory?: boolean;
}

/**
 * The ways a plan leaves the bound LP's family, each a relaxation of its
 * own (BoundExtras): chains (recomputesOneLevel false), split (splitsState),
 * stream (streamsUpdates), cast (castsUp).
 */
export interface Widening { chains?: boolean; split?: boolean; stream?: boolean; cast?: boolean }
export type WideningWay = keyof Widening;

/** The ways w names, in a fixed order (a plan's bound.widenedBy). */
export const wideningWays = (w: Widening): WideningWay[] => (['chains', 'split', 'stream', 'cast'] as const).filter((k) => w[k]);

/** Per graph, what every LP built for it and every rounding read (and none changes): producers, consumers. */
const factsOf = new WeakMap<Graph, { prod: Int32Array; cons: number[][] }>();
export function graphFacts(g: Graph): { prod: Int32Array; cons: number[][] } {
  let f = factsOf.get(g);
  if (!f) factsOf.set(g, f = { prod: producers(g), cons: consumers(g) });
  return f;
}

/** A copy up the GPU needs by op `at`: seconds c + sum of terms (column, seconds); `from`: an offloaded activation's producer. */
type H2dItem = { at: number; terms: [number, number][]; c: number; from?: number };

/**
 * The turn row of the wide bound LP (sixty-third session): at the first
 * backward segment's instant o, the GPU has run every op before o and the
 * GPU work the placement puts before it (gpuBefore), and the h2d stream must
 * still bring up what the ops after o need and the GPU does not hold at o:
 * offloaded activations read again after o, p16 fetched for the clusters of
 * reads after o, streamed state for the updates after o. A copy made before
 * o stays on the GPU through o, beside all that o's memory row counts (which
 * counts none of these), so those early copies are at most the room that row
 * leaves. Every such copy ends before the step does (its reader is in this
 * step), and h2d moves a byte in 1/h2dBytesPerSec:
 *   T >= work before o + (h2d seconds of the copies after o) - room / h2d bandwidth.
 * The room is a column in GB (its memory row's bytes as an equality), so that
 * this row's coefficients stay near 1: with the bytes in it HiGHS dropped the
 * state's coefficient (under its 1e-9 small-matrix value) and the row did
 * nothing. The bound LP without it keeps the GPU, the CPU and h2d each busy
 * the whole step, copying up during the forward pass what the backward pass
 * needs with no room to hold it: gpt3-13b/h200 0.27690 -> 0.28265 s (its
 * plan 0.29422; the LP at the plan's own choices 0.29369, under it). Rows at
 * the next three backward instants moved nothing.
 */
function turnRow(lp: LinearProgram, g: Graph, hw: HardwareProfile, T: number, unit: number, gpuRows: readonly GpuMemoryRow[], gpuBefore: readonly GpuItem[], h2dAt: readonly H2dItem[]): void {
  const firstBwd = g.ops.findIndex((op) => op.phase === 'backward');
  const r = gpuRows.filter((x) => x.at >= firstBwd).sort((a, b) => a.at - b.at)[0];
  if (!r) return;
  const o = r.at;
  let c = 0;
  for (let k = 0; k < o; k++) if (g.ops[k].phase !== 'update') c += opSeconds(g, g.ops[k], 'gpu', hw);
  const row: [number, number][] = [[T, 1]];
  for (const it of gpuBefore) if (it.at < o) row.push([it.col, -it.k * unit]);
  for (const it of h2dAt) {
    if (it.at <= o || (it.from !== undefined && it.from >= o)) continue;
    for (const [col, v] of it.terms) row.push([col, -v * unit]);
    c += it.c;
  }
  const room = lp.col(`room_${o}`);
  lp.row([...r.terms, [room, 1e9]], r.hi, r.hi);
  row.push([room, (unit * 1e9) / hw.h2dBytesPerSec]);
  lp.row(row, c * unit, Infinity);
}

function buildLp(g: Graph, hw: HardwareProfile, opts: LpOptions, segments: number, rows: 'bound' | 'plan', rematCast: 'cpu' | 'gpu' = rows === 'bound' ? 'gpu' : 'cpu', extras: BoundExtras = {}): BuiltLp {
  const chains = rows === 'bound' && (extras.chains ?? false);
  const split = rows === 'bound' && g.precision !== 'fp32' && (extras.split ?? false);
  const stream = rows === 'bound' && (extras.stream ?? false);
  const castWide = rows === 'bound' && g.precision !== 'fp32' && (extras.cast ?? false);
  const K = Math.max(1, Math.min(segments, g.ops.length));
  const seg = segmentsOf(g, hw, K);
  const { prod, cons } = graphFacts(g);
  const allGroups = paramGroups(g);
  const small = smallGroups(allGroups, opts.smallGroupsShare ?? SMALL_GROUPS_SHARE);
  const groups = allGroups.filter((_, i) => !small[i]); // the groups the LP places
  const inGroup = new Uint8Array(g.tensors.length);
  for (const q of allGroups) { inGroup[q.p16] = 1; for (const t of q.state) inGroup[t] = 1; inGroup[q.grad] = 1; }

  // fixed loads: forward and backward always run on the GPU
  // (not the update phase: the adams and the casts of master32 into p16 run
  // where their group's state is, a cast on the GPU only for a p16 not remade)
  let gpuFixed = 0, gpuWork = 0;
  for (const op of g.ops) {
    if (op.kind === 'adam') continue;
    const t = opSeconds(g, op, 'gpu', hw);
    gpuWork += t;
    if (op.phase !== 'update') gpuFixed += t;
  }
  // T and every time row are in units of the GPU's work, so that they are
  // near 1 whatever the model's size (HiGHS's tolerances are absolute, ~1e-7)
  const unit = 1 / Math.max(gpuWork, 1e-12);
  // saved activations: read again two or more segments after they are made
  const saved: number[] = [];
  for (const t of g.tensors) {
    if (inGroup[t.id] || t.persistent || t.role !== 'activation') continue;
    const p = prod[t.id];
    if (p >= 0 && cons[t.id].some((c) => seg[c] > seg[p] + 1)) saved.push(t.id);
  }

  const lp = new LinearProgram();
  const T = lp.col('T', 1);
  const PG = lp.col('PG'), PC = lp.col('PC');
  const tiers = ['gpu', 'cpu', 'nvme'] as const;
  // Without memory rows (noMemory) two choices are dominated, so left out:
  // - the state on NVMe: it adds reads and writes, and every row that counts
  //   a share of it counts the CPU's share no more, so moving the share to
  //   the CPU keeps a solution and its T;
  // - in fp16/bf16, p16 resting on the CPU: moved to the GPU (each pair
  //   share (cpu, s) to (gpu, s)), its first fetch (firstcpu, on h2d and in
  //   the forward fetches) becomes the copy up after a CPU update (ov, the
  //   same bytes on the same rows), its later fetches go, and its copy down
  //   after a GPU update (ov2) may; no other row reads those columns. (In
  //   fp32 p16 is its own state: it stays.)
  // The same optimum (to 1e-14) on every model kept on the GPU of the gap
  // grid and the tiny ones; gpt2-1.5b/a100's in 1772 simplex iterations
  // against 2920, a cold solve ~0.5 -> ~0.33 s.
  const dominated = (t: Tier, p16: boolean) => extras.noMemory === true && (p16 ? t === 'cpu' && g.precision !== 'fp32' : t === 'nvme');
  // (the third p16 share, made again in fp16/bf16, only where the group's p16 may be: remakeable)
  const x1 = groups.map((q, i) => tiers.map((t) => lp.col(`p16_${i}_${t}`, 0, 0, (t === 'gpu' || !opts.keepParamsOnGpu) && (t !== 'nvme' || q.cast < 0 || q.remakeable) && !dominated(t, true) ? 1 : 0)));
  const x2 = groups.map((q, i) => tiers.map((t) => lp.col(`st_${i}_${t}`, 0, 0, dominated(t, false) ? 0 : 1)));
  // the share of master32 on NVMe, which a p16 made from it reads there: the
  // state's NVMe share, or with split its own column, at least what of the
  // state's NVMe bytes the moments cannot hold (master M of the state's S
  // bytes: M y >= S x2[nvme] - (S - M)); what the state's NVMe share reads and
  // writes for the update is unchanged (the bytes there, either way)
  const masterNvme = groups.map((q, i) => {
    if (!split) return x2[i][2];
    const c = lp.col(`mst_nvme_${i}`, 0, 0, 1);
    const M = g.tensors[q.state[0]].sizeBytes, S = q.stateBytes;
    lp.row([[c, M / S], [x2[i][2], -1]], -(S - M) / S, Infinity);
    return c;
  });
  // stream: per group, the share of its state resting on the CPU
  // that is updated on the GPU all the same (streamed: copied up, updated
  // there once its gradient exists, copied home; compile's stream
  // candidates); upd: the share updated on the GPU, that and the state's GPU
  // share (elsewhere the state's GPU share alone)
  const streamed = stream ? groups.map((_, i) => { const c = lp.col(`stream_${i}`, 0, 0, 1); lp.row([[c, 1], [x2[i][1], -1]], -Infinity, 0); return c; }) : undefined;
  const upd = groups.map((_, i) => {
    if (!streamed) return x2[i][0];
    const c = lp.col(`upd_${i}`, 0, 0, 1);
    lp.row([[c, 1], [x2[i][0], -1], [streamed[i], -1]], 0, 0);
    return c;
  });
  const ov = groups.map((_, i) => lp.col(`ovh_${i}`));   // CPU-updated part of a GPU-resident p16: h2d after the update
  const ov2 = groups.map((_, i) => lp.col(`ovd_${i}`));  // GPU-updated part of a non-GPU p16: d2h after the update
  const keep = saved.map((t) => lp.col(`keep_${t}`, 0, 0, 1));
  const savedIndex = new Map(saved.map((t, j) => [t, j]));
  // recompute is allowed when every input of the producer will be there to read again
  const canRecompute = saved.map((t) => chains || oneLevel(g, g.ops[prod[t]], savedIndex));
  const again = saved.map((t, j) => lp.col(`recompute_${t}`, 0, 0, canRecompute[j] ? 1 : 0));
  saved.forEach((t, j) => {
    lp.row([[keep[j], 1], [again[j], 1]], 0, 1);
    if (!chains) for (const u of g.ops[prod[t]].inputs) { const k = savedIndex.get(u); if (k !== undefined) lp.row([[again[j], 1], [again[k], 1]], 0, 1); }
  });
  const half = g.precision !== 'fp32';
  groups.forEach((_, i) => {
    lp.row(x1[i].map((c) => [c, 1]), 1, 1);
    lp.row(x2[i].map((c) => [c, 1]), 1, 1);
    if (!half) for (let k = 0; k < 3; k++) lp.row([[x1[i][k], 1], [x2[i][k], -1]], 0, 0); // fp32: the parameter is its own state
    lp.row([[ov[i], 1], [x1[i][0], -1], [x2[i][0], 1]], 0, Infinity);
    // (the bound LP: only a CPU-homed p16 goes down; a remade one is cast on the GPU there)
    if (rows === 'bound' && half) lp.row([[ov2[i], 1], [x2[i][0], -1], [x1[i][1], -1]], -1, Infinity);
    else lp.row([[ov2[i], 1], [x2[i][0], -1], [x1[i][0], 1]], 0, Infinity);
  });
  // the bound LP (fp16/bf16): per group, the share of each (p16 choice, state
  // tier) pair, whose margins are x1 and x2; every product column below is at
  // least its pairs' shares (the products exactly, where the envelopes alone
  // let two halves cancel)
  const pair = rows === 'bound' && half ? groups.map((_, i) => [0, 1, 2].map((a) => [0, 1, 2].map((b) => lp.col(`pair_${i}_${a}${b}`)))) : undefined;
  const atLeastPairs = (i: number, col: number, pairs: [number, number][]) => { if (pair) lp.row([[col, 1], ...pairs.map(([a, b]): [number, number] => [pair[i][a][b], -1])], 0, Infinity); };
  if (pair) groups.forEach((_, i) => {
    for (let k = 0; k < 3; k++) {
      lp.row([[x1[i][k], -1], ...[0, 1, 2].map((b): [number, number] => [pair[i][k][b], 1])], 0, 0);
      lp.row([[x2[i][k], -1], ...[0, 1, 2].map((a): [number, number] => [pair[i][a][k], 1])], 0, 0);
    }
    atLeastPairs(i, ov[i], [[0, 1], [0, 2]]);
    atLeastPairs(i, ov2[i], [[1, 0]]);
  });
  // bytes of the placed groups resting on the GPU (PG) and the CPU (PC):
  // their state, and p16 (in fp32 the parameter, its own state; in fp16/bf16
  // the placement LP counts a resident p16 all step, the bound LP only between
  // its readers, in boundMemoryRows)
  const share = rows === 'plan' ? PLAN_CAPACITY_SHARE : 1;
  const persist = (col: number, k: number) => groups.flatMap((q, i): [number, number][] => (half && rows === 'bound' ? [[x2[i][k], -q.stateBytes]] : [[x1[i][k], -q.p16Bytes], [x2[i][k], -q.stateBytes]])).concat([[col, 1]]);
  lp.row(persist(PG, 0), 0, 0);
  lp.row(persist(PC, 1), 0, 0);
  lp.row(groups.flatMap((q, i): [number, number][] => (half ? [[x2[i][2], q.stateBytes]] : [[x1[i][2], q.p16Bytes], [x2[i][2], q.stateBytes]])), -Infinity, hw.nvme.capacityBytes * share);

  // loads of the whole step per resource (seconds), each as linear terms plus a constant
  type Terms = [number, number][];
  const resources = ['gpu', 'cpu', 'h2d', 'd2h', 'nr', 'nw'] as const;
  const load = Object.fromEntries(resources.map((r) => [r, { terms: [] as Terms, c: 0 }])) as Record<typeof resources[number], { terms: Terms; c: number }>;
  load.gpu.c = gpuFixed;
  // the NVMe rows below only when the state must use NVMe (more than GPU and
  // CPU hold); elsewhere they are left out (a relaxation: the bound stays one)
  // and the LP stays as small as it was
  const persistent = tensorBytes(g, 'persistent');
  const nvmeNeeded = hw.nvme.capacityBytes > 0 && persistent > (hw.gpu.capacityBytes + hw.cpu.capacityBytes) * share;
  const h2d = (b: number) => copySeconds(b, 'cpu', 'gpu', hw), d2h = (b: number) => copySeconds(b, 'gpu', 'cpu', hw);
  const nr = (b: number) => copySeconds(b, 'nvme', 'cpu', hw), nw = (b: number) => copySeconds(b, 'cpu', 'nvme', hw);
  const remat = groups.map(() => -1); // per group: its remat_nvme column, -1 when none
  const upCast = groups.map(() => -1); // per group: its castup column (cast: the share cast on the GPU from master32 copied up, backward clusters), -1 when none
  const upCastFwd = groups.map(() => -1); // and its castupfwd column (the forward clusters')
  const upCastLast = groups.map(() => -1); // and the column of its last cluster (precedenceRows' tail rows)
  // the bound LP: h2d of every parameter's first fetch, and the last forward op that reads a parameter first (precedenceRows)
  const forwardFetch = { terms: [] as Terms, c: 0, lastReader: -1, nr: [] as Terms };
  const gpuBefore: GpuItem[] = [];
  const turn = rows === 'bound' && (extras.fetchThenUpdate ?? false); // the turn row (turnRow, below): the wide bound LPs only
  const h2dAt: H2dItem[] = []; // (for it: each copy up by the op that needs it)
  groups.forEach((q, i) => {
    const u = g.ops[q.adam];
    const aG = opSeconds(g, u, 'gpu', hw), aC = opSeconds(g, u, 'cpu', hw);
    // update: gpu share on the GPU, the rest on the CPU (cpu load = aC * (1 - g2))
    load.gpu.terms.push([upd[i], aG]);
    load.cpu.terms.push([upd[i], -aC]); load.cpu.c += aC;
    // a streamed update: the state up and home again
    if (streamed) { load.h2d.terms.push([streamed[i], h2d(q.stateBytes)]); load.d2h.terms.push([streamed[i], d2h(q.stateBytes)]); if (turn && prod[q.grad] >= 0) h2dAt.push({ at: prod[q.grad], terms: [[streamed[i], h2d(q.stateBytes)]], c: 0 }); }
    load.h2d.terms.push([ov[i], h2d(q.p16Bytes)]);
    load.d2h.terms.push([ov2[i], d2h(q.p16Bytes)]);
    load.nr.terms.push([x2[i][2], nr(q.stateBytes)]);
    load.nw.terms.push([x2[i][2], nw(q.stateBytes)]);
    if (!half) load.nw.terms.push([x1[i][2], nw(q.p16Bytes)]);
    const castCpu = q.cast >= 0 ? opSeconds(g, g.ops[q.cast], 'cpu', hw) : 0;
    // gradient: made on the GPU; the CPU-updated share goes down once: d2h(grad) * (1 - g2)
    load.d2h.terms.push([upd[i], -d2h(q.gradBytes)]); load.d2h.c += d2h(q.gradBytes);
    // uses of p16 by forward/backward ops: fetch the non-resident share into the segment
    // the placement LP: one fetch per segment that reads it; the bound LP: one
    // per cluster of reads (the scheduler keeps a copy across gaps of up to
    // REFETCH_GAP ops, so a fetch can serve two segments)
    const fetches = rows === 'plan' ? new Set(cons[q.p16].filter((c) => c !== q.adam).map((c) => seg[c])).size : readClusters(g, cons[q.p16]).length;
    // fp16/bf16: a p16 made again for each use reads master32 where it lives;
    // the share of it on NVMe is read from there each time. That share is at
    // least x1[nvme] + x2[nvme] - 1 (the product's lower envelope, so the
    // bound stays one)
    const masterBytes = g.tensors[q.state[0]].sizeBytes;
    const fromNvme = half && nvmeNeeded ? lp.col(`remat_nvme_${i}`) : -1;
    remat[i] = fromNvme;
    if (fromNvme >= 0) lp.row([[fromNvme, 1], [x1[i][2], -1], [masterNvme[i], -1]], -1, Infinity);
    if (fromNvme >= 0 && !split) atLeastPairs(i, fromNvme, [[2, 2]]); // (the pairs place the whole state)
    // fp16/bf16: a p16 made again for each use is cast where its state is: on
    // the GPU (no copy) for the state's GPU share, else on the CPU and copied
    // in. In the bound LP the share cast on the CPU is a column, at least
    // x1[remat] - x2[gpu] (the product's lower envelope) and at most
    // x1[remat]; the first placement LP (rematCast 'cpu') charges the whole remat
    // share the CPU's cast and the copy, the second as the bound LP
    const onCpu = half && rematCast === 'gpu' ? lp.col(`remat_cpu_${i}`) : -1;
    if (onCpu >= 0) { lp.row([[onCpu, 1], [x1[i][2], -1], [x2[i][0], 1]], 0, Infinity); lp.row([[x1[i][2], 1], [onCpu, -1]], 0, Infinity); }
    if (onCpu >= 0) atLeastPairs(i, onCpu, [[2, 1], [2, 2]]);
    const castGpu = q.cast >= 0 ? opSeconds(g, g.ops[q.cast], 'gpu', hw) : 0;
    // cast: of the remade p16 whose state rests on the CPU (its pair share,
    // which onCpu is at least), a share cast on the GPU instead, master32
    // copied up for each cluster of reads in place of p16: for the backward
    // pass's clusters (up) and for the forward pass's (upFwd, each at most
    // the pair share: a plan may cast a group's forward reads on the CPU,
    // Placement.forwardCastOnCpu)
    const up = castWide && pair && onCpu >= 0 && q.cast >= 0 ? lp.col(`castup_${i}`) : -1;
    const upFwd = up >= 0 ? lp.col(`castupfwd_${i}`) : -1;
    if (up >= 0) { lp.row([[up, 1], [pair![i][2][1], -1]], -Infinity, 0); lp.row([[upFwd, 1], [pair![i][2][1], -1]], -Infinity, 0); }
    upCast[i] = up;
    upCastFwd[i] = upFwd;
    const upMore = up >= 0 ? h2d(masterBytes) - h2d(q.p16Bytes) : 0; // a copy of master32 in place of p16's
    const clusterStarts = readClusters(g, cons[q.p16]);
    const upAt = (at: number) => (g.ops[at].phase === 'forward' ? upFwd : up); // the column of the cluster that starts at op `at`
    if (up >= 0 && clusterStarts.length) upCastLast[i] = upAt(clusterStarts[clusterStarts.length - 1]);
    // the cast at the step's start runs on the GPU for the state's GPU share
    // when p16 is not remade: at least x2[gpu] - x1[remat] (the product's
    // lower envelope; the placement LPs charge x2[gpu], as they placed before)
    if (castGpu > 0) {
      if (rows === 'bound') { const c = lp.col(`castgpu_${i}`); lp.row([[c, 1], [x2[i][0], -1], [x1[i][2], 1]], 0, Infinity); atLeastPairs(i, c, [[0, 0], [1, 0]]); load.gpu.terms.push([c, castGpu]); gpuBefore.push({ at: q.cast, col: c, k: castGpu }); }
      else load.gpu.terms.push([x2[i][0], castGpu]);
    }
    if (rows === 'bound') {
      gpuBefore.push({ at: q.adam, col: upd[i], k: aG });
      if (onCpu >= 0 && castGpu > 0) for (const at of readClusters(g, cons[q.p16])) gpuBefore.push({ at, col: x1[i][2], k: castGpu }, { at, col: onCpu, k: -castGpu });
      if (up >= 0 && castGpu > 0) for (const at of clusterStarts) gpuBefore.push({ at, col: upAt(at), k: castGpu });
    }
    // and on the CPU for the rest of the state (staged there from NVMe) when
    // p16 is not remade: at least 1 - x2[gpu] - x1[remat]. The bound LP only:
    // in the placement LPs it moved plans both ways (13b/h200 -28 %, 13b/a100
    // +12 %; docs/BENCHMARKS.md), the lottery of their many optima again
    if (castCpu > 0 && rows === 'bound') { const c = lp.col(`castcpu_${i}`); lp.row([[c, 1], [x2[i][0], 1], [x1[i][2], 1]], 1, Infinity); atLeastPairs(i, c, [[0, 1], [0, 2], [1, 1], [1, 2]]); load.cpu.terms.push([c, castCpu]); }
    // the bound LP: a CPU-homed p16 whose state is on the GPU is cast there
    // for its first reads (and copied down), so its first fetch is only the
    // share not updated on the GPU: a column >= x1[cpu] - x2[gpu] (the
    // product's lower envelope)
    const firstCpu = rows === 'bound' && onCpu >= 0 ? lp.col(`firstcpu_${i}`) : -1;
    if (firstCpu >= 0) lp.row([[firstCpu, 1], [x1[i][1], -1], [x2[i][0], 1]], 0, Infinity);
    if (firstCpu >= 0) atLeastPairs(i, firstCpu, [[1, 1], [1, 2]]);
    const firstRead = cons[q.p16].find((c) => g.ops[c].phase !== 'update');
    const readFirstInForward = rows === 'bound' && firstRead !== undefined && g.ops[firstRead].phase === 'forward';
    if (readFirstInForward) forwardFetch.lastReader = Math.max(forwardFetch.lastReader, firstRead);
    for (let k = 0; k < fetches; k++) {
      const cpuHomed = k === 0 && firstCpu >= 0 ? firstCpu : x1[i][1];
      // the first fetch serves the first reads, in the forward pass: done before any gradient exists
      if (k === 0 && readFirstInForward) {
        if (onCpu >= 0) forwardFetch.terms.push([cpuHomed, h2d(q.p16Bytes)], [onCpu, h2d(q.p16Bytes)]);
        else { forwardFetch.terms.push([x1[i][0], -h2d(q.p16Bytes)]); forwardFetch.c += h2d(q.p16Bytes); }
        if (up >= 0) forwardFetch.terms.push([upAt(clusterStarts[0]), upMore]);
        // a GPU-homed p16 updated off the GPU is cast at the step's start and copied up (ov) before its first reader
        forwardFetch.terms.push([ov[i], h2d(q.p16Bytes)]);
        // whatever p16's home, this step's p16 is cast from master32 (fp32: is the parameter), so the share of it on NVMe is read from there first
        if (nvmeNeeded) forwardFetch.nr.push([masterNvme[i], nr(masterBytes)]);
      }
      // this fetch's copy up: the CPU-homed and CPU-cast shares of p16 (master32
      // in its place for the share cast on the GPU), or the share not resident
      const fetch: H2dItem = onCpu >= 0
        ? { at: clusterStarts[k] ?? -1, terms: [[cpuHomed, h2d(q.p16Bytes)], [onCpu, h2d(q.p16Bytes)], ...(up >= 0 ? [[upAt(clusterStarts[k]), upMore] as [number, number]] : [])], c: 0 }
        : { at: clusterStarts[k] ?? -1, terms: [[x1[i][0], -h2d(q.p16Bytes)]], c: h2d(q.p16Bytes) };
      load.h2d.terms.push(...fetch.terms); load.h2d.c += fetch.c;
      if (turn) h2dAt.push(fetch);
      if (onCpu >= 0) {
        load.cpu.terms.push([onCpu, castCpu]);
        load.gpu.terms.push([x1[i][2], castGpu], [onCpu, -castGpu]);
        if (up >= 0) { const c = upAt(clusterStarts[k]); load.cpu.terms.push([c, -castCpu]); load.gpu.terms.push([c, castGpu]); }
      } else if (half) load.cpu.terms.push([x1[i][2], castCpu]);
      else load.nr.terms.push([x1[i][2], nr(q.p16Bytes)]);
      if (fromNvme >= 0) load.nr.terms.push([fromNvme, nr(masterBytes)]);
    }
  });
  // recompute: the producer runs again before the reuse, once for all of its
  // recomputed outputs (the scheduler takes siblings from one run): a
  // producer with several saved outputs gets a column >= each one's share.
  // Through chains, so do the producers of the activations that are not
  // saved which it reads, theirs in turn (remadeWith): no copy of those is
  // left to read (checkpoints.ts makes them again too)
  const rerunCol = new Map<number, number>(); // producer -> its column
  const outputsOf = new Map<number, number[]>(); // op -> the saved activations' indices whose remaking runs it
  saved.forEach((t, j) => {
    if (!canRecompute[j]) return;
    for (const op of chains ? remadeWith(g, prod, t, savedIndex) : [prod[t]]) outputsOf.set(op, [...(outputsOf.get(op) ?? []), j]);
  });
  for (const [op, js] of outputsOf) {
    if (js.length === 1) { rerunCol.set(op, again[js[0]]); continue; }
    const c = lp.col(`rerun_${op}`);
    for (const j of js) lp.row([[c, 1], [again[j], -1]], 0, Infinity);
    rerunCol.set(op, c);
  }
  for (const [op, c] of rerunCol) load.gpu.terms.push([c, opSeconds(g, g.ops[op], 'gpu', hw)]);
  // d2h in the forward pass (precedenceRows): the activations offloaded, and
  // (bound LP) a CPU-homed p16 cast on the GPU for its first reads, copied
  // home right after (ov2: its lower envelope there)
  const forwardOffload = { terms: (rows === 'bound' && half ? groups.map((q, i): [number, number] => [ov2[i], d2h(q.p16Bytes)]) : []) as Terms, c: 0 };
  if (rows === 'bound') {
    saved.forEach((t, j) => {
      if (g.ops[prod[t]].phase !== 'forward') return;
      const b = d2h(g.tensors[t].sizeBytes);
      forwardOffload.terms.push([keep[j], -b], [again[j], -b]); forwardOffload.c += b;
    });
  }
  saved.forEach((t, j) => {
    const b = g.tensors[t].sizeBytes;
    // offload share o = 1 - k - r: d2h after production, h2d before reuse
    load.d2h.terms.push([keep[j], -d2h(b)], [again[j], -d2h(b)]); load.d2h.c += d2h(b);
    const back: H2dItem = { at: cons[t].find((c) => seg[c] > seg[prod[t]] + 1)!, terms: [[keep[j], -h2d(b)], [again[j], -h2d(b)]], c: h2d(b), from: prod[t] };
    load.h2d.terms.push(...back.terms); load.h2d.c += back.c;
    if (turn) h2dAt.push(back);
  });
  // every resource serves its whole step's load one item at a time, so the step
  // takes at least T >= each resource's load: a bound that holds for any
  // schedule of the placement (the simulator's included)
  const secondary = new Float64Array(lp.numCols + 1);
  for (const r of resources) {
    const { terms, c: constant } = load[r];
    const row: [number, number][] = [[T, 1]];
    for (let k = 0; k < terms.length; k++) { const [c, v] = terms[k]; secondary[c] += v; row.push([c, -v * unit]); }
    if (terms.length || constant) lp.row(row, constant * unit, Infinity);
  }
  const breaksPrecedence = precedenceRows(lp, T, unit, g, hw, groups, x2, upd, streamed, upCastLast, masterNvme, { h2d, d2h, nr, nw }, prod, cons, forwardFetch, forwardOffload, extras.fetchThenUpdate ?? false, extras.follow ?? false, split, gpuBefore);
  // (a p16 made again on the CPU for a state there or on NVMe is copied up, unless cast on the GPU: castWide's)
  const fetched = groups.map((_, i) => (pair && !chains ? [x1[i][1], pair[i][2][2], ...(castWide ? [] : [pair[i][2][1]])] : []));
  const columns = { allGroups, small, groups, x1, x2, remat, saved, keep, again, PG, PC, keepParams: opts.keepParamsOnGpu ?? false, inGroup, streamed, fetched };
  // (the bound LP's memory rows count the p16 copies held across a cluster of
  // reads with the fetch-then-update rows, and are checked for them without)
  let breaksHeld = (_: Float64Array) => false;
  const gpuRows: GpuMemoryRow[] = [];
  if (rows === 'bound') { if (!extras.noMemory) breaksHeld = boundMemoryRows(lp, g, hw, seg, K, prod, cons, columns, extras.fetchThenUpdate ?? false, turn ? gpuRows : undefined); }
  else planMemoryRows(lp, g, hw, seg, K, prod, cons, columns);
  if (turn) turnRow(lp, g, hw, T, unit, gpuRows, gpuBefore, h2dAt);
  const breaksFetchThenUpdate = (x: Float64Array) => breaksPrecedence(x) || breaksHeld(x);

  const secondaryCost = new Float64Array(lp.numCols);
  for (let c = 0; c < lp.numCols; c++) secondaryCost[c] = (secondary[c] ?? 0) + 1e-12;
  secondaryCost[T] = 0;
  const fixedTo = (p: Placement) => {
    const colLower = Float64Array.from(lp.colLower), colUpper = Float64Array.from(lp.colUpper);
    const fix = (col: number, v: number) => { colLower[col] = colUpper[col] = v; };
    const index = (t: Tier) => (t === 'gpu' ? 0 : t === 'cpu' ? 1 : 2);
    groups.forEach((q, i) => {
      const p16 = half && p.remat?.[q.p16] ? 2 : index(p.home[q.p16]);
      // the state's shares by bytes (split: master32 apart from its moments)
      const bytes = [0, 0, 0];
      for (const t of q.state) bytes[index(p.home[t])] += g.tensors[t].sizeBytes;
      for (let k = 0; k < 3; k++) { fix(x2[i][k], bytes[k] / q.stateBytes); fix(x1[i][k], k === p16 ? 1 : 0); }
      if (split) fix(masterNvme[i], p.home[q.state[0]] === 'nvme' ? 1 : 0);
      // (a streamed update: the adam on the GPU, the state resting on the CPU)
      if (streamed) fix(streamed[i], streamedUpdate(p, q) ? 1 : 0);
      // (a p16 cast on the GPU from master32 resting on the CPU)
      if (upCast[i] >= 0) { fix(upCast[i], castOnGpu(p, q) ? 1 : 0); fix(upCastFwd[i], castOnGpu(p, q) && !p.forwardCastOnCpu?.[q.cast] ? 1 : 0); }
    });
    saved.forEach((t, j) => {
      const again_ = p.remat?.[t] ? 1 : 0;
      fix(again[j], again_);
      fix(keep[j], !again_ && p.home[t] === 'gpu' ? 1 : 0);
    });
    return { colLower, colUpper };
  };
  return {
    data: lp.toHighs(Infinity), // HiGHS's infinity is IEEE infinity
    colNames: lp.colNames,
    T, secondaryCost, fixedTo, seconds: 1 / unit, breaksFetchThenUpdate,
    solution: (status, objective, x, solveSeconds) => ({
      status, lowerBoundSeconds: objective / unit, solveSeconds, rows, nvmeNeeded,
      size: { rows: lp.numRows, cols: lp.numCols, nonzeros: lp.nonzeros },
      groups: allGroups, small,
      // small groups were not placed by the LP: on the GPU (see smallGroups)
      p16Share: allShares(small, x1, x),
      stateShare: allShares(small, x2, x),
      saved, keepShare: Float64Array.from(keep, (col) => x[col]), recomputeShare: Float64Array.from(again, (col) => x[col]),
    }),
  };
}

/**
 * Small groups (biases, norm scales): the smallest groups, by state bytes, that
 * together hold at most SMALL_GROUPS_SHARE of the state. The LP leaves them
 * out: every load and every precedence row gets from a group a term >= 0 that
 * some placement makes 0, except the GPU bytes of its gradient (made there)
 * and of its p16 where it is read, which stay in as constants. Dropping the
 * rest relaxes the LP, so its optimum is still a lower bound; it is lower by
 * at most those groups' work (their share of the update time and traffic,
 * ~SMALL_GROUPS_SHARE of it). The plan puts them on the GPU (no traffic, an
 * update of a few KiB); the LP's capacity share leaves them room. On GPT
 * presets two thirds of the groups are small, so the LP has a third of the
 * group columns and rows.
 */
const SMALL_GROUPS_SHARE = 1e-3;

function smallGroups(groups: readonly ParamGroup[], share: number): Uint8Array {
  const small = new Uint8Array(groups.length);
  const total = groups.reduce((s, q) => s + q.stateBytes, 0);
  const order = groups.map((_, i) => i).sort((a, b) => groups[a].stateBytes - groups[b].stateBytes || a - b);
  let taken = 0;
  for (const i of order) {
    if (taken + groups[i].stateBytes > share * total) break;
    taken += groups[i].stateBytes;
    small[i] = 1;
  }
  return small;
}

/** Shares of every group: the LP's columns for placed groups, all on the GPU for small ones. */
function allShares(small: Uint8Array, cols: number[][], x: Float64Array): Float64Array[] {
  let k = 0;
  return Array.from(small, (s) => (s ? Float64Array.of(1, 0, 0) : Float64Array.from(cols[k++], (col) => x[col])));
}

/**
 * The ops that run again when saved activation t is made again through
 * chains: its producer, and the producers of the activations that are not
 * saved it reads, theirs in turn (an activation not saved is read only
 * close to where it is made, so the program has dropped it by the time t is
 * read again). In producer order, each once.
 */
function remadeWith(g: Graph, prod: Int32Array, t: number, savedIndex: Map<number, number>): number[] {
  const ops = new Set<number>([prod[t]]);
  const stack = [prod[t]];
  while (stack.length) {
    for (const u of g.ops[stack.pop()!].inputs) {
      const tu = g.tensors[u], p = prod[u];
      if (tu.role !== 'activation' || tu.persistent || savedIndex.has(u) || p < 0 || ops.has(p)) continue;
      ops.add(p);
      stack.push(p);
    }
  }
  return [...ops].sort((a, b) => a - b);
}

/** A recomputed activation's producer reads only what is there to read again: parameters, data, and saved activations (the LPs' one level). */
function oneLevel(g: Graph, producer: Graph['ops'][number], savedIndex: Map<number, number>): boolean {
  return producer.inputs.every((u) => {
    const tu = g.tensors[u];
    return tu.persistent || tu.role === 'input' || tu.role === 'param16' || savedIndex.has(u);
  });
}

/**
 * Whether a placement is in the LPs' family: forward and backward ops on the
 * GPU, each group's adam (and cast) on the GPU where its state is there, on
 * the CPU where it is on the CPU or NVMe (an adam streamed to the GPU where
 * its state is on the CPU: streamsUpdates, wideBound's with stream; a cast on
 * the GPU of a p16 made again from master32 on the CPU: castsUp, wideBound's
 * with cast). The
 * LPs' bound holds for these
 * plans only; the min-cut may run ops on the CPU (a profile whose GPU is
 * emulated on this CPU), and compile reports opCostFloorSeconds for such a plan.
 */
export function inLpFamily(g: Graph, p: Placement): boolean {
  const where = new Int8Array(g.ops.length); // 0: gpu; 1: cpu (an update whose state is off the GPU)
  for (const q of paramGroups(g)) {
    const off = p.home[q.state[0]] === 'gpu' ? 0 : 1;
    // (an update streamed to the GPU: the state rests on the CPU, the cast runs there)
    where[q.adam] = off && !streamedUpdate(p, q) ? 1 : 0;
    // (a p16 made again on the GPU from master32 resting on the CPU: castsUp, wideBound's with cast)
    if (q.cast >= 0) where[q.cast] = off && !castOnGpu(p, q) ? 1 : 0;
  }
  return g.ops.every((op) => p.opTier[op.id] === (where[op.id] ? 'cpu' : 'gpu'));
}

/**
 * Whether every activation a placement recomputes is in the LPs' one-level
 * family: saved (in `saved`), its producer reading only what oneLevel allows,
 * no activation among those inputs recomputed too. Plans of checkpoints.ts's chains are
 * not; their bound is the bound LP's over recompute through chains.
 */
export function recomputesOneLevel(g: Graph, p: Placement, saved: readonly number[]): boolean {
  if (!p.remat) return true;
  const savedIndex = new Map(saved.map((t, j) => [t, j]));
  const prod = producers(g);
  return g.tensors.every((t) => {
    if (!p.remat![t.id] || t.role !== 'activation') return true;
    const producer = g.ops[prod[t.id]];
    // (a remade p16 is there to read again, as the LP has it: its cast reruns)
    return savedIndex.has(t.id) && oneLevel(g, producer, savedIndex) && producer.inputs.every((u) => g.tensors[u].role !== 'activation' || !p.remat![u]);
  });
}

/**
 * Whether a placement rests some group's state in more than one place (the
 * split candidate's master32 on the CPU, its moments on NVMe): outside the
 * bound LP's family, whose rows read a master32 from NVMe wherever its state
 * is there; wideBound's rows hold for it.
 */
export function splitsState(g: Graph, p: Placement): boolean {
  return paramGroups(g).some((q) => q.state.some((t) => p.home[t] !== p.home[q.state[0]]));
}

/**
 * Whether a placement updates on the GPU some group whose state rests on the
 * CPU (compile's stream candidates): outside the bound LP's family, whose
 * updates run where their state is; wideBound's rows hold for it.
 */
export function streamsUpdates(g: Graph, p: Placement): boolean {
  return paramGroups(g).some((q) => streamedUpdate(p, q));
}

/**
 * Whether a placement makes some group's p16 again on the GPU for each
 * cluster of reads from master32 resting on the CPU, copied up for it
 * (compile's cast candidates): outside the bound LP's family, whose casts run
 * where their state is; wideBound's rows hold for it.
 */
export function castsUp(g: Graph, p: Placement): boolean {
  return paramGroups(g).some((q) => castOnGpu(p, q));
}

/**
 * The ways a placement of the LPs' family (inLpFamily) leaves the bound LP's
 * (`saved`: its saved activations), for wideBound; undefined where it leaves
 * it in none (the bound LP's bound holds).
 */
export function wideningOf(g: Graph, p: Placement, saved: readonly number[]): Widening | undefined {
  const w = { chains: !recomputesOneLevel(g, p, saved), split: splitsState(g, p), stream: streamsUpdates(g, p), cast: castsUp(g, p) };
  return w.chains || w.split || w.stream || w.cast ? w : undefined;
}

/** Whether a group's update runs on the GPU while its state rests on the CPU (streamed: compile's stream candidates). */
export const streamedUpdate = (p: Placement, q: ParamGroup): boolean => p.opTier[q.adam] === 'gpu' && q.state.every((t) => p.home[t] === 'cpu');

/** Whether a group's p16 is made again on the GPU for each use from its master32 resting on the CPU. */
const castOnGpu = (p: Placement, q: ParamGroup): boolean => q.cast >= 0 && p.opTier[q.cast] === 'gpu' && !!p.remat?.[q.p16] && q.state.every((t) => p.home[t] === 'cpu');
