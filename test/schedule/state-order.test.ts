// A parameter's state together in the spill file (compiler/schedule/state-order.ts,
// arena.ts): in a plan with optimizer state on NVMe, the persistent nvme
// buffers of one adam op's state (p, m, v in operand order) follow each other
// block after block, parameters in forward order, so the update's reads and
// write-backs are file-contiguous and the forward pass reads p in ascending
// file order; the plan stays valid and deterministic (the same input gives a
// byte-identical plan).
import { describe, expect, it } from 'vitest';
import { NVME_ALIGN_BYTES } from '../../compiler/schedule/arena.js';
import { verifyPlan } from '../../compiler/simulate/verify-plan.js';
import { compile } from '../../src/compile.js';

const nvmePlan = () => compile({ model: 'models/gpt.ts', preset: 'tiny', gpuMemBytes: 400000, cpuMemBytes: 200000 });
const blocksOf = (n: number) => Math.ceil(n / NVME_ALIGN_BYTES) * NVME_ALIGN_BYTES;

describe('state order in the nvme arena', () => {
  it('puts p, m, v of a parameter next to each other, parameters in forward order', async () => {
    const plan = await nvmePlan();
    expect(verifyPlan(plan)).toEqual([]);
    const home = new Map<number, (typeof plan.buffers)[number]>();  // tensor -> persistent nvme buffer
    for (const b of plan.buffers) if (b.tier === 'nvme' && b.allocAt < 0 && b.freeAt < 0) home.set(b.tensor, b);
    const updates = plan.instructions.filter((x) => x.kind === 'run' && plan.graph.ops[x.op].kind === 'adam');
    const groups = updates.map((u) => plan.graph.ops[u.op].outputs.map((t) => home.get(t)).filter((b) => b !== undefined)).filter((g) => g.length > 0);
    // this plan keeps every parameter's p, m and v on nvme
    expect(groups.length).toBeGreaterThan(10);
    for (const state of groups) {
      expect(state).toHaveLength(3);
      for (let i = 1; i < state.length; i++) {
        const [a, b] = [state[i - 1]!, state[i]!];
        expect(b.offsetBytes, `${plan.graph.tensors[b.tensor].name} right after ${plan.graph.tensors[a.tensor].name}`).toBe(a.offsetBytes + blocksOf(a.sizeBytes));
      }
    }
    // groups packed one after another, in the order of their first buffer (forward order)
    const byFile = [...groups].sort((a, b) => a[0]!.offsetBytes - b[0]!.offsetBytes);
    expect(byFile.map((g) => g[0]!.id)).toEqual([...groups].map((g) => g[0]!.id).sort((a, b) => a - b));
    expect(byFile[0]![0]!.offsetBytes).toBe(0);
    for (let i = 1; i < byFile.length; i++) {
      const last = byFile[i - 1]!.at(-1)!;
      expect(byFile[i]![0]!.offsetBytes).toBe(last.offsetBytes + blocksOf(last.sizeBytes));
    }
    // the forward pass reads p in ascending file order (the store merges those reads across m, v)
    const firstUpdate = updates[0]!.id;
    const forward = plan.instructions.filter((x) => x.stream === 'nvmeRead' && x.kind === 'copy' && x.id < firstUpdate).map((x) => plan.buffers[x.inputs[0]]);
    const firstReads = forward.filter((b, i) => forward.findIndex((c) => c.id === b.id) === i);  // the first read of each
    expect(firstReads.length).toBeGreaterThan(10);
    let ascending = 0;
    for (let i = 1; i < firstReads.length; i++) if (firstReads[i]!.offsetBytes > firstReads[i - 1]!.offsetBytes) ascending++;
    expect(ascending).toBe(firstReads.length - 1);
    // the write-backs of one update are consecutive nvmeWrite copies to consecutive file ranges
    const writes = plan.instructions.filter((x) => x.stream === 'nvmeWrite' && x.kind === 'copy').map((x) => plan.buffers[x.outputs[0]]);
    let adjacent = 0;
    for (let i = 1; i < writes.length; i++) if (writes[i].offsetBytes === writes[i - 1].offsetBytes + blocksOf(writes[i - 1].sizeBytes)) adjacent++;
    expect(adjacent).toBeGreaterThanOrEqual(2 * groups.length);
  }, 60_000);

  it('is deterministic: the same input gives a byte-identical plan', async () => {
    const [a, b] = [await nvmePlan(), await nvmePlan()];
    expect(JSON.stringify(b)).toBe(JSON.stringify(a));
  }, 60_000);
});
