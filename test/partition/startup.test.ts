// The step's first GPU op (a GPT's embedding) reads its parameter's half copy
// first thing: with that parameter's state on the CPU the copy is cast there
// and copied up while the GPU waits (gpt3-13b/h200: 10.3 ms). compile tries the
// best candidate with that group's state on the GPU too (compiler/partition/candidates.ts
// lpTryStartup) and keeps it where it is faster.
import { describe, expect, it } from 'vitest';
import { paramGroups } from '../../compiler/partition/lp.js';
import { simulate } from '../../compiler/simulate/simulate.js';
import { verifyPlan } from '../../compiler/simulate/verify-plan.js';
import { compiledOnce } from '../compiled-once.js';

describe('the step start', () => {
  it('gpt3-13b on an H200: the embedding does not wait for a CPU cast of wte (its state on the GPU), the plan verifies', async () => {
    const plan = await compiledOnce({ model: 'models/gpt.ts', preset: 'gpt3-13b', hw: 'h200-141g', precision: 'fp16' });
    expect(verifyPlan(plan)).toEqual([]);
    const g = plan.graph;
    const groups = paramGroups(g);
    // some state is on the CPU (the model does not fit), but not the embedding's
    expect(groups.some((q) => plan.placement.home[q.state[0]] === 'cpu')).toBe(true);
    const embedding = g.ops.find((o) => o.kind === 'embedding')!;
    const wte = groups.find((q) => embedding.inputs.includes(q.p16))!;
    expect(plan.placement.home[wte.state[0]]).toBe('gpu');
    const run = plan.instructions.find((x) => x.kind === 'run' && x.op === embedding.id)!;
    const sim = simulate(g, plan.placement, plan.buffers, plan.instructions, plan.hardware);
    expect(sim.start[run.id]).toBeLessThan(1e-3);
  }, 120_000);
});
