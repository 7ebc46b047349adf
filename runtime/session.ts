// A training session: a Plan bound to the native runtime. Builds the native
// program from the plan (the only translation between the two), initialises
// persistent state (seeded or from a weights file), writes each step's data,
// runs steps and reads the loss back.

import type { Tier } from '../compiler/cost/cost.js';
import { DTYPE_CODES, OP_CODES, encodeAttrs } from '../compiler/ir/ops.js';
import { isDelayedUpdate } from '../compiler/lower/dpu.js';
import { checkOptimizer } from '../compiler/lower/optimizer.js';
import { checkPlan } from '../compiler/plan/io.js';
import type { AdamAttrs, Tensor } from '../compiler/ir/types.js';
import { numel, shapeStr } from '../compiler/ir/types.js';
import type { Plan } from '../compiler/plan/types.js';
import { STREAMS } from '../compiler/plan/types.js';
import { diag, oneLine, UserError } from '../src/diagnostics.js';
import { nativeAddon, type NativeProgram, type NativeRingGroup, type NativeSession, type NativeSessionInfo, type StepStats } from './binding.js';
import { badValue, checkValues, valueWant } from './data.js';
import { checkDistinct } from '../src/atomic-write.js';
import { initValues } from './init.js';
import { cutSlice, pasteSlice } from './param-slice.js';
import { FLOAT_DTYPES, readSafetensors, toFloat64, writeSafetensors, type SafeTensor } from './safetensors.js';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { existsSync, realpathSync } from 'node:fs';
import { readOnnxInitializers } from '../compiler/import/onnx-decode.js';

const TIER_CODE: Record<Tier, number> = { gpu: 0, cpu: 1, nvme: 2 };
const KIND_CODE = { run: 0, copy: 1, free: 2 } as const;

export interface SessionOptions {
  seed?: number;
  /**
   * Initial weights by parameter name (safetensors); otherwise the model's init
   * specs. A model imported from ONNX (init kind 'onnx') starts from the
   * initializers of plan.model.source, read here (a relative path from the
   * working directory, else from `planDir`). Constants the plan carries (init
   * kind 'data') always come from the plan.
   */
  weightsFile?: string;
  /** The directory of the plan file, where a relative model.source is looked for when the working directory has no such file (`run` gives it). */
  planDir?: string;
  /** Optimizer settings that replace the plan's. */
  optimizer?: Partial<AdamAttrs>;
  spillDir?: string;
  /** The nvme store's queue depth, block size and O_DIRECT use; they replace the plan's
   *  (plan.hardware.nvme.queueDepth / blockBytes when the profile names them; else 8, 1 MiB, true). */
  nvme?: NvmeOptions;
  /** Record every instruction's start and end in each step's stats (for `run --trace`). */
  trace?: boolean;
  /** Sequence parallelism: this session is rank `rank` of the ring `group` (runtime/sp-session.ts steps them together). */
  ring?: { group: NativeRingGroup; rank: number };
}

export interface NvmeOptions { queueDepth?: number; blockBytes?: number; direct?: boolean }

export interface StepResult {
  step: number;
  loss: number;
  seconds: number;
  stats: StepStats;
}

export function nativeProgram(plan: Plan, optimizer: AdamAttrs, spillDir: string, nvme?: NvmeOptions): NativeProgram {
  const tiers = (['gpu', 'cpu', 'nvme'] as Tier[]).map((t) => ({ capacityBytes: plan.tiers[t].capacityBytes, arenaBytes: plan.tiers[t].peakBytes }));
  // the store's settings: the plan's (its hardware profile may name them), then the caller's
  const { queueDepth, blockBytes } = plan.hardware.nvme;
  const io: NvmeOptions = { ...(queueDepth !== undefined ? { queueDepth } : {}), ...(blockBytes !== undefined ? { blockBytes } : {}), ...nvme };
  return {
    tiers, spillDir, ...(Object.keys(io).length > 0 ? { nvme: io } : {}),
    tensors: plan.graph.tensors.map((t) => ({ name: t.name, dtype: DTYPE_CODES[t.dtype], shape: [...t.shape] })),
    buffers: plan.buffers.map((b) => ({ tensor: b.tensor, tier: TIER_CODE[b.tier], offsetBytes: b.offsetBytes, sizeBytes: b.sizeBytes })),
    ops: plan.graph.ops.map((op) => {
      if (op.kind !== 'adam') return { kind: OP_CODES[op.kind], ...encodeAttrs(op.kind, op.attrs) };
      // a delayed update (a DPU steady step's) is marked in iattr[2]
      const { iattr, fattr } = encodeAttrs(op.kind, { ...op.attrs, adam: optimizer });
      return { kind: OP_CODES[op.kind], iattr: [...iattr, isDelayedUpdate(plan.graph, op) ? 1 : 0], fattr };
    }),
    instructions: plan.instructions.map((x) => ({
      stream: STREAMS.indexOf(x.stream), kind: KIND_CODE[x.kind], op: x.op, inputs: [...x.inputs], outputs: [...x.outputs], waits: [...x.waits],
    })),
  };
}

