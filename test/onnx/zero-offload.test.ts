// ONNX models plan like DSL models: the tiny GPT exported by PyTorch, compiled
// for a V100 in fp16 with a GPU too small for the whole model state (16 bytes
// per parameter) but large enough for the fp16 parameters, gradients and
// activations, gets ZeRO-Offload's placement: 2M bytes host-to-device and 2M
// bytes device-to-host per step. Also: --freeze keeps matching initializers fixed.
import { describe, it, expect } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Plan } from '../../compiler/plan/types.js';
import { compile } from '../../src/compile.js';

const dir = mkdtempSync(join(tmpdir(), 'tiercut-onnx-zero-'));

describe('ONNX model, ZeRO-Offload placement', () => {
  it('tiercut compile gpt-tiny.onnx --hw v100-32g --precision fp16 --gpu-mem 300000', () => {
    const out = join(dir, 'gpt.plan.json');
    const r = spawnSync(process.execPath, ['bin/tiercut.js', 'compile', 'fixtures/onnx/gpt-tiny.onnx', '--hw', 'v100-32g', '--precision', 'fp16', '--gpu-mem', '300000', '-o', out], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const plan = JSON.parse(readFileSync(out, 'utf8')) as Plan;
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
