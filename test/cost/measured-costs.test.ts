// The measured parts of the cost model: kernel costs (fixed + factor x
// roofline, fitted by hw calibrate), NVMe request latency, and the executor's
// overheads in the simulator — exact arithmetic on hand-made cases, the fit on
// synthetic measurements, and profile validation of the new fields.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { copySeconds, kernelKey, opKernelKey, opSeconds, rooflineSeconds } from '../../compiler/cost/cost.js';
import { BUILTIN_PROFILES, loadProfile, type HardwareProfile } from '../../compiler/cost/profiles.js';
import type { Graph } from '../../compiler/ir/types.js';
import type { Placement } from '../../compiler/partition/placement.js';
import type { PlanBuffer, PlanInstruction } from '../../compiler/plan/types.js';
import { simulate } from '../../compiler/simulate/simulate.js';
import { slope } from '../../src/calibrate.js';
import { fitKernel } from '../../src/calibrate-kernels.js';
import { compile } from '../../src/compile.js';
import { scratchDir } from '../scratch-dir.js';

const local = BUILTIN_PROFILES.local;

describe('nvme batch fit', () => {
  it('the least-squares slope recovers a line and ignores a constant', () => {
    const k = [1, 2, 4, 8, 16, 32];
    expect(slope(k, k.map((x) => 1.5e-4 + 3e-5 * x))).toBeCloseTo(3e-5, 15);
    expect(slope(k, k.map(() => 2e-4))).toBe(0);
    expect(slope([4, 4], [1, 2])).toBe(0);
  });
});

describe('kernel fit', () => {
  it('recovers fixed + factor x roofline from exact measurements', () => {
    const r = [1e-6, 2e-6, 5e-6, 2e-5, 1e-4];
    const f = fitKernel(r, r.map((x) => 3e-6 + 2.5 * x));
    expect(f.fixedSeconds).toBeCloseTo(3e-6, 12);
    expect(f.rooflineFactor).toBeCloseTo(2.5, 9);
  });

  it('never returns a negative coefficient', () => {
    const r = [1e-6, 2e-6, 4e-6];
    const f = fitKernel(r, r.map((x) => -1e-6 + 3 * x));  // a free fit would want fixed < 0
    expect(f.fixedSeconds).toBe(0);
    expect(f.rooflineFactor).toBeGreaterThan(2);
    const g = fitKernel(r, [5e-6, 4e-6, 3e-6]);            // slower when smaller: a constant
    expect(g.rooflineFactor).toBe(0);
    expect(g.fixedSeconds).toBeGreaterThan(3e-6);
    expect(g.fixedSeconds).toBeLessThan(5e-6);
  });

  it('weighs relative error: a small instance is fitted as well as a large one', () => {
    // two regimes a straight line cannot both match: 1 µs at the small end, 10x roofline at the large
    const r = [1e-7, 1e-7, 1e-5, 1e-5], m = [1e-6, 1e-6, 1e-4, 1e-4];
    const f = fitKernel(r, m);
    for (let i = 0; i < r.length; i++) expect(Math.abs(f.fixedSeconds + f.rooflineFactor * r[i] - m[i]) / m[i]).toBeLessThan(0.02);
  });

  it('goes through the origin when the instances are all alike', () => {
    const m = [4e-6, 6e-6, 8e-6];
    const f = fitKernel([2e-6, 2e-6, 2e-6], m);
    expect(f.fixedSeconds).toBe(0);
    // the constant with the least squared relative error: sum(1/m) / sum(1/m^2)
    const best = m.reduce((s, x) => s + 1 / x, 0) / m.reduce((s, x) => s + 1 / x ** 2, 0);
    expect(f.rooflineFactor * 2e-6).toBeCloseTo(best, 15);
  });
});