/** Encodes float64 values in a tensor's storage dtype. */
function encode(t: Tensor, values: Float64Array | Float32Array): ArrayBufferView {
  switch (t.dtype) {
    case 'f32': return Float32Array.from(values);
    case 'i32': return Int32Array.from(values);
    case 'f16': case 'bf16': return nativeAddon().halfRound(Float32Array.from(values), t.dtype === 'f16' ? 'fp16' : 'bf16');
    case 'i64': return BigInt64Array.from(values, (v) => BigInt(v));
  }
}

/** A plan bound to a native session: where each tensor rests between steps. */
interface Bound { plan: Plan; native: NativeSession; homeOf: Map<number, number>; lossBuffer: number }

/**
 * A session's options as the CLI's flags are checked (the API had taken
 * trace: 'no' as on, weightsFile '' as none, nvme: 'x' as nothing, and named
 * program.nvme.queueDepth for a queue depth out of range).
 */
export function checkSessionOptions(opts: SessionOptions): void {
  if (typeof opts !== 'object' || opts === null) throw diag.usage(`expected a session's options object, got ${opts === null ? 'null' : typeof opts}`);
  for (const k of ['weightsFile', 'planDir', 'spillDir'] as const) {
    const v = opts[k];
    if (v !== undefined && (typeof v !== 'string' || v === '')) throw diag.usage(`${k}: expected a path, got ${JSON.stringify(v)}`);
  }
  if (opts.trace !== undefined && typeof opts.trace !== 'boolean') throw diag.usage(`trace: expected true or false, got ${JSON.stringify(opts.trace)}`);
  const n = opts.nvme;
  if (n === undefined) return;
  if (typeof n !== 'object' || n === null) throw diag.usage(`nvme: expected { queueDepth, blockBytes, direct }, got ${JSON.stringify(n)}`);
  if (n.queueDepth !== undefined && !(Number.isInteger(n.queueDepth) && n.queueDepth >= 1 && n.queueDepth <= 64)) throw diag.usage(`nvme.queueDepth (--nvme-queue-depth): expected 1..64, got ${n.queueDepth}`);
  if (n.blockBytes !== undefined && !(Number.isInteger(n.blockBytes) && n.blockBytes % 4096 === 0 && n.blockBytes >= 4096 && n.blockBytes <= 64 * 2 ** 20))
    throw diag.usage(`nvme.blockBytes (--nvme-block-size): expected a multiple of 4096 from 4KiB to 64MiB, got ${n.blockBytes}`);
  if (n.direct !== undefined && typeof n.direct !== 'boolean') throw diag.usage(`nvme.direct: expected true or false, got ${JSON.stringify(n.direct)}`);
}

/** Where a plan's model file may be, in the order a session looks (an ONNX plan reads its weights there): the path as the plan has it, then beside the plan. */
export function planModelFiles(plan: Plan, planDir?: string): string[] {
  const src = plan.model.source;
  return [...new Set([resolve(src), ...(planDir !== undefined ? [resolve(planDir, src), join(resolve(planDir), basename(src))] : [])])];
}

/** Those of planModelFiles that exist, each once (by its real path): the files an output may not overwrite. */
export function existingModelFiles(plan: Plan, planDir?: string): string[] {
  return [...new Set(planModelFiles(plan, planDir).filter((f) => existsSync(f)).map((f) => realpathSync(f)))];
}

/**
 * The runtime's switches (README, Environment variables) read as the native
 * side reads them, refused when they say nothing it knows: a TIERCUT_SPIN_US
 * of "abc" or TIERCUT_RING_ISA=scalar had silently given the default (the
 * ring kernels then 5-10x slower), TIERCUT_NVME_MERGE=no merging on.
 */
