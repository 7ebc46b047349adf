// compiler/lower/chunks.ts: gpt.ts tiny's
// blocks in two parts give bench/compile/gpt-chunked.ts's training graph (the
// same ops, shapes and parameters, in the same order), and train as the whole
// model does: from the same seed the same 5 losses (the parts' initial values
// are the whole parameters', cut by their slices); --save writes the whole
// parameters (names, shapes, values), and each plan trains on from the other's
// checkpoint alike. A part that took the wrong heads' columns or rows differs
// at the first step by far more than the tolerance.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { cli, expectUserError } from '../cli-helpers.js';
import { chunksMayPay, compile, trainingGraph, type CompileOptions } from '../../src/compile.js';
import { writePlan } from '../../compiler/plan/io.js';
import { readSafetensors, type SafeTensor } from '../../runtime/safetensors.js';
import type { Graph } from '../../compiler/ir/types.js';
import type { Plan } from '../../compiler/plan/types.js';
import { scratchDir } from '../scratch-dir.js';

const dir = scratchDir('tiercut-chunks-');
const LOSS_TOL = 1e-6;
/** After two Adam steps (lr 1e-3 updates): the parts' sums come in another order, which Adam's normalisation shows most where a gradient is near 0 (1.4e-6 measured, a bias). */
const PARAM_TOL = 1e-5;

const f32 = (t: SafeTensor) => new Float32Array(t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength / 4);
const signature = (g: Graph) => g.ops.map((o) => `${o.kind} ${JSON.stringify(o.attrs)} ${o.outputs.map((t) => g.tensors[t].shape.join('x')).join(',')}`);
const losses = (stdout: string) => stdout.trim().split('\n').filter((l) => l.includes('"loss"')).map((l) => (JSON.parse(l) as { loss: number }).loss);

