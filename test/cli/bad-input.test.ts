// Bad input gets one clear line naming the file and the problem, exit code 2,
// no stack trace, and never a crash inside the addon.
import { describe, it, expect, beforeAll } from 'vitest';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, expectUserError, SHAPE_ERROR_MODEL } from '../cli-helpers.js';
import { scratchDir } from '../scratch-dir.js';

const dir = scratchDir('tiercut-bad-');

let good: string;
beforeAll(() => {
  good = join(dir, 'good.plan.json');
  const r = cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--gpu-mem', '400000', '-o', good);
  expect(r.status, r.stderr).toBe(0);
});

function mutated(name: string, f: (plan: any) => void): string {
  const plan = JSON.parse(readFileSync(good, 'utf8'));
  f(plan);
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify(plan));
  return file;
}

describe('bad input', () => {
  it('a model file with a type error: file:line:col', () => {
    const model = join(dir, 'broken.ts');
    writeFileSync(model, [
      "import type { Model, PresetBase } from 'tiercut/dsl';",
      'const m: Model<PresetBase> = {',
      '  presets: { a: { batch: 1, seq: 1 } },',
      "  build(nn, cfg) { const x = nn.input('x', [cfg.batch, 4]); const y: number = nn.gelu(x); return x; },",
      '};',
      'export default m;',
    ].join('\n'));
    expectUserError(cli('compile', model, '-o', join(dir, 'x.json')), /broken\.ts:4:\d+: Type 'Tensor' is not assignable to type 'number'/);
  });

  it('a model file with a syntax error', () => {
    const model = join(dir, 'syntax.ts');
    writeFileSync(model, "import type { Model } from 'tiercut/dsl';\nconst m = {\n  presets: {,\n};\nexport default m;\n");
    expectUserError(cli('compile', model, '-o', join(dir, 'x.json')), /syntax\.ts:3:\d+: /);
  });

  it('a shape error while building names the model line', () => {
    const model = join(dir, 'shape.ts');
    writeFileSync(model, SHAPE_ERROR_MODEL);
    expectUserError(cli('compile', model, '-o', join(dir, 'x.json')), /shape\.ts:6:\d+: matmul: .*inner dimension/);
  });

  it('a NaN or infinite number in a model: its line, not an internal error', () => {
    // (a plan is JSON, where NaN becomes null: such an init reached the plan, and the plan reader now refuses it)
    const model = (name: string, body: string) => {
      const f = join(dir, name);
      writeFileSync(f, [
        "import type { Model, PresetBase } from 'tiercut/dsl';",
        'const m: Model<PresetBase> = {',
        '  presets: { a: { batch: 2, seq: 1 } },',
        `  build(nn, cfg) { const x = nn.input('x', [cfg.batch, 4]); ${body} },`,
        '};',
        'export default m;',
      ].join('\n'));
      return f;
    };
    const init = model('nan-init.ts', "const w = nn.param('w', [4], { constant: NaN }); return nn.layerNorm(x, w, w);");
    expectUserError(cli('compile', init, '-o', join(dir, 'x.json')), /nan-init\.ts:4:\d+: parameter 'w': its init needs finite numbers, got \{"constant":"NaN"\}/);
    const eps = model('inf-eps.ts', "const w = nn.param('w', [4], { constant: 1 }); return nn.layerNorm(x, w, w, Infinity);");
    expectUserError(cli('compile', eps, '-o', join(dir, 'x.json')), /inf-eps\.ts:4:\d+: layerNorm: eps must be a finite number, got Infinity/);
  });

  it('an unknown preset', () => {
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'huge', '-o', join(dir, 'x.json')), /models\/gpt\.ts: unknown preset 'huge' \(available: tiny, gpt2-124m, gpt2-1\.5b[,)]/);
  });

  it('an unknown hardware profile', () => {
    expectUserError(cli('compile', 'models/gpt.ts', '--hw', 'tpu-v9', '-o', join(dir, 'x.json')), /unknown hardware profile 'tpu-v9'/);
  });

  it('a hardware profile file with a zero capacity or a negative bandwidth', () => {
    const base = { name: 'mine', gpu: { capacityBytes: 1e9, memBandwidthBytesPerSec: 1e11, peakFlops: { f32: 1e12, f16: 1e12, bf16: 1e12 } },
      cpu: { capacityBytes: 1e10, memBandwidthBytesPerSec: 1e10, peakFlops: { f32: 1e11, f16: 1e11, bf16: 1e11 } },
      nvme: { capacityBytes: 1e11, readBytesPerSec: 1e9, writeBytesPerSec: 1e9 }, h2dBytesPerSec: 1e10, d2hBytesPerSec: 1e10 };
    const zero = join(dir, 'zero.json');
    writeFileSync(zero, JSON.stringify({ ...base, gpu: { ...base.gpu, capacityBytes: 0 } }));
    expectUserError(cli('compile', 'models/gpt.ts', '--hw', zero, '-o', join(dir, 'x.json')), /zero\.json: field 'gpu\.capacityBytes': expected a positive number, got 0/);
    const neg = join(dir, 'neg.json');
    writeFileSync(neg, JSON.stringify({ ...base, h2dBytesPerSec: -5 }));
    expectUserError(cli('compile', 'models/gpt.ts', '--hw', neg, '-o', join(dir, 'x.json')), /neg\.json: field 'h2dBytesPerSec': expected a positive number, got -5/);
    // positive but out of the range the LP can scale (HiGHS had refused the model: an internal error, exit 1)
    const slow = join(dir, 'slow.json');
    writeFileSync(slow, JSON.stringify({ ...base, nvme: { ...base.nvme, writeBytesPerSec: 1e-9 } }));
    expectUserError(cli('compile', 'models/gpt.ts', '--hw', slow, '--gpu-mem', '400000', '--cpu-mem', '200000', '-o', join(dir, 'x.json')), /slow\.json: field 'nvme\.writeBytesPerSec': expected a number from 1e\+6 to 1e\+18, got 1e-9/);
    // a measured kernel time past a second (1e300 s had given a predicted step of 9e303 ms)
    const hung = join(dir, 'kernel.json');
    writeFileSync(hung, JSON.stringify({ ...base, kernels: { matmul: { fixedSeconds: 1e300, rooflineFactor: 1 } } }));
    expectUserError(cli('compile', 'models/gpt.ts', '--hw', hung, '-o', join(dir, 'x.json')), /kernel\.json: field 'kernels\.matmul\.fixedSeconds': expected a number from 0 to 1, got 1e\+300/);
    // (a fractional capacity had compiled, and run then refused the plan naming program.tiers[1])
    const half = join(dir, 'half.json');
    writeFileSync(half, JSON.stringify({ ...base, cpu: { ...base.cpu, capacityBytes: 25276194816.5 } }));
    expectUserError(cli('compile', 'models/gpt.ts', '--hw', half, '-o', join(dir, 'x.json')), /half\.json: field 'cpu\.capacityBytes': expected a whole number of bytes, got 25276194816\.5/);
    const ok = join(dir, 'ok.json');
    writeFileSync(ok, JSON.stringify(base));
    expect(cli('compile', 'models/gpt.ts', '--hw', ok, '-o', join(dir, 'ok.plan.json')).status).toBe(0);
    // an NVMe of 0 bytes is none, in a file as on the command line (`hw calibrate --nvme 0` had written a profile compile refused)
    const none = join(dir, 'no-nvme.json');
    writeFileSync(none, JSON.stringify({ ...base, nvme: { ...base.nvme, capacityBytes: 0 } }));
    expect(cli('compile', 'models/gpt.ts', '--hw', none, '-o', join(dir, 'no-nvme.plan.json')).status).toBe(0);
    // fields of the wrong kind, an unknown kernel: named (a kernel key that names no op had been ignored; an empty name printed "hardware ,")
    const cases: [string, unknown, RegExp][] = [
      ['array', [1, 2], /array\.json: expected a JSON object/],
      ['kernel-key', { ...base, kernels: { bogus: { fixedSeconds: 0, rooflineFactor: 1 } } }, /field 'kernels\.bogus': expected a key naming an op kind/],
      ['empty-name', { ...base, name: '' }, /field 'name': expected a non-empty string, got ""/],
      ['executor', { ...base, executor: 5 }, /field 'executor': expected an object, got 5/],
      ['emulated', { ...base, emulatedGpu: 'yes' }, /field 'emulatedGpu': expected true or false, got "yes"/],
      ['description', { ...base, description: 42 }, /field 'description': expected a string, got 42/],
    ];
    for (const [name, json, want] of cases) {
      const f = join(dir, `${name}.json`);
      writeFileSync(f, JSON.stringify(json));
      expectUserError(cli('compile', 'models/gpt.ts', '--hw', f, '-o', join(dir, 'x.json')), want);
    }
    const fine = join(dir, 'kernel-variant.json');
    writeFileSync(fine, JSON.stringify({ ...base, kernels: { 'gelu[erf]@f16': { fixedSeconds: 1e-6, rooflineFactor: 1 } } }));
    expect(cli('compile', 'models/gpt.ts', '--hw', fine, '-o', join(dir, 'ok.plan.json')).status).toBe(0);
  });

  it('a GPU or CPU capacity of 0 given on the command line: refused as a profile file\'s is (--nvme 0 is no NVMe), by compile and fit alike', () => {
    const out = join(dir, 'x.json');
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--hw', 'v100-32g', '--gpu-mem', '0', '-o', out), /--gpu-mem: expected a capacity above 0 bytes, got 0: every op on the GPU reads and writes its memory .*\[TC203\]$/);
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--cpu-mem', '0', '-o', out), /--cpu-mem: expected a capacity above 0 bytes, got 0: the host stages every copy/);
    expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--nvme', '0', '-o', out).status).toBe(0);
    // fit checks the machine once, before any model (each preset had printed the error as its "no fit" reason, exit 0)
    expectUserError(cli('fit', 'models/gpt.ts', '--gpu-mem', '0', '--json'), /--gpu-mem: expected a capacity above 0 bytes, got 0/);
    expectUserError(cli('fit', 'models/gpt.ts', '--hw', join(dir, 'no-such-profile.json')), /no-such-profile\.json: hardware profile file not found \[TC101\]/);
  });

  it('fit where no preset fits, not even the smallest: the trials on stdout, then one line naming the smallest and its shortfall, exit 2', () => {
    // (it had printed "no preset of this model fits" and exited 0)
    const machine = ['--hw', 'v100-32g', '--gpu-mem', '1kB', '--cpu-mem', '1kB', '--nvme', '0'];
    const r = cli('fit', 'models/gpt.ts', ...machine);
    expectUserError(r, /^tiercut: models\/gpt\.ts: no preset fits, not even the smallest, tiny \(\d+ parameters\): does not fit: .*capacity is 1000 B \(short by [\d.]+ KiB\).*\[TC301\]$/);
    expect(r.stdout).toMatch(/^no fit +tiny /m);
    // (each trial's parameters in a unit that shows them: tiny's had read "0.00 B params")
    expect(r.stdout).toMatch(/^no fit +tiny +[\d.]+ K params/m);
    expect(r.stdout).toMatch(/^no fit +gpt3-175b +174\.60 B params/m);
    const j = cli('fit', 'models/gpt.ts', ...machine, '--json');
    expectUserError(j, /no preset fits, not even the smallest, tiny/);
    const found = JSON.parse(j.stdout);
    expect(found.model).toBeNull();
    expect(found.tried.length).toBeGreaterThan(1);
    expect(found.tried.every((t: { feasible: boolean }) => !t.feasible)).toBe(true);
  });

  it('fit --min-tflops that no model reaches: one line naming the fastest model that fits and its TFLOPS, exit 2', () => {
    const r = cli('fit', 'models/mlp.ts', '--min-tflops', '1000');
    expectUserError(r, /^tiercut: models\/mlp\.ts: no model of this family fits at 1000 TFLOPS or more: the fastest that fits, (wide|tiny) \(\d+ parameters\), is predicted at [\d.]+ TFLOPS; lower --min-tflops or raise a capacity \[TC301\]$/);
    expect(r.stdout.match(/predicted [\d.]+ TFLOPS < 1000/g)).toHaveLength(2);
  });

  it('a GPU too small for the LP\'s placements: the min-cut\'s plan, and a note that says so without pointing at the time limit', () => {
    // (tiny on 1 KB of a V100: the LP's placements run every forward and backward op on the GPU; the cut runs them on the CPU)
    const out = join(dir, 'small-gpu.plan.json');
    const r = cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--hw', 'v100-32g', '--gpu-mem', '1KB', '-o', out);
    expect(r.status, r.stderr).toBe(0);
    const plan = JSON.parse(readFileSync(out, 'utf8'));
    expect(plan.lpStatus).toBe('infeasible');
    expect(plan.placement.method).toBe('mincut');
    expect(r.stderr).toMatch(/the placement LP found no placement within the capacities \(its placements run every forward and backward op on the GPU\): this plan is the min-cut's, .*raise --gpu-mem/);
    expect(r.stderr).not.toMatch(/lp-time-limit/);
  });

  it('a model too large for every tier says by how many bytes', () => {
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'gpt2-1.5b', '--seq', '64', '--precision', 'fp16', '--hw', 'v100-32g', '--gpu-mem', '8GB', '--cpu-mem', '1GB', '--nvme', '1GB', '-o', join(dir, 'x.json')), /does not fit: the model state needs .* is short by at least [\d.]+ [KMG]iB/);
  });

  it('parameters kept on the GPU that it cannot hold: refused, by how many bytes', () => {
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'gpt2-1.5b', '--seq', '64', '--precision', 'fp16', '--hw', 'v100-32g', '--gpu-mem', '2GB', '--keep-params-on-gpu', '-o', join(dir, 'x.json')), /does not fit: the GPU \(1\.86 GiB\) cannot hold the 2\.90 GiB of parameters --keep-params-on-gpu keeps there \(short by 1\.04 GiB\); raise --gpu-mem/);
  });

  it('a GPU too small for every op there, where the min-cut runs ops on the CPU and then the CPU is short: both named, by how much', () => {
    // (it had named only the GPU, "raise --gpu-mem", where 0.2 GB more CPU makes it fit)
    const args = ['compile', 'models/gpt.ts', '--preset', 'gpt2-124m', '--seq', '32', '--precision', 'fp16', '--hw', 'v100-32g', '--gpu-mem', '200MB', '--nvme', '0', '-o', join(dir, 'x.json')];
    expectUserError(cli(...args, '--cpu-mem', '1.5GB'), /does not fit: with every op on the GPU, the working set .* \(short by [\d.]+ MiB\); with ops on the CPU the GPU suffices, but the CPU then needs [\d.]+ GiB, capacity is 1\.40 GiB \(short by [\d.]+ MiB\); raise --cpu-mem/);
    expect(cli(...args, '--cpu-mem', '1.8GB').status).toBe(0);
  });

  it('a CPU too small to stage the state that must rest on NVMe: refused before any LP, by how many bytes', () => {
    // (gpt3-13b's state is 143.65 GiB; beside a V100's 29.80 GiB the rest rests
    // on NVMe, through CPU buffers a tensor at a time, among them an MLP
    // weight's master32, 20480 x 5120 x 4 B = 400 MiB; it had ended in the
    // rounding's "no proof that no placement does")
    const r = cli('compile', 'models/gpt.ts', '--preset', 'gpt3-13b', '--precision', 'fp16', '--hw', 'v100-32g', '--cpu-mem', '100MB', '-o', join(dir, 'x.json'));
    expectUserError(r, /does not fit: 113\.75 GiB of the state \(143\.65 GiB\) is more than the GPU \(29\.80 GiB\) and the CPU hold, so it rests on NVMe, which is read and written through CPU buffers a whole tensor at a time; the smallest tensors that make up those bytes include one of 400\.00 MiB, and the CPU has 95\.37 MiB \(short by 304\.63 MiB\); raise --cpu-mem \[TC301\]/);
  });

  it('a model that cannot fit says by how much', () => {
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--gpu-mem', '1000', '-o', join(dir, 'x.json')), /does not fit: .*short by/);
  });

  it('an LP past its time limit says so and how to raise it (gpt2-124m with its state on NVMe, limit 1 ms); the limit is a number of seconds > 0', () => {
    const args = ['compile', 'models/gpt.ts', '--preset', 'gpt2-124m', '--seq', '32', '--precision', 'fp16', '--gpu-mem', '1GB', '--cpu-mem', '600MB', '-o', join(dir, 'x.json')];
    expectUserError(cli(...args, '--lp-time-limit', '0.001'), /the LP that places this step ran past its time limit of 0\.001 s without an optimal placement; raise --lp-time-limit \(seconds, default 120\) \[TC302\]/);
    expectUserError(cli(...args, '--lp-time-limit', '0'), /--lp-time-limit: expected a number of seconds > 0/);
    expectUserError(cli(...args, '--lp-time-limit', 'soon'), /--lp-time-limit: 'soon' is not a valid number/);
  });

  it('an LP past its time limit where the min-cut can stand in: the plan is the cut\'s, and compile, the plan and its report say so', () => {
    // gpt2-124m (seq 32) on a 1 GB GPU with this machine's CPU: two tiers hold it, so the cut is a plan
    const out = join(dir, 'cut.plan.json');
    const r = cli('compile', 'models/gpt.ts', '--preset', 'gpt2-124m', '--seq', '32', '--precision', 'fp16', '--gpu-mem', '1GB', '--lp-time-limit', '0.001', '-o', out);
    expect(r.status).toBe(0);
    const note = /the placement LP ran past its time limit: this plan is the min-cut's, which stood in .*; raise --lp-time-limit/;
    expect(r.stderr).toMatch(note);
    const plan = JSON.parse(readFileSync(out, 'utf8'));
    expect(plan.lpStatus).toBe('timeLimit');
    expect(plan.placement.method).toBe('mincut');
    const report = cli('report', out);
    expect(report.status).toBe(0);
    expect(report.stdout).toMatch(note);
    // with its LP solved, the same compile says nothing of the kind
    const solved = cli('compile', 'models/gpt.ts', '--preset', 'gpt2-124m', '--seq', '32', '--precision', 'fp16', '--gpu-mem', '1GB', '-o', join(dir, 'lp.plan.json'));
    expect(solved.status).toBe(0);
    expect(solved.stderr).not.toMatch(/note:/);
    expect(JSON.parse(readFileSync(join(dir, 'lp.plan.json'), 'utf8')).lpStatus).toBeUndefined();
  });

  it('a plan with a wrong formatVersion', () => {
    const f = mutated('version.plan.json', (p) => { p.formatVersion = 99; });
    expectUserError(cli('report', f), /version\.plan\.json: formatVersion 99 is not supported/);
    expectUserError(cli('run', f, '--steps', '1'), /version\.plan\.json: formatVersion 99/);
  });

  it('a plan with an arena offset out of range', () => {
    const f = mutated('offset.plan.json', (p) => { const b = p.buffers.find((x: any) => x.tier === 'gpu'); b.offsetBytes = p.tiers.gpu.peakBytes; });
    expectUserError(cli('run', f, '--steps', '1'), /offset\.plan\.json: buffers\[\d+\].*arena offset \d+ \+ size \d+ is outside the gpu arena/);
  });

  it('a plan with overlapping live buffers', () => {
    const f = mutated('overlap.plan.json', (p) => {
      const persistent = p.buffers.filter((x: any) => x.tier === 'cpu' && x.allocAt === -1 && x.freeAt === -1);
      persistent[1].offsetBytes = persistent[0].offsetBytes;
    });
    expectUserError(cli('run', f, '--steps', '1'), /overlap\.plan\.json: buffers\[\d+\] and buffers\[\d+\] \(cpu\): live at the same time and overlapping/);
  });

  it('a plan whose instruction waits on a later one', () => {
    const f = mutated('waits.plan.json', (p) => { p.instructions[3].waits = [p.instructions.length - 1]; });
    expectUserError(cli('run', f, '--steps', '1'), /waits\.plan\.json: instructions\[3\]: waits on \d+, which is not an earlier instruction/);
  });

  it('a plan that drops a wait (a read before its write is valid)', () => {
    const f = mutated('race.plan.json', (p) => {
      const x = p.instructions.find((i: any) => i.kind === 'copy' && i.waits.length > 0);
      x.waits = [];
    });
    expectUserError(cli('run', f, '--steps', '1'), /race\.plan\.json: instructions\[\d+\].*without waiting for instruction/);
  });

  it('a file that is not a plan', () => {
    const f = join(dir, 'junk.json');
    writeFileSync(f, '{"formatVersion": 1, "hello": ');
    expectUserError(cli('report', f), /junk\.json: not a plan: invalid JSON/);
    expectUserError(cli('report', join(dir, 'missing.json')), /missing\.json: plan file not found/);
  });

  it('bad sizes and numbers', () => {
    expectUserError(cli('compile', 'models/gpt.ts', '--gpu-mem', 'lots', '-o', join(dir, 'x.json')), /--gpu-mem: 'lots' is not a size/);
    expectUserError(cli('run', good, '--steps', '-3'), /--steps: expected an integer >= 1, got '-3'/);
    expectUserError(cli('run', good, '--steps', 'many'), /--steps: 'many' is not a valid number/);
  });

  it('options: an unknown one is named as unknown, given last too (it was said to need a value); a known one given last needs a value', () => {
    const first = (r: ReturnType<typeof cli>) => { expect(r.status, r.stderr).toBe(2); return r.stderr.split('\n')[0]; };
    expect(first(cli('report', good, '--bogus'))).toBe('tiercut: unknown option --bogus');
    expect(first(cli('report', good, '--bogus', '1'))).toBe('tiercut: unknown option --bogus');
    expect(first(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--gpu-mme', '1GB', '-o', join(dir, 'x.json')))).toBe('tiercut: unknown option --gpu-mme');
    expect(first(cli('hw', 'list', '--verbose'))).toBe('tiercut: unknown option --verbose');
    expect(first(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '-o'))).toBe('tiercut: -o needs a value');
    expect(first(cli('run', good, '--steps'))).toBe('tiercut: --steps needs a value');
    // (`--save --json` had saved the checkpoint to a file named --json; -o --trace took --trace as the plan)
    expect(first(cli('run', good, '--steps', '1', '--save', '--json'))).toBe('tiercut: --save needs a value');
    expect(first(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '-o', '--trace', join(dir, 't.json')))).toBe('tiercut: -o needs a value');
    expect(existsSync('--json')).toBe(false);
  });

  it('a hostile plan that passes the schema: a buffer freed early to share live bytes (a wrong loss, silently), a rate of 0, placement arrays cut short, betas past 1, an sp input of another shape or a position on two ranks (not its zigzag ones); control characters in a name escaped', () => {
    // (each had been run or reported: a wrong loss, a TypeError with a stack trace, "the gradient has an inf or NaN", a 16 GB allocation)
    const plan = JSON.parse(readFileSync(good, 'utf8'));
    const [a, b] = (() => {
      // two buffers of one tier and size, the first's live range ending after the second's begins
      for (const x of plan.buffers) for (const y of plan.buffers) if (x.id !== y.id && x.tier === y.tier && x.sizeBytes === y.sizeBytes && x.allocAt >= 0 && x.freeAt > y.allocAt && y.allocAt > x.allocAt + 1) return [x.id, y.id];
      throw new Error('no such pair');
    })();
    expectUserError(cli('report', mutated('early-free.json', (p) => { p.buffers[a].freeAt = p.buffers[a].allocAt + 1; p.buffers[b].offsetBytes = p.buffers[a].offsetBytes; })), new RegExp(`buffers\\[${a}\\]: freeAt \\d+ is not its free instruction \\[TC402\\]`));
    expectUserError(cli('report', mutated('h2d0.json', (p) => { p.hardware.h2dBytesPerSec = 0; })), /hardware: field 'h2dBytesPerSec': expected a positive number, got 0 \[TC402\]$/);
    expectUserError(cli('report', mutated('optier.json', (p) => { p.placement.opTier = []; })), /placement\.opTier: 0 entries for \d+ ops/);
    expectUserError(cli('report', mutated('bound.json', (p) => { p.bound.lowerBoundSeconds = 1e300; p.bound.gapPercent = -50; })), /bound: lowerBoundSeconds 1e\+300 and gapPercent -50 do not fit predicted\.stepSeconds/);
    expectUserError(cli('run', mutated('beta.json', (p) => { p.optimizer.beta1 = 1.5; }), '--steps', '1'), /optimizer: expected lr and weightDecay >= 0, eps > 0 and betas in \[0, 1\)/);
    const sp = join(dir, 'sp.plan.json');
    expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--sp', '2', '-o', sp).status).toBe(0);
    const spPlan = JSON.parse(readFileSync(sp, 'utf8'));
    spPlan.sp.inputs[0].fullShape = spPlan.sp.inputs[0].fullShape.map((d: number, k: number) => (k === spPlan.sp.inputs[0].axis ? d : 1e9));
    writeFileSync(sp, JSON.stringify(spPlan));
    expectUserError(cli('run', sp, '--steps', '1'), /sp: inputs\[0\]: tensor \d+ is not a data input cut from 16/);
    // (a position on two ranks had trained on a wrong sequence, silently)
    expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--sp', '2', '-o', sp).status).toBe(0);
    writeFileSync(sp + '.orig', readFileSync(sp));
    const dup = JSON.parse(readFileSync(sp, 'utf8'));
    dup.sp.perRank[1].positions[0] = dup.sp.perRank[0].positions[0];
    writeFileSync(sp, JSON.stringify(dup));
    expectUserError(cli('report', sp), /sp: perRank\[1\]\.positions are not rank 1's zigzag positions \(chunks 1 and 2 of 4, 8 positions\) \[TC402\]$/);
    // (ring numbers tampered to 0 had been reported, and run printed "plan 0" beside what it sent)
    const zero = JSON.parse(readFileSync(sp + '.orig', 'utf8'));
    zero.sp.perRank[0].ringWorkspaceBytes = 0;
    writeFileSync(sp, JSON.stringify(zero));
    expectUserError(cli('report', sp), /sp: perRank\[0\]: ringWorkspaceBytes 0 and ringSendBytes .* are not what its ops take and send \(\d+, /);
    // (--sp 0x2 had compiled 2 ranks; every other count takes decimal digits only)
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--sp', '0x2', '-o', sp), /--sp: expected a whole number of ranks from 1 to 1024, got '0x2'/);
    // control characters in a name the report prints: escaped, one screen line each
    const esc = cli('report', mutated('esc.json', (p) => { p.model.source = 'models/\x1b[2Jgpt.ts\r'; }));
    expect(esc.status, esc.stderr).toBe(0);
    expect(esc.stdout).toMatch(/^tiercut plan: models\/\\x1b\[2Jgpt\.ts\\x0d/);
    expect(esc.stdout).not.toMatch(/[\x1b\r]/);
    expectUserError(cli('report', dir), /cannot read it: EISDIR .*\[TC401\]/);
  });

  it('data that does not match the model inputs', () => {
    expectUserError(cli('run', good, '--steps', '1', '--data', 'fixtures/gpt-tiny-parity/init.safetensors'), /init\.safetensors: no tensor named 'tokens'/);
  });
});

describe('the main commands', () => {
  it('report --json has the contract fields; run --json prints steps and a summary', () => {
    const r = cli('report', good, '--json');
    expect(r.status, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout);
    expect(s.params).toBe(29056);
    for (const t of ['gpu', 'cpu', 'nvme']) expect(typeof s.tiers[t].capacityBytes).toBe('number');
    expect(s.placement.adamM.cpu).toBeGreaterThan(0);
    for (const k of ['h2dBytes', 'd2hBytes', 'nvmeReadBytes', 'nvmeWriteBytes']) expect(typeof s.traffic[k]).toBe('number');
    expect(s.predicted.stepSeconds).toBeGreaterThan(0);
    const run = cli('run', good, '--steps', '3', '--seed', '4', '--json');
    expect(run.status, run.stderr).toBe(0);
    const lines = run.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.slice(0, 3).map((l) => l.step)).toEqual([1, 2, 3]);
    expect(lines[3].summary.peakBytes.gpu).toBe(s.tiers.gpu.peakBytes);
    const hw = cli('hw', 'list');
    expect(hw.stdout).toMatch(/v100-32g[\s\S]*a100-80g[\s\S]*h100-80g[\s\S]*h200-141g[\s\S]*local/);
  });

  it('compiling twice gives a byte-identical plan', () => {
    const again = join(dir, 'again.plan.json');
    expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--gpu-mem', '400000', '-o', again).status).toBe(0);
    expect(readFileSync(again, 'utf8')).toBe(readFileSync(good, 'utf8'));
  });

  it('a DPU plan whose steady step is not the plain one\'s reordered, an sp and a dpu section together, capacities not the hardware\'s: refused as read (each had trained, or written a checkpoint without a parameter)', () => {
    const dpu = join(dir, 'dpu.plan.json');
    expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--precision', 'fp16', '--gpu-mem', '400000', '--cpu-mem', '200000', '--dpu', '--dpu-warmup', '2', '-o', dpu).status).toBe(0);
    const base = readFileSync(dpu, 'utf8');
    expect(JSON.parse(base).dpu.steady).toBeDefined();
    const bad = join(dir, 'dpu-bad.plan.json');
    const edited = (edit: (p: any) => void) => { const p = JSON.parse(base); edit(p); writeFileSync(bad, JSON.stringify(p)); return bad; }; // eslint-disable-line @typescript-eslint/no-explicit-any
    expectUserError(cli('report', edited((p) => { p.dpu.steady.graph.tensors.find((t: { role: string }) => t.role === 'master32').param = 'other'; })), /dpu\.steady: tensor \d+ is not the plain step's master\./);
    expectUserError(cli('report', edited((p) => { p.dpu.steady.graph.loss = p.dpu.steady.graph.ops[0].outputs[0]; })), /dpu\.steady: (its precision, loss or parameter count differs|graph: loss tensor)/);
    expectUserError(cli('report', edited((p) => { p.dpu.steady.graph.precision = 'fp32'; })), /dpu\.steady: graph: tensors\[\d+\] \(\S+\): a param16 of f16 in a graph of precision fp32/);
    expectUserError(cli('report', edited((p) => { p.dpu.steady.graph.ops.find((o: { kind: string }) => o.kind === 'layerNorm').attrs.eps = 0.5; })), /dpu\.steady: its ops are not the plain step's reordered/);
    expectUserError(cli('report', edited((p) => { p.tiers.gpu.capacityBytes = 2e9; })), /tiers\.gpu\.capacityBytes 2000000000 is not the hardware's 400000/);
    const sp = join(dir, 'sp2-for-dpu.plan.json');
    expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--sp', '2', '-o', sp).status).toBe(0);
    const spPlan = JSON.parse(readFileSync(sp, 'utf8'));
    expectUserError(cli('report', edited((p) => { p.sp = spPlan.sp; })), /a plan has an sp section or a dpu section, not both/);
    // a DPU run's measured peaks are its warm-up's and its steady step's larger (the steady step's alone had been reported)
    const one = JSON.parse(cli('run', dpu, '--steps', '1', '--json').stdout.trim().split('\n').pop()!).summary;
    const four = JSON.parse(cli('run', dpu, '--steps', '4', '--json').stdout.trim().split('\n').pop()!).summary;
    // (and its planned bytes per step the warm-up's and the steady step's mean, as measured: the steady step's alone had been set beside the mean)
    expect(four.plannedBytesPerStep).toEqual(four.bytesPerStep);
    for (const t of ['gpu', 'cpu', 'nvme']) {
      expect(four.peakBytes[t]).toBeGreaterThanOrEqual(one.peakBytes[t]);
      expect(four.planPeakBytes[t]).toBeGreaterThanOrEqual(one.planPeakBytes[t]);
    }
  });
});