function checkRuntimeEnv(): void {
  const env = (k: string) => { const v = process.env[k]; return v === undefined || v === '' ? undefined : v; };
  const spin = env('TIERCUT_SPIN_US');
  if (spin !== undefined && !(/^\d+$/.test(spin) && Number(spin) <= 1_000_000)) throw diag.usage(`TIERCUT_SPIN_US: expected a whole number of microseconds from 0 to 1000000, got "${oneLine(spin)}"`);
  const merge = env('TIERCUT_NVME_MERGE');
  if (merge !== undefined && merge !== '0' && merge !== '1') throw diag.usage(`TIERCUT_NVME_MERGE: expected 0 (no vectored I/O) or 1, got "${oneLine(merge)}"`);
  const ring = env('TIERCUT_RING_ISA');
  if (ring !== undefined && !['baseline', 'avx2', 'avx512'].includes(ring)) throw diag.usage(`TIERCUT_RING_ISA: expected baseline, avx2 or avx512, got "${oneLine(ring)}"`);
}

function bind(plan: Plan, optimizer: AdamAttrs, spillDir: string, nvme?: NvmeOptions, ring?: SessionOptions['ring']): Bound {
  const homeOf = new Map<number, number>();
  for (const b of plan.buffers) {
    const t = plan.graph.tensors[b.tensor];
    if (b.freeAt < 0 && (b.allocAt < 0 || t.role === 'loss') && !homeOf.has(b.tensor)) homeOf.set(b.tensor, b.id);
  }
  const lossBuffer = homeOf.get(plan.graph.loss);
  if (lossBuffer === undefined) throw diag.planInvalid(plan.model.source, 'no buffer keeps the loss after the step');
  try {
    return { plan, native: nativeAddon().createSession(nativeProgram(plan, optimizer, spillDir, nvme), ring), homeOf, lossBuffer };
  } catch (e) {
    throw diag.runtime(`cannot start the runtime: ${(e as Error).message}`);
  }
}

/**
 * One plan trained by the native runtime, a step at a time (`tiercut run`).
 * The constructor is synchronous: it checks the plan (checkPlan) and the
 * options, allocates the tiers and writes the initial state; it throws
 * UserError (TC402 a plan, TC107 an option, TC501/TC502 the runtime or a
 * weights file). step and saveCheckpoint are async, one at a time; every
 * error is a UserError. close() frees the tiers and removes the spill file
 * (also done at process exit).
 */
export class TrainingSession {
  private bound: Bound;
  readonly optimizer: AdamAttrs;
  private closed = false;

  private get native(): NativeSession { return this.bound.native; }
  private get homeOf(): Map<number, number> { return this.bound.homeOf; }
  /** Set once applyPending has run (the step it applied): no step may follow. */
  private pendingApplied?: number;
  /** A DPU session's warm-up step's measured peaks, once the steady step has taken over (memory() gives the larger of each). */
  private warmupPeaks?: ReturnType<TrainingSession['memory']>;
  /** The --weights file's tensors no parameter of the model took (a checkpoint of another model loads where it has every name; run notes them). */
  unusedWeights: readonly string[] = [];
  /** Its entry among the sessions closed at exit. */
  private open?: OpenNative;
  /** The plan running now: the plan itself, or its DPU steady state after the warm-up. */
  get current(): Plan { return this.bound.plan; }

  constructor(readonly plan: Plan, private readonly opts: SessionOptions = {}) {
    // (a plan object made or edited by the caller, not read from a file, is checked as a file is; the options as the CLI's flags)
    checkSessionOptions(opts);
    if (!opts.ring) checkPlan(plan, 'the plan'); // (a rank's plan: its SequenceParallelSession checked it)
    checkOptimizer(opts.optimizer ?? {});
    checkRuntimeEnv();
    // (the generators take 32 bits: seed 2^32 had run as seed 0)
    if (opts.seed !== undefined && !(Number.isSafeInteger(opts.seed) && opts.seed >= 0 && opts.seed < 2 ** 32)) throw diag.badNumber('--seed', String(opts.seed), 'an integer from 0 to 4294967295');
    // (an sp plan's ranks are a SequenceParallelSession's: one alone had failed in step 1 on its ring attention)
    if (plan.sp && !opts.ring) throw diag.usage(`the plan is sequence-parallel over ${plan.sp.ranks} ranks: run it with SequenceParallelSession (tiercut run does), not TrainingSession`);
    this.optimizer = { ...plan.optimizer, ...opts.optimizer };
    this.bound = bind(plan, this.optimizer, opts.spillDir ?? tmpdir(), opts.nvme, opts.ring);
    this.open = closeAtExit(this, this.native);
    try {
      this.initState();
    } catch (e) {
      this.close();
      throw e;
    }
  }

