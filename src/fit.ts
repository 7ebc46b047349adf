// fit: the largest model of a family that has a feasible plan on a machine
// (optionally: that still trains at >= minTflops predicted). Presets are sized
// by building their training graphs (symbolic, no weights) and compiled from
// the largest down; then, when the family has a `layers` field, the largest
// feasible preset is deepened by bisection on its layer count, up to the next
// preset's size.

import { modelPresets } from '../compiler/import/dsl.js';
import { planStats } from '../compiler/report/stats.js';
import { compile, trainingGraph, type CompileOptions } from './compile.js';
import { UserError } from './diagnostics.js';

export interface FitOptions extends Omit<CompileOptions, 'preset' | 'config'> { minTflops?: number }

interface Trial { preset: string; config?: Record<string, number>; params: number; feasible: boolean; why?: string; tflops?: number; stepSeconds?: number; modelConfig?: Record<string, unknown> }

export interface FitResult {
  params: number;
  model: { source: string; preset: string; overrides: Record<string, number>; config: Record<string, unknown> } | null;
  predicted: { stepSeconds: number; tflops: number } | null;
  tried: Trial[];
}

async function attempt(opts: FitOptions, preset: string, config?: Record<string, number>): Promise<Trial> {
  try {
    const plan = await compile({ ...opts, preset, config });
    const s = planStats(plan);
    const base = { preset, config, params: plan.graph.paramCount, tflops: s.predicted.tflops, stepSeconds: plan.predicted.stepSeconds, modelConfig: { ...plan.model.config } };
    if (opts.minTflops !== undefined && s.predicted.tflops < opts.minTflops) return { ...base, feasible: false, why: `predicted ${s.predicted.tflops.toFixed(2)} TFLOPS < ${opts.minTflops}` };
    return { ...base, feasible: true };
  } catch (e) {
    if (!(e instanceof UserError)) throw e;
    const { graph } = await trainingGraph({ ...opts, preset, config });
    return { preset, config, params: graph.paramCount, feasible: false, why: e.message };
  }
}

export async function fit(opts: FitOptions): Promise<FitResult> {
  const sized: { preset: string; params: number; layers?: number }[] = [];
  for (const preset of await modelPresets(opts.model)) {
    const { graph, config } = await trainingGraph({ ...opts, preset });
    sized.push({ preset, params: graph.paramCount, layers: typeof config.layers === 'number' ? config.layers : undefined });
  }
  sized.sort((a, b) => b.params - a.params || a.preset.localeCompare(b.preset));
  const tried: Trial[] = [];
  let best: Trial | undefined, above: { params: number } | undefined;
  for (const s of sized) {
    const t = await attempt(opts, s.preset);
    tried.push(t);
    if (t.feasible) { best = t; break; }
    above = s;
  }
  const layers = best ? sized.find((s) => s.preset === best!.preset)?.layers : undefined;
  if (best && layers) {
    // deepen: the most layers that still fit, below the next preset's size
    let lo = layers, hi = Math.max(layers + 1, Math.ceil(layers * (above ? above.params / best.params : 4)));
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      const t = await attempt(opts, best.preset, { layers: mid });
      tried.push(t);
      if (t.feasible) { lo = mid; best = t; } else hi = mid;
    }
  }
  if (!best) return { params: 0, model: null, predicted: null, tried };
  return {
    params: best.params,
    model: { source: opts.model, preset: best.preset, overrides: best.config ?? {}, config: best.modelConfig ?? {} },
    predicted: { stepSeconds: best.stepSeconds!, tflops: best.tflops! },
    tried,
  };
}
