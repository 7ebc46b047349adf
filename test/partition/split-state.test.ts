// State split by tensor (compiler/partition/candidates.ts lpTrySplit): where a plan holds state
// on NVMe, each such group's master32 moved into CPU memory and, for room,
// other groups' moments (m, v) onto NVMe, so that the forward pass makes p16
// with no NVMe read and the write-backs start sooner. Such a plan is outside
// the bound LP's family (its rows read a master32 from NVMe wherever its
// state's share is there: gpt3-175b's split plan simulated at 302.2 s under
// that LP's 305.2), so it reports the bound LP's widened by split (and by
// chains or streamed updates too where the plan also leaves the family so:
// wideBound(wideningOf(...))).
// Checked: compile takes the split where it is faster and the plan verifies;
// that LP fixed to the placement lies at or under its simulated step, and the
// bound reported under that; the runtime trains split placements
// bit-identically to the all-GPU plan (fp16 and bf16); where the split wins,
// its ring's spare bytes and the GPU's spare room hold state; and the LP
// widened by split, and by split and chains, as compile solves them, are the
// interior point solver's optima.
import { describe, expect, it } from 'vitest';
import { boundWith, paramGroups, placementBound, splitsState, startLp, wideningOf } from '../../compiler/partition/lp.js';
import { placementFrom, roundSolution } from '../../compiler/partition/lp-round.js';
import { LpWorker } from '../../compiler/partition/highs-worker.js';
import { allGpu } from '../../compiler/partition/mincut.js';
import { loadProfile } from '../../compiler/cost/profiles.js';
import { ADAM_DEFAULTS } from '../../compiler/lower/optimizer.js';
import { compile, place, planFor, trainingGraph } from '../../src/compile.js';
import { readBuffersPeak } from '../../compiler/schedule/arena.js';
import { verifyPlan } from '../../compiler/simulate/verify-plan.js';
import type { Tier } from '../../compiler/cost/cost.js';
import { seeded, tinyHalfModels, trainLosses, widenedBoundHolds } from '../helpers.js';

