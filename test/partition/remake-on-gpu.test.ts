// A p16 homed on the CPU whose state is on the GPU is made again on the GPU
// for each use instead (compiler/partition/lp.ts remakeOnGpu): one cast on the
// GPU in place of a copy down after the forward and a copy up for the backward.
import { describe, expect, it } from 'vitest';
import { paramGroups } from '../../compiler/partition/lp.js';
import { remakeOnGpu, type Rounded } from '../../compiler/partition/lp-round.js';
import type { Tier } from '../../compiler/cost/cost.js';
import { trainingGraph } from '../../src/compile.js';
import { compiledOnce } from '../compiled-once.js';
import { verifyPlan } from '../../compiler/simulate/verify-plan.js';

describe('remakeOnGpu', () => {
  it('remakes exactly the remakeable p16 homed on the CPU with their state on the GPU', async () => {
    const { graph: g } = await trainingGraph({ model: 'models/gpt.ts', preset: 'tiny', precision: 'fp16' });
    const groups = paramGroups(g);
    expect(groups.some((q) => q.remakeable)).toBe(true);
    const states: Tier[] = ['gpu', 'gpu', 'cpu', 'gpu', 'nvme'];
    const p16s: Tier[] = ['cpu', 'gpu', 'cpu', 'nvme', 'cpu'];
    const r: Rounded = { stateTier: groups.map((_, i) => states[i % 5]), p16Tier: groups.map((_, i) => p16s[i % 5]), offload: new Set(), recompute: new Set() };
    const out = remakeOnGpu(g, groups, r);
    groups.forEach((q, i) => expect(out[i], `group ${i}`).toBe(i % 5 === 0 && q.remakeable ? 'nvme' : p16s[i % 5]));
    expect(out.some((t, i) => t !== r.p16Tier[i])).toBe(true);
    expect(r.p16Tier.map((_, i) => p16s[i % 5])).toEqual(r.p16Tier); // the rounding given is not changed
  });

  it('fp32 has no half copy to remake', async () => {
    const { graph: g } = await trainingGraph({ model: 'models/gpt.ts', preset: 'tiny', precision: 'fp32' });
    const groups = paramGroups(g);
    const r: Rounded = { stateTier: groups.map(() => 'gpu'), p16Tier: groups.map(() => 'cpu'), offload: new Set(), recompute: new Set() };
    expect(remakeOnGpu(g, groups, r)).toEqual(r.p16Tier);
  });

  it('gpt3-6.7b on an A100: no p16 is homed on the CPU with its state on the GPU, and the step is faster', async () => {
    const plan = await compiledOnce({ model: 'models/gpt.ts', preset: 'gpt3-6.7b', hw: 'a100-80g', precision: 'fp16' });
    expect(verifyPlan(plan)).toEqual([]);
    const { home, remat } = plan.placement;
    const groups = paramGroups(plan.graph);
    for (const q of groups) {
      if (home[q.state[0]] === 'gpu' && q.remakeable) expect(home[q.p16] === 'cpu' && !remat?.[q.p16], plan.graph.tensors[q.p16].name).toBe(false);
    }
    // 0.4162 s with such groups homed on the CPU (13 of them, 1.6 GB of p16)
    expect(plan.predicted.stepSeconds).toBeLessThan(0.41);
    expect(plan.predicted.stepSeconds).toBeGreaterThanOrEqual(plan.bound!.lowerBoundSeconds);
  }, 120_000);
});
