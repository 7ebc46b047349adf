// fit: the largest model of a family that has a feasible plan on a machine
// (optionally: that still trains at >= minTflops predicted). Presets are sized
// by building their training graphs (symbolic, no weights) and compiled from
// the largest down; then, when the family has a `layers` field, the largest
// feasible preset is deepened by bisection on its layer count (up to
// FIT_MAX_OPS_FACTOR, below). The first layer count tried is a guess from the capacity the
// best plan leaves free (divided by the state bytes of one layer); from there
// the search gallops outwards and bisects, so a fit compiles a handful of models,
// each as a probe (compile's first plan that fits: whether it fits, for less
// time), and the answer once more with every candidate for its predicted step
// and its plan, handed back (compile's plan, without the bound: fit does not report it; and of the
// whole model: compile's second try, the blocks in parts, needs that bound,
// so compile may place fit's answer faster than fit says).
// The deepening stops at FIT_MAX_OPS_FACTOR times the ops of the family's
// largest preset: the compiler's tested scale. A narrow preset would otherwise
// be deepened to thousands of layers (gpt tiny, the largest preset fitting 50 MB
// of GPU, towards 8565 layers: one compile ran past 10 minutes and 9 GB).

import { modelPresets } from '../compiler/import/dsl.js';
import { tensorBytes } from '../compiler/ir/graph.js';
import type { Graph } from '../compiler/ir/types.js';
import type { Plan } from '../compiler/plan/types.js';
import { planTflops } from '../compiler/report/stats.js';
import { checkCompileOptions, compile, isOnnx, machineOf, trainingGraph, type CompileOptions } from './compile.js';
import { diag, UserError } from './diagnostics.js';

export interface FitOptions extends Omit<CompileOptions, 'preset' | 'config'> { minTflops?: number }

interface Trial {
  preset: string; config?: Record<string, number>; params: number; feasible: boolean; why?: string;
  /** the plan's predicted TFLOPS and step; a probe's (the first plan that fits) are at most the full compile's TFLOPS and at least its step */
  tflops?: number; stepSeconds?: number;
  /** compiled as a probe of whether it fits (CompileOptions.probe 'fits'), fitting or not */
  probe?: boolean;
  modelConfig?: Record<string, unknown>; freeBytes?: number; stateBytes?: number; gpuFreeBytes?: number; p16Bytes?: number;
}

/** How far fit deepens a preset: its training graph at most this many times the ops of the family's largest preset's (gpt: 4 x 7189, ~512 layers; the 120B GPT of scale.test.ts, 381 layers of gpt3-13b, has 21357). */
export const FIT_MAX_OPS_FACTOR = 4;

export interface FitResult {
  params: number;
  /** Set when the deepest model tried fits and the search stopped at the FIT_MAX_OPS_FACTOR limit (a deeper one may fit too). */
  layerLimit?: number;
  /** Set when the preset's `layers` field does not change the model (one more layer, the same graph): fit did not deepen it. */
  layersIdle?: boolean;
  model: { source: string; preset: string; overrides: Record<string, number>; config: Record<string, unknown> } | null;
  predicted: { stepSeconds: number; tflops: number } | null;
  /** The answer's plan: compile's own for it (probe 'step', whole blocks), the one `predicted` describes; not in `fit --json`. */
  plan: Plan | null;
  tried: Trial[];
}

/** A trial with the plan it compiled to, kept only for a full compile ('step') that fits: fit hands back its answer's. */
interface Compiled { trial: Trial; plan?: Plan }

/**
 * One model compiled as a probe (the first plan that fits: whether it fits is
 * the full compile's answer, for a fraction of its time), and again with every
 * candidate where the probe's TFLOPS are under minTflops (the fastest plan may
 * reach them).
 */
async function attempt(opts: FitOptions, preset: string, config?: Record<string, number>): Promise<Compiled> {
  let c = await compiled(opts, preset, config, 'fits');
  if (c.trial.feasible && opts.minTflops !== undefined && c.trial.tflops! < opts.minTflops) c = await compiled(opts, preset, config, 'step');
  return fastEnough(opts, c);
}

/** A trial that fits but is predicted under minTflops: not feasible, and why. */
function fastEnough(opts: FitOptions, c: Compiled): Compiled {
  const t = c.trial;
  if (!t.feasible || opts.minTflops === undefined || t.tflops! >= opts.minTflops) return c;
  return { trial: { ...t, feasible: false, why: `predicted ${t.tflops!.toFixed(2)} TFLOPS < ${opts.minTflops}` } };
}