describe('measured costs in the cost model', () => {
  it('keys kernels by op kind and the flag / name attributes that pick their code', () => {
    const op = (kind: string, attrs: Record<string, unknown>) => ({ kind, attrs }) as unknown as Graph['ops'][number];
    expect(kernelKey(op('gelu', {}))).toBe('gelu');
    expect(kernelKey(op('gelu', { erf: true }))).toBe('gelu[erf]');
    expect(kernelKey(op('gelu', { erf: false }))).toBe('gelu');
    expect(kernelKey(op('attention', { heads: 4, causal: true, kvHeads: 2 }))).toBe('attention[causal]');
    expect(kernelKey(op('unary', { fn: 'exp' }))).toBe('unary[fn=exp]');
    expect(kernelKey(op('bmm', { transB: true, transA: true }))).toBe('bmm[transA,transB]');
    expect(kernelKey(op('gelu', { erf: true }), 'f16')).toBe('gelu[erf]@f16');
    expect(kernelKey(op('matmul', {}), 'bf16')).toBe('matmul@bf16');
  });

  it("a half kernel's own cost wins; without one it costs as the same kernel in fp32", async () => {
    const plan = await compile({ model: 'models/bert.ts', preset: 'tiny', precision: 'fp16' });
    const g = plan.graph;
    const erf = g.ops.find((o) => o.kind === 'gelu' && o.attrs.erf)!;
    expect(opKernelKey(g, erf)).toBe('gelu[erf]@f16');
    const adam = g.ops.find((o) => o.kind === 'adam')!;
    expect(opKernelKey(g, adam)).toBe('adam@f16'); // an fp16 gradient in, fp32 state
    const r = rooflineSeconds(g, erf, 'gpu', local);
    const fp32 = { 'gelu[erf]': { fixedSeconds: 0, rooflineFactor: 3 } };
    expect(opSeconds(g, erf, 'gpu', { ...local, kernels: fp32 })).toBeCloseTo(3 * r, 15);
    expect(opSeconds(g, erf, 'gpu', { ...local, kernels: { ...fp32, 'gelu[erf]@f16': { fixedSeconds: 2e-6, rooflineFactor: 5 } } })).toBeCloseTo(2e-6 + 5 * r, 15);
  }, 60_000);

  it("a variant's own cost wins over its kind's", async () => {
    const plan = await compile({ model: 'models/bert.ts', preset: 'tiny' });
    const g = plan.graph;
    const erf = g.ops.find((o) => o.kind === 'gelu' && o.attrs.erf)!;
    const kinds = { gelu: { fixedSeconds: 1e-6, rooflineFactor: 1 } };
    const r = rooflineSeconds(g, erf, 'gpu', local);
    expect(opSeconds(g, erf, 'gpu', { ...local, kernels: kinds })).toBeCloseTo(1e-6 + r, 15);
    expect(opSeconds(g, erf, 'gpu', { ...local, kernels: { ...kinds, 'gelu[erf]': { fixedSeconds: 0, rooflineFactor: 3 } } })).toBeCloseTo(3 * r, 15);
  }, 60_000);

  it('kernels and nvme latency change only what they name', async () => {
    const plan = await compile({ model: 'models/mlp.ts', preset: 'tiny' });
    const g = plan.graph;
    const mm = g.ops.find((o) => o.kind === 'matmul')!, add = g.ops.find((o) => o.kind === 'add')!;
    const hw: HardwareProfile = { ...local, kernels: { matmul: { fixedSeconds: 1e-6, rooflineFactor: 4 } }, nvme: { ...local.nvme, readLatencySeconds: 1e-4, writeLatencySeconds: 2e-4 } };
    expect(opSeconds(g, mm, 'gpu', hw)).toBeCloseTo(1e-6 + 4 * rooflineSeconds(g, mm, 'gpu', local), 15);
    expect(opSeconds(g, add, 'gpu', hw)).toBe(opSeconds(g, add, 'gpu', local));
    expect(opSeconds(g, mm, 'gpu', local)).toBe(rooflineSeconds(g, mm, 'gpu', local));
    expect(copySeconds(4096, 'nvme', 'cpu', hw) - copySeconds(4096, 'nvme', 'cpu', local)).toBeCloseTo(1e-4, 15);
    expect(copySeconds(4096, 'cpu', 'nvme', hw) - copySeconds(4096, 'cpu', 'nvme', local)).toBeCloseTo(2e-4, 15);
    expect(copySeconds(4096, 'cpu', 'gpu', hw)).toBe(copySeconds(4096, 'cpu', 'gpu', local));
  }, 60_000);

  it('the simulator charges dispatch per instruction and one step overhead on a single stream', async () => {
    const plan = await compile({ model: 'models/mlp.ts', preset: 'tiny' });
    expect(new Set(plan.instructions.map((x) => x.stream))).toEqual(new Set(['gpu']));
    const base = simulate(plan.graph, plan.placement, plan.buffers, plan.instructions, plan.hardware);
    const over = { instructionSeconds: 3e-7, wakeSeconds: 5e-6, stepSeconds: 2e-5 };
    const sim = simulate(plan.graph, plan.placement, plan.buffers, plan.instructions, { ...plan.hardware, executor: over });
    // one round per run instruction: on a single stream every free is ready when
    // the instruction before it completes, and completes with it (no round of its own)
    const rounds = plan.instructions.filter((x) => x.kind !== 'free').length;
    expect(rounds).toBeLessThan(plan.instructions.length);
    expect(sim.stepSeconds).toBeCloseTo(base.stepSeconds + (rounds - 1) * over.instructionSeconds + over.stepSeconds, 12);
    for (const x of plan.instructions) if (x.kind === 'free') expect([sim.start[x.id], sim.end[x.id]]).toEqual([sim.end[x.id - 1], sim.end[x.id - 1]]);
    expect(sim.streamBusySeconds.gpu).toBeCloseTo(base.streamBusySeconds.gpu, 15);  // busy = the instructions only
  }, 60_000);

  it('the simulator charges an nvme batch one latency plus the per-request cost of every further request, each member ending when the batch is answered and its own bytes have moved', () => {
    // five ready nvme reads of 4096 bytes, each into its own cpu buffer: one batch (one block
    // apart in the file, so that none is merged with the one before: see the next test)
    const n = 5;
    const buffers: PlanBuffer[] = [];
    for (let i = 0; i < n; i++) {
      buffers.push({ id: 2 * i, tensor: i, tier: 'nvme', offsetBytes: i * 8192, sizeBytes: 4096, allocAt: -1, freeAt: -1 });
      buffers.push({ id: 2 * i + 1, tensor: i, tier: 'cpu', offsetBytes: i * 4096, sizeBytes: 4096, allocAt: i, freeAt: -1 });
    }
    const ins: PlanInstruction[] = Array.from({ length: n }, (_, i) => ({ id: i, stream: 'nvmeRead', kind: 'copy', op: -1, inputs: [2 * i], outputs: [2 * i + 1], waits: [] }));
    const none = {} as Graph, nowhere = {} as Placement;
    const bytes = (n * 4096) / local.nvme.readBytesPerSec;
    const nvme = { ...local.nvme, readLatencySeconds: 1e-4, queueDepth: 2 };
    // without a measured batch cost: one latency per queue depth of requests
    expect(simulate(none, nowhere, buffers, ins, { ...local, nvme }).stepSeconds).toBeCloseTo(3 * 1e-4 + bytes, 12);
    const sim = simulate(none, nowhere, buffers, ins, { ...local, nvme: { ...nvme, readBatchRequestSeconds: 3e-5 } });
    expect(sim.stepSeconds).toBeCloseTo(1e-4 + (n - 1) * 3e-5 + bytes, 12);
    // member i ends after one latency, every further request (the disk answers
    // a small batch at once) and the bytes of members 0..i
    for (let i = 0; i < n; i++) {
      expect(sim.start[i]).toBe(0);
      expect(sim.end[i]).toBeCloseTo(1e-4 + (n - 1) * 3e-5 + ((i + 1) * 4096) / local.nvme.readBytesPerSec, 12);
    }
    expect(sim.end[n - 1]).toBe(sim.stepSeconds);
    expect(sim.streamBusySeconds.nvmeRead).toBeCloseTo(sim.stepSeconds, 12);
    // a reader of the first member starts when that member ends, not when the batch does
    const gpuBuf: PlanBuffer = { id: 2 * n, tensor: n, tier: 'gpu', offsetBytes: 0, sizeBytes: 4096, allocAt: -1, freeAt: -1 };
    const reader: PlanInstruction = { id: n, stream: 'h2d', kind: 'copy', op: -1, inputs: [1], outputs: [2 * n], waits: [0] };
    const withReader = simulate(none, nowhere, [...buffers, gpuBuf], [...ins, reader], { ...local, nvme: { ...nvme, readBatchRequestSeconds: 3e-5 } });
    expect(withReader.start[n]).toBeCloseTo(withReader.end[0], 12);
    expect(withReader.start[n]).toBeLessThan(withReader.end[n - 1]);
    // a single copy is not a batch: latency + bytes
    expect(simulate(none, nowhere, buffers, ins.slice(0, 1), { ...local, nvme: { ...nvme, readBatchRequestSeconds: 3e-5 } }).stepSeconds).toBeCloseTo(1e-4 + 4096 / local.nvme.readBytesPerSec, 12);
  });

  it('the simulator prices file-contiguous members of a batch as one request (merged I/O), up to the block size', () => {
    // reads of 4096 bytes (the third 100 bytes: a whole block in the file) at these file offsets:
    // [0, 4096, 8192] follow each other, then a gap, then [16384, 20480]
    const offsets = [0, 4096, 8192, 16384, 20480];
    const sizes = [4096, 4096, 100, 4096, 4096];
    const buffers: PlanBuffer[] = [];
    offsets.forEach((o, i) => {
      buffers.push({ id: 2 * i, tensor: i, tier: 'nvme', offsetBytes: o, sizeBytes: sizes[i], allocAt: -1, freeAt: -1 });
      buffers.push({ id: 2 * i + 1, tensor: i, tier: 'cpu', offsetBytes: i * 4096, sizeBytes: sizes[i], allocAt: i, freeAt: -1 });
    });
    const ins: PlanInstruction[] = offsets.map((_, i) => ({ id: i, stream: 'nvmeRead', kind: 'copy', op: -1, inputs: [2 * i], outputs: [2 * i + 1], waits: [] }));
    const none = {} as Graph, nowhere = {} as Placement;
    const bw = local.nvme.readBytesPerSec;
    const upTo = (k: number) => sizes.slice(0, k + 1).reduce((a, b) => a + b, 0);
    const nvme = { ...local.nvme, readLatencySeconds: 1e-4, readBatchRequestSeconds: 3e-5, blockBytes: 1 << 20 };
    // two runs, one request each: members end with their run, once the batch's two requests are answered (one latency + one per-request cost) and the bytes up to the run's last copy have moved
    const sim = simulate(none, nowhere, buffers, ins, { ...local, nvme });
    const lastOf = [2, 2, 2, 4, 4];
    for (let i = 0; i < offsets.length; i++) expect(sim.end[i], `member ${i}`).toBeCloseTo(1e-4 + 3e-5 + upTo(lastOf[i]) / bw, 12);
    expect(sim.stepSeconds).toBeCloseTo(1e-4 + 3e-5 + upTo(4) / bw, 12);
    // a run holds at most blockBytes of file blocks: with 8 KiB, [0, 4096] | [8192] | [16384, 20480]
    const small = simulate(none, nowhere, buffers, ins, { ...local, nvme: { ...nvme, blockBytes: 8192 } });
    const lastOf8 = [1, 1, 2, 4, 4];
    for (let i = 0; i < offsets.length; i++) expect(small.end[i], `member ${i}`).toBeCloseTo(1e-4 + 2 * 3e-5 + upTo(lastOf8[i]) / bw, 12);
    // a merged run costs what one copy of its bytes costs: latency + bytes / bandwidth
    const one = simulate(none, nowhere, buffers, ins.slice(0, 3), { ...local, nvme });
    expect(one.stepSeconds).toBeCloseTo(1e-4 + upTo(2) / bw, 12);
  });

  it('the simulator charges a wake-up when a stream blocked on another', () => {
    // copies back and forth between h2d and d2h, each waiting for the one before
    const buffers: PlanBuffer[] = [
      { id: 0, tensor: 0, tier: 'cpu', offsetBytes: 0, sizeBytes: 6e6, allocAt: -1, freeAt: -1 },
      { id: 1, tensor: 1, tier: 'gpu', offsetBytes: 0, sizeBytes: 6e6, allocAt: -1, freeAt: -1 },
    ];
    const n = 9;
    const ins: PlanInstruction[] = Array.from({ length: n }, (_, i) => ({
      id: i, stream: i % 2 === 0 ? 'h2d' : 'd2h', kind: 'copy', op: -1,
      inputs: [i % 2 === 0 ? 0 : 1], outputs: [i % 2 === 0 ? 1 : 0], waits: i > 0 ? [i - 1] : [],
    }));
    const none = {} as Graph, nowhere = {} as Placement;
    const d = 6e6 / local.h2dBytesPerSec;
    const over = { instructionSeconds: 1e-7, wakeSeconds: 4e-6, stepSeconds: 1e-5 };
    const sim = simulate(none, nowhere, buffers, ins, { ...local, executor: over });
    expect(simulate(none, nowhere, buffers, ins, local).stepSeconds).toBeCloseTo(n * d, 12);
    expect(sim.stepSeconds).toBeCloseTo(n * d + (n - 1) * over.wakeSeconds + over.stepSeconds, 12);
  });
});

