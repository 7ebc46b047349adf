// The programmatic API (src/index.ts) given what the CLI would refuse: a plan
// object edited after it was read, options out of range, a model path that is
// a device, a session used after close, a checkpoint that does not match its
// shapes. Each had trained silently, crashed, hung or thrown a TypeError; now
// each is one UserError with the CLI's code. And a session left open when the
// process exits takes its spill file with it.
import { describe, it, expect } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { compile, parsePlan, SequenceParallelSession, serializePlan, spFullGraph, syntheticData, TrainingSession, writeSafetensors, UserError } from '../../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'tiercut-api-'));
const MLP = { model: 'models/mlp.ts', preset: 'tiny', hw: 'v100-32g', gpuMemBytes: 20000, cpuMemBytes: 1e6 };

/** The UserError code `fn` throws (or rejects with); fails where it throws anything else or nothing. */
async function codeOf(fn: () => unknown): Promise<string> {
  try { await fn(); } catch (e) {
    expect(e, String(e)).toBeInstanceOf(UserError);
    return (e as UserError).code;
  }
  throw new Error('did not throw');
}

describe('the API refuses what the CLI refuses', () => {
  it('a plan object edited after it was read: checked again by the session (two live buffers on one range had trained to a wrong loss)', async () => {
    const text = serializePlan(await compile(MLP));
    const overlap = parsePlan(text, 'p.json') as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    overlap.buffers[22].offsetBytes = overlap.buffers[20].offsetBytes; // two GPU buffers live at once, moved onto one range
    expect(() => parsePlan(serializePlan(overlap), 'p.json')).toThrow(/live at the same time and overlapping/);
    expect(await codeOf(() => new TrainingSession(overlap))).toBe('TC402');
    const edited = parsePlan(text, 'p.json') as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    edited.optimizer.lr = -1;
    expect(await codeOf(() => new TrainingSession(edited))).toBe('TC402');
    const lossIsParam = parsePlan(text, 'p.json') as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    lossIsParam.graph.loss = 0;
    expect(await codeOf(() => new TrainingSession(lossIsParam))).toBe('TC402');
  });

  it('compile options: a precision, a learning rate, a capacity, a model path the CLI would refuse (/dev/zero had been read until memory ran out)', async () => {
    expect(await codeOf(() => compile({ ...MLP, precision: 'fp8' as never }))).toBe('TC100');
    expect(await codeOf(() => compile({ ...MLP, optimizer: { lr: -1 } }))).toBe('TC107');
    expect(await codeOf(() => compile({ ...MLP, gpuMemBytes: 20000.5 }))).toBe('TC106');
    expect(await codeOf(() => compile({ ...MLP, dpuWarmupSteps: Number.NaN, precision: 'fp16' }))).toBe('TC107');
    expect(await codeOf(() => compile({ ...MLP, model: '/dev/zero' }))).toBe('TC105');
    expect(await codeOf(() => compile({ ...MLP, model: 123 as never }))).toBe('TC100');
    // (a key given as undefined had replaced the default: a plan without lr, which readPlan then refused)
    expect(await codeOf(() => compile({ ...MLP, optimizer: { lr: undefined } }))).toBe('TC107');
  });

  it('a session: options out of range, no data, used after close', async () => {
    const plan = await compile(MLP);
    expect(await codeOf(() => new TrainingSession(plan, { optimizer: { lr: -5 } }))).toBe('TC107');
    expect(await codeOf(() => new TrainingSession(plan, { seed: Number.NaN }))).toBe('TC107');
    const s = new TrainingSession(plan);
    const data = syntheticData(plan.graph, 0);
    expect(await codeOf(() => s.step(1, undefined as never))).toBe('TC501');
    expect(await codeOf(() => s.step(1, data(1), -1))).toBe('TC107');
    expect((await s.step(1, data(1))).loss).toBeGreaterThan(0);
    s.close();
    expect(await codeOf(() => s.step(2, data(2)))).toBe('TC501');
    expect(await codeOf(() => s.loss())).toBe('TC501');
  });

  it('a sequence-parallel session: a step number out of range, used after close, a plan of no sp section', async () => {
    const plan = await compile({ model: 'models/gpt.ts', preset: 'tiny', sp: 2 });
    const s = new SequenceParallelSession(plan, syntheticData(spFullGraph(plan), 0));
    expect(await codeOf(() => s.step(0))).toBe('TC107'); // (had been a ring failure, TC604)
    expect((await s.step(1)).loss).toBeGreaterThan(0);
    s.close();
    expect(await codeOf(() => s.step(2))).toBe('TC501'); // (had been a plain Error)
    const plain = await compile({ model: 'models/gpt.ts', preset: 'tiny' });
    expect(await codeOf(() => new SequenceParallelSession(plain, syntheticData(spFullGraph(plan), 0)))).toBe('TC100');
  });

  it('writeSafetensors: bytes that are not the shape\'s refused, the old file kept', async () => {
    const f = join(dir, 'w.safetensors');
    writeSafetensors(f, new Map([['w', { dtype: 'F32' as const, shape: [2], bytes: new Uint8Array(8) }]]));
    const before = readFileSync(f);
    expect(await codeOf(() => writeSafetensors(f, new Map([['w', { dtype: 'F32' as const, shape: [16, 32], bytes: new Uint8Array(8) }]])))).toBe('TC502');
    expect(await codeOf(() => writeSafetensors(f, new Map([['__metadata__', { dtype: 'F32' as const, shape: [2], bytes: new Uint8Array(8) }]])))).toBe('TC502');
    expect(readFileSync(f).equals(before)).toBe(true);
  });

  it('a session left open at process.exit or an uncaught exception: its spill file removed (it had been left behind)', () => {
    for (const how of ['exit', 'throw']) {
      const spill = mkdtempSync(join(dir, `spill-${how}-`));
      const script = join(dir, `leak-${how}.mjs`);
      writeFileSync(script, [
        `const tc = await import(${JSON.stringify(resolve('dist/src/index.js'))});`,
        `const plan = await tc.compile({ ...${JSON.stringify(MLP)}, model: ${JSON.stringify(resolve('models/mlp.ts'))}, cpuMemBytes: 20000 });`,
        'if (!(plan.tiers.nvme.peakBytes > 0)) throw new Error("no nvme arena");',
        `const s = new tc.TrainingSession(plan, { spillDir: ${JSON.stringify(spill)} });`,
        'await s.step(1, tc.syntheticData(plan.graph, 0)(1));',
        how === 'exit' ? 'process.exit(0);' : 'throw new Error("a bug of the caller");',
      ].join('\n'));
      const r = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 60_000 });
      expect(r.stderr).not.toMatch(/no nvme arena/);
      expect(r.status).toBe(how === 'exit' ? 0 : 1);
      const left = readdirSync(spill, { recursive: true }).filter((f) => String(f).endsWith('nvme.bin'));
      expect(left, how).toEqual([]);
    }
  });
});