describe('chunkBlocks', () => {
  it("gives gpt-chunked.ts's training graph from gpt.ts's", async () => {
    const a = (await trainingGraph({ model: 'models/gpt.ts', preset: 'tiny', chunks: 2 })).graph;
    const b = (await trainingGraph({ model: 'bench/compile/gpt-chunked.ts', preset: 'tiny' })).graph;
    expect(signature(a)).toEqual(signature(b));
    expect(a.paramCount).toBe(b.paramCount);
    const whole = (await trainingGraph({ model: 'models/gpt.ts', preset: 'tiny' })).graph;
    expect(a.paramCount).toBe(whole.paramCount);
  });

  it('trains as the whole model does: the same initial values, and checkpoints under the whole parameters\' names', async () => {
    const plain = join(dir, 'plain.json'), chunked = join(dir, 'chunked.json'), w = join(dir, 'plain.safetensors'), wc = join(dir, 'chunked.safetensors');
    writePlan(plain, await compile({ model: 'models/gpt.ts', preset: 'tiny' }));
    writePlan(chunked, await compile({ model: 'models/gpt.ts', preset: 'tiny', chunks: 2 }));
    const run = (...args: string[]) => { const r = cli('run', ...args, '--json'); expect(r.status, r.stderr).toBe(0); return r; };
    // the same seed: the parts' initial values are the whole's, cut
    const a = losses(run(plain, '--steps', '5').stdout), b = losses(run(chunked, '--steps', '5').stdout);
    expect(a).toHaveLength(5);
    for (let s = 0; s < 5; s++) expect(Math.abs(a[s] - b[s]), `step ${s + 1}: ${a[s]} vs ${b[s]}`).toBeLessThanOrEqual(LOSS_TOL);
    // checkpoints: the chunked plan's --save names and shapes the whole parameters, as the plain plan's does
    run(plain, '--steps', '2', '--save', w);
    run(chunked, '--steps', '2', '--save', wc);
    const ta = readSafetensors(w), tb = readSafetensors(wc);
    expect([...tb.keys()].sort()).toEqual([...ta.keys()].sort());
    for (const [name, t] of ta) expect(tb.get(name)!.shape, name).toEqual(t.shape);
    for (const [name, t] of ta) { const x = f32(t), y = f32(tb.get(name)!); let d = 0; for (let i = 0; i < x.length; i++) d = Math.max(d, Math.abs(x[i] - y[i])); expect(d, name).toBeLessThanOrEqual(PARAM_TOL); }
    // report says which parameters are in parts (gpt tiny: 2 blocks x 4 matmul weights and 2 biases)
    const report = JSON.parse(cli('report', chunked, '--json').stdout) as { paramsInParts?: { parameters: number; parts: number } };
    expect(report.paramsInParts).toEqual({ parameters: 12, parts: 24 });
    expect(cli('report', chunked).stdout).toContain('12 parameters in 24 parts');
    expect(JSON.parse(cli('report', plain, '--json').stdout)).not.toHaveProperty('paramsInParts');
    // and either plan trains on from the other's checkpoint alike
    const c = losses(run(plain, '--steps', '3', '--weights', wc).stdout), e = losses(run(chunked, '--steps', '3', '--weights', w).stdout);
    for (let s = 0; s < 3; s++) expect(Math.abs(c[s] - e[s]), `step ${s + 1}: ${c[s]} vs ${e[s]}`).toBeLessThanOrEqual(LOSS_TOL);
  });
  it('a plan whose slices are wrong is refused, naming the tensor and what is wrong', async () => {
    const plan = await compile({ model: 'models/gpt.ts', preset: 'tiny', chunks: 2 });
    const text = JSON.stringify(plan);
    const edited = (name: string, edit: (t: { name: string; slice: { ranges: number[][]; axis: number } }[]) => void, pattern: RegExp) => {
      const p = JSON.parse(text) as { graph: { tensors: { name: string; role: string; slice: { ranges: number[][]; axis: number } }[] } };
      edit(p.graph.tensors.filter((t) => t.role === 'param16' && t.slice));
      const file = join(dir, `${name}.json`);
      writeFileSync(file, JSON.stringify(p));
      expectUserError(cli('run', file, '--steps', '1'), pattern);
    };
    edited('past', (ts) => { ts[0].slice.ranges = [[0, 1000]]; }, /tensors\[10\] \(h\.0\.attn\.qkv\.w#0\): slice: ranges \[\[0,1000\]\] must be in order, not overlapping, within 0\.\.96/);
    edited('overlap', (ts) => { const [a, b] = ts.filter((t) => t.name.startsWith('h.0.mlp.fc.w#')); b.slice.ranges = a.slice.ranges; }, /the parts of parameter 'h\.0\.mlp\.fc\.w' do not cover its axis 1 \(0\.\.128\) exactly once/);
    edited('axis', (ts) => { ts[0].slice.axis = 5; }, /slice: axis must be one of the 2 axes/);
  });
});

describe('chunksMayPay: where compile also tries the model in parts', () => {
  // gpt3-medium with 6 layers on 600 MB of a V100 and no NVMe: its state
  // offloaded to the CPU, the GPU busy ~23 % of the step, ~21 % above its bound
  const opts: CompileOptions = { model: 'models/gpt.ts', preset: 'gpt3-medium', config: { layers: 6 }, hw: 'v100-32g', precision: 'fp16', gpuMemBytes: 600e6, cpuMemBytes: 4e9, nvmeBytes: 0 };
  it('only a plan that offloads state to the CPU alone, over 2 % above its bound, its GPU not busy most of the step', async () => {
    const plan = await compile({ ...opts, chunks: 1 });
    const g = plan.graph;
    expect(g.tensors.some((t) => t.persistent && plan.placement.home[t.id] === 'cpu')).toBe(true);
    expect(plan.placement.home).not.toContain('nvme');
    const busy = plan.predicted.streamBusySeconds.gpu / plan.predicted.stepSeconds;
    expect(busy).toBeLessThan(0.9);
    const gap = (gapPercent: number): Plan => ({ ...plan, bound: { ...plan.bound!, gapPercent } });
    expect(chunksMayPay(opts, g, gap(5))).toBe(true);
    expect(chunksMayPay(opts, g, gap(2))).toBe(false);
    expect(chunksMayPay(opts, g, { ...gap(5), bound: undefined })).toBe(false);
    expect(chunksMayPay({ ...opts, probe: 'fits' }, g, gap(5))).toBe(false);
    expect(chunksMayPay({ ...opts, probe: 'step' }, g, gap(5))).toBe(false);
    expect(chunksMayPay({ ...opts, chunks: 1 }, g, gap(5))).toBe(false);
    expect(chunksMayPay({ ...opts, sp: 2 }, g, gap(5))).toBe(false);
    expect(chunksMayPay({ ...opts, dpuWarmupSteps: 40 }, g, gap(5))).toBe(false);
    // state on NVMe; the GPU busy most of the step; every state tensor on the GPU
    const home = [...plan.placement.home];
    const onCpu = g.tensors.find((t) => t.persistent && home[t.id] === 'cpu')!;
    expect(chunksMayPay(opts, g, { ...gap(5), placement: { ...plan.placement, home: home.map((h, i) => (i === onCpu.id ? 'nvme' : h)) } })).toBe(false);
    expect(chunksMayPay(opts, g, { ...gap(5), predicted: { ...plan.predicted, streamBusySeconds: { ...plan.predicted.streamBusySeconds, gpu: 0.95 * plan.predicted.stepSeconds } } })).toBe(false);
    expect(chunksMayPay(opts, g, { ...gap(5), placement: { ...plan.placement, home: home.map((h, i) => (g.tensors[i].persistent ? 'gpu' : h)) } })).toBe(false);
  });
  it('compile keeps the faster of the two plans and reports the lower bound', async () => {
    const whole = await compile({ ...opts, chunks: 1 }), parts = await compile({ ...opts, chunks: 2 }), plan = await compile(opts);
    const tried = chunksMayPay(opts, whole.graph, whole);
    expect(tried).toBe(true);
    const faster = tried && parts.predicted.stepSeconds < whole.predicted.stepSeconds ? parts : whole;
    expect(plan.predicted.stepSeconds).toBe(faster.predicted.stepSeconds);
    expect(plan.graph.tensors.some((t) => t.slice)).toBe(faster === parts);
    const lower = tried ? Math.min(whole.bound!.lowerBoundSeconds, parts.bound!.lowerBoundSeconds) : whole.bound!.lowerBoundSeconds;
    expect(plan.bound!.lowerBoundSeconds).toBe(lower);
    expect(plan.bound!.gapPercent).toBeCloseTo((100 * (plan.predicted.stepSeconds - lower)) / lower, 9);
    console.log(`gpt3-medium, 6 layers, 600 MB: whole ${whole.predicted.stepSeconds} s (gap ${whole.bound!.gapPercent.toFixed(2)} %), parts ${parts.predicted.stepSeconds} s (gap ${parts.bound!.gapPercent.toFixed(2)} %), tried ${tried}`);
  });
});