describe('profile files with measured fields', () => {
  const dir = scratchDir('tiercut-profile-');
  const write = (name: string, extra: Record<string, unknown>) => {
    const file = join(dir, `${name}.json`);
    writeFileSync(file, JSON.stringify({ ...local, ...extra }));
    return file;
  };

  it('accepts them and rejects bad values naming the field', () => {
    const good = loadProfile(write('good', {
      kernels: { matmul: { fixedSeconds: 1e-6, rooflineFactor: 2 } }, executor: { instructionSeconds: 1e-7, wakeSeconds: 3e-6, stepSeconds: 1e-6 },
      nvme: { ...local.nvme, readLatencySeconds: 1e-4, writeLatencySeconds: 2e-4, readBatchRequestSeconds: 2e-5, writeBatchRequestSeconds: 0, queueDepth: 4, blockBytes: 8192 },
    }));
    expect(good.nvme.readBatchRequestSeconds).toBe(2e-5);
    expect(good.kernels?.matmul.rooflineFactor).toBe(2);
    expect(good.nvme.queueDepth).toBe(4);
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ kernels: { matmul: { fixedSeconds: -1, rooflineFactor: 2 } } }, /field 'kernels\.matmul\.fixedSeconds'/],
      [{ kernels: { gelu: { fixedSeconds: 0 } } }, /field 'kernels\.gelu\.rooflineFactor'/],
      [{ executor: { instructionSeconds: 1e-7, wakeSeconds: 'fast', stepSeconds: 0 } }, /field 'executor\.wakeSeconds'/],
      [{ nvme: { ...local.nvme, queueDepth: 65 } }, /field 'nvme\.queueDepth'/],
      [{ nvme: { ...local.nvme, blockBytes: 5000 } }, /field 'nvme\.blockBytes'/],
      [{ nvme: { ...local.nvme, readLatencySeconds: -1 } }, /field 'nvme\.readLatencySeconds'/],
      [{ nvme: { ...local.nvme, writeBatchRequestSeconds: -1e-6 } }, /field 'nvme\.writeBatchRequestSeconds'/],
      [{ nvme: { ...local.nvme, readBatchRequestSeconds: 'slow' } }, /field 'nvme\.readBatchRequestSeconds'/],
    ];
    bad.forEach(([extra, message], i) => expect(() => loadProfile(write(`bad${i}`, extra))).toThrow(message));
  });
});