  /**
   * After the DPU warm-up: the steady-state plan takes over. Its graph has the
   * same tensor ids; every state tensor moves across, and the gradients (state
   * only in the steady plan) start at zero.
   */
  private switchToSteady(): void {
    const steady = this.plan.dpu!.steady!;
    // (the warm-up's arenas are open while the steady step's are made: the tiers, and the spill directory, hold both for a moment)
    const next = bind(steady, this.optimizer, this.opts.spillDir ?? tmpdir(), this.opts.nvme);
    try {
      for (const t of steady.graph.tensors) {
        const dst = next.homeOf.get(t.id);
        if (dst === undefined || !t.persistent) continue;
        const src = this.plan.graph.tensors[t.id]?.persistent ? this.homeOf.get(t.id) : undefined;
        next.native.write(dst, src !== undefined ? this.native.read(src) : encode(t, new Float32Array(numel(t.shape))));
      }
    } catch (e) {
      next.native.close();
      throw e;
    }
    this.warmupPeaks = this.memory();
    this.native.close();
    this.bound = next;
    if (this.open) this.open.native = next.native;
  }

  private initState(): void {
    const g = this.plan.graph;
    const seed = this.opts.seed ?? 0;
    const weights = this.opts.weightsFile ? readSafetensors(this.opts.weightsFile) : undefined;
    const valuesOf = new Map<string, Float32Array>();
    let onnx: Map<string, { dims: number[]; values: Float32Array }> | undefined;
    const half = g.precision === 'fp16' ? 'f16' : g.precision === 'bf16' ? 'bf16' : undefined;
    const onnxValues = (name: string, p: Tensor): Float32Array => {
      // (a plan compiled in one directory and run from another had not found its ONNX model: the path as
      // the plan has it, else beside the plan, the path or its file name)
      const src = this.plan.model.source, tried = planModelFiles(this.plan, this.opts.planDir);
      const source = tried.find((f) => existsSync(f));
      if (source === undefined) throw diag.fileNotFound(src, `ONNX model (looked for at ${tried.join(', ')})`);
      onnx ??= readOnnxInitializers(source, new Set(g.tensors.flatMap((t) => (t.init?.kind === 'onnx' ? [t.init.initializer] : []))));
      const got = onnx.get(name);
      if (!got) throw diag.data(this.plan.model.source, `no initializer named '${name}' (a parameter of the model, shape ${shapeStr(p.shape)})`);
      if (shapeStr(got.dims) !== shapeStr(p.shape)) throw diag.data(this.plan.model.source, `initializer '${name}' has shape ${shapeStr(got.dims)}, the plan's parameter is ${shapeStr(p.shape)}`);
      // (a trained one as a --weights file's: a NaN, or a value past fp16's range in an fp16 plan, had
      // trained one step and failed there on a NaN gradient, naming an update instead of the weight; a
      // buffer --freeze keeps fixed is left as exported: a mask may hold -inf)
      const bad = p.frozen ? -1 : badValue(got.values, undefined, half);
      if (bad >= 0) throw diag.data(source, `initializer '${name}' value ${got.values[bad]} at index ${bad} is ${valueWant(undefined, half, got.values[bad])}`);
      return got.values;
    };
    const paramValues = (p: Tensor): Float32Array => {
      const name = p.param ?? p.name;
      let v = valuesOf.get(name);
      if (v) return v;
      if (p.slice) {
        // (a part of a parameter: the whole's values, by the whole's name, cut)
        const { of, whole } = p.slice;
        v = cutSlice(paramValues({ ...p, name: of, param: of, shape: whole, slice: undefined }), p.slice);
      } else if (p.init?.kind === 'data') {
        v = initValues(p.init, numel(p.shape), seed, name);
      } else if (weights) {
        const st = weights.get(name);
        if (!st) throw diag.data(this.opts.weightsFile!, `no tensor named '${name}' (a parameter of the model, shape ${shapeStr(p.shape)})`);
        if (shapeStr(st.shape) !== shapeStr(p.shape)) throw diag.data(this.opts.weightsFile!, `tensor '${name}' has shape ${shapeStr(st.shape)}, the model's parameter is ${shapeStr(p.shape)}`);
        // (integers had loaded as floats of the same bits' value: 1e9 where a weight was meant)
        if (!FLOAT_DTYPES.includes(st.dtype)) throw diag.data(this.opts.weightsFile!, `tensor '${name}' is ${st.dtype}; a parameter needs floats (F32, F16, BF16 or F64)`);
        const values = toFloat64(st);
        checkValues(this.opts.weightsFile!, name, values, undefined, half);
        v = Float32Array.from(values);
      } else if (p.init?.kind === 'onnx') {
        v = onnxValues(p.init.initializer, p);
      } else {
        v = initValues(p.init, numel(p.shape), seed, name);
      }
      valuesOf.set(name, v);
      return v;
    };
    for (const t of g.tensors) {
      const buf = this.homeOf.get(t.id);
      if (buf === undefined || !t.persistent) continue;
      let values: Float32Array;
      if (t.role === 'param16' || t.role === 'master32') values = paramValues(t);
      else values = new Float32Array(numel(t.shape)); // adamM, adamV start at zero
      // (an NVMe write failing here had ended the run with a stack trace naming a buffer)
      try { this.native.write(buf, encode(t, values)); } catch (e) { throw e instanceof UserError ? e : diag.runtime(`writing the initial value of tensor '${t.name}' failed: ${(e as Error).message}`); }
    }
    if (weights) this.unusedWeights = [...weights.keys()].filter((n) => !valuesOf.has(n));
  }

