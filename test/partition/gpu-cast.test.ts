// Casts on the GPU from master32 copied up (compiler/partition/candidates.ts lpTryCasts): where
// the CPU is a plan's busiest stream and it makes p16 again for each cluster
// of reads from master32 resting on the CPU, those casts run on the GPU
// instead, each reading master32 fetched for it (4 bytes a parameter where
// p16 is 2), so the CPU keeps only its updates. Such a plan is outside the
// bound LP's family (its casts run where their state is) and reports the
// bound LP widened by cast (wideBound({ cast }), and by chains, split or
// stream too where the plan also leaves the family so).
// Checked: the runtime trains such placements bit-identically to the all-GPU
// plan (fp16 and bf16), each cast on the GPU after its master32's copy up and
// no half copy of those groups sent up; random placements with casts on the
// GPU simulate at or above that bound, the LP fixed to each lies between the
// bound and its step, the LP widened every way lies under it, and the
// interior point solver finds the same optimum. (llama2-13b on an H100 with
// 96 GB of CPU, where compile casts on the GPU: checkpoints.test.ts.)
import { describe, expect, it } from 'vitest';
import { boundWith, castsUp, paramGroups, startLp, wideningOf } from '../../compiler/partition/lp.js';
import { placementFrom, roundSolution } from '../../compiler/partition/lp-round.js';
import type { Placement } from '../../compiler/partition/placement.js';
import { LpWorker } from '../../compiler/partition/highs-worker.js';
import { loadProfile } from '../../compiler/cost/profiles.js';
import { ADAM_DEFAULTS } from '../../compiler/lower/optimizer.js';
import { planFor, trainingGraph } from '../../src/compile.js';
import type { Graph } from '../../compiler/ir/types.js';
import type { Tier } from '../../compiler/cost/cost.js';
import { seeded, tinyHalfModels, widenedBoundHolds } from '../helpers.js';

/**
 * p with the casts of the groups `onGpu` picks moved to the GPU where the
 * group's p16 is made again from master32 on the CPU, those `forwardOnCpu`
 * picks of them with their forward runs left on the CPU.
 */
function castOnGpu(g: Graph, p: Placement, onGpu: (i: number) => boolean, forwardOnCpu: (i: number) => boolean = () => false): Placement {
  const opTier = [...p.opTier], forwardCastOnCpu = g.ops.map(() => false);
  paramGroups(g).forEach((q, i) => {
    if (!onGpu(i) || q.cast < 0 || !p.remat?.[q.p16] || !q.state.every((t) => p.home[t] === 'cpu')) return;
    opTier[q.cast] = 'gpu';
    forwardCastOnCpu[q.cast] = forwardOnCpu(i);
  });
  return { ...p, opTier, ...(forwardCastOnCpu.some(Boolean) ? { forwardCastOnCpu } : {}) };
}

