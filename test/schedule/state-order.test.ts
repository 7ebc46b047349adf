// A parameter's state together in the spill file (compiler/schedule/state-order.ts,
// arena.ts): in a plan with optimizer state on NVMe, the persistent nvme
// buffers of one adam op's state (p, m, v in operand order) follow each other
// block after block, parameters in update order, so the update's reads and
// write-backs are file-contiguous; the plan stays valid and deterministic
// (the same input gives a byte-identical plan).
import { describe, expect, it } from 'vitest';
import { NVME_ALIGN_BYTES } from '../../compiler/schedule/arena.js';
import { verifyPlan } from '../../compiler/simulate/verify-plan.js';
import { compile } from '../../src/compile.js';

const nvmePlan = () => compile({ model: 'models/gpt.ts', preset: 'tiny', gpuMemBytes: 400000, cpuMemBytes: 200000 });
const blocksOf = (n: number) => Math.ceil(n / NVME_ALIGN_BYTES) * NVME_ALIGN_BYTES;

describe('state order in the nvme arena', () => {
  it('puts p, m, v of a parameter next to each other, parameters in update order', async () => {
    const plan = await nvmePlan();
    expect(verifyPlan(plan)).toEqual([]);
    const home = new Map<number, (typeof plan.buffers)[number]>();  // tensor -> persistent nvme buffer
    for (const b of plan.buffers) if (b.tier === 'nvme' && b.allocAt < 0 && b.freeAt < 0) home.set(b.tensor, b);
    const updates = plan.instructions.filter((x) => x.kind === 'run' && plan.graph.ops[x.op].kind === 'adam');
    let groups = 0, threes = 0, lastEnd = -1, inOrder = 0;
    for (const u of updates) {
      const state = plan.graph.ops[u.op].outputs.map((t) => home.get(t)).filter((b) => b !== undefined);
      if (state.length === 0) continue;
      groups++;
      if (state.length === 3) threes++;
      for (let i = 1; i < state.length; i++) {
        const [a, b] = [state[i - 1]!, state[i]!];
        expect(b.offsetBytes, `${plan.graph.tensors[b.tensor].name} right after ${plan.graph.tensors[a.tensor].name}`).toBe(a.offsetBytes + blocksOf(a.sizeBytes));
      }
      // the next parameter updated starts where this one's state ends (update order)
      if (lastEnd >= 0 && state[0]!.offsetBytes === lastEnd) inOrder++;
      const last = state[state.length - 1]!;
      lastEnd = last.offsetBytes + blocksOf(last.sizeBytes);
    }
    // this plan keeps every parameter's p, m and v on nvme
    expect(groups).toBeGreaterThan(10);
    expect(threes).toBe(groups);
    expect(inOrder).toBe(groups - 1);
    // the write-backs of one update are consecutive nvmeWrite copies to consecutive file ranges
    const writes = plan.instructions.filter((x) => x.stream === 'nvmeWrite' && x.kind === 'copy').map((x) => plan.buffers[x.outputs[0]]);
    let adjacent = 0;
    for (let i = 1; i < writes.length; i++) if (writes[i].offsetBytes === writes[i - 1].offsetBytes + blocksOf(writes[i - 1].sizeBytes)) adjacent++;
    expect(adjacent).toBeGreaterThanOrEqual(2 * groups);
  }, 60_000);

  it('is deterministic: the same input gives a byte-identical plan', async () => {
    const [a, b] = [await nvmePlan(), await nvmePlan()];
    expect(JSON.stringify(b)).toBe(JSON.stringify(a));
  }, 60_000);
});