/** One compile: feasible when it fits (a probe: compile's first plan that fits). */
async function compiled(opts: FitOptions, preset: string, config: Record<string, number> | undefined, probe: 'fits' | 'step'): Promise<Compiled> {
  try {
    const plan = await compile({ ...opts, preset, config, probe });
    const tflops = planTflops(plan);
    const freeBytes = (['gpu', 'cpu', 'nvme'] as const).reduce((sum, t) => sum + plan.tiers[t].capacityBytes - plan.tiers[t].peakBytes, 0);
    const stateBytes = tensorBytes(plan.graph, 'persistent');
    const gpuFreeBytes = plan.tiers.gpu.capacityBytes - plan.tiers.gpu.peakBytes;
    const p16Bytes = tensorBytes(plan.graph, 'param16');
    const base = { preset, config, params: plan.graph.paramCount, ...(probe === 'fits' ? { probe: true } : {}), tflops, stepSeconds: plan.predicted.stepSeconds, modelConfig: { ...plan.model.config }, freeBytes, stateBytes, gpuFreeBytes, p16Bytes };
    return { trial: { ...base, feasible: true }, ...(probe === 'step' ? { plan } : {}) };
  } catch (e) {
    if (!(e instanceof UserError)) throw e;
    const { graph } = await trainingGraph({ ...opts, preset, config });
    return { trial: { preset, config, params: graph.paramCount, ...(probe === 'fits' ? { probe: true } : {}), feasible: false, why: e.message } };
  }
}

/** A model fit tried, as its table prints it: the preset and its overrides (`gpt3-13b layers=46`). */
export const fitLabel = (preset: string, config?: Record<string, number>): string => `${preset}${Object.entries(config ?? {}).map(([k, v]) => ` ${k}=${v}`).join('')}`;

/**
 * The one line for a fit that found nothing (the CLI prints it and exits 2):
 * with minTflops, the fastest model that fits and its TFLOPS where one fits;
 * otherwise the smallest model tried and why it does not fit (what, and by
 * how many bytes).
 */
export function noFitMessage(opts: FitOptions, r: FitResult): string {
  const name = (t: Trial) => fitLabel(t.preset, t.config);
  const ran = r.tried.filter((t) => t.tflops !== undefined);
  if (opts.minTflops !== undefined && ran.length > 0) {
    const fastest = ran.reduce((a, b) => (b.tflops! > a.tflops! ? b : a));
    return `${opts.model}: no model of this family fits at ${opts.minTflops} TFLOPS or more: the fastest that fits, ${name(fastest)} (${fastest.params} parameters), is predicted at ${fastest.tflops!.toFixed(2)} TFLOPS; lower --min-tflops or raise a capacity`;
  }
  const smallest = r.tried.reduce((a, b) => (b.params < a.params ? b : a));
  return `${opts.model}: no preset fits, not even the smallest, ${name(smallest)} (${smallest.params} parameters): ${smallest.why ?? 'no plan'}`;
}

