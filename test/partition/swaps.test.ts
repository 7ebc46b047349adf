// Groups of one size exchanging their configurations (compiler/partition/candidates.ts
// lpTrySwaps, exchanged): the LP is symmetric in the layers of one kind, so
// which layer's group rests off the GPU is the vertex's accident; the last
// family exchanges the whole configuration of two groups of one size (state
// homes, gradient home, update and cast tiers, p16 home and remade or not)
// and keeps an exchange that simulates at least SWAP_MIN_GAIN faster.
// Checked: the exchange is exact (each group gets the other's configuration,
// nothing else moves); on gpt tiny fp16 with its state on NVMe compile keeps
// an exchange of h.0.mlp.fc.w and h.1.mlp.fc.w (0.1755 ms without), the family
// finds it again from the plan with the two exchanged back, the plan's bound
// holds, and the runtime trains that plan bit-identically to the all-GPU plan.
// Then the head of the CPU's chain of updates exchanged with a group of its
// size whose gradient comes before it (gpt3-13b on an A100), and on
// gpt3-6.7b on an A100 the plan the chain's ends exchanged lead to: within
// 2 % of its bound, the GPU never waiting. Last, the tail of the NVMe
// write-backs (gpt3-6.7b on a V100 with 48 GB of CPU): the NVMe group whose
// gradient comes last exchanged with the CPU group of its size whose gradient
// comes first, found again from the plan exchanged back.
import { describe, expect, it } from 'vitest';
import { paramGroups, type ParamGroup } from '../../compiler/partition/lp.js';
import { exchanged, lpTrySwaps } from '../../compiler/partition/candidates.js';
import { build, fitsTiers, retimed, simulated, type LpCandidates } from '../../compiler/partition/built.js';
import type { Placement } from '../../compiler/partition/placement.js';
import { verifyPlan } from '../../compiler/simulate/verify-plan.js';
import { compile } from '../../src/compile.js';
import { compiledOnce } from '../compiled-once.js';
import { producers } from '../../compiler/ir/graph.js';
import { tinyHalfModels } from '../helpers.js';

/** A group's configuration in p, as the family compares them. */
const configOf = (p: Placement, q: ParamGroup) => ({
  state: q.state.map((t) => p.home[t]), grad: p.home[q.grad], update: p.opTier[q.adam],
  cast: q.cast >= 0 ? p.opTier[q.cast] : undefined, p16: p.home[q.p16], remade: p.remat?.[q.p16] ?? false,
});

