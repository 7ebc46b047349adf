// A remade p16 whose state rounds to the CPU is kept on the CPU instead
// (compiler/partition/lp.ts castOnce): cast there once per step rather than
// again for each read cluster, while the CPU has room for it; and compile
// rounds the bound LP's shares too, so a plan can come from either LP; the
// bound LP's NVMe state shares round to the CPU where NVMe is not needed.
import { describe, expect, it } from 'vitest';
import { paramGroups, type LpSolution } from '../../compiler/partition/lp.js';
import { castOnce, roundSolution, type Rounded } from '../../compiler/partition/lp-round.js';
import type { Tier } from '../../compiler/cost/cost.js';
import { trainingGraph, compile } from '../../src/compile.js';
import { compiledOnce } from '../compiled-once.js';
import { verifyPlan } from '../../compiler/simulate/verify-plan.js';

describe('castOnce', () => {
  it('keeps on the CPU exactly the remade p16 whose state is there, within the CPU bytes given', async () => {
    const { graph: g } = await trainingGraph({ model: 'models/gpt.ts', preset: 'tiny', precision: 'fp16' });
    const groups = paramGroups(g);
    const states: Tier[] = ['cpu', 'gpu', 'cpu', 'nvme'];
    const p16s: Tier[] = ['nvme', 'nvme', 'gpu', 'nvme'];
    const r: Rounded = { stateTier: groups.map((_, i) => states[i % 4]), p16Tier: groups.map((_, i) => p16s[i % 4]), offload: new Set(), recompute: new Set() };
    const out = castOnce(g, groups, r, Infinity)!;
    groups.forEach((_, i) => expect(out.p16Tier[i], `group ${i}`).toBe(i % 4 === 0 ? 'cpu' : p16s[i % 4]));
    expect(out.stateTier).toEqual(r.stateTier);
    // homed on the CPU after it: the CPU state and the p16 kept there
    let homed = 0;
    groups.forEach((q, i) => { if (states[i % 4] === 'cpu') homed += q.stateBytes; if (i % 4 === 0) homed += q.p16Bytes; });
    expect(castOnce(g, groups, r, homed)).toBeDefined();
    expect(castOnce(g, groups, r, homed - 1)).toBeUndefined();
    // nothing to change: no remade p16 with its state on the CPU
    expect(castOnce(g, groups, { ...r, p16Tier: r.p16Tier.map((t) => (t === 'nvme' ? 'gpu' : t)) }, Infinity)).toBeUndefined();
  });

  it('fp32 has no cast to keep', async () => {
    const { graph: g } = await trainingGraph({ model: 'models/gpt.ts', preset: 'tiny', precision: 'fp32' });
    const groups = paramGroups(g);
    const r: Rounded = { stateTier: groups.map(() => 'cpu'), p16Tier: groups.map(() => 'nvme'), offload: new Set(), recompute: new Set() };
    expect(castOnce(g, groups, r, Infinity)).toBeUndefined();
  });
});

describe('compile with both LPs rounded', () => {
  it('gpt3-13b on an H200 with 32 GB of CPU: the plan verifies, fits and predicts no faster than the bound', async () => {
    // (the whole model: both LPs' roundings are the subject, not compile's second try in parts, ~28 s more here)
    const plan = await compile({ model: 'models/gpt.ts', preset: 'gpt3-13b', config: { layers: 40 }, hw: 'h200-141g', cpuMemBytes: 32e9, nvmeBytes: 0, precision: 'fp16', chunks: 1 });
    expect(verifyPlan(plan)).toEqual([]);
    for (const t of ['gpu', 'cpu'] as const) expect(plan.tiers[t].peakBytes).toBeLessThanOrEqual(plan.tiers[t].capacityBytes);
    expect(plan.predicted.stepSeconds).toBeGreaterThanOrEqual(plan.bound!.lowerBoundSeconds);
  }, 120_000);

  it('gpt3-13b on an H200: no remade p16 is cast on the CPU where its state is (the CPU has room)', async () => {
    const plan = await compiledOnce({ model: 'models/gpt.ts', preset: 'gpt3-13b', hw: 'h200-141g', precision: 'fp16' });
    const groups = paramGroups(plan.graph);
    expect(groups.some((q) => plan.placement.home[q.state[0]] === 'cpu')).toBe(true);
    for (const q of groups) if (plan.placement.home[q.state[0]] === 'cpu') expect(plan.placement.remat?.[q.p16] ?? false, plan.graph.tensors[q.p16].name).toBe(false);
  }, 120_000);
});

describe("the bound LP's NVMe shares", () => {
  it('round to the CPU where the state does not need NVMe, and stay on NVMe where it does', async () => {
    const { graph: g } = await trainingGraph({ model: 'models/gpt.ts', preset: 'tiny', precision: 'fp16' });
    const groups = paramGroups(g);
    const sol = {
      status: 'optimal', lowerBoundSeconds: 1, solveSeconds: 0, rows: 'bound', nvmeNeeded: false, size: { rows: 1, cols: 1, nonzeros: 1 },
      groups, small: new Uint8Array(groups.length),
      p16Share: groups.map(() => Float64Array.of(1, 0, 0)), stateShare: groups.map(() => Float64Array.of(0, 0.2, 0.8)),
      saved: [], keepShare: new Float64Array(0), recomputeShare: new Float64Array(0),
    } as LpSolution;
    for (const how of ['largest', 'bytes'] as const) {
      expect(new Set(roundSolution(g, sol, how).stateTier), how).toEqual(new Set(['cpu']));
      expect(roundSolution(g, { ...sol, nvmeNeeded: true }, how).stateTier, how).toContain('nvme');
      expect(roundSolution(g, { ...sol, rows: 'plan' }, how).stateTier, how).toContain('nvme');
    }
  });
});
