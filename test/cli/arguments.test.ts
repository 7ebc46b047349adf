// The command line's arguments: what each command takes, and one clear line
// (exit 2) for what it does not. Each case here was once taken and ignored,
// or misread, or crashed with a stack trace.
import { describe, it, expect, beforeAll } from 'vitest';
import { chmodSync, copyFileSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { spawnSync } from 'node:child_process';
import { cli, expectUserError } from '../cli-helpers.js';
import { BUILTIN_PROFILES } from '../../compiler/cost/profiles.js';
import { writeSafetensors, type SafeTensor } from '../../runtime/safetensors.js';
import { scratchDir } from '../scratch-dir.js';

const dir = scratchDir('tiercut-args-');
const ONNX = 'fixtures/onnx/gpt-tiny.onnx';

let tiny: string;
beforeAll(() => {
  tiny = join(dir, 'tiny.plan.json');
  const r = cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--nvme', '0', '-o', tiny);
  expect(r.status, r.stderr).toBe(0);
});

describe('arguments', () => {
  it('more positional arguments than the command takes: refused, naming the first one over', () => {
    // (compile had compiled the first preset, report had reported the first plan)
    expectUserError(cli('compile', 'models/gpt.ts', 'gpt2-124m', '-o', join(dir, 'x.json')), /^tiercut: unexpected argument 'gpt2-124m'/);
    expectUserError(cli('report', tiny, tiny), /unexpected argument '.*tiny\.plan\.json'/);
    expectUserError(cli('hw', 'list', 'extra'), /unexpected argument 'extra'/);
  });

  it('a switch given a value (--json=false) is refused, not taken as the switch', () => {
    expectUserError(cli('report', tiny, '--json=false'), /--json takes no value, got '--json=false' \[TC100\]$/);
    expect(cli('report', tiny, '--json').status).toBe(0);
  });

  it('--help after a command prints the usage and exits 0', () => {
    const r = cli('compile', '--help');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^usage:/);
    expect(r.stdout).toMatch(/tiercut fit MODEL/);
  });

  it("the README's usage block is the CLI's usage, option for option", () => {
    // (compile's --keep-params-on-gpu, --freeze and --trace had been in one and not the other)
    const words = (t: string) => t.split(/\s+/).filter(Boolean).join(' ');
    const readme = /## The CLI\n\n```sh\n([\s\S]*?)```/.exec(readFileSync('README.md', 'utf8'));
    expect(readme).not.toBeNull();
    const usage = cli('--help').stdout.replace(/^usage:/, '').replace(/SIZE:[\s\S]*$/, '');
    expect(words(usage)).toContain('tiercut compile MODEL');
    expect(words(readme![1])).toBe(words(usage));
  });

  it('--betas with an empty part, --lp-time-limit at or below 0: refused with the same message each way', () => {
    // (Number('') is 0: '0.9,' had given beta2 = 0)
    for (const b of ['0.9,', ',0.999', ' , ']) expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--betas', b, '-o', join(dir, 'x.json')), /--betas: expected B1,B2 with 0 <= B < 1/);
    for (const t of ['0', '-1']) expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--lp-time-limit', t, '-o', join(dir, 'x.json')), new RegExp(`--lp-time-limit: expected a number of seconds > 0, got ${t} \\[TC100\\]$`));
  });

  it('an option of the other kind of model: --preset on ONNX, --freeze on a DSL model, fit on ONNX', () => {
    expectUserError(cli('compile', ONNX, '--preset', 'tiny', '-o', join(dir, 'x.json')), /--preset: .*gpt-tiny\.onnx is an ONNX model, of one fixed size/);
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--freeze', 'wte', '-o', join(dir, 'x.json')), /--freeze: applies to an ONNX model's initializers; models\/gpt\.ts is a DSL model/);
    // (fit had type-checked the .onnx as TypeScript: "File appears to be binary")
    expectUserError(cli('fit', ONNX), /fit takes a DSL model \(\.ts\), whose presets it searches; .*gpt-tiny\.onnx is an ONNX model/);
  });

  it('a DSL model with no presets: compile and fit say so (fit had crashed in its no-fit message)', () => {
    const model = join(dir, 'empty.ts');
    writeFileSync(model, [
      "import type { Model, PresetBase } from 'tiercut/dsl';",
      'const m: Model<PresetBase> = {',
      '  presets: {},',
      "  build(nn, cfg) { return nn.crossEntropy(nn.input('x', [cfg.batch, 4]), nn.input('y', [cfg.batch], 'i32')); },",
      '};',
      'export default m;',
    ].join('\n'));
    for (const args of [['compile', model, '-o', join(dir, 'x.json')], ['fit', model], ['fit', model, '--json']]) {
      expectUserError(cli(...args), /empty\.ts: the model has no presets: give it at least one/);
    }
  });

  it('run --optimizer adam on an AdamW plan trains as a plain Adam plan (the AdamW decay was kept as an L2 term)', () => {
    const adamw = join(dir, 'adamw.plan.json'), adam = join(dir, 'adam.plan.json');
    expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--optimizer', 'adamw', '--weight-decay', '0.5', '--lr', '0.01', '-o', adamw).status).toBe(0);
    expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--optimizer', 'adam', '--lr', '0.01', '-o', adam).status).toBe(0);
    const losses = (...args: string[]) => {
      const r = cli('run', ...args, '--steps', '4', '--json');
      expect(r.status, r.stderr).toBe(0);
      return r.stdout.trim().split('\n').map((l) => JSON.parse(l)).filter((o) => o.loss !== undefined).map((o) => o.loss as number);
    };
    const plain = losses(adam);
    expect(plain).toHaveLength(4);
    expect(losses(adamw, '--optimizer', 'adam')).toEqual(plain);
    // and the AdamW plan as compiled trains otherwise (the decay is there to drop)
    expect(losses(adamw)).not.toEqual(plain);
  });

  it('report: a tier of no capacity prints no "NaN %"; hw calibrate --json -o keeps stdout JSON (in its usage)', () => {
    const r = cli('report', tiny);
    expect(r.stdout).toMatch(/^nvme +0 +0 +-$/m);
    expect(r.stdout).not.toMatch(/NaN/);
    expect(cli('--help').stdout).toMatch(/tiercut hw calibrate .*\[--json\]/);
  });

  it('run --save or --trace where nothing can be written: refused before any step (a whole run\'s weights had been lost after it)', () => {
    const missing = join(dir, 'no-such-dir', 'model.safetensors');
    for (const flag of ['--save', '--trace']) {
      const r = cli('run', tiny, '--steps', '2', flag, missing);
      expectUserError(r, new RegExp(`cannot write the ${flag === '--save' ? 'checkpoint' : 'trace'} to .*model\\.safetensors: ENOENT .*; nothing was done \\[TC108\\]$`));
      expect(r.stdout).not.toMatch(/step/);
    }
    expectUserError(cli('run', tiny, '--steps', '1', '--save', dir), /cannot write the checkpoint to .*: EISDIR/);
    const ok = join(dir, 'saved.safetensors');
    expect(cli('run', tiny, '--steps', '1', '--save', ok).status).toBe(0);
    expect(readdirSync(dir).filter((f) => f.includes('.tmp-'))).toEqual([]);
  });

  it('report: a profile with only an NVMe write latency is a calibrated cost model, as its own line says', () => {
    // (kind 'roofline' beside nvmeLatency true, and "rooflines (no measured costs in the profile)")
    const hw = join(dir, 'write-latency.json');
    writeFileSync(hw, JSON.stringify({ name: 'mine', gpu: { capacityBytes: 1e9, memBandwidthBytesPerSec: 1e11, peakFlops: { f32: 1e12, f16: 1e12, bf16: 1e12 } },
      cpu: { capacityBytes: 1e10, memBandwidthBytesPerSec: 1e10, peakFlops: { f32: 1e11, f16: 1e11, bf16: 1e11 } },
      nvme: { capacityBytes: 1e11, readBytesPerSec: 1e9, writeBytesPerSec: 1e9, writeLatencySeconds: 1e-4 }, h2dBytesPerSec: 1e10, d2hBytesPerSec: 1e10 }));
    const out = join(dir, 'wl.plan.json');
    expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--hw', hw, '-o', out).status).toBe(0);
    const s = JSON.parse(cli('report', out, '--json').stdout);
    expect(s.costModel).toMatchObject({ kind: 'calibrated', nvmeLatency: true });
    expect(cli('report', out).stdout).toMatch(/cost model: calibrated \(0 kernel kinds fitted, nvme request latency\)/);
  });

    it('an LP past its time limit on a model kept on the GPU: the note says only the bound over every placement is missing, as the report prints the GPU\'s own bound', () => {
    const out = join(dir, 'limit.plan.json');
    const r = cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--lp-time-limit', '1e-9', '-o', out);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/the bound LP ran past its time limit: the LP's bound over every placement is missing; raise --lp-time-limit/);
    const text = cli('report', out).stdout;
    expect(text).toMatch(/lower bound \(the GPU's own work/);
    expect(text).not.toMatch(/reports no lower bound/);
    expect(JSON.parse(readFileSync(out, 'utf8')).lpStatus).toBe('timeLimit');
  });

  it('an empty value, a byte count with a fraction, two of a command\'s files that are one file: refused before any work', () => {
    // (--weights "" had trained from a fresh init; --save "" failed after the run)
    for (const f of ['--weights', '--save', '--data', '--spill-dir', '--trace']) expectUserError(cli('run', tiny, '--steps', '1', f, ''), new RegExp(`^tiercut: ${f}: expected a value, got an empty string \\[TC100\\]$`));
    expectUserError(cli('run', tiny, '--nvme-block-size', '4096.5'), /--nvme-block-size: '4096\.5' is not a size/);
    // (--save onto the plan had replaced it; --save and --trace alike kept the trace; -o onto the model would have replaced its source)
    const plan = join(dir, 'own.plan.json');
    writeFileSync(plan, readFileSync(tiny));
    expectUserError(cli('run', plan, '--steps', '1', '--save', plan), /PLAN and --save are the same file/);
    // (one file by two names: through a symbolic link to its directory)
    const alias = join(dir, 'alias');
    symlinkSync(dir, alias);
    expectUserError(cli('run', plan, '--steps', '1', '--save', join(dir, 'a.st'), '--trace', join(alias, 'a.st')), /--save and --trace are the same file/);
    // (a device twice is fine: nothing is kept there)
    expect(cli('run', plan, '--steps', '1', '--save', '/dev/null', '--trace', '/dev/null').status).toBe(0);
    expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '-o', '/dev/null', '--trace', '/dev/null').status).toBe(0);
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '-o', 'models/gpt.ts'), /MODEL and -o PLAN are the same file/);
    expect(readFileSync(plan, 'utf8')).toBe(readFileSync(tiny, 'utf8'));
    // (a profile file as --hw, and the plan's model file, which an ONNX plan reads its weights from, had been overwritten)
    const hw = join(dir, 'hw.json');
    writeFileSync(hw, JSON.stringify(BUILTIN_PROFILES.local));
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--hw', hw, '-o', hw), /-o PLAN and --hw are the same file/);
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--hw', hw, '-o', join(dir, 'hw.plan.json'), '--trace', hw), /--trace and --hw are the same file/);
    expect(JSON.parse(readFileSync(hw, 'utf8'))).toEqual(BUILTIN_PROFILES.local);
    const onnxDir = join(dir, 'onnx-model');
    mkdirSync(onnxDir);
    copyFileSync('fixtures/onnx/gpt-tiny.onnx', join(onnxDir, 'm.onnx'));
    expect(cli('compile', join(onnxDir, 'm.onnx'), '-o', join(onnxDir, 'm.plan.json')).status).toBe(0);
    expectUserError(cli('run', join(onnxDir, 'm.plan.json'), '--steps', '1', '--save', join(onnxDir, 'm.onnx')), /--save and the plan's model are the same file/);
    const dsl = join(dir, 'mlp.ts');
    copyFileSync('models/mlp.ts', dsl);
    expect(cli('compile', dsl, '-o', join(dir, 'mlp.plan.json')).status).toBe(0);
    expectUserError(cli('run', join(dir, 'mlp.plan.json'), '--steps', '1', '--trace', dsl), /--trace and the plan's model are the same file/);
    expect(readFileSync(dsl, 'utf8')).toBe(readFileSync('models/mlp.ts', 'utf8'));
    expect(readFileSync(join(onnxDir, 'm.onnx')).equals(readFileSync('fixtures/onnx/gpt-tiny.onnx'))).toBe(true);
    // (--weights A --save A continues a checkpoint: allowed)
    const ck = join(dir, 'ck.safetensors');
    expect(cli('run', plan, '--steps', '1', '--save', ck).status).toBe(0);
    expect(cli('run', plan, '--steps', '1', '--weights', ck, '--save', ck).status).toBe(0);
  });

  // a review's finds: each had gone unsaid, or written a checkpoint --weights then refused
  it('eps 0 refused; a checkpoint of a parameter that is no longer finite not written; --weights says Adam starts afresh; --data says what it does not read and that it wraps', () => {
    expectUserError(cli('run', tiny, '--steps', '1', '--eps', '0'), /--eps: expected a number above 0 \(Adam divides by sqrt\(v\) \+ eps/);
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--eps', '0', '-o', join(dir, 'eps0.json')), /--eps: expected a number above 0/);
    const ck = join(dir, 'diverged.safetensors');
    // AdamW's decoupled decay by lr x decay = 1e40 takes every weight past f32 in one step
    const r = cli('run', tiny, '--steps', '1', '--optimizer', 'adamw', '--lr', '1e30', '--weight-decay', '1e10', '--save', ck);
    expectUserError(r, /the checkpoint .*diverged\.safetensors was not written: parameter '\S+' holds -?Infinity at index \d+ after step 1 \(training diverged/);
    expect(existsSync(ck)).toBe(false);
    const good = join(dir, 'resume.safetensors');
    expect(cli('run', tiny, '--steps', '2', '--save', good).status).toBe(0);
    const resumed = cli('run', tiny, '--steps', '1', '--weights', good);
    expect(resumed.status, resumed.stderr).toBe(0);
    expect(resumed.stderr).toMatch(/^tiercut: note: --weights: parameters only; Adam's moments and its step count start from zero/m);
    const data = join(dir, 'data.safetensors');
    const plan = JSON.parse(readFileSync(tiny, 'utf8'));
    const tensors = new Map(plan.graph.tensors.filter((t: { role: string }) => t.role === 'input').map((t: { name: string; shape: number[] }) =>
      [t.name, { dtype: 'I32', shape: [2, ...t.shape], bytes: new Uint8Array(4 * 2 * t.shape.reduce((a, b) => a * b, 1)) }]));
    tensors.set('extra', { dtype: 'F32', shape: [1], bytes: new Uint8Array(4) });
    writeSafetensors(data, tensors as Map<string, SafeTensor>);
    const wrapped = cli('run', tiny, '--steps', '3', '--data', data);
    expect(wrapped.status, wrapped.stderr).toBe(0);
    expect(wrapped.stderr).toMatch(/note: --data: 1 tensor of .*data\.safetensors is no input of the model and was not read \('extra'\)/);
    expect(wrapped.stderr).toMatch(/note: --data: .*data\.safetensors holds 2 steps of data for 3 steps; step k reads its step \(\(k - 1\) mod 2\) \+ 1/);
    expect(cli('run', tiny, '--steps', '2', '--data', data).stderr).not.toMatch(/holds 2 steps/);
  });

  it('fit prints the compile line of its answer, and that line plans it (a deepened preset had no way onto the command line); --config refuses what is not a field of the preset\'s kind', () => {
    const machine = ['--hw', 'v100-32g', '--gpu-mem', '64MB', '--lr', '0.01'];
    const r = cli('fit', 'models/mlp.ts', ...machine);
    expect(r.status, r.stderr).toBe(0);
    const line = /^compile it: tiercut (compile .*)$/m.exec(r.stdout);
    expect(line).not.toBeNull();
    const answer = /^largest feasible: wide layers=(\d+) /m.exec(r.stdout);
    expect(answer).not.toBeNull();
    const words = line![1].split(' ');
    expect(words).toEqual(['compile', 'models/mlp.ts', '--preset', 'wide', '--config', `layers=${answer![1]}`, '--precision', 'fp16', ...machine, '-o', 'plan.json']);
    const plan = join(dir, 'fit-answer.plan.json');
    const c = cli(...words.slice(0, -1), plan);
    expect(c.status, c.stderr).toBe(0);
    const p = JSON.parse(readFileSync(plan, 'utf8'));
    expect(p.model.config.layers).toBe(Number(answer![1]));
    expect(p.optimizer.lr).toBe(0.01);
    const bad = (config: string, message: RegExp) => expectUserError(cli('compile', 'models/mlp.ts', '--preset', 'wide', '--config', config, '-o', join(dir, 'x.json')), message);
    bad('layers=x', /--config: layers: 'x' is not a finite decimal number/);
    bad('layers=0x10', /--config: layers: '0x10' is not a finite decimal number/);
    expectUserError(cli('compile', ONNX, '--config', 'layers=2', '-o', join(dir, 'x.json')), /--config: .*gpt-tiny\.onnx is an ONNX model/);
    bad('layers', /--config: expected KEY=VALUE\[,KEY=VALUE\.\.\.\] \(e\.g\. layers=46\), got 'layers'/);
    bad('layers=3,layers=4', /--config: layers is given twice/);
    bad('depth=3', /preset 'wide' has no numeric field 'depth' to override/);
    bad('layers=2.5', /preset 'wide': 'layers' is a whole number above 0 \(4\), got 2\.5/);
    bad('layers=0', /'layers' is a whole number above 0 \(4\), got 0/);
  });

  it('fit deepens the mlp family too (its layer count had been named depth, which fit does not read)', () => {
    const r = cli('fit', 'models/mlp.ts', '--hw', 'local', '--json');
    expect(r.status, r.stderr).toBe(0);
    const fitted = JSON.parse(r.stdout);
    expect(fitted.model.preset).toBe('wide');
    expect(fitted.model.config.layers).toBeGreaterThan(4);
    // (the answer's plan, which fit hands back to a caller, is not printed)
    expect(fitted.plan).toBeUndefined();
    // a family with no layer count: its presets compared, and that said
    const flat = join(dir, 'flat.ts');
    writeFileSync(flat, readFileSync('models/mlp.ts', 'utf8').replace(/\blayers\b/g, 'depth'));
    const text = cli('fit', flat, '--hw', 'local');
    expect(text.status, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/this family's presets have no numeric 'layers' field: fit compared its presets and did not deepen/);
    // a layers field the model does not read: not deepened, and that said (fit had
    // deepened it to the ops limit, answering a model no larger than the preset)
    const idle = join(dir, 'idle.ts');
    writeFileSync(idle, readFileSync('models/mlp.ts', 'utf8').replace('l < cfg.layers', 'l < 2'));
    const same = cli('fit', idle, '--hw', 'local', '--json');
    expect(same.status, same.stderr).toBe(0);
    const r2 = JSON.parse(same.stdout);
    expect(r2.layersIdle).toBe(true);
    expect(r2.model.overrides).toEqual({});
    expect(r2.tried.every((t: { config?: unknown }) => t.config === undefined)).toBe(true);
    expect(cli('fit', idle, '--hw', 'local').stdout).toMatch(/this family's 'layers' field does not change the model: one more layer builds the same graph, so fit did not deepen/);
    // one block per two layers: one more layer is the same graph, twice as many is not; deepened
    const pairs = join(dir, 'pairs.ts');
    writeFileSync(pairs, readFileSync('models/mlp.ts', 'utf8').replace('l < cfg.layers', 'l < Math.floor(cfg.layers / 2)'));
    const paired = cli('fit', pairs, '--hw', 'local', '--json');
    expect(paired.status, paired.stderr).toBe(0);
    const r3 = JSON.parse(paired.stdout);
    expect(r3.layersIdle).toBeUndefined();
    expect(r3.model.overrides.layers).toBeGreaterThan(5);
  });

  it('the runtime\'s switches are refused when they name nothing it knows (each had silently given the default)', () => {
    const withEnv = (k: string, v: string) => spawnSync(process.execPath, ['bin/tiercut.js', 'run', tiny, '--steps', '1'], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, [k]: v } });
    expectUserError(withEnv('TIERCUT_RING_ISA', 'scalar'), /TIERCUT_RING_ISA: expected baseline, avx2 or avx512, got "scalar" \[TC100\]$/);
    expectUserError(withEnv('TIERCUT_SPIN_US', 'abc'), /TIERCUT_SPIN_US: expected a whole number of microseconds from 0 to 1000000, got "abc"/);
    expectUserError(withEnv('TIERCUT_NVME_MERGE', 'no'), /TIERCUT_NVME_MERGE: expected 0 \(no vectored I\/O\) or 1, got "no"/);
    expect(withEnv('TIERCUT_SPIN_US', '0').status).toBe(0);
  });

  it('--save onto a symbolic link writes its target and keeps the file\'s mode (the link had been replaced by a file)', () => {
    const target = join(dir, 'target.safetensors'), link = join(dir, 'link.safetensors');
    expect(cli('run', tiny, '--steps', '1', '--save', target).status).toBe(0);
    const before = readFileSync(target);
    chmodSync(target, 0o640);
    symlinkSync(target, link);
    expect(cli('run', tiny, '--steps', '2', '--save', link).status).toBe(0);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readFileSync(target).equals(before)).toBe(false);
    expect(statSync(target).mode & 0o777).toBe(0o640);
    // set-id bits are not carried onto new content
    chmodSync(target, 0o6755);
    expect(cli('run', tiny, '--steps', '1', '--save', target).status).toBe(0);
    expect(statSync(target).mode & 0o7777).toBe(0o755);
    // a dangling link: the file it names is made (the link had been replaced by a file)
    const dangling = join(dir, 'dangling.safetensors'), named = join(dir, 'named.safetensors');
    symlinkSync(named, dangling);
    expect(cli('run', tiny, '--steps', '1', '--save', dangling).status).toBe(0);
    expect(lstatSync(dangling).isSymbolicLink()).toBe(true);
    expect(statSync(named).isFile()).toBe(true);
    // `..` after a link is the link target's parent, as the OS resolves it (the text's parent had been written)
    mkdirSync(join(dir, 'other', 'sub'), { recursive: true });
    mkdirSync(join(dir, 'work'));
    symlinkSync(join(dir, 'other', 'sub'), join(dir, 'work', 'link'));
    writeFileSync(join(dir, 'work', 'p.json'), 'BYSTANDER');
    expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '-o', `${dir}/work/link/../p.json`).status).toBe(0); // (not join: it would drop the `..` as text)
    expect(readFileSync(join(dir, 'work', 'p.json'), 'utf8')).toBe('BYSTANDER');
    expect(JSON.parse(readFileSync(join(dir, 'other', 'p.json'), 'utf8')).formatVersion).toBe(1);
  });

  it('a number flag takes a decimal number, and a count a whole one exactly (0x10 had been 16, 1e30 warm-up steps taken)', () => {
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--precision', 'fp16', '--dpu', '--dpu-warmup', '0x10', '-o', join(dir, 'x.json')), /--dpu-warmup: '0x10' is not a valid number/);
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--precision', 'fp16', '--dpu', '--dpu-warmup', '1e30', '-o', join(dir, 'x.json')), /--dpu-warmup: expected an integer >= 0, got '1e30'/);
    expectUserError(cli('run', tiny, '--steps', '9007199254740993'), /--steps: expected an integer >= 1/);
  });

  it('an ONNX plan run from another directory finds its model beside the plan (it had looked only in the working directory)', () => {
    const a = scratchDir('tiercut-onnx-a-'), b = scratchDir('tiercut-onnx-b-');
    writeFileSync(join(a, 'm.onnx'), readFileSync(ONNX));
    const bin = resolve('bin/tiercut.js');
    const run = (cwd: string, ...args: string[]) => spawnSync(process.execPath, [bin, ...args], { cwd, encoding: 'utf8', timeout: 60_000 });
    expect(run(a, 'compile', 'm.onnx', '-o', 'p.json').status).toBe(0);
    const there = run(b, 'run', join(a, 'p.json'), '--steps', '1');
    expect(there.status, there.stderr).toBe(0);
    const loss = (out: string) => /^step +1 +loss (\S+)/.exec(out)?.[1];
    expect(loss(there.stdout)).toBeDefined();
    expect(loss(there.stdout)).toBe(loss(run(a, 'run', 'p.json', '--steps', '1').stdout));
    // a plan written elsewhere than where compile ran, the model moved beside it, or neither: found, found, one line naming where it looked
    mkdirSync(join(a, 'models')); mkdirSync(join(a, 'plans'));
    writeFileSync(join(a, 'models', 'n.onnx'), readFileSync(ONNX));
    expect(run(a, 'compile', 'models/n.onnx', '-o', 'plans/q.json').status).toBe(0);
    expect(loss(run(b, 'run', join(a, 'plans', 'q.json'), '--steps', '1').stdout)).toBe(loss(there.stdout));
    writeFileSync(join(a, 'plans', 'n.onnx'), readFileSync(ONNX)); rmSync(join(a, 'models', 'n.onnx'));
    expect(loss(run(b, 'run', join(a, 'plans', 'q.json'), '--steps', '1').stdout)).toBe(loss(there.stdout));
    rmSync(join(a, 'plans', 'n.onnx'));
    const gone = run(b, 'run', join(a, 'plans', 'q.json'), '--steps', '1');
    expect(gone.status).toBe(2);
    expect(gone.stderr).toMatch(/n\.onnx: ONNX model \(looked for at .*models\/n\.onnx, .*plans\/n\.onnx\) not found \[TC101\]/);
  });
});
