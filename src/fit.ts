// fit: the largest model of a family that has a feasible plan on a machine
// (optionally: that still trains at >= minTflops predicted). Presets are
// sized by building their training graphs (symbolic, no weights), then
// compiled from the largest down; the first feasible one is the answer.

import { modelPresets } from '../compiler/import/dsl.js';
import type { Plan } from '../compiler/plan/types.js';
import { planStats } from '../compiler/report/stats.js';
import { compile, trainingGraph, type CompileOptions } from './compile.js';
import { UserError } from './diagnostics.js';

export interface FitOptions extends Omit<CompileOptions, 'preset'> { minTflops?: number }

export interface FitResult {
  params: number;
  model: { source: string; preset: string; config: Record<string, unknown> } | null;
  predicted: { stepSeconds: number; tflops: number } | null;
  tried: { preset: string; params: number; feasible: boolean; why?: string; tflops?: number }[];
}

export async function fit(opts: FitOptions): Promise<FitResult> {
  const sized: { preset: string; params: number }[] = [];
  for (const preset of await modelPresets(opts.model)) {
    const { graph } = await trainingGraph({ ...opts, preset });
    sized.push({ preset, params: graph.paramCount });
  }
  sized.sort((a, b) => b.params - a.params || a.preset.localeCompare(b.preset));
  const tried: FitResult['tried'] = [];
  for (const { preset, params } of sized) {
    let plan: Plan;
    try {
      plan = await compile({ ...opts, preset });
    } catch (e) {
      if (!(e instanceof UserError)) throw e;
      tried.push({ preset, params, feasible: false, why: e.message });
      continue;
    }
    const s = planStats(plan);
    if (opts.minTflops !== undefined && s.predicted.tflops < opts.minTflops) {
      tried.push({ preset, params, feasible: false, why: `predicted ${s.predicted.tflops.toFixed(2)} TFLOPS < ${opts.minTflops}`, tflops: s.predicted.tflops });
      continue;
    }
    tried.push({ preset, params, feasible: true, tflops: s.predicted.tflops });
    return { params, model: { source: opts.model, preset, config: { ...plan.model.config } }, predicted: { stepSeconds: plan.predicted.stepSeconds, tflops: s.predicted.tflops }, tried };
  }
  return { params: 0, model: null, predicted: null, tried };
}