describe('casts on the GPU from master32 copied up', () => {
  it('the runtime trains placements that cast on the GPU bit-identically to the all-GPU plan (gpt fp16, llama bf16), master32 copied up for each cast on the GPU and no half copy sent up but from a forward cast left on the CPU', async () => {
    for (const { source, g, hw, model, reference, losses } of await tinyHalfModels()) {
      // every group's state on the CPU, p16 made again for each use; every other group's casts on the GPU
      const groups = paramGroups(g);
      const base = placementFrom(g, groups, groups.map((): Tier => 'nvme'), groups.map((): Tier => 'cpu'), new Set(), 0);
      // (and of those, every other one's forward runs on the CPU: Placement.forwardCastOnCpu)
      const p = castOnGpu(g, base, (i) => i % 2 === 0, (i) => i % 4 === 0);
      expect(castsUp(g, p)).toBe(true);
      expect(castsUp(g, base)).toBe(false);
      const plan = planFor(g, hw, p, model, ADAM_DEFAULTS);
      const tensorOf = (b: number) => plan.buffers[b].tensor;
      let checked = 0, onCpu = 0;
      groups.forEach((q, i) => {
        if (q.cast < 0 || p.opTier[q.cast] !== 'gpu') return;
        const readerOf = (run: { id: number; outputs: readonly number[] }) => plan.instructions.find((x) => x.kind === 'run' && x.id > run.id && x.inputs.some((b) => tensorOf(b) === q.p16))!;
        for (const run of plan.instructions.filter((x) => x.kind === 'run' && x.op === q.cast && x.stream === 'cpu')) {
          // a forward run on the CPU: its p16 goes up, for a forward reader
          expect(p.forwardCastOnCpu?.[q.cast], `${source} ${g.tensors[q.p16].name}`).toBe(true);
          expect(g.ops[readerOf(run).op].phase).toBe('forward');
          onCpu++;
        }
        const runs = plan.instructions.filter((x) => x.kind === 'run' && x.op === q.cast && x.stream === 'gpu');
        // (one whose reads make one cluster, all in the forward pass, may have none with its forward runs on the CPU)
        if (!p.forwardCastOnCpu?.[q.cast]) expect(runs.length, `${source} ${g.tensors[q.p16].name}`).toBeGreaterThan(0);
        for (const run of runs) {
          if (p.forwardCastOnCpu?.[q.cast]) expect(g.ops[readerOf(run).op].phase).toBe('backward');
          // its input is master32 on the GPU, copied up (h2d) before it runs
          const input = run.inputs.find((b) => tensorOf(b) === q.state[0]);
          expect(input !== undefined && plan.buffers[input].tier === 'gpu').toBe(true);
          const up = plan.instructions.find((x) => x.kind === 'copy' && x.stream === 'h2d' && x.outputs[0] === input);
          expect(up && run.waits.includes(up.id), `${source} ${g.tensors[q.state[0]].name}`).toBe(true);
          checked++;
        }
        // and p16 itself crosses the link only from a forward cast on the CPU
        if (!p.forwardCastOnCpu?.[q.cast]) expect(plan.instructions.some((x) => x.kind === 'copy' && (tensorOf(x.inputs[0]) === q.p16 || tensorOf(x.outputs[0]) === q.p16))).toBe(false);
      });
      expect(checked).toBeGreaterThan(0);
      expect(onCpu).toBeGreaterThan(0);
      expect(await losses(plan), source).toEqual(reference);
    }
  }, 120_000);

  it('the bound LP widened by cast holds for random placements that cast on the GPU (gpt3-6.7b, 4 layers, 6 GB of a V100), and is the interior point solver\'s optimum', async () => {
    const hw = loadProfile('v100-32g', { gpuMemBytes: 6e9 });
    const { graph: g } = await trainingGraph({ model: 'models/gpt.ts', preset: 'gpt3-6.7b', precision: 'fp16', config: { layers: 4 } });
    const solver = new LpWorker();
    const run = startLp(g, hw, { solver });
    try {
      const wide = await run.wideBound({ cast: true });
      expect(wide.status).toBe('optimal');
      // (widened every way: a relaxation of this one, so no higher; the unwidened LP no lower;
      // up to HiGHS's tolerances, 1e-7: where the same row binds in both, 6e-9 apart)
      const widest = await run.wideBound({ chains: true, split: true, stream: true, cast: true });
      expect(widest.lowerBoundSeconds).toBeLessThanOrEqual(wide.lowerBoundSeconds * (1 + 1e-7));
      expect(wide.lowerBoundSeconds).toBeLessThanOrEqual((await run.bound).lowerBoundSeconds * (1 + 1e-7));
      const ipm = await boundWith(g, hw, solver, { solver: 'ipm' }, { widen: { cast: true } });
      expect(typeof ipm).toBe('number');
      expect(Math.abs(wide.lowerBoundSeconds - (ipm as number)), `simplex ${wide.lowerBoundSeconds} s, interior point ${ipm} s`).toBeLessThanOrEqual(1e-6 * (ipm as number));
      const r = roundSolution(g, await run.bound, 'bytes');
      // a seeded generator: the same placements every run
      const next = seeded(11);
      let checked = 0;
      for (let k = 0; k < 12; k++) {
        const stateTier = r.stateTier.map((): Tier => (next() < 0.85 ? 'cpu' : 'gpu'));
        const p16Tier = r.p16Tier.map((t, i): Tier => (stateTier[i] === 'cpu' && next() < 0.8 ? 'nvme' : t));
        const base = placementFrom(g, wide.groups, p16Tier, stateTier, new Set(r.offload), 0, new Set(r.recompute));
        const p = castOnGpu(g, base, () => next() < 0.6, () => next() < 0.5);
        expect(wideningOf(g, p, wide.saved)).toEqual(castsUp(g, p) ? { chains: false, split: false, stream: false, cast: true } : undefined);
        if (!await widenedBoundHolds(g, hw, p, solver, { cast: true }, wide.lowerBoundSeconds, `random ${k}${castsUp(g, p) ? ' (casts on the GPU)' : ''}`)) continue; // does not fit
        if (castsUp(g, p)) checked++;
      }
      expect(checked).toBeGreaterThan(2);
    } finally { run.close(); solver.close(); }
  }, 180_000);
});
