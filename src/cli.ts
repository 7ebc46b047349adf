// The command line: compile | report | run | fit | hw. Wires the public API to
// arguments and output; every user error ends as one line on stderr and exit 2.

import { dirname, resolve } from 'node:path';
import { checkDistinct, checkWritable, writeOutput } from './atomic-write.js';
import { BUILTIN_PROFILES, checkOverrides, withCapacities, type ProfileOverrides } from '../compiler/cost/profiles.js';
import type { AdamAttrs, Precision } from '../compiler/ir/types.js';
import { readPlan, writePlan } from '../compiler/plan/io.js';
import { dpuStats, planStats } from '../compiler/report/stats.js';
import { textReport, fmtBytes, lpStatusNote, dpuLine } from '../compiler/report/text.js';
import { capacityFlag, whatIf } from '../compiler/report/what-if.js';
import { STREAMS, type Plan } from '../compiler/plan/types.js';
import type { NativeSessionInfo } from '../runtime/binding.js';
import { compile, isOnnx, type CompileOptions } from './compile.js';
// the runtime (native addon, sessions) and calibration load only for `run` and `hw calibrate`,
// so that `compile`, `fit` and `report` start without them
import { simulate } from '../compiler/simulate/simulate.js';
import { chromeTraceBytes, type TraceStep } from '../compiler/simulate/trace.js';
import { fit, fitLabel as label, FIT_MAX_OPS_FACTOR, noFitMessage } from './fit.js';
import { diag, oneLine, UserError } from './diagnostics.js';
import { parseSize } from './sizes.js';
import { cleanupOnSignals } from './signals.js';
import { MAX_SP_RANKS } from '../compiler/lower/sequence-parallel.js';

const USAGE = `usage:
  tiercut compile MODEL [--preset P] [--hw NAME|FILE] [--gpu-mem SIZE] [--cpu-mem SIZE] [--nvme SIZE]
                  [--precision fp32|fp16|bf16] [--batch N] [--seq N] [--keep-params-on-gpu] [--dpu [--dpu-warmup N]]
                  [--freeze REGEX (ONNX initializers kept fixed)] [--optimizer adam|adamw] [--lr X] [--betas B1,B2]
                  [--eps X] [--weight-decay X] [--sp P] [--lp-time-limit SECONDS] [--config KEY=VALUE,...]
                  -o PLAN [--trace FILE.json]
  tiercut report PLAN [--json] [--gpu-mem SIZE] [--cpu-mem SIZE] [--nvme SIZE]
  tiercut run PLAN [--steps N] [--seed N] [--lr X] [--optimizer adam|adamw] [--betas B1,B2] [--eps X]
                  [--weight-decay X] [--data FILE.safetensors] [--weights FILE.safetensors]
                  [--save FILE.safetensors] [--spill-dir DIR] [--json] [--trace FILE.json]
                  [--nvme-queue-depth N] [--nvme-block-size SIZE] [--nvme-buffered] [--gpu-mem SIZE] [--cpu-mem SIZE] [--nvme SIZE]
  tiercut fit MODEL [--hw NAME|FILE] [--gpu-mem SIZE] [--cpu-mem SIZE] [--nvme SIZE] [--precision P]
                  [--batch N] [--seq N] [--keep-params-on-gpu] [--min-tflops X] [--json]
  tiercut hw list [--gpu-mem SIZE] [--cpu-mem SIZE] [--nvme SIZE]
  tiercut hw calibrate [-o FILE.json] [--spill-dir DIR] [--gpu-mem SIZE] [--cpu-mem SIZE] [--nvme SIZE] [--json]
SIZE: 64MB, 32GiB or plain bytes.`;

/** missing: options given last with no value after them (takeFlags names them: unknown, or needing a value). */
interface Args { positional: string[]; flags: Map<string, string>; missing: string[] }

const BOOLEAN_FLAGS = new Set(['--json', '--keep-params-on-gpu', '--dpu', '--nvme-buffered']);

function parseArgs(argv: string[]): Args {
  const positional: string[] = [], missing: string[] = [];
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-o' || a.startsWith('--')) {
      const eq = a.indexOf('=');
      if (a !== '-o' && eq > 0) {
        // (`--json=false` had counted as --json)
        if (BOOLEAN_FLAGS.has(a.slice(0, eq))) throw diag.usage(`${a.slice(0, eq)} takes no value, got '${a}'`);
        flags.set(a.slice(0, eq), a.slice(eq + 1));
        continue;
      }
      if (BOOLEAN_FLAGS.has(a)) { flags.set(a, 'true'); continue; }
      const v = argv[i + 1];
      // (`--save --json` had saved the checkpoint to a file named --json; a value that starts so is given as --save=--x)
      if (v === undefined || v.startsWith('--') || v === '-o') { missing.push(a); continue; }
      flags.set(a, v); i++;
      continue;
    }
    positional.push(a);
  }
  return { positional, flags, missing };
}

/**
 * Refuses an option the command does not take (`--gpu-mme`), then one given
 * last with no value (an unknown one was reported as needing a value), then
 * more than `positionals` arguments (`compile MODEL PRESET` had compiled the
 * first preset, `report A B` reported A alone).
 */
