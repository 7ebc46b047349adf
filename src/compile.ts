// compile: model file -> Plan. Wires the compiler passes in order and runs the
// verifiers between them (DESIGN.md, data flow).

import { statSync, type Stats } from 'node:fs';
import { autodiff } from '../compiler/autodiff/autodiff.js';
import type { Tier } from '../compiler/cost/cost.js';
import { loadProfile, type HardwareProfile } from '../compiler/cost/profiles.js';
import { importDsl } from '../compiler/import/dsl.js';
import type { AdamAttrs, Graph, Op, Precision } from '../compiler/ir/types.js';
import { assertGraph } from '../compiler/ir/verify.js';
import { ADAM_DEFAULTS, checkOptimizer, lowerOptimizer } from '../compiler/lower/optimizer.js';
import { lowerPrecision } from '../compiler/lower/precision.js';
import { dpuOrder, lowerDpu } from '../compiler/lower/dpu.js';
import { insertGradAllReduce } from '../compiler/lower/grad-allreduce.js';
import { chunkBlocks } from '../compiler/lower/chunks.js';
import { lowerSequenceParallel, MAX_SP_RANKS, rankRingNumbers, zigzagPositions, type SpSharding } from '../compiler/lower/sequence-parallel.js';
import { ringWorkspaceBytes } from '../compiler/ir/ops.js';
import { formatBytes as fmtBytes } from './sizes.js';
import type { LpSolution } from '../compiler/partition/lp.js';
import { LpWorker } from '../compiler/partition/highs-worker.js';
import type { Placement } from '../compiler/partition/placement.js';
import { FORMAT_VERSION, type Plan, type PlanSp, type Traffic } from '../compiler/plan/types.js';
import { verifyPlan } from '../compiler/simulate/verify-plan.js';
import { diag, UserError } from './diagnostics.js';
import { mark } from './timing.js';
import { ringBytes } from '../compiler/report/what-if.js';
import { build, RoundingFailed, simulated, type Built } from '../compiler/partition/built.js';
import { place } from '../compiler/partition/search.js';

export { place, placeMinCut, type Placed } from '../compiler/partition/search.js';
export { placeLp, type Built } from '../compiler/partition/built.js';

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
  /** Told, one line each, what the model does that compiles but is likely a mistake (a parameter the loss does not reach). */
  note?: (message: string) => void;
  /** Each block's MLP and attention as this many parts (compiler/lower/chunks.ts). compile sets it for its second try (chunksMayPay); given, compile makes that plan alone. */
  chunks?: number;
}

/** Whether a model path names an ONNX file (else a DSL model). */
export const isOnnx = (model: string): boolean => /\.onnx$/i.test(model);

/**
 * The options as the command line checks its flags, for callers of the API
 * too (each had compiled: precision 'fp8' as bf16 labelled fp8, lr -1, a
 * warm-up of NaN steps; a model path of /dev/zero was read until memory ran
 * out). Throws the CLI's UserError for the first that is not.
 */