export async function fit(opts: FitOptions): Promise<FitResult> {
  // the machine first: an unknown or invalid profile, or a capacity of 0, is
  // the input's error, not each model's (it was printed as every preset's
  // "no fit" reason, exit 0)
  machineOf(opts);
  // (an ONNX file has one fixed size: nothing to search; type-checked as a DSL model it had failed as "binary")
  checkCompileOptions(opts);
  if (isOnnx(opts.model)) throw diag.usage(`fit takes a DSL model (.ts), whose presets it searches; ${opts.model} is an ONNX model of one fixed size: compile it instead`);
  const presets = await modelPresets(opts.model);
  const sized: { preset: string; params: number; ops: number; layers?: number }[] = [];
  for (const preset of presets) {
    const { graph, config } = await trainingGraph({ ...opts, preset });
    sized.push({ preset, params: graph.paramCount, ops: graph.ops.length, layers: typeof config.layers === 'number' ? config.layers : undefined });
  }
  sized.sort((a, b) => b.params - a.params || a.preset.localeCompare(b.preset));
  const tried: Trial[] = [];
  let best: Trial | undefined, bestPlan: Plan | undefined, above: { params: number } | undefined;
  for (const s of sized) {
    const { trial: t, plan } = await attempt(opts, s.preset);
    tried.push(t);
    if (t.feasible) { best = t; bestPlan = plan; break; }
    above = s;
  }
  const bestSized = best ? sized.find((s) => s.preset === best!.preset) : undefined;
  const layers = bestSized?.layers;
  let layerLimit: number | undefined;
  let layersIdle = false;
  if (best && bestSized && layers) {
    // (a `layers` field the model does not read: one more layer, and twice as
    // many, the same graph; fit had deepened it to the ops limit, answering a
    // model no larger than the preset)
    const deeper = await trainingGraph({ ...opts, preset: best.preset, config: { layers: layers + 1 } });
    const same = (g: Graph) => g.ops.length === bestSized.ops && g.paramCount === best!.params;
    if (same(deeper.graph) && same((await trainingGraph({ ...opts, preset: best.preset, config: { layers: 2 * layers } })).graph)) layersIdle = true;
    else {
      // deepen: the most layers that still fit, below the next preset's size
      // and within the ops limit
      const opsPerLayer = Math.max(1, deeper.graph.ops.length - bestSized.ops);
      const maxOps = FIT_MAX_OPS_FACTOR * Math.max(...sized.map((s) => s.ops));
      const limit = Math.max(layers, layers + Math.floor((maxOps - bestSized.ops) / opsPerLayer));
      // (below the next preset's size; the largest preset up to the ops limit: 4x its layers had capped it
      // silently below that, mlp wide at 15 layers where 17 fitted)
      const natural = above ? Math.max(layers + 1, Math.ceil(layers * (above.params / best.params))) : limit + 1;
      let lo = layers, hi = Math.min(limit + 1, natural);
      const probe = async (n: number) => {
        const { trial: t, plan } = await attempt(opts, best!.preset, { layers: n });
        tried.push(t);
        if (t.feasible) { lo = n; best = t; bestPlan = plan; } else hi = n;
        return t.feasible;
      };
      // guess: the free bytes of the best plan over the state bytes of one more
      // layer; with parameters kept on the GPU, no more than its GPU's free
      // bytes over one layer's half copies (gpt on a V100 at ZeRO-Offload's
      // setting: 46 layers of gpt3-13b, where the state's bytes alone guessed
      // 513 and thirteen probes came down from there)
      const layerBytes = tensorBytes(deeper.graph, 'persistent') - best.stateBytes!;
      const layerP16 = tensorBytes(deeper.graph, 'param16') - best.p16Bytes!;
      let room = layerBytes > 0 ? Math.floor(best.freeBytes! / layerBytes) : 1;
      if (opts.keepParamsOnGpu && layerP16 > 0) room = Math.min(room, Math.floor(best.gpuFreeBytes! / layerP16));
      const guess = layers + room;
      if (hi - lo > 1) {
        const first = Math.min(hi - 1, Math.max(lo + 1, guess));
        // gallop away from the guess until the answer is bracketed, then bisect
        if (await probe(first)) { for (let step = 1; hi - lo > 1 && lo + step < hi; step *= 2) if (!(await probe(lo + step))) break; }
        else { for (let step = 1; hi - lo > 1 && hi - step > lo; step *= 2) if (await probe(hi - step)) break; }
      }
      while (hi - lo > 1) await probe(Math.floor((lo + hi) / 2));
      if (lo === limit && (!above || limit + 1 < natural)) layerLimit = limit;
    }
  }
  if (!best) return { params: 0, model: null, predicted: null, plan: null, tried };
  // the answer's own plan, with every candidate (its step and TFLOPS as `compile` gives them)
  if (best.probe) {
    const probed = best;
    ({ trial: best, plan: bestPlan } = fastEnough(opts, await compiled(opts, probed.preset, probed.config, 'step')));
    tried.push(best);
    if (!best.feasible) throw diag.doesNotFit(`fit: ${probed.preset}${probed.config ? ` ${JSON.stringify(probed.config)}` : ''} fits as a probe but not compiled in full: ${best.why}; please report the model and profile`);
  }
  return {
    params: best.params,
    ...(layerLimit !== undefined ? { layerLimit } : {}),
    ...(layersIdle ? { layersIdle } : {}),
    model: { source: opts.model, preset: best.preset, overrides: best.config ?? {}, config: best.modelConfig ?? {} },
    predicted: { stepSeconds: best.stepSeconds!, tflops: best.tflops! },
    plan: bestPlan!,
    tried,
  };
}
