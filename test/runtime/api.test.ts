// The programmatic API (src/index.ts) given what the CLI would refuse: a plan
// object edited after it was read, options out of range, a model path that is
// a device, a session used after close, a checkpoint that does not match its
// shapes. Each had trained silently, crashed, hung or thrown a TypeError; now
// each is one UserError with the CLI's code. And a session left open when the
// process exits takes its spill file with it.
import { describe, it, expect } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { checkPlan, compile, parsePlan, SequenceParallelSession, serializePlan, spFullGraph, syntheticData, TrainingSession, writeSafetensors, UserError } from '../../src/index.js';
import { scratchDir } from '../scratch-dir.js';

const dir = scratchDir('tiercut-api-');
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

  // a review's finds: each had trained silently, or failed later naming something else
  it('data the CLI would refuse: ids that are not integers, data at a rank\'s shapes, no data; a seed past 32 bits; an sp plan alone; unknown optimizer keys; a checkpoint over the plan\'s model; an edited plan checked again', async () => {
    const plan = await compile({ model: 'models/gpt.ts', preset: 'tiny' });
    const s = new TrainingSession(plan);
    try {
      const data = syntheticData(plan.graph, 0)(1);
      const tokens = plan.graph.tensors.find((t) => t.name === 'tokens')!.id;
      for (const bad of [Number.NaN, 3.7, 2 ** 32 + 1]) {
        const v = Float64Array.from(data.get(tokens)!); v[5] = bad;
        await expect(s.step(1, new Map([...data, [tokens, v]]))).rejects.toThrow(new RegExp(`step 1: input tokens value ${String(bad).replace('.', '\\.')} at index 5 is not an integer in \\[0, 2147483648\\)`));
      }
    } finally { s.close(); }
    expect(await codeOf(() => new TrainingSession(plan, { seed: 2 ** 32 }))).toBe('TC107');
    for (const bad of [{ trace: 'no' }, { weightsFile: '' }, { nvme: 'x' }, { nvme: { queueDepth: 100 } }, null]) expect(await codeOf(() => new TrainingSession(plan, bad as never)), JSON.stringify(bad)).toBe('TC100');
    expect(await codeOf(() => compile(null as never))).toBe('TC100');
    expect(await codeOf(() => compile({ model: 'models/mlp.ts', optimizer: { lrr: 0.1 } as never }))).toBe('TC100');
    expect(await codeOf(() => compile({ model: 'models/mlp.ts', optimizer: 'adamw' as never }))).toBe('TC100');
    const sp = await compile({ model: 'models/gpt.ts', preset: 'tiny', sp: 2 });
    expect(await codeOf(() => new TrainingSession(sp))).toBe('TC100');
    expect(await codeOf(() => new SequenceParallelSession(sp, undefined as never))).toBe('TC100');
    const rankShaped = new SequenceParallelSession(sp, syntheticData(sp.graph, 0));
    try { await expect(rankShaped.step(1)).rejects.toThrow(/input tokens needs (\d+) values at its whole shape \[\d+,16\] .*got \d+/); } finally { rankShaped.close(); }
    // checkPlan checks every time (an object it had passed once was taken as checked, edits and all)
    const edited = parsePlan(serializePlan(plan), 'p.json');
    (edited.optimizer as { lr: number }).lr = -1;
    expect(await codeOf(() => checkPlan(edited, 'edited'))).toBe('TC402');
    // a checkpoint onto the ONNX model the plan reads its weights from
    const model = join(dir, 'm.onnx');
    writeFileSync(model, readFileSync('fixtures/onnx/gpt-tiny.onnx'));
    const onnx = await compile({ model });
    const o = new TrainingSession(onnx);
    try {
      await o.step(1, syntheticData(onnx.graph, 0)(1));
      await expect(o.saveCheckpoint(model, 1)).rejects.toThrow(/the checkpoint and the plan's model are the same file/);
    } finally { o.close(); }
    expect(readFileSync(model).equals(readFileSync('fixtures/onnx/gpt-tiny.onnx'))).toBe(true);
  }, 60_000);

  // (a step's promise settled while the worker's environment was being torn down: std::terminate, the whole process aborted)
  it('a worker thread terminated while its session steps: the process goes on', () => {
    const spill = mkdtempSync(join(dir, 'spill-worker-'));
    const script = join(dir, 'worker-main.mjs'), worker = join(dir, 'worker.mjs');
    writeFileSync(worker, [
      "import { parentPort } from 'node:worker_threads';",
      `const tc = await import(${JSON.stringify(resolve('dist/src/index.js'))});`,
      `const plan = await tc.compile({ ...${JSON.stringify(MLP)}, model: ${JSON.stringify(resolve('models/mlp.ts'))}, cpuMemBytes: 20000 });`,
      `const s = new tc.TrainingSession(plan, { spillDir: ${JSON.stringify(spill)} });`,
      'const data = tc.syntheticData(plan.graph, 0);',
      'for (let k = 1; ; k++) { await s.step(k, data(k)); if (k === 2) parentPort.postMessage("stepping"); }',
    ].join('\n'));
    writeFileSync(script, [
      "import { Worker } from 'node:worker_threads';",
      `const w = new Worker(${JSON.stringify(worker)});`,
      "w.on('error', (e) => { console.error('worker error', e); process.exit(3); });",
      "await new Promise((r) => w.once('message', r));",
      'await w.terminate();',
      "console.log('alive');",
    ].join('\n'));
    const r = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 120_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('alive');
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
    // ('collected': a session dropped without close() and collected just before exit had left it)
    for (const how of ['exit', 'throw', 'collected']) {
      const spill = mkdtempSync(join(dir, `spill-${how}-`));
      const script = join(dir, `leak-${how}.mjs`);
      writeFileSync(script, [
        `const tc = await import(${JSON.stringify(resolve('dist/src/index.js'))});`,
        `const plan = await tc.compile({ ...${JSON.stringify(MLP)}, model: ${JSON.stringify(resolve('models/mlp.ts'))}, cpuMemBytes: 20000 });`,
        'if (!(plan.tiers.nvme.peakBytes > 0)) throw new Error("no nvme arena");',
        `let s = new tc.TrainingSession(plan, { spillDir: ${JSON.stringify(spill)} });`,
        'await s.step(1, tc.syntheticData(plan.graph, 0)(1));',
        how === 'collected' ? 's = undefined; await new Promise((r) => setTimeout(r, 10)); globalThis.gc(); process.exit(0);' : how === 'exit' ? 'process.exit(0);' : 'throw new Error("a bug of the caller");',
      ].join('\n'));
      const r = spawnSync(process.execPath, [...(how === 'collected' ? ['--expose-gc'] : []), script], { encoding: 'utf8', timeout: 60_000 });
      expect(r.stderr).not.toMatch(/no nvme arena/);
      expect(r.status, r.stderr).toBe(how === 'throw' ? 1 : 0);
      const left = readdirSync(spill, { recursive: true }).filter((f) => String(f).endsWith('nvme.bin'));
      expect(left, how).toEqual([]);
    }
  });
});
