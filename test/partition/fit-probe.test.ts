// fit's compiles (CompileOptions.probe): 'fits' answers whether a model fits
// exactly as the full compile does, with a plan that verifies and is no faster;
// 'step' is the full compile's placement and step without the bound. Checked
// across the edge of what fits (GPT tiny in fp16 with no NVMe: too little CPU,
// too little GPU, then enough) and on the other paths (state on NVMe, BERT).
import { describe, it, expect } from 'vitest';
import { compile, type CompileOptions } from '../../src/compile.js';
import { UserError } from '../../src/diagnostics.js';
import { verifyPlan } from '../../compiler/simulate/verify-plan.js';

const tiny = { model: 'models/gpt.ts', preset: 'tiny', precision: 'fp16' as const, nvmeBytes: 0 };
const CASES: [string, CompileOptions][] = [
  ...[200e3, 300e3, 400e3].flatMap((gpu) => [250e3, 300e3, 350e3].map((cpu): [string, CompileOptions] => [`gpt tiny fp16, gpu ${gpu / 1e3} kB, cpu ${cpu / 1e3} kB`, { ...tiny, gpuMemBytes: gpu, cpuMemBytes: cpu }])),
  ['gpt tiny fp16, state on NVMe', { model: 'models/gpt.ts', preset: 'tiny', precision: 'fp16', gpuMemBytes: 400000, cpuMemBytes: 200000 }],
  ['bert tiny, 300 kB GPU', { model: 'models/bert.ts', preset: 'tiny', gpuMemBytes: 300000 }],
];

const outcome = async (opts: CompileOptions) => {
  try { return await compile(opts); } catch (e) { if (e instanceof UserError) return e; throw e; }
};

describe('fit\'s probes agree with the full compile', () => {
  let fitting = 0, refused = 0;
  for (const [name, opts] of CASES) {
    it(name, async () => {
      const full = await outcome(opts), step = await outcome({ ...opts, probe: 'step' }), fits = await outcome({ ...opts, probe: 'fits' });
      if (full instanceof UserError) {
        refused++;
        expect(step).toBeInstanceOf(UserError);
        expect(fits).toBeInstanceOf(UserError);
        expect((fits as UserError).message).toBe(full.message);
        return;
      }
      fitting++;
      if (step instanceof UserError || fits instanceof UserError) throw new Error(`a probe refused what the full compile placed: ${(step as Error).message ?? ''} ${(fits as Error).message ?? ''}`);
      // 'step': the same plan, its bound left out
      expect(step.bound).toBeUndefined();
      expect(full.bound).toBeDefined();
      expect(step.placement.home).toEqual(full.placement.home);
      expect(step.placement.opTier).toEqual(full.placement.opTier);
      expect(step.instructions).toEqual(full.instructions);
      expect(step.predicted).toEqual(full.predicted);
      // 'fits': a plan that verifies, within capacity, no faster than the full compile's
      expect(fits.bound).toBeUndefined();
      expect(verifyPlan(fits)).toEqual([]);
      for (const t of ['gpu', 'cpu', 'nvme'] as const) expect(fits.tiers[t].peakBytes).toBeLessThanOrEqual(fits.tiers[t].capacityBytes);
      expect(fits.predicted.stepSeconds).toBeGreaterThanOrEqual(full.predicted.stepSeconds * (1 - 1e-12));
    });
  }
  it('the cases span the edge: some fit, some do not', () => {
    expect(fitting).toBeGreaterThan(2);
    expect(refused).toBeGreaterThan(2);
  });
});
