// The min-cut derives ZeRO-Offload's partition (ZeRO-Offload, section 4) without
// being told it: GPT-2 1.5B, fp16, one V100 with 16 GB usable, batch 1, seq 1024.
// The whole model state (16 bytes per parameter, ~24.9 GB) cannot stay on the
// GPU; the fp16 parameters, gradients and activations can. compile itself goes
// further: the LP keeps part of the state on the GPU (recomputing activations
// to make room), which the simulator finds faster than ZeRO-Offload's partition.
import { describe, it, expect, beforeAll } from 'vitest';
import { placeMinCut, planFor, trainingGraph } from '../../src/compile.js';
import { compiledOnce } from '../compiled-once.js';
import { loadProfile } from '../../compiler/cost/profiles.js';
import { ADAM_DEFAULTS } from '../../compiler/lower/optimizer.js';
import type { Plan } from '../../compiler/plan/types.js';
import { planStats } from '../../compiler/report/stats.js';

const OPTS = { model: 'models/gpt.ts', preset: 'gpt2-1.5b', hw: 'v100-32g', gpuMemBytes: 16e9, precision: 'fp16' as const, batch: 1, seq: 1024 };

describe('ZeRO-Offload derivation', () => {
  let plan: Plan;
  beforeAll(async () => {
    const hw = loadProfile(OPTS.hw, OPTS);
    const { graph } = await trainingGraph(OPTS);
    const cut = placeMinCut(graph, hw);
    expect(cut).toBeDefined();
    plan = planFor(graph, hw, cut!, { source: OPTS.model, preset: OPTS.preset, config: {} }, ADAM_DEFAULTS);
  });

  it('places param16, grad16 production and all forward/backward ops on the GPU; master32, m, v and the update on the CPU', () => {
    const g = plan.graph, p = plan.placement;
    const M = g.paramCount;
    expect(M).toBeGreaterThan(1.5e9);
    expect(16 * M).toBeGreaterThan(16e9); // the whole model state cannot fit
    const s = planStats(plan);
    console.log(JSON.stringify(s.placement), JSON.stringify(s.ops), JSON.stringify(s.traffic));
    for (const t of g.tensors) {
      if (t.role === 'param16') expect(p.home[t.id], t.name).toBe('gpu');
      if (t.role === 'master32' || t.role === 'adamM' || t.role === 'adamV') expect(p.home[t.id], t.name).toBe('cpu');
    }
    for (const op of g.ops) {
      if (op.phase === 'update') expect(p.opTier[op.id], `${op.kind} ${op.id}`).toBe('cpu');
      else expect(p.opTier[op.id], `${op.kind} ${op.id}`).toBe('gpu');
    }
    // every grad16 is produced on the GPU (by a backward op) and goes to the CPU once
    expect(s.placement.grad16.gpu + s.placement.grad16.cpu).toBe(2 * M);
  });

  it('moves exactly 2M bytes host-to-device and 2M bytes device-to-host per step, and fits', () => {
    const M = plan.graph.paramCount;
    expect(plan.traffic.h2dBytes).toBe(2 * M);
    expect(plan.traffic.d2hBytes).toBe(2 * M);
    expect(plan.traffic.nvmeReadBytes + plan.traffic.nvmeWriteBytes).toBe(0);
    expect(plan.tiers.gpu.peakBytes).toBeLessThanOrEqual(16e9);
    expect(plan.tiers.cpu.peakBytes).toBeGreaterThanOrEqual(12 * M); // master32 + m + v
  });

  it('compile keeps a faster placement than ZeRO-Offload\'s when the LP finds one (and says how it compares to the bound)', async () => {
    const best = await compiledOnce(OPTS);
    console.log(`min-cut (ZeRO-Offload) ${plan.predicted.stepSeconds.toFixed(3)} s, compile (${best.placement.method}) ${best.predicted.stepSeconds.toFixed(3)} s, LP bound ${best.bound!.lowerBoundSeconds.toFixed(3)} s`);
    expect(best.predicted.stepSeconds).toBeLessThanOrEqual(plan.predicted.stepSeconds);
    expect(best.bound!.lowerBoundSeconds).toBeLessThanOrEqual(best.predicted.stepSeconds);
    expect(best.tiers.gpu.peakBytes).toBeLessThanOrEqual(16e9);
  });
});