  /** Runs one step on the given input values (tensor id -> values). */
  async step(step: number, data: Map<number, Float64Array>, lr?: number): Promise<StepResult> {
    // (the API's misuse as one UserError line each: a TypeError for no data, a plain Error after close, lr -1 trained)
    if (this.closed) throw diag.runtime(`step ${step}: the session is closed`);
    if (!(Number.isSafeInteger(step) && step >= 1)) throw diag.badNumber('step', String(step), 'an integer >= 1');
    if (lr !== undefined && !(lr >= 0 && Number.isFinite(lr))) throw diag.badNumber('--lr', String(lr), 'a number >= 0');
    if (!(data instanceof Map)) throw diag.runtime(`step ${step}: expected the step's data as a Map of tensor id to values, got ${data === null ? 'null' : typeof data}`);
    if (this.pendingApplied !== undefined) throw diag.runtime(`step ${step}: this DPU session applied its pending updates for a checkpoint after step ${this.pendingApplied}; train on in a new session (--weights)`);
    // DPU: after the warm-up, step k's delayed updates apply the gradients of
    // step k-1 (their (k-1)-th update; the first steady step has none yet), its
    // other updates those of step k
    const dpu = this.plan.dpu;
    let delayedStep = step;
    if (dpu?.steady && step > dpu.warmupSteps) {
      if (this.bound.plan === this.plan) {
        // (its own errors too: "cannot reserve … bytes" had not said it was the switch, which holds both steps' arenas at once)
        try { this.switchToSteady(); } catch (e) { throw diag.runtime(`step ${step}: the DPU steady step could not take over (its arenas are made while the warm-up's are open, so each tier and the spill directory must hold both): ${(e as Error).message}`); }
      }
      delayedStep = step - 1 === dpu.warmupSteps ? 0 : step - 1;
    }
    let stats: StepStats;
    try {
      this.writeInputs(step, data);
      stats = await this.native.step(step, { ...(lr !== undefined ? { lr } : {}), delayedStep, ...(this.opts.trace ? { trace: true } : {}) });
    } catch (e) {
      throw e instanceof UserError ? e : diag.runtime(`step ${step} failed: ${(e as Error).message}`);
    }
    this.lastStep = step;
    return { step, loss: this.loss(), seconds: stats.seconds, stats };
  }

  /** The last step that completed (a DPU session's checkpoint applies that step's pending updates, and only that step's). */
  private lastStep: number | undefined;