describe('state split by tensor', () => {
  it('gpt tiny fp16 with its state on NVMe: compile splits it (no master32 on NVMe), and the bound LP widened so holds for the plan', async () => {
    const opts = { model: 'models/gpt.ts', preset: 'tiny', precision: 'fp16' as const, gpuMemBytes: 400000, cpuMemBytes: 200000 };
    const plan = await compile(opts);
    expect(verifyPlan(plan)).toEqual([]);
    const g = plan.graph, home = plan.placement.home;
    expect(splitsState(g, plan.placement)).toBe(true);
    const groups = paramGroups(g);
    expect(groups.filter((q) => home[q.state[0]] === 'nvme')).toEqual([]);
    expect(groups.some((q) => home[q.state[1]] === 'nvme' && home[q.state[2]] === 'nvme')).toBe(true);
    const hw = loadProfile('local', { gpuMemBytes: opts.gpuMemBytes, cpuMemBytes: opts.cpuMemBytes });
    const solver = new LpWorker();
    try {
      const run = startLp(g, hw, { solver });
      const widen = wideningOf(g, plan.placement, (await run.firstVertex).saved);
      expect(widen?.split).toBe(true);
      expect(plan.bound!.widenedBy).toContain('split');
      expect(plan.bound!.lowerBoundSeconds).toBe((await run.wideBound(widen!)).lowerBoundSeconds);
      const own = await placementBound(g, hw, plan.placement, solver, { widen });
      expect(typeof own).toBe('number');
      expect(own as number).toBeLessThanOrEqual(plan.predicted.stepSeconds * (1 + 1e-9));
      expect(plan.bound!.lowerBoundSeconds).toBeLessThanOrEqual((own as number) * (1 + 1e-6));
    } finally { solver.close(); }
  }, 120_000);

  it('the runtime trains split placements bit-identically to the all-GPU plan (gpt fp16, llama bf16)', async () => {
    for (const { source, g, hw, model, reference, losses } of await tinyHalfModels()) {
      // every other group's state on NVMe, the rest on the CPU, p16 made again
      // from master32 for each use; then each group split: master32 in CPU
      // memory, its moments on NVMe
      const groups = paramGroups(g);
      const stateTier = groups.map((_, i): Tier => (i % 2 ? 'nvme' : 'cpu'));
      const p = placementFrom(g, groups, groups.map(() => 'nvme'), stateTier, new Set(), 0);
      const home = [...p.home];
      for (const q of groups) { home[q.state[0]] = 'cpu'; home[q.state[1]] = 'nvme'; home[q.state[2]] = 'nvme'; }
      const split = { ...p, home };
      expect(splitsState(g, split)).toBe(true);
      expect(await losses(planFor(g, hw, split, model, ADAM_DEFAULTS)), source).toEqual(reference);
    }
  }, 240_000);

  it('gpt3-13b on an A100 with 64 GB of CPU: the split plan\'s ring keeps at most 3 times its reads\' peak, the rest of its bytes hold state', async () => {
    const opts = { model: 'models/gpt.ts', preset: 'gpt3-13b', precision: 'fp16' as const, hw: 'a100-80g', cpuMemBytes: 64e9 };
    const hw = loadProfile(opts.hw, { cpuMemBytes: opts.cpuMemBytes });
    const { graph: g } = await trainingGraph(opts);
    const placed = await place(g, hw);
    const b = placed.built!;
    expect(splitsState(g, b.placement)).toBe(true);
    expect(b.arenas.ring).toBe(true);
    // (the split alone left a ring of 3.7 times the peak: 0.63 GB more on NVMe, 6.820 s against 6.663)
    const peak = readBuffersPeak(b.prog);
    expect(peak).toBeGreaterThan(0);
    expect(b.arenas.ringBytes).toBeLessThanOrEqual(3 * peak);
    const plan = planFor(g, hw, b.placement, { source: opts.model, preset: opts.preset, config: {} }, ADAM_DEFAULTS, await placed.lp, b);
    expect(verifyPlan(plan)).toEqual([]);
    // (the candidate families again from the second-fastest rounding, then the
    // ring's spare given back to NVMe moments: 6.216 -> 5.720 -> 5.210 s)
    expect(plan.predicted.stepSeconds).toBeLessThan(5.5);
    console.log(`gpt3-13b/a100/64 GB: ring ${(b.arenas.ringBytes / 1e9).toFixed(2)} GB, reads' peak ${(peak / 1e9).toFixed(2)} GB, step ${plan.predicted.stepSeconds.toFixed(3)} s`);
  }, 240_000);

  it('gpt tiny fp16 on 400 kB GPU, 150 kB CPU: the split candidate fills the GPU\'s spare room with state, and trains bit-identically to the all-GPU plan', async () => {
    const opts = { model: 'models/gpt.ts', preset: 'tiny', precision: 'fp16' as const, gpuMemBytes: 400000, cpuMemBytes: 150000 };
    const plan = await compile(opts);
    expect(verifyPlan(plan)).toEqual([]);
    expect(splitsState(plan.graph, plan.placement)).toBe(true);
    // (the split alone, its NVMe bytes as the best plan before it had them: 0.309 ms, 280 kB on NVMe; with two CPU groups updated on the GPU instead, 0.178 ms, 172 kB)
    expect(plan.predicted.stepSeconds).toBeLessThan(0.25e-3);
    const { graph: g } = await trainingGraph(opts);
    const reference = await trainLosses(planFor(g, loadProfile('local'), allGpu(g), { source: opts.model, preset: opts.preset, config: {} }, ADAM_DEFAULTS), 4, 0);
    expect(await trainLosses(plan, 4, 0)).toEqual(reference);
  }, 240_000);

  it('the bound LP widened by split holds for random split placements (gpt3-6.7b, 4 layers, 6 GB of a V100, 4 GB of CPU)', async () => {
    const hw = loadProfile('v100-32g', { gpuMemBytes: 6e9, cpuMemBytes: 4e9 });
    const { graph: g } = await trainingGraph({ model: 'models/gpt.ts', preset: 'gpt3-6.7b', precision: 'fp16', config: { layers: 4 } });
    const solver = new LpWorker();
    const run = startLp(g, hw, { solver });
    try {
      const wide = await run.wideBound({ split: true });
      expect(wide.status).toBe('optimal');
      const widest = await run.wideBound({ chains: true, split: true });
      expect(widest.lowerBoundSeconds).toBeLessThanOrEqual(wide.lowerBoundSeconds * (1 + 1e-9));
      const r = roundSolution(g, await run.bound, 'bytes');
      // a seeded generator: the same placements every run
      const next = seeded(11);
      let checked = 0;
      for (let k = 0; k < 40 && checked < 4; k++) {
        const stateTier = r.stateTier.map((): Tier => { const u = next(); return u < 0.1 ? 'gpu' : u < 0.25 ? 'cpu' : 'nvme'; });
        const p = placementFrom(g, wide.groups, r.p16Tier, stateTier, new Set(r.offload), 0, new Set(r.recompute));
        // some NVMe groups split: master32 into CPU memory, the moments stay on NVMe
        const home = [...p.home];
        for (const q of wide.groups) if (home[q.state[0]] === 'nvme' && next() < 0.4) home[q.state[0]] = 'cpu';
        const split = { ...p, home };
        expect(wideningOf(g, split, wide.saved)).toEqual(splitsState(g, split) ? { chains: false, split: true, stream: false, cast: false } : undefined);
        if (!await widenedBoundHolds(g, hw, split, solver, { split: true }, wide.lowerBoundSeconds, `random ${k}${splitsState(g, split) ? ' (splits)' : ''}`)) continue; // does not fit
        if (splitsState(g, split)) checked++;
      }
      expect(checked).toBe(4);
    } finally { run.close(); solver.close(); }
  }, 180_000);

  // HiGHS's simplex, with the scaling compile gives the wide LP (strategy 4),
  // has answered "optimal" at a vertex far above the optimum: with a trial
  // row for the NVMe state staged during a CPU update, gpt3-6.7b on a V100
  // with 48 GB of CPU got 17.26 s (every group's state off the GPU) where the
  // interior point solver, the default simplex and the plan's own placement
  // said 2.48-5.03 s (docs/BENCHMARKS.md, seventeenth session). A row that
  // trips it shows here.
  it('the bound LP widened by split, and by split and chains, as compile solves them, are the interior point solver\'s optima (gpt3-6.7b: 4 and 8 layers with state on NVMe; 32 layers, 48 GB of CPU)', async () => {
    for (const c of [{ layers: 4, gpuMemBytes: 6e9, cpuMemBytes: 4e9 }, { layers: 8, gpuMemBytes: 8e9, cpuMemBytes: 3e9 }, { layers: 32, gpuMemBytes: undefined, cpuMemBytes: 48e9 }]) {
      const hw = loadProfile('v100-32g', { gpuMemBytes: c.gpuMemBytes, cpuMemBytes: c.cpuMemBytes });
      const { graph: g } = await trainingGraph({ model: 'models/gpt.ts', preset: 'gpt3-6.7b', precision: 'fp16', config: { layers: c.layers } });
      const solver = new LpWorker();
      try {
        const run = startLp(g, hw, { solver });
        for (const widen of [{ split: true }, { chains: true, split: true }]) {
          const wide = await run.wideBound(widen);
          expect(wide.status).toBe('optimal');
          const ipm = await boundWith(g, hw, solver, { solver: 'ipm' }, { widen });
          expect(typeof ipm).toBe('number');
          expect(Math.abs(wide.lowerBoundSeconds - (ipm as number)), `${c.layers} layers, ${JSON.stringify(widen)}: simplex ${wide.lowerBoundSeconds} s, interior point ${ipm} s`).toBeLessThanOrEqual(1e-6 * (ipm as number));
        }
      } finally { solver.close(); }
    }
  }, 120_000);
});