export function checkCompileOptions(opts: CompileOptions): void {
  // (compile() and compile(null) had thrown a TypeError)
  if (typeof opts !== 'object' || opts === null || Array.isArray(opts)) throw diag.usage(`compile: expected an options object { model, ... }, got ${opts === null ? 'null' : typeof opts}`);
  if (typeof opts.model !== 'string' || opts.model === '') throw diag.usage(`model: expected a model file path, got ${JSON.stringify(opts.model)}`);
  let st: Stats;
  try { st = statSync(opts.model); } catch { throw diag.fileNotFound(opts.model, 'model file'); }
  if (!st.isFile()) throw diag.modelExport(opts.model, 'not a model file: not a regular file');
  // (a path without .ts had reached the TypeScript loader, whose error was its own internal text)
  if (!isOnnx(opts.model) && !/\.(m?ts|tsx)$/.test(opts.model)) throw diag.modelExport(opts.model, 'not a model file: a model is a TypeScript file (.ts, .mts or .tsx) written with the DSL, or an ONNX file (.onnx)');
  if (opts.hw !== undefined && typeof opts.hw !== 'string') throw diag.usage(`hw: expected a profile name or a JSON file, got ${typeof opts.hw}`);
  if (opts.note !== undefined && typeof opts.note !== 'function') throw diag.usage(`note: expected a function, got ${typeof opts.note}`);
  if (opts.precision !== undefined && !['fp32', 'fp16', 'bf16'].includes(opts.precision)) throw diag.usage(`--precision: expected fp32, fp16 or bf16, got '${opts.precision}'`);
  for (const [flag, v, min] of [['--batch', opts.batch, 1], ['--seq', opts.seq, 1], ['--dpu-warmup', opts.dpuWarmupSteps, 0]] as const) {
    if (v !== undefined && !(Number.isSafeInteger(v) && v >= min)) throw diag.badNumber(flag, String(v), `an integer >= ${min}`);
  }
  if (opts.lpTimeLimitSeconds !== undefined && !(opts.lpTimeLimitSeconds > 0 && Number.isFinite(opts.lpTimeLimitSeconds))) throw diag.usage(`--lp-time-limit: expected a number of seconds > 0, got ${opts.lpTimeLimitSeconds}`);
  if (opts.probe !== undefined && opts.probe !== 'fits' && opts.probe !== 'step') throw diag.usage(`probe: expected 'fits' or 'step', got ${JSON.stringify(opts.probe)}`);
  checkOptimizer(opts.optimizer ?? {});
}