describe('groups of one size exchanging their configurations', () => {
  it('gpt tiny fp16 with its state on NVMe: compile keeps an exchange of h.0.mlp.fc.w and h.1.mlp.fc.w (under 0.166 ms, 0.1756 without), as fast again from the plan exchanged back; the bound holds; the runtime trains it bit-identically to the all-GPU plan', async () => {
    // (with the CPU updates following their gradients down, the tries went to
    // the biases and norms before these two: lpTrySwaps leaves out groups far
    // smaller than the largest, SWAP_SMALLEST)
    const plan = await compile({ model: 'models/gpt.ts', preset: 'tiny', precision: 'fp16', gpuMemBytes: 400_000, cpuMemBytes: 200_000 });
    expect(verifyPlan(plan)).toEqual([]);
    const step = plan.predicted.stepSeconds;
    console.log(`gpt tiny fp16 on NVMe: step ${(step * 1e3).toFixed(4)} ms, bound ${(plan.bound!.lowerBoundSeconds * 1e3).toFixed(4)} ms`);
    expect(step).toBeLessThan(0.166e-3);
    expect(plan.bound!.lowerBoundSeconds).toBeLessThanOrEqual(step);

    const g = plan.graph, hw = plan.hardware, p = plan.placement;
    const groups = paramGroups(g);
    const named = (n: string) => groups.find((q) => g.tensors[q.p16].name === n)!;
    const a = named('h.0.mlp.fc.w'), b = named('h.1.mlp.fc.w');
    expect(configOf(p, a)).not.toEqual(configOf(p, b));
    // the exchange is exact: each takes the other's configuration, every other entry stays
    const back = exchanged(p, a, b);
    expect(configOf(back, a)).toEqual(configOf(p, b));
    expect(configOf(back, b)).toEqual(configOf(p, a));
    const mine = new Set([...a.state, a.grad, a.p16, ...b.state, b.grad, b.p16]);
    expect(back.home.filter((t, i) => !mine.has(i) && t !== p.home[i])).toEqual([]);
    const myOps = new Set([a.adam, a.cast, b.adam, b.cast]);
    expect(back.opTier.filter((t, i) => !myOps.has(i) && t !== p.opTier[i])).toEqual([]);
    expect(exchanged(back, a, b)).toEqual(p);

    // exchanged back, the plan is slower; the family finds the exchange again
    const slower = retimed(g, hw, build(g, hw, back));
    expect(fitsTiers(slower.arenas.arenaBytes, hw)).toBe(true);
    expect(simulated(g, hw, slower).stepSeconds).toBeGreaterThan(step * 1.02);
    const acc: LpCandidates = { seen: new Set(), best: slower };
    lpTrySwaps(g, hw, acc);
    // (as fast again, by this exchange or an equal one: h.0's and h.1's other groups of that size)
    expect(simulated(g, hw, acc.best!).stepSeconds).toBeLessThanOrEqual(step * (1 + 1e-9));

    const [gpt] = await tinyHalfModels();
    expect(await gpt.losses(plan)).toEqual(gpt.reference);
  }, 120_000);

  it('gpt3-13b on an A100: the head of the CPU\'s chain of updates moves to the first gradient of its size (under 1.595 s, 1.5975 with h.39.mlp.fc.w at the head)', async () => {
    // h.39.mlp.proj.w's gradient comes before h.39.mlp.fc.w's: updated on the
    // CPU in its place, the chain starts sooner (the two exchange configurations)
    const plan = await compile({ model: 'models/gpt.ts', preset: 'gpt3-13b', hw: 'a100-80g', precision: 'fp16' });
    expect(verifyPlan(plan)).toEqual([]);
    const g = plan.graph, p = plan.placement, made = producers(g);
    const head = paramGroups(g).filter((q) => p.opTier[q.adam] === 'cpu').sort((a, b) => made[a.grad] - made[b.grad])[0];
    console.log(`gpt3-13b/a100: step ${plan.predicted.stepSeconds.toFixed(4)} s, bound ${plan.bound!.lowerBoundSeconds.toFixed(4)} s, the CPU's first update ${g.tensors[head.p16].name}`);
    expect(g.tensors[head.p16].name).toBe('h.39.mlp.proj.w');
    expect(plan.predicted.stepSeconds).toBeLessThan(1.595);
    expect(plan.bound!.lowerBoundSeconds).toBeLessThanOrEqual(plan.predicted.stepSeconds);
  }, 240_000);

  it('gpt3-6.7b on an A100: within 2 % of its bound, the GPU never waiting (its busy time the step), the CPU\'s last update hidden under the GPU\'s', async () => {
    // The families' first pass starts from the bound LP's rounding over 97.5 %
    // of the GPU (lp.ts HEADROOM_SHARES: 0.3937 s retimed), lpTryChainHead
    // takes it to 0.3885 s, the GPU waiting 3.8 ms in the forward pass for
    // fetches of early layers' weights; lpTrySwaps' chain tail then exchanges
    // h.6.attn.qkv.w with h.30.attn.qkv.w and h.3.attn.proj.w with
    // h.28.attn.proj.w (their state onto the GPU, the late layers' updated on
    // the CPU), 0.3847 s: without those exchanges the plan is 2.2 % above its
    // bound. Before, from 98 %'s rounding, 0.3911 s with the GPU waiting 9 ms
    // (thirty-eighth session)
    const plan = await compiledOnce({ model: 'models/gpt.ts', preset: 'gpt3-6.7b', hw: 'a100-80g', precision: 'fp16' });
    expect(verifyPlan(plan)).toEqual([]);
    const g = plan.graph, p = plan.placement, made = producers(g);
    const tail = paramGroups(g).filter((q) => p.opTier[q.adam] === 'cpu').sort((a, b) => made[b.grad] - made[a.grad])[0];
    const step = plan.predicted.stepSeconds, bound = plan.bound!.lowerBoundSeconds;
    console.log(`gpt3-6.7b/a100: step ${step.toFixed(4)} s, bound ${bound.toFixed(4)} s, GPU busy ${plan.predicted.streamBusySeconds.gpu.toFixed(4)} s, the CPU's last update ${g.tensors[tail.p16].name}`);
    expect(bound).toBeLessThanOrEqual(step);
    expect(step).toBeLessThanOrEqual(bound * 1.02);
    expect(plan.predicted.streamBusySeconds.gpu).toBeGreaterThan(step * 0.999);
    expect(plan.predicted.streamBusySeconds.cpu).toBeGreaterThan(0.2); // (the CPU does update some groups)
  }, 240_000);

  it('gpt3-6.7b on a V100 with 48 GB of CPU: the write-backs\' tail, the first CPU-updated gradient\'s moments on NVMe (under 3.35 s, 3.517 without); exchanged back, slower, and found again', async () => {
    // The LP's rounding and lpTrySplit put moments on NVMe for groups whose
    // gradients come in the middle and end of the backward pass: their
    // write-backs (2.35 s of NVMe writes) were the step's last 1.14 s.
    // h.7.mlp.proj.w's (the NVMe group updated last that has a partner)
    // exchanged with h.31.mlp.proj.w's (the first gradient of the step), the
    // write stream starts 0.24 s sooner
    const plan = await compile({ model: 'models/gpt.ts', preset: 'gpt3-6.7b', hw: 'v100-32g', cpuMemBytes: 48e9, precision: 'fp16' });
    expect(verifyPlan(plan)).toEqual([]);
    const g = plan.graph, hw = plan.hardware, p = plan.placement, made = producers(g);
    const step = plan.predicted.stepSeconds;
    const groups = paramGroups(g);
    const head = groups.filter((q) => p.opTier[q.adam] === 'cpu').sort((a, b) => made[a.grad] - made[b.grad])[0];
    console.log(`gpt3-6.7b/v100 on 48 GB of CPU: step ${step.toFixed(4)} s, bound ${plan.bound!.lowerBoundSeconds.toFixed(4)} s, the CPU's first update ${g.tensors[head.p16].name}, its state on ${head.state.map((t) => p.home[t]).join(' ')}`);
    expect(step).toBeLessThan(3.35);
    expect(plan.bound!.lowerBoundSeconds).toBeLessThanOrEqual(step);
    expect(g.tensors[head.p16].name).toBe('h.31.mlp.proj.w');
    expect(head.state.slice(1).map((t) => p.home[t])).toEqual(['nvme', 'nvme']);

    const partner = groups.find((q) => g.tensors[q.p16].name === 'h.7.mlp.proj.w')!;
    expect(partner.state.map((t) => p.home[t])).toEqual(['cpu', 'cpu', 'cpu']);
    const slower = retimed(g, hw, build(g, hw, exchanged(p, head, partner)));
    expect(fitsTiers(slower.arenas.arenaBytes, hw)).toBe(true);
    expect(simulated(g, hw, slower).stepSeconds).toBeGreaterThan(step * 1.03);
    const acc: LpCandidates = { seen: new Set(), best: slower };
    lpTrySwaps(g, hw, acc);
    // (the exchanges find it again: h.31.mlp.proj.w's moments back on NVMe,
    // 3.561 -> 3.354 s; compile's later families then take the plan to its 3.298)
    const again = acc.best!.placement;
    expect(head.state.slice(1).map((t) => again.home[t])).toEqual(['nvme', 'nvme']);
    expect(simulated(g, hw, acc.best!).stepSeconds).toBeLessThan(simulated(g, hw, slower).stepSeconds * 0.96);
  }, 240_000);
});
