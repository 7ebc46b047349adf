// GPU room for optimizer state (compiler/partition/room.ts lpTryRoom): the
// kept plan's streamed updates moved to sooner gradients and its cheap kept
// activations made again, their bytes given to off-GPU groups. Checked on
// llama2-13b on an H200, whose plan before kept its SiLU outputs (4.5 GB)
// with 30 GB of state updated on the CPU and the first layers' streamed state
// going home in the step's last 195 ms (583.0 ms). Now it makes the SiLU
// outputs again (one level: 555.8 ms), and the SwiGLU products silu(gate) x
// up from them (through chains: 4.3 GB more, streamed state onto the GPU).
// The plan verifies, runs under 520 ms, and its bound is over the LPs'
// family widened by chains and streamed updates. And llama2-13b on an H100,
// whose CPU binds while its GPU idles half the step: at a larger share of
// the copies, the gate and up projections' outputs made again too (1.218 ->
// 1.117 s), its own choices' bound between its bound and its step.
import { describe, expect, it } from 'vitest';
import { paramGroups, placementBound } from '../../compiler/partition/lp.js';
import { LpWorker } from '../../compiler/partition/highs-worker.js';
import { producers } from '../../compiler/ir/graph.js';
import { lpTryRoom } from '../../compiler/partition/room.js';
import { build, fitsTiers, simulated, type LpCandidates } from '../../compiler/partition/built.js';
import { verifyPlan } from '../../compiler/simulate/verify-plan.js';
import { compiledOnce } from '../compiled-once.js';

describe('GPU room for state', () => {
  it('llama2-13b on an H200: 38 SiLU outputs and SwiGLU products made again, more state on the GPU, under 520 ms (583.0 without, 555.8 with the SiLU outputs alone), its bound widened by chains and streams', async () => {
    const plan = await compiledOnce({ model: 'models/llama.ts', preset: 'llama2-13b', hw: 'h200-141g', precision: 'fp16' });
    expect(verifyPlan(plan)).toEqual([]);
    const step = plan.predicted.stepSeconds;
    console.log(`llama2-13b/h200: step ${(step * 1e3).toFixed(2)} ms, bound ${(plan.bound!.lowerBoundSeconds * 1e3).toFixed(2)} ms`);
    expect(step).toBeLessThan(0.52);
    expect(plan.bound!.lowerBoundSeconds).toBeLessThanOrEqual(step);
    expect(plan.bound!.widenedBy).toEqual(['chains', 'stream']);
    const g = plan.graph, p = plan.placement;
    const silu = g.tensors.filter((t) => t.role === 'activation' && /mlp\.silu#\d+$/.test(t.name));
    expect(silu.length).toBe(40);
    // (all but the last two layers', read again within a segment of the LP: not saved activations)
    expect(silu.filter((t) => p.remat?.[t.id]).length).toBe(38);
    // and the products that read them (kept before), made again from them
    const mul = g.tensors.filter((t) => t.role === 'activation' && /mlp\.mul#\d+$/.test(t.name));
    expect(mul.length).toBe(40);
    expect(mul.filter((t) => p.remat?.[t.id]).length).toBe(38);

    // run again from the plan itself (every activation counted as saved): what it keeps fits and is no slower
    const acc: LpCandidates = { seen: new Set(), best: build(g, plan.hardware, p) };
    const before = simulated(g, plan.hardware, acc.best!).stepSeconds;
    lpTryRoom(g, plan.hardware, acc, g.tensors.filter((t) => t.role === 'activation').map((t) => t.id), false);
    expect(fitsTiers(acc.best!.arenas.arenaBytes, plan.hardware)).toBe(true);
    expect(simulated(g, plan.hardware, acc.best!).stepSeconds).toBeLessThanOrEqual(before);
    // and the state on the GPU is more than the 116 GB the plan had before
    // the room, and the 121.1 GB with the SiLU outputs' alone
    const onGpu = paramGroups(g).filter((q) => q.state.every((t) => p.home[t] === 'gpu')).reduce((s, q) => s + q.stateBytes, 0);
    expect(onGpu).toBeGreaterThan(123e9);
  }, 300_000);

  it('llama2-13b on an H100, CPU-bound with the GPU idle half the step: the projections made again through chains too, under 1.15 s (1.218 with the SwiGLU products alone), under 1.113 s with more updates streamed last, its bound over chains and streams holding for it', async () => {
    const opts = { model: 'models/llama.ts', preset: 'llama2-13b', hw: 'h100-80g', precision: 'fp16' } as const;
    const plan = await compiledOnce(opts);
    expect(verifyPlan(plan)).toEqual([]);
    const step = plan.predicted.stepSeconds;
    console.log(`llama2-13b/h100: step ${step.toFixed(4)} s, bound ${plan.bound!.lowerBoundSeconds.toFixed(4)} s`);
    expect(step).toBeLessThan(1.15);
    // (and more updates streamed once more after the room and the reruns
    // held, search.ts: 1.1174 -> 1.1083 s)
    expect(step).toBeLessThan(1.113);
    expect(plan.bound!.widenedBy).toEqual(['chains', 'stream']);
    // (the gate and up projections' outputs, kept or offloaded before: 1 of 119 made again)
    const g = plan.graph, p = plan.placement, made = producers(g);
    const projections = g.tensors.filter((t) => t.role === 'activation' && p.remat?.[t.id] && g.ops[made[t.id]].kind === 'matmul' && g.ops[made[t.id]].phase === 'forward');
    expect(projections.length).toBeGreaterThan(80);
    // its own choices' bound lies between the bound and the step
    const solver = new LpWorker();
    try {
      const own = await placementBound(g, plan.hardware, p, solver, { widen: { chains: true, stream: true } });
      expect(typeof own).toBe('number');
      expect(plan.bound!.lowerBoundSeconds).toBeLessThanOrEqual((own as number) * (1 + 1e-6));
      expect(own as number).toBeLessThanOrEqual(step * (1 + 1e-9));
    } finally { solver.close(); }
  }, 300_000);
});
