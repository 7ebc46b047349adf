// Models at scale, planned symbolically (no weights allocated): the ZeRO-Offload
// paper's single-GPU results, reproduced by the partitioner.
//  - ZeRO-Offload (parameters kept on the GPU): a 13B GPT-3 trains on one
//    32 GB V100 with its 1.5 TB host share (and fit finds at least that).
//  - ZeRO-3 Offload (parameters offloaded too): a 40B model on the same V100.
import { describe, it, expect } from 'vitest';
import { compile } from '../../src/compile.js';
import { fit } from '../../src/fit.js';
import { verifyPlan } from '../../compiler/simulate/verify-plan.js';

describe('paper reproduction on one V100 32 GB (1.5 TB host share, no NVMe)', () => {
  it('fit finds a GPT of >= 13B parameters with parameters kept on the GPU', async () => {
    const found = await fit({ model: 'models/gpt.ts', hw: 'v100-32g', nvmeBytes: 0, precision: 'fp16', keepParamsOnGpu: true });
    console.log(`fit, parameters kept on a V100: ${found.model?.preset} ${JSON.stringify(found.model?.overrides)}, ${(found.params / 1e9).toFixed(2)}B, ${found.tried.length} compiles, predicted ${found.predicted?.stepSeconds.toFixed(2)} s/step`);
    expect(found.params).toBeGreaterThanOrEqual(13e9);
    expect(found.predicted!.stepSeconds).toBeGreaterThan(0);
    // the next layer does not fit: it stopped at the edge, not short of it
    expect(found.tried.some((t) => !t.feasible && t.preset === found.model!.preset && t.config?.layers === (found.model!.overrides.layers ?? 0) + 1)).toBe(true);
  }, 300_000); // (47-50 s on this VM with no LP cache: three presets refused before any LP, seven probes, the answer)

  it('GPT-3 13B fits with parameters kept on the GPU', async () => {
    // (whether it fits is the subject: asked as fit asks it, the first
    // placement that fits, probe 'fits', which fits exactly when the full
    // compile's does, fit-probe.test.ts; the full compile of the whole model
    // took 12.5 s in the suite, 4x its probe)
    const plan = await compile({ model: 'models/gpt.ts', preset: 'gpt3-13b', hw: 'v100-32g', nvmeBytes: 0, precision: 'fp16', keepParamsOnGpu: true, probe: 'fits' });
    expect(plan.graph.paramCount).toBeGreaterThan(12.8e9);
    for (const t of plan.graph.tensors) if (t.role === 'param16') expect(plan.placement.home[t.id]).toBe('gpu');
    expect(plan.tiers.gpu.peakBytes).toBeLessThanOrEqual(plan.tiers.gpu.capacityBytes);
    expect(verifyPlan(plan)).toEqual([]);
  });

  // (fit's question, asked as fit asks it: the first placement that fits,
  // probe 'fits', which fits exactly when the full compile's does; the full
  // compile took 31 s here, the probe 3.4 s)
  it('a 40B GPT fits when parameters may leave the GPU too', async () => {
    const plan = await compile({ model: 'models/gpt.ts', preset: 'gpt3-13b', config: { layers: 127 }, hw: 'v100-32g', nvmeBytes: 0, precision: 'fp16', probe: 'fits' });
    expect(plan.graph.paramCount).toBeGreaterThan(40e9);
    expect(plan.tiers.gpu.peakBytes).toBeLessThanOrEqual(plan.tiers.gpu.capacityBytes);
    expect(plan.tiers.cpu.peakBytes).toBeLessThanOrEqual(plan.tiers.cpu.capacityBytes);
    const p16Off = plan.graph.tensors.filter((t) => t.role === 'param16' && plan.placement.home[t.id] !== 'gpu').length;
    expect(p16Off).toBeGreaterThan(0);
    expect(verifyPlan(plan)).toEqual([]);
    console.log(`40B on a V100: gpu ${(plan.tiers.gpu.peakBytes / 1e9).toFixed(1)} GB, cpu ${(plan.tiers.cpu.peakBytes / 1e9).toFixed(0)} GB, predicted ${plan.predicted.stepSeconds.toFixed(1)} s/step (a probe: no bound)`);
  });
});

describe('capacity bound', () => {
  // (fit's probe of whether it fits: the same answer as the full compile,
  // fit-probe.test.ts; this one's full compile took 255 s alone on this VM,
  // its probe 38 s)
  it('h200-141g with 1.5 TB CPU and no NVMe holds a 120B GPT (12 bytes of state per parameter)', async () => {
    const plan = await compile({ model: 'models/gpt.ts', preset: 'gpt3-13b', config: { layers: 381 }, hw: 'h200-141g', cpuMemBytes: 1.5e12, nvmeBytes: 0, precision: 'fp16', probe: 'fits' });
    expect(plan.graph.paramCount).toBeGreaterThan(120e9);
    let state = 0;
    for (const t of plan.graph.tensors) if (t.persistent) state += t.sizeBytes;
    expect(state / plan.graph.paramCount).toBeCloseTo(12, 1);
    expect(plan.tiers.gpu.peakBytes).toBeLessThanOrEqual(plan.tiers.gpu.capacityBytes);
    expect(plan.tiers.cpu.peakBytes).toBeLessThanOrEqual(plan.tiers.cpu.capacityBytes);
    expect(verifyPlan(plan)).toEqual([]);
  }, 300_000);
});

describe('NVMe scale', () => {
  it('a 1T GPT plans on one a100-80g with 2 TB CPU and 28 TB of NVMe', async () => {
    const plan = await compile({ model: 'models/gpt.ts', preset: 'gpt-1t', hw: 'a100-80g', nvmeBytes: 28e12, precision: 'fp16' });
    expect(plan.graph.paramCount).toBeGreaterThan(1e12);
    for (const t of ['gpu', 'cpu', 'nvme'] as const) expect(plan.tiers[t].peakBytes).toBeLessThanOrEqual(plan.tiers[t].capacityBytes);
    expect(plan.tiers.nvme.peakBytes).toBeGreaterThan(1e12);
    expect(verifyPlan(plan)).toEqual([]);
  }, 300_000); // (31 s alone on 2 cores; 45-55 s while its finer placement LP's dual simplex ran to the 30 s limit, lp.ts postPlans)
});
