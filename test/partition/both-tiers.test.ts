// The bound LP's GPU and CPU rows together: an offloaded activation is on the
// GPU, the CPU or both from its producer to its last reader, so where the CPU
// is full of optimizer state every byte offloaded pushes a byte of state to
// NVMe. Per tier alone the bound LP offloaded freely into a CPU it had filled
// with state: gpt2-1.5b on 8 GB of a V100 with 6 GB of CPU bounded at 3.15 s,
// and the plan rounded from that vertex was the best of the candidates at
// 6.25 s (gap 98 %). With the rows together: bound 3.89 s, plan 4.60 s.
// Since the fifteenth session that plan rests master32 apart from its moments
// (compile's split candidate) and its NVMe reads go to the arena's ring:
// 3.70 s, below the bound LP's optimum, which holds only for plans that keep a
// group's state in one place; its reported bound is the wide bound LP's.
// (Validity where the row binds: test/partition/bound-valid.test.ts, gpt3-6.7b
// with 8 layers on 8 GB of a V100 and 3 GB of CPU, random plans included.)
import { describe, it, expect } from 'vitest';
import { loadProfile } from '../../compiler/cost/profiles.js';
import { startLp } from '../../compiler/partition/lp.js';
import { compile, trainingGraph } from '../../src/compile.js';

describe('GPU and CPU together in the bound LP', () => {
  it('gpt2-1.5b on 8 GB of GPU and 6 GB of CPU: the rows bind, and the plan is within 25 % of the bound LP', async () => {
    const opts = { model: 'models/gpt.ts', preset: 'gpt2-1.5b', hw: 'v100-32g', gpuMemBytes: 8e9, cpuMemBytes: 6e9, precision: 'fp16' as const };
    const plan = await compile(opts);
    const { lowerBoundSeconds, gapPercent } = plan.bound!;
    const lp = startLp((await trainingGraph(opts)).graph, loadProfile(opts.hw, { gpuMemBytes: opts.gpuMemBytes, cpuMemBytes: opts.cpuMemBytes }), {});
    const boundLp = (await lp.bound).lowerBoundSeconds;
    lp.close();
    console.log(`step ${plan.predicted.stepSeconds.toFixed(3)} s, bound ${lowerBoundSeconds.toFixed(3)} s, gap ${gapPercent.toFixed(1)} %; the bound LP's optimum ${boundLp.toFixed(3)} s`);
    expect(plan.tiers.cpu.peakBytes).toBeLessThanOrEqual(6e9);
    expect(plan.traffic.nvmeReadBytes).toBeGreaterThan(0);
    expect(lowerBoundSeconds).toBeLessThanOrEqual(plan.predicted.stepSeconds);
    // per tier alone the bound LP's optimum was 3.15 s
    expect(boundLp).toBeGreaterThan(3.5);
    expect(plan.predicted.stepSeconds).toBeLessThan(boundLp * 1.25);
  }, 120_000);
});
