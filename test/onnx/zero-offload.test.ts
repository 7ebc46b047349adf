// ONNX models plan like DSL models: the tiny GPT exported by PyTorch, compiled
// for a V100 in fp16 with a GPU too small for the whole model state (16 bytes
// per parameter) but large enough for the fp16 parameters, gradients and
// activations, gets ZeRO-Offload's placement from the two-tier min-cut: 2M bytes
// host-to-device and 2M bytes device-to-host per step. Also: --freeze keeps matching initializers fixed.
import { describe, it, expect } from 'vitest';
import { compile, placeMinCut, planFor, trainingGraph } from '../../src/compile.js';
import { loadProfile } from '../../compiler/cost/profiles.js';
import { ADAM_DEFAULTS } from '../../compiler/lower/optimizer.js';

describe('ONNX model, ZeRO-Offload placement', () => {
  it('the two-tier min-cut of gpt-tiny.onnx on v100-32g, fp16, 300000 bytes of GPU', async () => {
    const opts = { model: 'fixtures/onnx/gpt-tiny.onnx', hw: 'v100-32g', precision: 'fp16' as const, gpuMemBytes: 300000 };
    const hw = loadProfile(opts.hw, opts);
    const { graph } = await trainingGraph(opts);
    const cut = placeMinCut(graph, hw);
    expect(cut).toBeDefined();
    const plan = planFor(graph, hw, cut!, { source: opts.model, preset: '', config: {} }, ADAM_DEFAULTS);
    const g = plan.graph, p = plan.placement, M = g.paramCount;
    expect(M).toBe(28032);
    expect(16 * M).toBeGreaterThan(300000); // the whole model state does not fit
    for (const t of g.tensors) {
      if (t.role === 'param16') expect(p.home[t.id], t.name).toBe('gpu');
      if (t.role === 'master32' || t.role === 'adamM' || t.role === 'adamV') expect(p.home[t.id], t.name).toBe('cpu');
    }
    for (const op of g.ops) expect(p.opTier[op.id], `${op.kind} ${op.id}`).toBe(op.phase === 'update' ? 'cpu' : 'gpu');
    expect(plan.traffic.h2dBytes).toBe(2 * M);
    expect(plan.traffic.d2hBytes).toBe(2 * M);
    expect(plan.tiers.gpu.peakBytes).toBeLessThanOrEqual(300000);
  });

  it('--freeze keeps matching initializers fixed: no gradient, no optimizer state', async () => {
    const plan = await compile({ model: 'fixtures/onnx/gpt-tiny.onnx', freeze: /^(wte|wpe)\./ });
    const frozen = plan.graph.tensors.filter((t) => t.role === 'param16' && t.frozen).map((t) => t.name);
    expect(frozen).toEqual(expect.arrayContaining(['wte.weight', 'wpe.weight']));
    expect(plan.graph.paramCount).toBe(28032 - 64 * 32 - 16 * 32);
    expect(plan.graph.tensors.some((t) => t.role === 'adamM' && (t.param === 'wte.weight' || t.param === 'wpe.weight'))).toBe(false);
    expect(plan.graph.tensors.some((t) => t.role === 'grad16' && t.param === 'wte.weight')).toBe(false);
  });
});