function takeFlags(args: Args, allowed: string[], positionals = 1): void {
  for (const k of [...args.flags.keys(), ...args.missing]) if (!allowed.includes(k)) throw diag.usage(`unknown option ${k}\n${USAGE}`);
  if (args.missing.length) throw diag.usage(`${args.missing[0]} needs a value\n${USAGE}`);
  if (args.positional.length > positionals) throw diag.usage(`unexpected argument '${args.positional[positionals]}' (see tiercut --help)`);
  // (`--weights "$UNSET"` had trained from a fresh init, `--save ""` failed after the run)
  for (const [k, v] of args.flags) if (v === '' && !BOOLEAN_FLAGS.has(k)) throw diag.usage(`${k}: expected a value, got an empty string`);
}

/** A decimal number as a flag's value may be written (no hex, no binary, no 'Infinity'). */
const DECIMAL = /^\s*[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?\s*$/i;
/** text's value where it is a finite decimal number (DECIMAL), else undefined. */
const decimal = (text: string): number | undefined => (DECIMAL.test(text) && Number.isFinite(Number(text)) ? Number(text) : undefined);

function num(args: Args, flag: string, opts: { integer?: boolean; min?: number } = {}): number | undefined {
  const v = args.flags.get(flag);
  if (v === undefined) return undefined;
  const n = decimal(v);
  // (a decimal number only: '0x10' had been 16; a whole number exactly: 1e30 warm-up steps and 2^53 + 1 had been taken)
  if (n === undefined) throw diag.badNumber(flag, v);
  if ((opts.integer && !Number.isSafeInteger(n)) || (opts.min !== undefined && n < opts.min)) throw diag.badNumber(flag, v, `${opts.integer ? 'an integer' : 'a number'}${opts.min !== undefined ? ` >= ${opts.min}` : ''}`);
  return n;
}

function optimizerFlags(args: Args): Partial<AdamAttrs> {
  const o: { -readonly [K in keyof AdamAttrs]?: AdamAttrs[K] } = {};
  const kind = args.flags.get('--optimizer');
  if (kind !== undefined) {
    if (kind !== 'adam' && kind !== 'adamw') throw diag.usage(`--optimizer: expected adam or adamw, got '${kind}'`);
    o.adamw = kind === 'adamw';
    // (without --weight-decay: the kind's default, torch.optim.AdamW's 0.01 or
    // Adam's 0; run had kept a plan's AdamW decay as Adam's L2 term)
    if (!args.flags.has('--weight-decay')) o.weightDecay = kind === 'adamw' ? 0.01 : 0;
  }
  const lr = num(args, '--lr', { min: 0 }); if (lr !== undefined) o.lr = lr;
  const eps = num(args, '--eps', { min: 0 }); if (eps !== undefined) o.eps = eps; // (above 0: checkOptimizer)
  const wd = num(args, '--weight-decay', { min: 0 }); if (wd !== undefined) o.weightDecay = wd;
  const betas = args.flags.get('--betas');
  if (betas !== undefined) {
    const raw = betas.split(','), parts = raw.map(Number);
    if (parts.length !== 2 || raw.some((b) => b.trim() === '') || parts.some((b) => !(b >= 0 && b < 1))) throw diag.usage(`--betas: expected B1,B2 with 0 <= B < 1, got '${betas}'`);
    o.beta1 = parts[0]; o.beta2 = parts[1];
  }
  return o;
}

const OPT_FLAGS = ['--optimizer', '--lr', '--betas', '--eps', '--weight-decay'];

function compileOptions(args: Args, model: string, defaultPrecision: Precision): CompileOptions {
  const precision = args.flags.get('--precision') ?? defaultPrecision;
  if (!['fp32', 'fp16', 'bf16'].includes(precision)) throw diag.usage(`--precision: expected fp32, fp16 or bf16, got '${precision}'`);
  return {
    model, preset: args.flags.get('--preset'), hw: args.flags.get('--hw'), ...capacityFlags(args),
    precision: precision as Precision, batch: num(args, '--batch', { integer: true, min: 1 }), seq: num(args, '--seq', { integer: true, min: 1 }),
    optimizer: optimizerFlags(args), keepParamsOnGpu: args.flags.has('--keep-params-on-gpu'),
    ...dpuFlags(args),
  };
}

/** --dpu [--dpu-warmup N]: delayed parameter update after N plain steps (default 40, as ZeRO-Offload). */
function dpuFlags(args: Args): { dpuWarmupSteps?: number } {
  const warm = num(args, '--dpu-warmup', { integer: true, min: 0 });
  if (!args.flags.has('--dpu')) {
    if (warm !== undefined) throw diag.usage('--dpu-warmup needs --dpu');
    return {};
  }
  return { dpuWarmupSteps: warm ?? 40 };
}

/** What-if capacities, on every command: compile and fit plan for them, report and run check a plan against them, hw list shows the profiles with them and hw calibrate writes them into the profile it measures. */
const CAPACITY_FLAGS = ['--gpu-mem', '--cpu-mem', '--nvme'];

/** --gpu-mem, --cpu-mem, --nvme: capacities in place of the profile's (SIZE each). */
function capacityFlags(args: Args): ProfileOverrides {
  const size = (f: string) => (args.flags.has(f) ? parseSize(f, args.flags.get(f)!) : undefined);
  return { gpuMemBytes: size('--gpu-mem'), cpuMemBytes: size('--cpu-mem'), nvmeBytes: size('--nvme') };
}

const MACHINE_FLAGS = ['--hw', ...CAPACITY_FLAGS, '--precision', '--batch', '--seq', '--keep-params-on-gpu'];

/** A parameter count in the unit that keeps it readable: 124.44 M, 13.00 B, 1.01 T (a tiny model's had read "0.00 B"). */
function fmtParams(n: number): string {
  const [unit, scale] = n >= 1e12 ? ['T', 1e12] : n >= 1e9 ? ['B', 1e9] : n >= 1e6 ? ['M', 1e6] : n >= 1e3 ? ['K', 1e3] : ['', 1];
  return scale === 1 ? String(n) : `${(n / scale).toFixed(2)} ${unit}`;
}

async function cmdFit(args: Args): Promise<void> {
  takeFlags(args, [...MACHINE_FLAGS, '--min-tflops', '--json', ...OPT_FLAGS]);
  const model = args.positional[0];
  if (!model) throw diag.usage(`fit needs MODEL\n${USAGE}`);
  const fitOpts = { ...compileOptions(args, model, 'fp16'), minTflops: num(args, '--min-tflops', { min: 0 }) };
  const r = await fit(fitOpts);
  // nothing fits: the table (or the JSON, model null) on stdout, then one line saying why and exit 2
  const nothing = () => { if (!r.model) throw diag.doesNotFit(noFitMessage(fitOpts, r)); };
  // (the answer's plan stays out of the JSON: `tiercut compile` with its preset and overrides writes it)
  if (args.flags.has('--json')) { process.stdout.write(JSON.stringify({ ...r, plan: undefined }) + '\n'); nothing(); return; }
  for (const t of r.tried) process.stdout.write(`${t.feasible ? 'fits    ' : 'no fit  '} ${label(t.preset, t.config).padEnd(24)} ${fmtParams(t.params).padStart(9)} params${t.tflops !== undefined ? `  ${t.probe ? '>= ' : ''}${t.tflops.toFixed(2)} TFLOPS${t.probe ? ' (probe)' : ''}` : ''}${t.why ? `  (${t.why})` : ''}\n`);
  nothing();
  process.stdout.write(`largest feasible: ${label(r.model!.preset, r.model!.overrides)} (${fmtParams(r.params)} parameters, ${fitOpts.precision}), predicted step ${r.predicted!.stepSeconds.toFixed(3)} s, ${r.predicted!.tflops.toFixed(2)} TFLOPS\n`);
  process.stdout.write(`compile it: ${compileCommand(args, r.model!.source, r.model!.preset, r.model!.overrides)}\n`);
  if (r.layerLimit !== undefined) process.stdout.write(`(fit deepens a preset to at most ${r.layerLimit} layers here: ${FIT_MAX_OPS_FACTOR}x the ops of this family's largest preset; a deeper model may fit too)\n`);
  if (r.layersIdle) process.stdout.write(`(this family's 'layers' field does not change the model: one more layer builds the same graph, so fit did not deepen the largest preset that fits)\n`);
  // (a family whose presets name no layer count is not deepened: it had gone unsaid)
  if (typeof r.model!.config.layers !== 'number') process.stdout.write(`(this family's presets have no numeric 'layers' field: fit compared its presets and did not deepen the largest that fits)\n`);
}

/**
 * --config KEY=VALUE[,KEY=VALUE...]: numeric fields of the preset overridden
 * (fit's answer deepened, e.g. layers=46: it had no way to be compiled from
 * the command line). Each value a finite number; the model checks the keys
 * (a preset without that numeric field is refused, naming it).
 */
function configFlag(args: Args): Record<string, number> | undefined {
  const v = args.flags.get('--config');
  if (v === undefined) return undefined;
  const config: Record<string, number> = {};
  for (const item of v.split(',')) {
    const eq = item.indexOf('=');
    const key = item.slice(0, eq).trim(), text = item.slice(eq + 1).trim();
    if (eq < 0 || key === '' || text === '') throw diag.usage(`--config: expected KEY=VALUE[,KEY=VALUE...] (e.g. layers=46), got '${item}'`);
    const n = decimal(text);
    // (a decimal number, as every number flag: '0x10' is not 16; whole numbers exactly)
    if (n === undefined || (Number.isInteger(n) && !Number.isSafeInteger(n))) throw diag.usage(`--config: ${key}: '${text}' is not a finite decimal number`);
    if (Object.prototype.hasOwnProperty.call(config, key)) throw diag.usage(`--config: ${key} is given twice`);
    config[key] = n;
  }
  return config;
}

/** The `tiercut compile` line for fit's answer: its preset and overrides, and the machine and optimizer flags fit was given (fit's own dropped). */
function compileCommand(args: Args, model: string, preset: string, overrides: Record<string, number>): string {
  const quote = (a: string) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`);
  const words = ['tiercut', 'compile', model, '--preset', preset];
  const config = Object.entries(overrides).map(([k, v]) => `${k}=${v}`).join(',');
  if (config) words.push('--config', config);
  // (fit's default precision is fp16, compile's fp32: always said)
  if (!args.flags.has('--precision')) words.push('--precision', 'fp16');
  for (const [k, v] of args.flags) {
    if (k === '--min-tflops' || k === '--json') continue;
    words.push(k);
    if (!BOOLEAN_FLAGS.has(k)) words.push(v);
  }
  words.push('-o', 'plan.json');
  return words.map(quote).join(' ');
}

/** --freeze REGEX: ONNX initializers whose name matches get no gradient and no update. */
function freezeFlag(args: Args): RegExp | undefined {
  const v = args.flags.get('--freeze');
  if (v === undefined) return undefined;
  try { return new RegExp(v); } catch (e) { throw diag.usage(`--freeze: '${v}' is not a regular expression (${(e as Error).message})`); }
}

/** --sp P: sequence parallelism over P ranks (1: none). */
function spFlag(args: Args): number | undefined {
  const v = args.flags.get('--sp');
  if (v === undefined) return undefined;
  const n = Number(v);
  // (decimal digits only, as every other count: 0x2 and 2e0 had been 2 ranks)
  if (!/^\s*\d+\s*$/.test(v) || !Number.isInteger(n) || n < 1 || n > MAX_SP_RANKS) throw diag.spRanks(`--sp: expected a whole number of ranks from 1 to ${MAX_SP_RANKS}, got '${v}'`);
  return n;
}

async function cmdCompile(args: Args): Promise<void> {
  takeFlags(args, ['--preset', '--config', '-o', '--freeze', '--dpu', '--dpu-warmup', '--trace', '--sp', '--lp-time-limit', ...MACHINE_FLAGS, ...OPT_FLAGS]);
  const model = args.positional[0];
  const out = args.flags.get('-o');
  const sp = spFlag(args);
  if (!model || !out) throw diag.usage(`compile needs MODEL and -o PLAN\n${USAGE}`);
  // (a profile file given as --hw had been overwritten by -o or --trace: a calibration lost)
  const hw = args.flags.get('--hw');
  checkDistinct([['MODEL', model], ['-o PLAN', out], ['--trace', args.flags.get('--trace')], ['--hw', hw !== undefined && !(hw in BUILTIN_PROFILES) ? hw : undefined]]);
  // (a path that cannot take the plan or the trace fails now, not after the compile: the trace's had failed with the plan written)
  checkWritable(out, 'the plan');
  if (args.flags.has('--trace')) checkWritable(args.flags.get('--trace')!, 'the trace');
  const lpTimeLimitSeconds = num(args, '--lp-time-limit');
  if (lpTimeLimitSeconds !== undefined && lpTimeLimitSeconds <= 0) throw diag.usage(`--lp-time-limit: expected a number of seconds > 0, got ${args.flags.get('--lp-time-limit')}`);
  const config = configFlag(args);
  const compiled = await compile({ ...compileOptions(args, model, 'fp32'), freeze: freezeFlag(args), ...(config ? { config } : {}), ...(sp !== undefined ? { sp } : {}), ...(lpTimeLimitSeconds !== undefined ? { lpTimeLimitSeconds } : {}), note });
  // (an ONNX model is read again at run time, from wherever `run` is: its path absolute, as `run` looks beside the plan too)
  const plan = isOnnx(model) ? { ...compiled, model: { ...compiled.model, source: resolve(model) } } : compiled;
  writePlan(out, plan);
  const traceFile = args.flags.get('--trace');
  if (traceFile !== undefined) {
    const sim = simulate(plan.graph, plan.placement, plan.buffers, plan.instructions, plan.hardware);
    afterWritten(`the plan ${out}`, () => writeOutput(traceFile, chromeTraceBytes([{ step: 1, plan, startSeconds: sim.start, endSeconds: sim.end }], `tiercut predicted: ${out}`,
      { kind: 'predicted', plan: out, hardware: plan.hardware.name, stepSeconds: sim.stepSeconds }), 'the trace'));
  }
  if (plan.lpStatus !== undefined) note(lpStatusNote(plan.lpStatus, plan.placement.method, plan.bound !== undefined));
  if (plan.dpu?.declined) note(dpuLine(dpuStats(plan.dpu), plan.predicted.stepSeconds));
  const spNote = plan.sp ? `; sequence parallel: ${plan.sp.ranks} ranks of ${plan.sp.seq / plan.sp.ranks} tokens (per rank)` : '';
  process.stdout.write(`wrote ${out}: ${plan.graph.ops.length} ops, ${plan.instructions.length} instructions; gpu peak ${fmtBytes(plan.tiers.gpu.peakBytes)} of ${fmtBytes(plan.tiers.gpu.capacityBytes)}, predicted step ${(plan.predicted.stepSeconds * 1e3).toFixed(3)} ms${spNote}\n`);
}

function cmdReport(args: Args): void {
  takeFlags(args, ['--json', ...CAPACITY_FLAGS]);
  const file = args.positional[0];
  if (!file) throw diag.usage(`report needs PLAN\n${USAGE}`);
  const plan = readPlan(file);
  const s = planStats(plan, whatIf(plan, capacityFlags(args)));
  process.stdout.write(args.flags.has('--json') ? JSON.stringify(s) + '\n' : textReport(s) + '\n');
}

async function cmdRun(args: Args): Promise<void> {
  const { fileData, syntheticData } = await import('../runtime/data.js');
  const { TrainingSession, existingModelFiles } = await import('../runtime/session.js');
  takeFlags(args, ['--steps', '--seed', '--json', '--data', '--weights', '--save', '--spill-dir', '--trace', '--nvme-queue-depth', '--nvme-block-size', '--nvme-buffered', ...CAPACITY_FLAGS, ...OPT_FLAGS]);
  const file = args.positional[0];
  if (!file) throw diag.usage(`run needs PLAN\n${USAGE}`);
  const steps = num(args, '--steps', { integer: true, min: 1 }) ?? 10;
  const seed = num(args, '--seed', { integer: true, min: 0 }) ?? 0; // (below 2^32: TrainingSession)
  const json = args.flags.has('--json');
  const plan = readPlan(file);
  // (a plan's arenas are fixed when it is compiled: the capacities given can only be checked, before anything is allocated)
  const w = whatIf(plan, capacityFlags(args));
  if (w && !w.fits) throw diag.doesNotFit(`${file}: does not fit the capacities given: ${w.over.map((o) => `its ${o.step === 'steady' ? 'DPU steady step\'s ' : ''}${o.tier} arena needs ${fmtBytes(o.peakBytes)}${o.ringBytes ? ` and ${fmtBytes(o.ringBytes)} of ring buffers beside it` : ''}, ${capacityFlag(o.tier)} gives ${fmtBytes(o.capacityBytes)} (short by ${fmtBytes(o.overBytes)})`).join('; ')}; compile it again with them`);
  // (the outputs come after every step: a path that cannot take them fails now, not after the run)
  // (the plan's model, which an ONNX plan reads its weights from, had been overwritten by --save or --trace:
  // where run may find it, as the session looks, the path as the plan has it, then beside the plan)
  checkDistinct([['PLAN', file], ['--data', args.flags.get('--data')], ['--save', args.flags.get('--save')], ['--trace', args.flags.get('--trace')],
    ...existingModelFiles(plan, dirname(file)).map((f) => ["the plan's model", f] as const)]);
  checkDistinct([['--weights', args.flags.get('--weights')], ['--trace', args.flags.get('--trace')]]);
  if (args.flags.has('--save')) checkWritable(args.flags.get('--save')!, 'the checkpoint');
  if (args.flags.has('--trace')) checkWritable(args.flags.get('--trace')!, 'the trace');
  if (plan.sp) return runSequenceParallel(args, file, plan, steps, seed, json);
  const data = args.flags.has('--data') ? fileData(plan.graph, args.flags.get('--data')!, { steps, note }) : syntheticData(plan.graph, seed);
  const traceFile = args.flags.get('--trace');
  const blockBytes = args.flags.has('--nvme-block-size') ? parseSize('--nvme-block-size', args.flags.get('--nvme-block-size')!) : undefined;
  const queueDepth = num(args, '--nvme-queue-depth', { integer: true, min: 1 }); // (ranges: TrainingSession's checkSessionOptions)
  const nvme = { ...(queueDepth !== undefined ? { queueDepth } : {}), ...(blockBytes !== undefined ? { blockBytes } : {}), ...(args.flags.has('--nvme-buffered') ? { direct: false } : {}) };
  // (the session's spill file is made, and its initial state written, as it is constructed: a signal then must clean up too)
  let session: InstanceType<typeof TrainingSession> | undefined;
  const release = cleanupOnSignals(() => session?.close());
  try {
    session = new TrainingSession(plan, { seed, weightsFile: args.flags.get('--weights'), planDir: dirname(file), optimizer: optimizerFlags(args), spillDir: args.flags.get('--spill-dir'), nvme, trace: traceFile !== undefined });
    noteWeights(args, session.unusedWeights);
    const nvmeNote = session.info().nvmeNote;
    if (nvmeNote && plan.tiers.nvme.peakBytes > 0 && !args.flags.has('--nvme-buffered')) note(`nvme tier: ${nvmeNote}`);
    const traced: TraceStep[] = [];
    let total = 0;
    const busy = [0, 0, 0, 0, 0, 0];
    const bytes = { h2d: 0, d2h: 0, nvmeRead: 0, nvmeWrite: 0 };
    for (let k = 1; k <= steps; k++) {
      const r = await session.step(k, data(k));
      if (r.stats.trace) traced.push({ step: k, plan: session.current, startSeconds: r.stats.trace.startSeconds, endSeconds: r.stats.trace.endSeconds });
      total += r.seconds;
      r.stats.streamBusySeconds.forEach((b, i) => { busy[i] += b; });
      bytes.h2d += r.stats.bytes.h2d; bytes.d2h += r.stats.bytes.d2h; bytes.nvmeRead += r.stats.bytes.nvmeRead; bytes.nvmeWrite += r.stats.bytes.nvmeWrite;
      if (json) process.stdout.write(JSON.stringify({ step: k, loss: r.loss, seconds: r.seconds, busiestStreamSeconds: Math.max(...r.stats.streamBusySeconds) }) + '\n');
      else process.stdout.write(`step ${String(k).padStart(4)}  loss ${r.loss.toFixed(4)}  ${(r.seconds * 1e3).toFixed(1)} ms\n`);
    }
    if (args.flags.has('--save')) await session.saveCheckpoint(args.flags.get('--save')!, steps);
    const io = session.info();  // after the steps: the edge-read count covers them
    if (traceFile !== undefined) {
      const write = () => writeOutput(traceFile, chromeTraceBytes(traced, `tiercut run: ${file}`, { kind: 'measured', plan: file, steps }), 'the trace');
      if (args.flags.has('--save')) afterWritten(`the checkpoint ${args.flags.get('--save')}`, write); else write();
    }
    const mem = session.memory();
    // (a DPU run's peaks are the larger of its warm-up's and its steady step's, planned as measured)
    const ran = session.current === plan ? [plan] : [plan, session.current];
    const planPeakBytes = Object.fromEntries((['gpu', 'cpu', 'nvme'] as const).map((t) => [t, Math.max(...ran.map((p) => p.predicted.peakBytes[t]))])) as Plan['predicted']['peakBytes'];
    // the planned per-step numbers as the steps ran them: a DPU run's warm-up steps
    // the plain plan's, the rest the steady step's (the steady step's alone had
    // been set beside means over both)
    const plainSteps = session.current === plan ? steps : Math.min(steps, plan.dpu?.warmupSteps ?? steps);
    const planned = (f: (p: Plan) => number) => (plainSteps * f(plan) + (steps - plainSteps) * f(session!.current)) / steps;
    const summary = {
      steps, meanStepSeconds: total / steps, predictedStepSeconds: planned((p) => p.predicted.stepSeconds),
      peakBytes: mem.peakBytes, planPeakBytes, peakLiveBytes: mem.peakLiveBytes,
      streamBusySeconds: Object.fromEntries(['gpu', 'cpu', 'h2d', 'd2h', 'nvmeRead', 'nvmeWrite'].map((s, i) => [s, busy[i] / steps])),
      predictedStreamBusySeconds: Object.fromEntries(STREAMS.map((k) => [k, planned((p) => p.predicted.streamBusySeconds[k])])),
      bytesPerStep: { h2d: bytes.h2d / steps, d2h: bytes.d2h / steps, nvmeRead: bytes.nvmeRead / steps, nvmeWrite: bytes.nvmeWrite / steps },
      plannedBytesPerStep: { h2d: planned((p) => p.traffic.h2dBytes), d2h: planned((p) => p.traffic.d2hBytes), nvmeRead: planned((p) => p.traffic.nvmeReadBytes), nvmeWrite: planned((p) => p.traffic.nvmeWriteBytes) },
      nvme: nvmeSummary(io),
    };
    if (json) process.stdout.write(JSON.stringify({ summary }) + '\n');
    else {
      process.stdout.write(`peak bytes: gpu ${fmtBytes(mem.peakBytes.gpu)} (plan ${fmtBytes(planPeakBytes.gpu)}), cpu ${fmtBytes(mem.peakBytes.cpu)} (plan ${fmtBytes(planPeakBytes.cpu)}); mean step ${(summary.meanStepSeconds * 1e3).toFixed(1)} ms\n`);
      if (summary.nvme) process.stdout.write(nvmeLine(summary.nvme));
    }
  } finally {
    session?.close();
    release();
  }
}

/** How the nvme tier was served (null without one): run's summary.nvme. */
function nvmeSummary(io: NativeSessionInfo) {
  return io.nvmeFile === '' ? null : {
    backend: io.nvmeBackend, direct: io.nvmeDirect, queueDepth: io.nvmeQueueDepth, blockBytes: io.nvmeBlockBytes,
    edgeReads: io.nvmeEdgeReads, ios: io.nvmeIos, mergedChunks: io.nvmeMergedChunks, note: io.nvmeNote,
  };
}
function nvmeLine(n: NonNullable<ReturnType<typeof nvmeSummary>>): string {
  return `nvme tier: ${n.backend}, ${n.direct ? 'O_DIRECT' : 'buffered'}, queue depth ${n.queueDepth}, blocks ${fmtBytes(n.blockBytes)}, ${n.edgeReads} edge-block reads, ${n.ios} I/Os (${n.mergedChunks} requests merged into the one before)\n`;
}

/** A second output's write, after `first` was written: its failure says so (it had said only that nothing was written). */
function afterWritten(first: string, write: () => void): void {
  try { write(); } catch (e) {
    if (e instanceof UserError) throw new UserError(e.code, e.message.replace(/; nothing was written$/, `; nothing of it was written (${first} was)`));
    throw e;
  }
}

/** One line on stderr that is not an error. */
const note = (message: string) => { process.stderr.write(`tiercut: note: ${message}\n`); };

/** The notes --weights takes: a checkpoint holds no optimizer state, and its tensors no parameter took (they had been ignored without a word). */
function noteWeights(args: Args, unused: readonly string[]): void {
  // (a resumed run had restarted Adam without a word: its moments and bias correction from zero)
  if (args.flags.has('--weights')) note(`--weights: parameters only; Adam's moments and its step count start from zero (a checkpoint holds no optimizer state)`);
  if (!unused.length) return;
  const many = unused.length > 1;
  note(`--weights: ${unused.length} tensor${many ? 's' : ''} of ${args.flags.get('--weights')} ${many ? 'are' : 'is'} not the model's and ${many ? 'were' : 'was'} not loaded (${unused.slice(0, 3).map((n) => `'${oneLine(n)}'`).join(', ')}${unused.length > 3 ? ', …' : ''})`);
}

/** `run` on a plan made with --sp: P rank sessions (threads) stepped together; the loss is the mean of the ranks'. */
async function runSequenceParallel(args: Args, file: string, plan: Plan, steps: number, seed: number, json: boolean): Promise<void> {
  const { fileData, syntheticData, spFullGraph } = await import('../runtime/data.js');
  const { SequenceParallelSession } = await import('../runtime/sp-session.js');
  for (const f of ['--trace', '--nvme-queue-depth', '--nvme-block-size', '--nvme-buffered']) if (args.flags.has(f)) throw diag.usage(`${f} is not supported with a sequence-parallel plan yet`);
  const full = spFullGraph(plan);
  const data = args.flags.has('--data') ? fileData(full, args.flags.get('--data')!, { steps, note }) : syntheticData(full, seed);
  let session: InstanceType<typeof SequenceParallelSession> | undefined;
  const release = cleanupOnSignals(() => session?.close());
  try {
    session = new SequenceParallelSession(plan, data, { seed, weightsFile: args.flags.get('--weights'), planDir: dirname(file), optimizer: optimizerFlags(args), spillDir: args.flags.get('--spill-dir') });
    noteWeights(args, session.ranks[0]?.unusedWeights ?? []);
    // (rank 0's, as every rank's store is made alike: a refused O_DIRECT had gone unsaid)
    const nvmeNote = session.ranks[0]?.info().nvmeNote;
    if (nvmeNote && plan.tiers.nvme.peakBytes > 0) note(`nvme tier (each rank): ${nvmeNote}`);
    const P = plan.sp!.ranks;
    let total = 0;
    const sent = new Array<number>(P).fill(0), workspace = new Array<number>(P).fill(0);
    for (let k = 1; k <= steps; k++) {
      const r = await session.step(k);
      total += r.seconds;
      r.stats.forEach((st, i) => { sent[i] += st.bytes.ringSent; workspace[i] = Math.max(workspace[i], st.ringWorkspaceBytes); });
      if (json) process.stdout.write(JSON.stringify({ step: k, loss: r.loss, rankLosses: r.rankLosses, seconds: r.seconds }) + '\n');
      else process.stdout.write(`step ${String(k).padStart(4)}  loss ${r.loss.toFixed(4)}  ${(r.seconds * 1e3).toFixed(1)} ms  (ranks ${r.rankLosses.map((l) => l.toFixed(4)).join(' ')})\n`);
    }
    if (args.flags.has('--save')) await session.saveCheckpoint(args.flags.get('--save')!, steps);
    const mem = session.memory();
    const summary = {
      steps, ranks: P, meanStepSeconds: total / steps, predictedStepSeconds: plan.predicted.stepSeconds, planPeakBytes: plan.predicted.peakBytes,
      perRank: mem.map((m, r) => ({
        rank: r, peakBytes: m.peakBytes, peakLiveBytes: m.peakLiveBytes, ringSentBytesPerStep: sent[r] / steps,
        ringWorkspaceBytes: workspace[r], plannedRingWorkspaceBytes: plan.sp!.perRank[r].ringWorkspaceBytes,
        plannedRingSentBytesPerStep: plan.sp!.perRank[r].ringSendBytes.attention + plan.sp!.perRank[r].ringSendBytes.allReduce,
        nvme: nvmeSummary(session!.ranks[r].info()),
      })),
    };
    if (json) process.stdout.write(JSON.stringify({ summary }) + '\n');
    else process.stdout.write(`${P} ranks; per rank peak bytes: gpu ${fmtBytes(mem[0].peakBytes.gpu)} (plan ${fmtBytes(plan.predicted.peakBytes.gpu)}), cpu ${fmtBytes(mem[0].peakBytes.cpu)} (plan ${fmtBytes(plan.predicted.peakBytes.cpu)}); ring sent per step ${fmtBytes(summary.perRank[0].ringSentBytesPerStep)} (plan ${fmtBytes(summary.perRank[0].plannedRingSentBytesPerStep)}); mean step ${(summary.meanStepSeconds * 1e3).toFixed(1)} ms\n`);
    if (!json && summary.perRank[0].nvme) process.stdout.write(`rank 0's ${nvmeLine(summary.perRank[0].nvme)}`);
  } finally {
    session?.close();
    release();
  }
}

async function cmdHw(args: Args): Promise<void> {
  if (args.positional[0] === 'calibrate') {
    takeFlags(args, ['-o', '--spill-dir', '--json', ...CAPACITY_FLAGS]);
    const over = capacityFlags(args);
    checkOverrides(over); // (before the measurements)
    if (args.flags.has('-o')) checkWritable(args.flags.get('-o')!, 'the profile');
    const { calibrate, removeCalibrationFiles } = await import('./calibrate.js');
    const release = cleanupOnSignals(removeCalibrationFiles);
    let measured: Awaited<ReturnType<typeof calibrate>>;
    try { measured = await calibrate({ spillDir: args.flags.get('--spill-dir') }); } finally { release(); }
    // the capacities given stand in for the measured ones (this machine's memory, the spill directory's free bytes) in the profile written
    const c = { ...measured, profile: withCapacities(measured.profile, over) };
    const out = args.flags.get('-o');
    if (out !== undefined) writeJson(out, c.profile, 'the profile');
    const m = c.measured, gb = (x: number) => `${(x / 1e9).toFixed(2)} GB/s`, us = (s: number) => `${(s * 1e6).toFixed(1)} µs`;
    if (args.flags.has('--json') || out === undefined) process.stdout.write(JSON.stringify(out === undefined ? c.profile : c, null, out === undefined ? 2 : 0) + '\n');
    // (with --json, stdout is the JSON alone; the summary goes to stderr)
    if (out !== undefined) (args.flags.has('--json') ? process.stderr : process.stdout).write(`wrote ${out}: matmul ${(m.matmulFlops / 1e9).toFixed(2)} GFLOPS, triad ${gb(m.triadBytesPerSec)}, memcpy ${gb(m.copyBytesPerSec)}, Adam ${(m.adamParamsPerSec / 1e6).toFixed(0)} M params/s, nvme read ${gb(m.nvmeReadBytesPerSec)} write ${gb(m.nvmeWriteBytesPerSec)}${m.nvmeDirect ? ' (O_DIRECT' : ` (${m.nvmeNote}`}, ${m.nvmeBackend}), nvme request latency read ${us(m.nvmeReadLatencySeconds)} write ${us(m.nvmeWriteLatencySeconds)} (both directions at once; 4 KiB alone: read ${us(m.nvmeReadAloneSeconds)} write ${us(m.nvmeWriteAloneSeconds)}), nvme batch cost per further request read ${us(m.nvmeReadBatchRequestSeconds)} write ${us(m.nvmeWriteBatchRequestSeconds)} (batches of ${m.nvmeBatch.sizes.join('/')}: read ${m.nvmeBatch.readSeconds.map((s) => (s * 1e6).toFixed(0)).join('/')} µs, write ${m.nvmeBatch.writeSeconds.map((s) => (s * 1e6).toFixed(0)).join('/')} µs), executor per instruction ${(m.executor.instructionSeconds * 1e6).toFixed(3)} µs wake-up ${us(m.executor.wakeSeconds)} step ${us(m.executor.stepSeconds)}, ${Object.keys(m.kernels).length} kernel kinds fitted\n`);
    return;
  }
  if (args.positional[0] !== 'list') throw diag.usage(`hw: expected 'list' or 'calibrate'\n${USAGE}`);
  takeFlags(args, CAPACITY_FLAGS);
  const over = capacityFlags(args);
  for (const p of Object.values(BUILTIN_PROFILES).map((b) => withCapacities(b, over))) {
    process.stdout.write(`${p.name.padEnd(10)}  gpu ${fmtBytes(p.gpu.capacityBytes).padStart(10)}  cpu ${fmtBytes(p.cpu.capacityBytes).padStart(10)}  nvme ${fmtBytes(p.nvme.capacityBytes).padStart(10)}  h2d ${(p.h2dBytesPerSec / 1e9).toFixed(0)} GB/s  ${p.description}\n`);
  }
}

export async function main(argv: string[]): Promise<number> {
  try {
    const [cmd, ...rest] = argv;
    if (!cmd || cmd === '--help' || cmd === 'help' || rest.includes('--help')) { process.stdout.write(USAGE + '\n'); return cmd ? 0 : 2; }
    const args = parseArgs(rest);
    switch (cmd) {
      case 'compile': await cmdCompile(args); break;
      case 'report': cmdReport(args); break;
      case 'run': await cmdRun(args); break;
      case 'hw': await cmdHw(args); break;
      case 'fit': await cmdFit(args); break;
      default: throw diag.usage(`unknown command '${cmd}'\n${USAGE}`);
    }
    return 0;
  } catch (e) {
    if (e instanceof UserError) { process.stderr.write(`tiercut: ${e.message} [${e.code}]\n`); return 2; }
    throw e;
  }
}

export function writeJson(file: string, value: unknown, what: string): void { writeOutput(file, JSON.stringify(value, null, 2) + '\n', what); }
