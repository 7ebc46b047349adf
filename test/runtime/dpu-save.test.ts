// A checkpoint saved by a DPU run holds every update of its steps: after
// step k the delayed groups still owe step k's gradient (DPU applies it in
// step k + 1), and saveCheckpoint applies it first. The checkpoint had held
// k - 1 updates of those groups (a review found it: 25 of gpt tiny's 28
// tensors one update behind the step the file names).
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { compile } from '../../src/compile.js';
import { TrainingSession } from '../../runtime/session.js';
import { syntheticData } from '../../runtime/data.js';
import { readSafetensors, toFloat64 } from '../../runtime/safetensors.js';
import { isDelayedUpdate } from '../../compiler/lower/dpu.js';
import type { Plan } from '../../compiler/plan/types.js';
import { scratchDir } from '../scratch-dir.js';

const dir = scratchDir('tiercut-dpu-save-');

async function trained(plan: Plan, steps: number, save?: string): Promise<Map<string, Float32Array>> {
  const s = new TrainingSession(plan, { seed: 3 });
  try {
    const data = syntheticData(plan.graph, 3);
    for (let k = 1; k <= steps; k++) await s.step(k, data(k));
    if (save) {
      await s.saveCheckpoint(save, steps);
      // (its gradients are then the extra pass's: no step may follow)
      await expect(s.step(steps + 1, data(steps + 1))).rejects.toThrow(/applied its pending updates for a checkpoint after step 4; train on in a new session/);
    }
    return s.parameters();
  } finally {
    s.close();
  }
}

describe('DPU checkpoints', () => {
  it('hold the delayed groups\' pending update: as step k + 1 applies it, every other group as after step k', async () => {
    const plan = await compile({ model: 'models/gpt.ts', preset: 'tiny', precision: 'fp16', gpuMemBytes: 400000, cpuMemBytes: 200000, dpuWarmupSteps: 2 });
    const steady = plan.dpu?.steady;
    expect(steady, 'the DPU plan was declined').toBeDefined();
    const delayed = new Set<string>();
    for (const op of steady!.graph.ops) {
      if (!isDelayedUpdate(steady!.graph, op)) continue;
      for (const t of op.inputs) if (steady!.graph.tensors[t].role === 'master32') delayed.add(steady!.graph.tensors[t].param!);
    }
    expect(delayed.size).toBeGreaterThan(0);
    const k = 4, file = join(dir, 'k4.safetensors');
    await trained(plan, k, file);
    const saved = readSafetensors(file);
    const after = await trained(plan, k), next = await trained(plan, k + 1);
    let others = 0;
    for (const [name, t] of saved) {
      const v = Float32Array.from(toFloat64(t));
      if (delayed.has(name)) {
        expect(v, name).toEqual(next.get(name));
        expect(v, `${name}: the pending update changes it`).not.toEqual(after.get(name));
      } else {
        others++;
        expect(v, name).toEqual(after.get(name));
      }
    }
    expect(others).toBeGreaterThan(0);
    expect(saved.size).toBe(delayed.size + others);

    // (a second save had run the extra pass again, one more update of every delayed group; a save
    // naming another step had dropped the pending update or counted Adam's bias correction from it)
    const s = new TrainingSession(plan, { seed: 3 });
    try {
      const data = syntheticData(plan.graph, 3);
      for (let j = 1; j <= k; j++) await s.step(j, data(j));
      await expect(s.saveCheckpoint(join(dir, 'k3.safetensors'), k - 1)).rejects.toThrow(/step: expected the last step this DPU session ran, 4, got '3'/);
      const again = [join(dir, 'again1.safetensors'), join(dir, 'again2.safetensors')];
      for (const f of again) await s.saveCheckpoint(f, k);
      for (const f of again) {
        const got = readSafetensors(f);
        for (const [name, t] of saved) expect(Float32Array.from(toFloat64(got.get(name)!)), `${f} ${name}`).toEqual(Float32Array.from(toFloat64(t)));
      }
    } finally {
      s.close();
    }
  }, 60_000);
});