/** The whole training step of a model: forward, backward, optimizer, in the compute precision. */
export async function trainingGraph(opts: CompileOptions, onForward?: (forward: Graph) => void): Promise<{ graph: Graph; preset: string; config: Record<string, unknown>; sharding?: SpSharding }> {
  checkCompileOptions(opts);
  const P = opts.sp ?? 1;
  // (2048 had compiled, and run then crashed in the native ring's own check)
  if (!(Number.isInteger(P) && P >= 1 && P <= MAX_SP_RANKS)) throw diag.spRanks(`--sp: expected a whole number of ranks from 1 to ${MAX_SP_RANKS}, got ${P}`);
  if (P > 1 && opts.dpuWarmupSteps !== undefined) throw diag.usage('--sp and --dpu together are not supported yet');
  // (each was taken and ignored: --freeze on a DSL model, --preset on an ONNX one)
  const onnx = isOnnx(opts.model);
  if (onnx && opts.preset !== undefined) throw diag.usage(`--preset: ${opts.model} is an ONNX model, of one fixed size (its symbolic dims take --batch and --seq); presets are a DSL model's`);
  if (onnx && opts.config !== undefined) throw diag.usage(`--config: ${opts.model} is an ONNX model, of one fixed size; presets and their fields are a DSL model's`);
  if (!onnx && opts.freeze !== undefined) throw diag.usage(`--freeze: applies to an ONNX model's initializers; ${opts.model} is a DSL model, whose parameters all train`);
  // the ONNX importer (and its protobuf decoder, ~0.1 s to load) only for ONNX models
  const imported = onnx
    ? (await import('../compiler/import/onnx.js')).importOnnx(opts.model, { batch: opts.batch, seq: opts.seq, freeze: opts.freeze })
    : await importDsl(opts.model, { preset: opts.preset, batch: opts.batch, seq: opts.seq, config: opts.config });
  mark('import');
  for (const n of imported.notes ?? []) opts.note?.(n);
  onForward?.(imported.graph);
  assertGraph(imported.graph, 'import');
  let forward = imported.graph, sharding: SpSharding | undefined;
  if (P > 1) {
    ({ graph: forward, sharding } = lowerSequenceParallel(forward, P, opts.model));
    assertGraph(forward, 'sequence-parallel lowering');
  }
  if (opts.chunks !== undefined && opts.chunks > 1) {
    forward = chunkBlocks(forward, opts.chunks);
    assertGraph(forward, 'chunks');
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

/** The plan of a placement and its bound; `built` (from place) is its program, arenas and simulation, when already made for this graph and placement. */
export function planFor(g: Graph, hw: HardwareProfile, p: Placement, model: Plan['model'], optimizer: AdamAttrs, lp?: LpSolution, built?: Built): Plan {
  return withBound(unboundPlan(g, hw, p, model, optimizer, built), lp);
}

/**
 * The plan of a placement without its bound, assembled and verified (the
 * verifier reads no bound): compile makes it while the bound of a model kept
 * on the GPU still solves (place's promise), then adds the bound (withBound).
 */
function unboundPlan(g: Graph, hw: HardwareProfile, p: Placement, model: Plan['model'], optimizer: AdamAttrs, built?: Built): Plan {
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
  for (const t of ['cpu', 'nvme'] as Tier[]) {
    if (tiers[t].peakBytes > tiers[t].capacityBytes) throw diag.doesNotFit(`does not fit: the ${t} tier needs ${fmtBytes(tiers[t].peakBytes)}, capacity is ${fmtBytes(tiers[t].capacityBytes)} (short by ${fmtBytes(tiers[t].peakBytes - tiers[t].capacityBytes)}); raise --${t === 'cpu' ? 'cpu-mem' : 'nvme'}`);
  }
  const plan: Plan = {
    formatVersion: FORMAT_VERSION, generator: 'tiercut 0.1.0', model, hardware: hw, optimizer, graph: g, placement: p,
    tiers, buffers: arenas.buffers, instructions: arenas.instructions, traffic: traffic as Traffic,
    predicted: { stepSeconds: sim.stepSeconds, streamBusySeconds: sim.streamBusySeconds, peakBytes: arenas.arenaBytes },
  };
  mark('plan assembled');
  const problems = verifyPlan(plan);
  mark('plan verified');
  if (problems.length) throw new Error(`internal: the emitted plan fails verification:\n  ${problems.slice(0, 8).join('\n  ')}`);
  return plan;
}

/** A plan (unboundPlan's) with its bound: lpStatus where the LP was not optimal, and plan.bound where it bounds the plan. */
function withBound(plan: Plan, lp?: LpSolution): Plan {
  const step = plan.predicted.stepSeconds;
  // the bound holds for every plan of the family: a plan simulated below it
  // means the solver's "optimal" was wrong or a row of the bound LP is not
  // valid (seen with a trial row: HiGHS answered 1.42 s where a plan of the
  // family ran 0.44 s) — never reported as a negative gap
  const bounded = lp && (lp.status === 'optimal' || lp.opCostFloor || lp.keptOnGpu);
  if (bounded && step < lp.lowerBoundSeconds * (1 - 1e-6))
    throw new Error(`internal: the ${lp.opCostFloor ? 'op-cost floor' : lp.keptOnGpu ? "GPU's own work" : "LP's lower bound"} (${lp.lowerBoundSeconds} s) lies above this plan's simulated step (${step} s): the solver's optimum is wrong or a bound row is not valid; please report the model and profile`);
  return {
    ...plan,
    ...(lp && lp.status !== 'optimal' ? { lpStatus: lp.status } : {}),
    ...(bounded ? {
      bound: {
        lowerBoundSeconds: lp.lowerBoundSeconds,
        // (a step below the bound within the tolerance above is rounding: gap 0, not '-0.0 %')
        gapPercent: Math.max(0, (100 * (step - lp.lowerBoundSeconds)) / lp.lowerBoundSeconds),
        lp: { ...lp.size, status: lp.status },
        ...(lp.keptOnGpu ? { keptOnGpu: true } : {}),
        ...(lp.anyPlacementSeconds !== undefined ? { anyPlacementLowerBoundSeconds: lp.anyPlacementSeconds } : {}),
        ...(lp.opCostFloor ? { opCostFloor: true } : {}),
        ...(lp.widenedBy ? { widenedBy: lp.widenedBy } : {}),
        ...(lp.relaxed ? { relaxed: true } : {}),
      },
    } : {}),
  };
}

/** The parts compile tries a block's MLP and attention in (compiler/lower/chunks.ts; 4 were slower on every cell tried: docs/BENCHMARKS.md, forty-ninth session). */
const CHUNKS = 2;
/** compile tries the parameters in parts only where the plan's gap to its bound is above this (issue 5's target), */
const CHUNKS_ABOVE_GAP_PERCENT = 2;
/** and its GPU is busy for at most this share of the step (gpt3-13b/h200: 94 %, its plan in parts slower; 13b/h100 26 %). */
const CHUNKS_GPU_BUSY_SHARE = 0.9;

/**
 * Whether compile also places the model with its blocks in parts: a plan
 * that offloads (its state does not fit the GPU), keeps no state on NVMe (a
 * second compile of gpt3-175b would take it past 10 s; moves.ts leaves such
 * plans out alike), has a bound and is more than CHUNKS_ABOVE_GAP_PERCENT
 * above it, its GPU not busy most of the step; not fit's probes (fit judges
 * the whole model: the bound this needs cost a 97-layer BERT tiny's answer
 * ~25 s more), nor --sp or --dpu plans. Where it was tried on the gap grid:
 * gpt3-13b/h100 1.0785 -> 1.0704 s (gap 2.42 -> 1.85 %), gpt3-6.7b/v100
 * 2.3119 -> 2.2886 s (3.03 -> 2.11 %), gpt3-13b/h200 slower in parts
 * (0.3003 s against 0.2945; left out by its GPU's 94 % busy share); each at
 * the cost of a second compile, ~2x the first (docs/BENCHMARKS.md,
 * forty-ninth and fiftieth sessions).
 */
export function chunksMayPay(opts: CompileOptions, g: Graph, plan: Plan): boolean {
  if (opts.probe !== undefined || (opts.sp ?? 1) > 1 || opts.chunks !== undefined || opts.dpuWarmupSteps !== undefined) return false;
  if (!plan.bound || plan.bound.gapPercent <= CHUNKS_ABOVE_GAP_PERCENT || plan.bound.keptOnGpu || plan.bound.opCostFloor) return false;
  // (parts add GPU work, a sum per block, for room to place: not where the GPU is busy most of the step already)
  if (plan.predicted.streamBusySeconds.gpu > CHUNKS_GPU_BUSY_SHARE * plan.predicted.stepSeconds) return false;
  if (plan.placement.home.includes('nvme')) return false;
  return g.tensors.some((t) => t.persistent && plan.placement.home[t.id] !== 'gpu');
}

/**
 * Of the plan and the plan of the same model in parts, the faster, its bound
 * the lower of the two: each holds for its own graph's plans (the parts add a
 * sum per block, so either can be the lower), the lower for both.
 */
function inParts(whole: Plan, parts: Plan | undefined): Plan {
  if (!parts?.bound || !whole.bound) return whole;
  const kept = parts.predicted.stepSeconds < whole.predicted.stepSeconds ? parts : whole;
  const lower = parts.bound.lowerBoundSeconds < whole.bound.lowerBoundSeconds ? parts.bound : whole.bound;
  const step = kept.predicted.stepSeconds;
  return { ...kept, bound: { ...lower, gapPercent: Math.max(0, (100 * (step - lower.lowerBoundSeconds)) / lower.lowerBoundSeconds) } };
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

/**
 * The training state's bytes as the forward graph tells them: 16 per trainable
 * parameter (its half copy, gradient, master32 and two moments in fp16/bf16;
 * the parameter, gradient and moments in fp32), a frozen one's own. Where they
 * fit in the GPU, the model most likely stays there (an all-GPU plan solves
 * one small LP, for its bound over every placement) and HiGHS keeps its
 * baseline code: all-GPU gpt2-1.5b on a V100 compiled cold in 1.51-1.56 s so,
 * 1.80-1.84 s optimised (docs/BENCHMARKS.md, twenty-ninth session).
 */
function stateBytes(forward: Graph): number {
  let frozen = 0;
  for (const t of forward.tensors) if (t.role === 'param16' && t.frozen) frozen += t.sizeBytes;
  return 16 * forward.paramCount + frozen;
}

/** The code of a does-not-fit UserError (a DPU steady step that does not fit is declined, not an error). */
const DOES_NOT_FIT = diag.doesNotFit('').code;

/** The machine a compile (or fit) plans for: its profile (the local one by default) with the capacity overrides applied and checked. */
export const machineOf = (opts: Pick<CompileOptions, 'hw' | 'gpuMemBytes' | 'cpuMemBytes' | 'nvmeBytes'>) =>
  loadProfile(opts.hw ?? 'local', { gpuMemBytes: opts.gpuMemBytes, cpuMemBytes: opts.cpuMemBytes, nvmeBytes: opts.nvmeBytes });

/**
 * A model compiled to a plan, as `tiercut compile` does (async: the LPs solve
 * on worker threads). Throws UserError: TC1xx for options or a model file that
 * is not right (the CLI's codes), TC301 where nothing fits, TC6xx for --sp.
 */
export async function compile(opts: CompileOptions): Promise<Plan> {
  checkCompileOptions(opts);
  const hw = machineOf(opts);
  // the LP's solver thread starts now; HiGHS loads once the forward graph is
  // imported (while this thread builds the rest), optimised for large models
  // whose state does not fit in the GPU
  // (in fp16/bf16 a second thread solves the second placement LP beside the first)
  const solver = new LpWorker({ deferLoad: true });
  let second: LpWorker | undefined;
  mark('compile start');
  try {
    const { graph, preset, config, sharding } = await trainingGraph(opts, (forward) => {
      const offGpu = stateBytes(forward) > hw.gpu.capacityBytes;
      const optimised = forward.ops.length > OPTIMISED_SOLVER_MIN_FORWARD_OPS && offGpu;
      solver.load(optimised);
      // (a model that stays on the GPU solves one LP, on the first thread: no
      // second thread, whose start alone costs ~0.1 s of CPU beside the
      // graph's build and that solve, gpt2-1.5b/a100's; where the state fits
      // and the arenas do not after all, the first thread solves every LP)
      if (offGpu && (opts.precision ?? 'fp32') !== 'fp32') (second = new LpWorker({ deferLoad: true })).load(optimised);
    });
    // sequence parallelism: the ring buffers of the largest collective sit
    // beside the arenas of the tier it runs on; place within what they leave on
    // the GPU, and where the plan runs one on the CPU without room for its
    // buffers there, once more with the CPU's room taken too (both had been
    // taken at once: a CPU that `run` accepts for the plan had been refused)
    const optimizer = { ...ADAM_DEFAULTS, ...opts.optimizer };
    const model = { source: opts.model, preset, config };
    const placeWithin = async (reserve: readonly ('gpu' | 'cpu')[]) => {
      const placeHw = sharding ? withoutRingBuffers(graph, hw, reserve) : hw;
      const placeOn = (on: HardwareProfile) => place(graph, on, { keepParamsOnGpu: opts.keepParamsOnGpu, solver, second, lpTimeLimitSeconds: opts.lpTimeLimitSeconds, probe: opts.probe });
      const { placement, lp, built, smallerGpu } = await placeOn(placeHw).then((r) => ({ ...r, smallerGpu: false })).catch(async (e: unknown) => {
        // where the LP's placement, rounded, could not be repaired to fit: placed
        // for a GPU of 3/4, 1/2 and 1/4 of it, the first that fits (what fits
        // there fits here; 100 MB had been refused where 50 and 75 MB compiled:
        // fit's answer fell as the GPU grew).
        // Its bound is that GPU's, no bound for this one: the plan carries none.
        if (e instanceof RoundingFailed) {
          for (const share of [3 / 4, 1 / 2, 1 / 4]) {
            try {
              const r = await placeOn({ ...placeHw, gpu: { ...placeHw.gpu, capacityBytes: Math.floor(placeHw.gpu.capacityBytes * share) } });
              return { ...r, lp: undefined, smallerGpu: true };
            } catch (again) {
              if (!(again instanceof UserError && again.code === DOES_NOT_FIT)) throw again;
            }
          }
        }
        // (its capacities are the tiers' less the ring buffers: say so, or "capacity is 41 KiB" of a 146 KiB GPU reads wrong)
        if (sharding && e instanceof UserError && e.code === DOES_NOT_FIT) throw diag.doesNotFit(`${e.message} (with --sp, a ${reserve.join(' or ')} capacity named is the tier's less the ${fmtBytes(hw.gpu.capacityBytes - placeHw.gpu.capacityBytes)} of one attention call's ring buffers beside the arena)`);
        throw e;
      });
      const plan = withBound(unboundPlan(graph, hw, placement, model, optimizer, built), await lp);
      return { placement, plan: smallerGpu ? { ...plan, lpStatus: 'smallerGpu' } : plan };
    };
    let { placement, plan } = await placeWithin(['gpu']);
    if (sharding) {
      if (ringWorkspaceProblem(plan)?.tier === 'cpu') ({ placement, plan } = await placeWithin(['gpu', 'cpu']));
      const problem = ringWorkspaceProblem(plan);
      if (problem) throw diag.doesNotFit(problem.message);
      return { ...plan, sp: spSection(plan, sharding) };
    }
    // the same model with its blocks' parameters in parts (compiler/lower/chunks.ts), placed and planned alike
    const placeWithinParts = async (): Promise<Plan | undefined> => {
      const parts = await trainingGraph({ ...opts, chunks: CHUNKS });
      if (parts.graph.ops.length === graph.ops.length) return undefined; // (no block of the patterns)
      const r = await place(parts.graph, hw, { keepParamsOnGpu: opts.keepParamsOnGpu, solver, second, lpTimeLimitSeconds: opts.lpTimeLimitSeconds }).catch((e: unknown) => {
        if (e instanceof RoundingFailed || (e instanceof UserError && e.code === DOES_NOT_FIT)) return undefined;
        throw e;
      });
      return r && withBound(unboundPlan(parts.graph, hw, r.placement, model, optimizer, r.built), await r.lp);
    };
    if (opts.dpuWarmupSteps === undefined) return chunksMayPay(opts, graph, plan) ? inParts(plan, await placeWithinParts()) : plan;
    const warmupSteps = opts.dpuWarmupSteps;
    // the updates the plain step runs on the CPU are delayed (ZeRO-Offload's
    // DPU); those the GPU runs beside its own work stay in place
    const delayed = new Set(graph.ops.filter((o) => o.kind === 'adam' && placement.opTier[o.id] === 'cpu'));
    const delays = (u: Op) => delayed.has(u);
    const delayedUpdates = delayed.size;
    if (delayedUpdates === 0) return { ...plan, dpu: { warmupSteps, declined: { reason: 'nothing-to-delay', delayedUpdates } } };
    const steadyGraph = lowerDpu(graph, delays);
    assertGraph(steadyGraph, 'dpu lowering');
    const known = steadyPlacementOf(graph, placement, dpuOrder(graph, delays), delayed);
    let steadyPlace: Awaited<ReturnType<typeof place>>;
    try {
      steadyPlace = await place(steadyGraph, hw, { keepParamsOnGpu: opts.keepParamsOnGpu, solver, second, lpTimeLimitSeconds: opts.lpTimeLimitSeconds, probe: opts.probe, known });
    } catch (e) {
      // its delayed gradients are state: where the plain step fits with no
      // room for them, the plain step stands (not a failed compile)
      if (!(e instanceof UserError) || e.code !== DOES_NOT_FIT) throw e;
      return { ...plan, dpu: { warmupSteps, declined: { reason: 'does-not-fit', delayedUpdates, message: e.message } } };
    }
    const steady = planFor(steadyGraph, hw, steadyPlace.placement, model, optimizer, await steadyPlace.lp, steadyPlace.built);
    // delaying them must pay: the steady step's order (every cast first, the
    // delayed updates before the forward, their gradients written over the
    // ones they read) can cost more than the overlap gains (gpt3-13b/h200:
    // 0.386 against 0.308 s, docs/BENCHMARKS.md)
    if (steady.predicted.stepSeconds >= plan.predicted.stepSeconds) return { ...plan, dpu: { warmupSteps, declined: { reason: 'slower', delayedUpdates, steadyStepSeconds: steady.predicted.stepSeconds } } };
    return { ...plan, dpu: { warmupSteps, steady } };
  } finally {
    solver.close();
    second?.close();
  }
}

/**
 * The plain step's placement for its DPU steady step (ops in `order`, the
 * plain step's op ids: dpuOrder): each op and tensor where the plain step has
 * it, except that a delayed group's p16 is made once (a cast run again would
 * read master32 after its update). place tries it beside the LP's roundings,
 * and the families build on it (gpt3-6.7b/a100's steady step 0.452 -> 0.392
 * s, below the plain 0.396; docs/BENCHMARKS.md).
 */
function steadyPlacementOf(g: Graph, p: Placement, order: readonly number[], delayed: ReadonlySet<Op>): Placement {
  const masters = new Set([...delayed].map((u) => u.inputs[0]));
  const remat = p.remat && [...p.remat];
  if (remat) for (const o of g.ops) if (o.phase === 'update' && o.kind !== 'adam' && masters.has(o.inputs[0])) for (const t of o.outputs) remat[t] = false;
  return {
    ...p, opTier: order.map((k) => p.opTier[k]), ...(remat ? { remat } : {}),
    ...(p.forwardCastOnCpu ? { forwardCastOnCpu: order.map((k) => p.forwardCastOnCpu![k]) } : {}),
  };
}

/** The profile with the largest collective op's ring buffers taken off the capacities of `tiers` (placement only). */
function withoutRingBuffers(g: Graph, hw: HardwareProfile, tiers: readonly ('gpu' | 'cpu')[]): HardwareProfile {
  let most = 0;
  for (const op of g.ops) most = Math.max(most, ringWorkspaceBytes(op.kind, op.inputs.map((t) => g.tensors[t]), op.attrs));
  let out = hw;
  for (const tier of tiers) {
    if (hw[tier].capacityBytes <= most)
      throw diag.doesNotFit(`does not fit: the ring buffers of one attention call need ${fmtBytes(most)}, the ${tier} tier holds ${fmtBytes(hw[tier].capacityBytes)}; raise --${tier === 'gpu' ? 'gpu-mem' : 'cpu-mem'}, use more ranks or lower --batch`);
    out = { ...out, [tier]: { ...hw[tier], capacityBytes: hw[tier].capacityBytes - most } };
  }
  return out;
}

/**
 * A collective op's ring buffers and scratch live beside its tier's arena, not
 * in it (the ring kernels allocate them per call): the arena plus the largest
 * of them must still fit the tier, or the plan would run out of memory that its
 * peaks do not show. The first tier where they do not, and its line.
 */
function ringWorkspaceProblem(plan: Plan): { tier: 'gpu' | 'cpu'; message: string } | undefined {
  const ring = ringBytes(plan);
  for (const tier of ['gpu', 'cpu'] as const) {
    const { peakBytes, capacityBytes } = plan.tiers[tier];
    if (peakBytes + ring[tier] > capacityBytes)
      return { tier, message: `does not fit: the ${tier} tier needs ${fmtBytes(peakBytes)} for the step plus ${fmtBytes(ring[tier])} of ring buffers beside it, capacity is ${fmtBytes(capacityBytes)} (short by ${fmtBytes(peakBytes + ring[tier] - capacityBytes)}); raise --${tier === 'gpu' ? 'gpu-mem' : 'cpu-mem'}, use more ranks or lower --batch` };
  }
  return undefined;
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
  const perRank = Array.from({ length: s.ranks }, (_, rank) => ({ rank, positions: zigzagPositions(s.seq, s.ranks, rank), ...rankRingNumbers(g, plan.instructions, rank) }));
  return { ranks: s.ranks, seq: s.seq, inputs: s.inputs.map((i) => ({ ...i, fullShape: [...i.fullShape] })), ...(s.positions !== undefined ? { positions: s.positions } : {}), perRank };
}