  /** Writes one step's data inputs (tensor id -> values) into their buffers. */
  writeInputs(step: number, data: Map<number, Float64Array>): void {
    for (const t of this.bound.plan.graph.tensors) {
      if (t.role !== 'input') continue;
      const v = data.get(t.id);
      if (!v || v.length !== numel(t.shape)) throw diag.runtime(`step ${step}: no data of ${numel(t.shape)} values for input ${t.name}${shapeStr(t.shape)}`);
      // (the API's data as --data's is checked: an id of NaN or 3.7 had become 0 or 3, a float past fp16 an inf gradient blamed elsewhere)
      const half = t.dtype === 'f16' || t.dtype === 'bf16' ? t.dtype : undefined, bound = t.dtype === 'i32' ? 2 ** 31 : undefined;
      const bad = badValue(v, bound, half);
      if (bad >= 0) throw diag.runtime(`step ${step}: input ${t.name} value ${v[bad]} at index ${bad} is ${valueWant(bound, half, v[bad])}`);
      this.native.write(this.homeOf.get(t.id)!, encode(t, v));
    }
  }

  /** The loss the last step left. */
  loss(): number {
    if (this.closed) throw diag.runtime('loss: the session is closed');
    return new Float32Array(this.native.read(this.bound.lossBuffer).buffer.slice(0))[0];
  }

  /** The native session (runtime/sp-session.ts steps the ranks' sessions together). */
  get nativeSession(): NativeSession { return this.native; }

  /** How the nvme tier is served now (file, O_DIRECT or buffered, queue depth, block size). */
  info(): NativeSessionInfo { return this.native.info(); }

  /** Measured arena use per tier so far. */
  memory(): { peakBytes: Record<Tier, number>; peakLiveBytes: Record<Tier, number> } {
    const s = this.native.stats(), w = this.warmupPeaks;
    // (a DPU run's: the larger of the warm-up's and the steady step's; the steady step's alone had been reported)
    const rec = (a: number[], before?: Record<Tier, number>) => ({ gpu: Math.max(a[0], before?.gpu ?? 0), cpu: Math.max(a[1], before?.cpu ?? 0), nvme: Math.max(a[2], before?.nvme ?? 0) });
    return { peakBytes: rec(s.peakBytes, w?.peakBytes), peakLiveBytes: rec(s.peakLiveBytes, w?.peakLiveBytes) };
  }

  /** The current fp32 value of every parameter (the master copy when training in half precision). */
  parameters(): Map<string, Float32Array> {
    const g = this.bound.plan.graph;
    const out = new Map<string, Float32Array>();
    const half = g.precision !== 'fp32';
    for (const t of g.tensors) {
      // in half precision a frozen parameter (BatchNorm's running statistics, an
      // initializer --freeze keeps) has no master32: its own copy is its value
      // (it had been left out, and a checkpoint of its plan did not load back)
      const frozenHalf = half && t.role === 'param16' && t.frozen === true && t.persistent;
      if (!(half ? t.role === 'master32' || frozenHalf : t.role === 'param16')) continue;
      // (the constants an ONNX plan carries, a causal mask among them, are not parameters: they had been saved, and torch's strict load refused them)
      if (t.init?.kind === 'data') continue;
      let bytes: Uint8Array;
      // (a spill file lost after the last step had ended the run with a stack trace)
      try { bytes = this.native.read(this.homeOf.get(t.id)!); } catch (e) { throw diag.runtime(`reading parameter '${t.param ?? t.name}' failed: ${(e as Error).message}`); }
      const copy = bytes.slice();
      const values = t.dtype === 'f32' ? new Float32Array(copy.buffer) : Float32Array.from(toFloat64({ dtype: t.dtype === 'f16' ? 'F16' : 'BF16', shape: t.shape, bytes: copy }));
      // (a part of a parameter goes into the whole, under the whole's name)
      if (t.slice) {
        let whole = out.get(t.slice.of);
        if (!whole) out.set(t.slice.of, whole = new Float32Array(numel(t.slice.whole)));
        pasteSlice(whole, values, t.slice);
      } else out.set(t.param ?? t.name, values);
    }
    return out;
  }

