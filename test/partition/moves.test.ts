// One group's configuration changed at a time (compiler/partition/moves.ts
// lpTryMoves): after the families, each large group streamed, unstreamed or
// exchanged with a near GPU-state group of its size, the moves with the
// lowest floors retimed, the fastest kept where it gains 0.1 %. Checked on
// gpt3-13b on an H200, where the kept plan has h.39.attn.qkv.w's state on the
// GPU and h.35.attn.qkv.w's on the CPU (298.7 ms before the moves): the plan
// verifies and runs under 296 ms above its bound; exchanged back it is slower,
// and the moves find it again from there. And on gpt3-6.7b on a V100, whose
// plan is in parts, where the moves' retimes go round their floors: the plan
// within issue 5's 2 % of its bound (2.11 % when the retimes went to the
// twelve lowest floors, each an MLP part streamed; 1.85 % with a qkv part).
import { describe, expect, it } from 'vitest';
import { paramGroups } from '../../compiler/partition/lp.js';
import { exchanged } from '../../compiler/partition/candidates.js';
import { lpTryMoves } from '../../compiler/partition/moves.js';
import { build, fitsTiers, retimed, simulated, type LpCandidates } from '../../compiler/partition/built.js';
import { verifyPlan } from '../../compiler/simulate/verify-plan.js';
import { compiledOnce } from '../compiled-once.js';

describe('one group moved at a time', () => {
  it('gpt3-13b on an H200: the moves put h.39.attn.qkv.w\'s state on the GPU and h.35.attn.qkv.w\'s on the CPU (under 296 ms, 298.7 without), and find that exchange again from the plan exchanged back', async () => {
    const plan = await compiledOnce({ model: 'models/gpt.ts', preset: 'gpt3-13b', hw: 'h200-141g', precision: 'fp16' });
    expect(verifyPlan(plan)).toEqual([]);
    const step = plan.predicted.stepSeconds;
    console.log(`gpt3-13b/h200: step ${(step * 1e3).toFixed(2)} ms, bound ${(plan.bound!.lowerBoundSeconds * 1e3).toFixed(2)} ms`);
    expect(step).toBeLessThan(0.296);
    expect(plan.bound!.lowerBoundSeconds).toBeLessThanOrEqual(step);

    const g = plan.graph, hw = plan.hardware, p = plan.placement;
    const named = (n: string) => paramGroups(g).find((q) => g.tensors[q.p16].name === n)!;
    const a = named('h.39.attn.qkv.w'), b = named('h.35.attn.qkv.w');
    expect(a.state.map((t) => p.home[t])).toEqual(['gpu', 'gpu', 'gpu']);
    expect(b.state.map((t) => p.home[t])).toEqual(['cpu', 'cpu', 'cpu']);

    const slower = retimed(g, hw, build(g, hw, exchanged(p, a, b)));
    expect(fitsTiers(slower.arenas.arenaBytes, hw)).toBe(true);
    expect(simulated(g, hw, slower).stepSeconds).toBeGreaterThan(step * 1.01);
    const acc: LpCandidates = { seen: new Set(), best: slower };
    lpTryMoves(g, hw, acc);
    expect(fitsTiers(acc.best!.arenas.arenaBytes, hw)).toBe(true);
    expect(simulated(g, hw, acc.best!).stepSeconds).toBeLessThanOrEqual(step * (1 + 1e-9));
  }, 300_000);

  it('gpt3-6.7b on a V100: with the moves retimed in turn over their floors, the plan (in parts) is within 2 % of its bound', async () => {
    const plan = await compiledOnce({ model: 'models/gpt.ts', preset: 'gpt3-6.7b', hw: 'v100-32g', precision: 'fp16' });
    expect(verifyPlan(plan)).toEqual([]);
    console.log(`gpt3-6.7b/v100: step ${plan.predicted.stepSeconds.toFixed(4)} s, bound ${plan.bound!.lowerBoundSeconds.toFixed(4)} s, gap ${plan.bound!.gapPercent.toFixed(2)} %`);
    expect(plan.graph.tensors.some((t) => t.slice)).toBe(true);
    expect(plan.bound!.gapPercent).toBeLessThanOrEqual(2);
  }, 300_000);
});
