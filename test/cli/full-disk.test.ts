// A full disk (here a file-size limit of 1 KiB: every write of a regular file
// past it fails with EFBIG) costs compile its caches, never its answer: a DSL
// model still loads (from memory, with its source map: a shape error still
// names its line), and the plan goes to stdout. A plan file the disk will not
// take is one line naming it and the OS error, exit code 2, the old file
// untouched and no temporary file left; so is a checkpoint at the end of a
// run. The caches keep at most a number of
// entries, the oldest removed first.
import { describe, it, expect, afterAll } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parsePlan } from '../../compiler/plan/io.js';
import { remember } from '../../src/cache-dir.js';
import { expectUserError, SHAPE_ERROR_MODEL } from '../cli-helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'tiercut-fulldisk-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** bin/tiercut.js with a 1 KiB file-size limit and its own (empty) temp directory. */
function limited(...args: string[]) {
  const tmp = mkdtempSync(join(dir, 'tmp-'));
  const quoted = args.map((a) => `'${a}'`).join(' ');
  // (through a pipe: /dev/stdout cannot be opened on the socket spawnSync gives)
  const r = spawnSync('bash', ['-c', `set -o pipefail; ulimit -f 1; "${process.execPath}" bin/tiercut.js ${quoted} | cat`], { encoding: 'utf8', timeout: 120_000, env: { ...process.env, TMPDIR: tmp, TIERCUT_LP_CACHE: '1' }, maxBuffer: 1 << 28 });
  return { ...r, tmp };
}

const leftovers = (d: string): string[] => readdirSync(d, { recursive: true }).map(String).filter((f) => f.includes('.tmp-'));

describe('a full disk', () => {
  it('compile still answers on stdout, without its caches', () => {
    const r = limited('compile', 'models/gpt.ts', '--preset', 'tiny', '--gpu-mem', '400000', '-o', '/dev/stdout');
    expect(r.status, r.stderr).toBe(0);
    const plan = parsePlan(r.stdout.slice(0, r.stdout.lastIndexOf('}') + 1), 'stdout');
    expect(plan.graph.ops.length).toBeGreaterThan(0);
    expect(leftovers(r.tmp)).toEqual([]);
  });

  it('a DSL shape error still names its line', () => {
    const model = join(dir, 'shape.ts');
    writeFileSync(model, SHAPE_ERROR_MODEL);
    expectUserError(limited('compile', model, '-o', '/dev/stdout'), /shape\.ts:6:\d+: matmul: .*inner dimension/);
  });

  it('a plan file it will not take: one line, exit 2, the old file kept, nothing left behind', () => {
    const out = join(dir, 'out');
    mkdirSync(out);
    const plan = join(out, 'old.plan.json');
    writeFileSync(plan, 'the old plan');
    const r = limited('compile', 'models/gpt.ts', '--preset', 'tiny', '-o', plan);
    expectUserError(r, /cannot write the plan to .*old\.plan\.json: EFBIG .*nothing was written/);
    expect(readFileSync(plan, 'utf8')).toBe('the old plan');
    expect(readdirSync(out)).toEqual(['old.plan.json']);
    expect(leftovers(r.tmp)).toEqual([]);
  });
});

describe('a full disk at the end of a run', () => {
  it('a checkpoint it will not take: one line, exit 2, the old checkpoint kept, nothing left behind', () => {
    const plan = join(dir, 'tiny.plan.json');
    const c = spawnSync(process.execPath, ['bin/tiercut.js', 'compile', 'models/gpt.ts', '--preset', 'tiny', '-o', plan], { encoding: 'utf8', timeout: 120_000 });
    expect(c.status, c.stderr).toBe(0);
    const out = join(dir, 'ck');
    mkdirSync(out);
    const ck = join(out, 'model.safetensors');
    writeFileSync(ck, 'the old checkpoint');
    const r = limited('run', plan, '--steps', '1', '--save', ck);
    expectUserError(r, /cannot write the checkpoint to .*model\.safetensors: EFBIG .*nothing was written/);
    expect(readFileSync(ck, 'utf8')).toBe('the old checkpoint');
    expect(readdirSync(out)).toEqual(['model.safetensors']);
  });
});

describe('cache entries', () => {
  // (it had said "nothing was written" of the trace alone, the plan or checkpoint before it written)
  it('a second output the disk will not take (/dev/full) says the first was written', () => {
    const plan = join(dir, 'first.plan.json');
    const r = spawnSync(process.execPath, ['bin/tiercut.js', 'compile', 'models/gpt.ts', '--preset', 'tiny', '-o', plan, '--trace', '/dev/full'], { encoding: 'utf8', timeout: 120_000 });
    expectUserError(r, /cannot write the trace to \/dev\/full: ENOSPC \(no space left on device\); nothing of it was written \(the plan .*first\.plan\.json was\) \[TC108\]$/);
    expect(parsePlan(readFileSync(plan, 'utf8'), plan).graph.ops.length).toBeGreaterThan(0);
    const ck = join(dir, 'first.safetensors');
    const run = spawnSync(process.execPath, ['bin/tiercut.js', 'run', plan, '--steps', '1', '--save', ck, '--trace', '/dev/full'], { encoding: 'utf8', timeout: 120_000 });
    expectUserError(run, /cannot write the trace to \/dev\/full: ENOSPC .*; nothing of it was written \(the checkpoint .*first\.safetensors was\)/);
    expect(readdirSync(dir)).toContain('first.safetensors');
  });

  it('a name near the 255-byte limit has a temporary file of its own (ENAMETOOLONG had refused it)', () => {
    const long = join(dir, `${'p'.repeat(240)}.json`);
    const r = spawnSync(process.execPath, ['bin/tiercut.js', 'compile', 'models/gpt.ts', '--preset', 'tiny', '-o', long], { encoding: 'utf8', timeout: 120_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(readdirSync(dir).filter((f) => f.startsWith('ppp') && f.includes('.tmp-'))).toEqual([]);
  });

  // (a stack trace and exit 1 after the measurements)
  it('hw calibrate with a temp directory that cannot be used: one line, exit 2, nothing left in the spill directory', () => {
    const spill = mkdtempSync(join(dir, 'cal-'));
    const r = spawnSync(process.execPath, ['bin/tiercut.js', 'hw', 'calibrate', '--spill-dir', spill, '-o', join(dir, 'prof.json')], { encoding: 'utf8', timeout: 120_000, env: { ...process.env, TMPDIR: join(dir, 'no-such-dir') } });
    expectUserError(r, /calibrate \(the roofline profile the kernels are fitted against\): cannot create a test directory in .*no-such-dir: ENOENT/);
    expect(readdirSync(spill)).toEqual([]);
  });

  it('at most `max` of a kind, the oldest removed first; others untouched', () => {
    const cache = join(dir, 'cache');
    mkdirSync(cache);
    writeFileSync(join(cache, 'other.txt'), 'not an entry');
    const mine = (f: string) => f.endsWith('.entry');
    for (let k = 0; k < 5; k++) {
      expect(remember(cache, `${k}.entry`, `entry ${k}`, mine, 3)).toBe(true);
      utimesSync(join(cache, `${k}.entry`), 1000 + k, 1000 + k); // distinct ages, whatever the clock's resolution
    }
    expect(readdirSync(cache).sort()).toEqual(['2.entry', '3.entry', '4.entry', 'other.txt']);
    expect(remember(join(cache, 'no-such-dir'), 'x.entry', 'x', mine, 3)).toBe(false);
  });
});
