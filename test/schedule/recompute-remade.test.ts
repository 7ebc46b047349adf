// A recompute on the GPU whose producer reads a param16 made again from
// master32 (remade) does not make that param16 once more: the half copy the
// CPU made for the recompute is kept until the next reader of the pass (the
// backward pass's own read of the weight), which copies it up again instead
// of casting master32 read again from NVMe. So in the backward pass a remade
// param16 is cast once per cluster of its reads there (once where only
// recomputes read it), however many recomputes read it, and master32 is read
// from NVMe once per cast and once for the update. Training
// matches the all-GPU plan bit for bit.
import { describe, expect, it } from 'vitest';
import { planFor } from '../../src/compile.js';
import { paramGroups } from '../../compiler/partition/lp.js';
import { placementFrom } from '../../compiler/partition/lp-round.js';
import { readClusters } from '../../compiler/partition/lp-memory.js';
import { consumers } from '../../compiler/ir/graph.js';
import { ADAM_DEFAULTS } from '../../compiler/lower/optimizer.js';
import { tinyHalfModels } from '../helpers.js';

describe('a remade param16 read by recomputes', () => {
  it('is cast once per cluster of its reads, and trains as the all-GPU plan', async () => {
    for (const { g, hw, model, reference, losses } of await tinyHalfModels()) {
      const groups = paramGroups(g);
      const cons = consumers(g);
      // state on NVMe, every param16 remade; the output of every forward
      // matmul reading a weight recomputed, and the forward ops reading it
      // (a bias add, a rotary embedding): recomputing those runs the matmul again
      const p16s = new Set(groups.map((q) => q.p16));
      const matmuls = g.ops.filter((o) => o.phase === 'forward' && o.kind === 'matmul' && o.inputs.some((t) => p16s.has(t)));
      const recompute = new Set(matmuls.flatMap((o) => [o.outputs[0], ...cons[o.outputs[0]].filter((c) => g.ops[c].phase === 'forward').flatMap((c) => g.ops[c].outputs)]));
      const p = placementFrom(g, groups, groups.map(() => 'nvme'), groups.map(() => 'nvme'), new Set(), 0, recompute);
      const plan = planFor(g, hw, p, model, ADAM_DEFAULTS);
      const runs = (op: number) => plan.instructions.filter((x) => x.kind === 'run' && x.op === op).length;
      // matmuls ran again (recomputed) and read a remade param16 there
      expect(matmuls.filter((o) => runs(o.id) > 1).length).toBeGreaterThan(2);
      const firstBackward = plan.instructions.findIndex((x) => x.kind === 'run' && g.ops[x.op].phase === 'backward');
      let remade = 0;
      for (const q of groups) {
        if (!plan.placement.remat?.[q.p16]) continue;
        remade++;
        // in the backward pass: one cast per cluster of the backward's own reads, at least one where recomputes read it
        const clusters = readClusters(g, cons[q.p16].filter((c) => g.ops[c].phase === 'backward')).length;
        const casts = plan.instructions.filter((x) => x.kind === 'run' && x.op === q.cast && x.id > firstBackward).length;
        expect(casts, g.tensors[q.p16].name).toBeLessThanOrEqual(Math.max(1, clusters));
        const nvme = new Set(plan.buffers.filter((b) => b.tensor === q.state[0] && b.tier === 'nvme').map((b) => b.id));
        const reads = plan.instructions.filter((x) => x.kind === 'copy' && nvme.has(x.inputs[0])).length;
        expect(reads, g.tensors[q.state[0]].name).toBeLessThanOrEqual(runs(q.cast) + 1);
      }
      expect(remade).toBeGreaterThan(2);
      expect(await losses(plan)).toEqual(reference);
    }
  }, 60_000);
});
