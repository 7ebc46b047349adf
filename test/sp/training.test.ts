// Sequence parallelism end to end: the tiny GPT compiled with --sp P (ring
// attention over P rank threads, gradients all-reduced) trains like the same
// model without sharding: the same loss trajectory and the same parameters;
// measured ring bytes and memory equal the plan's.
import { describe, it, expect } from 'vitest';
import { compile } from '../../src/compile.js';
import type { Plan } from '../../compiler/plan/types.js';
import { TrainingSession } from '../../runtime/session.js';
import { SequenceParallelSession } from '../../runtime/sp-session.js';
import { spFullGraph, syntheticData, type StepData } from '../../runtime/data.js';

const STEPS = 6;
const opts = { seed: 7, optimizer: { lr: 1e-3 } };

async function trainPlain(plan: Plan) {
  const s = new TrainingSession(plan, opts);
  const data = syntheticData(plan.graph, 1);
  try {
    const losses: number[] = [];
    for (let k = 1; k <= STEPS; k++) losses.push((await s.step(k, data(k))).loss);
    return { losses, params: s.parameters() };
  } finally { s.close(); }
}

async function trainSp(plan: Plan) {
  const s = new SequenceParallelSession(plan, syntheticData(spFullGraph(plan), 1), opts);
  try {
    const losses: number[] = [];
    const sent: number[][] = [], workspace: number[][] = [];
    for (let k = 1; k <= STEPS; k++) {
      const r = await s.step(k);
      losses.push(r.loss);
      sent.push(r.stats.map((st) => st.bytes.ringSent));
      workspace.push(r.stats.map((st) => st.ringWorkspaceBytes));
    }
    return { losses, params: s.ranks.map((_, r) => s.parameters(r)), sent, workspace, memory: s.memory() };
  } finally { s.close(); }
}

describe('sequence parallelism: the tiny GPT', () => {
  let base: Awaited<ReturnType<typeof trainPlain>>;
  it('trains the same with --sp 1', async () => {
    base = await trainPlain(await compile({ model: 'models/gpt.ts', preset: 'tiny' }));
    expect(base.losses[STEPS - 1]).toBeLessThan(base.losses[0]);
  });
  // --gpu-mem 300000: optimizer state and updates on the CPU, so collectives run on two streams at once
  for (const [P, gpuMemBytes] of [[2, undefined], [4, undefined], [8, undefined], [2, 300_000]] as const) {
    it(`--sp ${P}${gpuMemBytes ? ` --gpu-mem ${gpuMemBytes}` : ''}: same losses (1e-5) and parameters as --sp 1; ranks identical; ring bytes as planned`, async () => {
      const plan = await compile({ model: 'models/gpt.ts', preset: 'tiny', sp: P, gpuMemBytes });
      if (gpuMemBytes) expect(plan.placement.method).not.toBe('all-gpu');
      const sp = await trainSp(plan);
      const diffs = sp.losses.map((l, i) => Math.abs(l - base.losses[i]));
      console.log(`--sp ${P}: ${sp.losses.map((l) => l.toFixed(6)).join(' ')}\n--sp 1: ${base.losses.map((l) => l.toFixed(6)).join(' ')}\nmax |loss diff| ${Math.max(...diffs).toExponential(2)}`);
      for (let i = 0; i < STEPS; i++) expect(diffs[i], `step ${i + 1}`).toBeLessThanOrEqual(1e-5);
      let worst = 0;
      for (const [name, want] of base.params) {
        const got = sp.params[0].get(name)!;
        for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
        for (let r = 1; r < P; r++) expect(Buffer.from(sp.params[r].get(name)!.buffer).equals(Buffer.from(got.buffer)), `${name} on rank ${r}`).toBe(true);
      }
      console.log(`--sp ${P}: max |param diff| vs --sp 1 after ${STEPS} steps: ${worst.toExponential(2)}`);
      // Adam divides by the gradient's running RMS, so an element whose gradient is near zero moves by up to
      // lr per step on a last-bit difference of the summation order (P partial sums vs one); lr is 1e-3 here
      expect(worst).toBeLessThanOrEqual(2e-5);
      for (let r = 0; r < P; r++) {
        const planned = plan.sp!.perRank[r].ringSendBytes;
        for (const step of sp.sent) expect(step[r]).toBe(planned.attention + planned.allReduce);
        for (const step of sp.workspace) expect(step[r]).toBe(plan.sp!.perRank[r].ringWorkspaceBytes);
        for (const tier of ['gpu', 'cpu', 'nvme'] as const) expect(sp.memory[r].peakBytes[tier]).toBe(plan.tiers[tier].peakBytes);
      }
    });
  }

  it('fp16 storage: --sp 2 follows --sp 1 (to half-precision rounding); ranks keep identical parameters', async () => {
    const half = { model: 'models/gpt.ts', preset: 'tiny', precision: 'fp16' as const, gpuMemBytes: 300_000 };
    const a = await trainPlain(await compile(half));
    const b = await trainSp(await compile({ ...half, sp: 2 }));
    console.log(`fp16 --sp 2: ${b.losses.map((l) => l.toFixed(5)).join(' ')}\nfp16 --sp 1: ${a.losses.map((l) => l.toFixed(5)).join(' ')}`);
    for (let i = 0; i < STEPS; i++) expect(Math.abs(b.losses[i] - a.losses[i]), `step ${i + 1}`).toBeLessThanOrEqual(2e-3);
    for (const [name, v] of b.params[0]) expect(Buffer.from(b.params[1].get(name)!.buffer).equals(Buffer.from(v.buffer)), name).toBe(true);
  });

  it('a rank that fails stops the others: one error naming the rank, no hang; a rank cannot step alone', async () => {
    const plan = await compile({ model: 'models/gpt.ts', preset: 'tiny', sp: 4 });
    const whole = syntheticData(spFullGraph(plan), 1);
    const targets = plan.sp!.inputs.find((i) => i.name === 'targets')!.tensor;
    // position 5 lies in zigzag chunk 2 of 8, which rank 2 holds (with chunk 5)
    const bad: StepData = (k) => {
      const m = new Map(whole(k));
      const t = Float64Array.from(m.get(targets)!);
      t[5] = 999;
      m.set(targets, t);
      return m;
    };
    const s = new SequenceParallelSession(plan, bad, { seed: 1, ringTimeoutMs: 60_000 });
    try {
      const t0 = Date.now();
      await expect(s.step(1)).rejects.toThrow(/^step 1 failed: rank 2: instruction \d+ \(gpu, run crossEntropy[^)]*\): cross_entropy: target 999/);
      expect(Date.now() - t0).toBeLessThan(10_000); // the other ranks were stopped, not left to their 60 s timeout
      await expect(s.step(2)).rejects.toThrow(/rank 2/);
      await expect(s.ranks[0].step(3, new Map())).rejects.toThrow(/no data|stepGroup/);
    } finally {
      s.close();
    }
    const ok = new SequenceParallelSession(plan, whole, { seed: 1 });
    try {
      const input = ok.ranks[1];
      const data = new Map(plan.graph.tensors.filter((t) => t.role === 'input').map((t) => [t.id, new Float64Array(t.shape.reduce((a, b) => a * b, 1))]));
      await expect(input.step(1, data)).rejects.toThrow(/this session is rank 1 of a ring of 4; step all ranks together with stepGroup/);
    } finally {
      ok.close();
    }
  });
});