  /**
   * A DPU session past its warm-up holds each delayed group's last gradient
   * (step `step`'s) not yet applied: the steady program runs once more with
   * every other update skipped, so that the delayed ones apply it, as step
   * step + 1 would (its forward and backward run on the inputs still in their
   * buffers; the gradient they make is never applied). The checkpoint then
   * holds `step` updates of every parameter (it had held step - 1 of the
   * delayed ones). Nothing pending: nothing runs.
   */
  async applyPending(step: number): Promise<void> {
    const dpu = this.plan.dpu;
    if (!dpu?.steady || this.bound.plan === this.plan || step <= dpu.warmupSteps) return;
    // (once: a second checkpoint had run the extra pass again, applying the gradient it made, and saved other parameters)
    if (this.pendingApplied === step) return;
    // (the step the session ran: another had dropped step t's pending update, or counted Adam's bias correction from it)
    if (step !== this.lastStep) throw diag.badNumber('step', String(step), `the last step this DPU session ran, ${this.lastStep ?? 'none yet'}`);
    // (its persistent gradients are then the extra pass's, not a step's: the session trains no further)
    this.pendingApplied = step;
    try {
      await this.native.step(step + 1, { delayedStep: step, onlyDelayed: true });
    } catch (e) {
      throw e instanceof UserError ? e : diag.runtime(`applying the delayed updates of step ${step} before the checkpoint failed: ${(e as Error).message}`);
    }
  }

  /** Writes the parameters as a safetensors checkpoint (atomically); a DPU session applies its pending updates first (applyPending). */
  async saveCheckpoint(file: string, step: number): Promise<void> {
    if (!(Number.isSafeInteger(step) && step >= 0)) throw diag.badNumber('step', String(step), 'an integer >= 0');
    if (this.closed) throw diag.runtime(`the checkpoint ${file} was not written: the session is closed`);
    // (the API's checkpoint onto the plan's own model had replaced it, as run --save had before run checked)
    checkDistinct([['the checkpoint', file], ...existingModelFiles(this.plan, this.opts.planDir).map((f) => ["the plan's model", f] as const)]);
    await this.applyPending(step);
    const tensors = new Map<string, SafeTensor>();
    const shapes = new Map(this.plan.graph.tensors.filter((t) => t.role === 'param16').map((t) => (t.slice ? [t.slice.of, t.slice.whole] : [t.param ?? t.name, t.shape])));
    let params: Map<string, Float32Array>;
    try { params = this.parameters(); } catch (e) { throw diag.runtime(`the checkpoint ${file} was not written: ${(e as Error).message}`); }
    for (const [name, v] of params) {
      // (a NaN had been saved with exit 0, and --weights then refused the file)
      const bad = badValue(v);
      if (bad >= 0) throw diag.runtime(`the checkpoint ${file} was not written: parameter '${name}' holds ${v[bad]} at index ${bad} after step ${step} (training diverged: lower --lr, or look at the data)`);
      tensors.set(name, { dtype: 'F32', shape: shapes.get(name)!, bytes: new Uint8Array(v.buffer) });
    }
    writeSafetensors(file, tensors, { format: 'pt', step: String(step), model: this.plan.graph.name });
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.open) { OPEN.delete(this.open); COLLECTED.unregister(this.open); }
    this.native.close();
  }
}

/**
 * The sessions not yet closed, closed when the process exits (process.exit,
 * an uncaught exception: each had left its NVMe spill file behind, GBs for a
 * real model). A signal that ends the process unhandled runs no exit code:
 * the CLI closes on SIGINT and SIGTERM itself; an API caller does likewise.
 * A step still running is waited for (close takes the step's lock), so such
 * an exit takes up to the rest of that step.
 * A session lost without close() is still collected: its native side is
 * closed then (its file removed), or at exit, whichever comes first.
 */
const OPEN = new Set<OpenNative>();
/** A session's native side, for the exit hook (a DPU session's changes as its steady step takes over). */
interface OpenNative { native: NativeSession }
/** A session lost without close(): its native side closed when it is collected; until then the exit hook holds it (a session collected just before exit had left its spill file). */
const COLLECTED = new FinalizationRegistry<OpenNative>((o) => { if (OPEN.delete(o)) o.native.close(); });
let exitHooked = false;
function closeAtExit(s: TrainingSession, native: NativeSession): OpenNative {
  const o = { native };
  OPEN.add(o);
  COLLECTED.register(s, o, o);
  if (!exitHooked) {
    exitHooked = true;
    process.on('exit', () => { for (const x of [...OPEN]) x.native.close(); });
  }
  return o;
}
