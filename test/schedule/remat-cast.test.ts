// A param16 that the placement rematerialises (made again from master32 for
// each use) is cast where it is read, and only there: no cast's result is
// dropped unread, so no master32 is read from NVMe for nothing.
import { describe, it, expect } from 'vitest';
import { compile } from '../../src/compile.js';
import { verifyPlan } from '../../compiler/simulate/verify-plan.js';

describe('rematerialised param16', () => {
  it('every cast of master32 into param16 is read, and the reads from NVMe are one per cast and one per update', async () => {
    for (const precision of ['fp16', 'bf16'] as const) {
      const plan = await compile({ model: 'models/gpt.ts', preset: 'tiny', precision, gpuMemBytes: 400_000, cpuMemBytes: 200_000 });
      const remat = plan.placement.remat ?? [];
      const again = plan.graph.tensors.filter((t) => t.role === 'param16' && remat[t.id]);
      expect(again.length).toBeGreaterThan(0);
      expect(verifyPlan(plan)).toEqual([]);
      const read = new Set<number>();
      for (const x of plan.instructions) if (x.kind !== 'free') x.inputs.forEach((b) => read.add(b));
      const casts = plan.instructions.filter((x) => x.kind === 'run' && plan.graph.ops[x.op].kind === 'reshape' && plan.graph.ops[x.op].phase === 'update');
      for (const x of casts) expect(read.has(x.outputs[0]), `cast ${x.id} into ${plan.graph.tensors[plan.buffers[x.outputs[0]].tensor].name}`).toBe(true);
      // master32 on NVMe is read for the casts of its param16 and for its update, nothing more
      for (const t of plan.graph.tensors) {
        if (t.role !== 'master32' || plan.placement.home[t.id] !== 'nvme') continue;
        const bufs = new Set(plan.buffers.filter((b) => b.tensor === t.id && b.tier === 'nvme').map((b) => b.id));
        const reads = plan.instructions.filter((x) => x.kind === 'copy' && bufs.has(x.inputs[0])).length;
        const castOp = plan.graph.ops.find((o) => o.kind === 'reshape' && o.phase === 'update' && o.inputs[0] === t.id)!;
        const castsOnCpu = casts.filter((x) => x.op === castOp.id).length;
        expect(reads, t.name).toBeLessThanOrEqual(castsOnCpu + 1);
      }
    }
  });
});
