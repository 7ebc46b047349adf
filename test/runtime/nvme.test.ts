// The nvme tier: O_DIRECT store round trip (unaligned ranges, both I/O modes),
// spill files removed on SIGTERM, and faults — an unwritable spill directory,
// a full disk, a spill file removed or truncated during the run — each end the
// run with one line naming the tier, the tensor (when a step was running) and
// the OS error, exit code 2, no step reported that did not complete, and
// nothing left in the spill directory. Child processes of bin/tiercut.js.
import { describe, it, expect, beforeAll } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nativeAddon } from '../../runtime/binding.js';

const dir = mkdtempSync(join(tmpdir(), 'tiercut-nvme-'));
const planFile = join(dir, 'nvme.plan.json');
const cli = (...args: string[]) => spawnSync(process.execPath, ['bin/tiercut.js', ...args], { encoding: 'utf8', timeout: 120_000 });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(() => {
  const c = cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--gpu-mem', '400000', '--cpu-mem', '200000', '-o', planFile);
  expect(c.status, c.stderr).toBe(0);
}, 120_000);

/** Everything left under a spill directory (recursively). */
const leftovers = (d: string): string[] => (existsSync(d) ? readdirSync(d, { recursive: true }).map(String) : []);

function expectOneLine(stderr: string, status: number | null, pattern: RegExp): void {
  expect(status, stderr).toBe(2);
  const lines = stderr.trim().split('\n');
  expect(lines.length, stderr).toBe(1);
  expect(lines[0]).toMatch(/^tiercut: /);
  expect(lines[0]).toMatch(pattern);
  expect(stderr).not.toMatch(/\n\s+at /);
}

/** Every stdout line is a finished step, numbered 1, 2, 3, ... */
function expectOnlyCompletedSteps(stdout: string): number {
  const lines = stdout.trim() === '' ? [] : stdout.trim().split('\n').map((l) => JSON.parse(l));
  lines.forEach((l, i) => { expect(l.step).toBe(i + 1); expect(Number.isFinite(l.loss)).toBe(true); });
  return lines.length;
}

/** Starts a long run; once its spill file exists, applies `fault` to it; resolves when the run ends. */
async function runWithFault(spill: string, fault: (file: string) => void): Promise<{ status: number | null; signal: string | null; stdout: string; stderr: string }> {
  mkdirSync(spill, { recursive: true });
  const child = spawn(process.execPath, ['bin/tiercut.js', 'run', planFile, '--steps', '1000000', '--json', '--spill-dir', spill]);
  let stdout = '', stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  const done = new Promise<{ status: number | null; signal: string | null }>((r) => child.on('close', (status, signal) => r({ status, signal })));
  for (let i = 0; i < 600; i++) {
    // after a few steps have run, so that a step is in flight
    const file = leftovers(spill).find((f) => f.endsWith('nvme.bin'));
    if (file && stdout.split('\n').length > 3) { fault(join(spill, file)); break; }
    await sleep(50);
  }
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const r = await done;
  clearTimeout(timer);
  return { ...r, stdout, stderr };
}

describe('nvme store', () => {
  it('round-trips unaligned ranges with O_DIRECT and buffered I/O', () => {
    const addon = nativeAddon();
    for (const direct of [true, false]) {
      const r = addon.nvmeBench({ dir, bytes: 3 * 4096 + 100, requestBytes: 4096 + 7, queueDepth: 3, blockBytes: 4096, direct });
      expect(r.writeBytesPerSec).toBeGreaterThan(0);
      if (!direct) expect(r.direct).toBe(false);
      expect(existsSync(r.file)).toBe(false);
    }
  });

  it('the plan trains with bit-identical losses on O_DIRECT, buffered, and odd queue depth / block size', () => {
    const runs = [[], ['--nvme-buffered'], ['--nvme-queue-depth', '3', '--nvme-block-size', '8KiB']].map((extra) => {
      const r = cli('run', planFile, '--steps', '4', '--json', '--spill-dir', join(dir, 'modes'), ...extra);
      expect(r.status, r.stderr).toBe(0);
      return r.stdout.trim().split('\n').slice(0, 4).map((l) => JSON.parse(l).loss);
    });
    expect(runs[1]).toEqual(runs[0]);
    expect(runs[2]).toEqual(runs[0]);
    expect(leftovers(join(dir, 'modes'))).toEqual([]);
  }, 120_000);

  it('SIGTERM during a run removes the spill files', async () => {
    const spill = join(dir, 'sigterm');
    mkdirSync(spill);
    const child = spawn(process.execPath, ['bin/tiercut.js', 'run', planFile, '--steps', '1000000', '--json', '--spill-dir', spill]);
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    for (let i = 0; i < 600 && out.split('\n').length < 3; i++) await sleep(50);
    expect(leftovers(spill).some((f) => f.endsWith('nvme.bin'))).toBe(true);
    const exit = new Promise<number | null>((res) => child.on('close', (code) => res(code)));
    child.kill('SIGTERM');
    expect(await exit).toBe(130);
    expect(leftovers(spill)).toEqual([]);
  }, 120_000);
});

describe('nvme faults: one line, exit 2, nothing left behind', () => {
  it('an unwritable spill directory', () => {
    const file = join(dir, 'not-a-dir');
    writeFileSync(file, 'x');
    const r = cli('run', planFile, '--steps', '2', '--json', '--spill-dir', join(file, 'spill'));
    expectOneLine(r.stderr, r.status, /nvme tier: cannot create the spill directory .*not-a-dir\/spill: Not a directory/);
    expect(r.stdout).toBe('');
  });

  it('a full disk (file-size limit: the spill file cannot be reserved)', () => {
    const spill = join(dir, 'fsize');
    mkdirSync(spill);
    const r = spawnSync('bash', ['-c', `ulimit -f 64; exec "${process.execPath}" bin/tiercut.js run "${planFile}" --steps 2 --json --spill-dir "${spill}"`], { encoding: 'utf8', timeout: 60_000 });
    expectOneLine(r.stderr, r.status, /nvme tier: cannot (size|reserve) .*nvme\.bin.*: File too large/);
    expect(r.stdout).toBe('');
    expect(leftovers(spill)).toEqual([]);
  });

  it('a full disk (a 64 KiB tmpfs, when this machine lets us mount one)', (ctx) => {
    const mnt = join(dir, 'tiny-tmpfs');
    mkdirSync(mnt);
    const m = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', mnt], { encoding: 'utf8' });
    if (m.status !== 0) { ctx.skip(); return; }
    try {
      const r = cli('run', planFile, '--steps', '2', '--json', '--spill-dir', mnt);
      expectOneLine(r.stderr, r.status, /nvme tier: cannot reserve \d+ bytes for .*nvme\.bin: No space left on device/);
      expect(r.stdout).toBe('');
      expect(leftovers(mnt)).toEqual([]);
    } finally {
      spawnSync('umount', [mnt]);
    }
  });

  it('a spill file removed during the run', async () => {
    const spill = join(dir, 'removed');
    const r = await runWithFault(spill, (f) => unlinkSync(f));
    expectOneLine(r.stderr, r.status, /step \d+ failed: instruction \d+ \(nvme\w+, copy \S+ -> \S+ of tensor '[^']+'\): nvme tier: the spill file .*nvme\.bin was removed during the run \(No such file or directory\)/);
    const done = expectOnlyCompletedSteps(r.stdout);
    expect(r.stderr).toContain(`step ${done + 1} failed`);
    expect(leftovers(spill)).toEqual([]);
  }, 120_000);

  it('a short read (the spill file truncated during the run)', async () => {
    const spill = join(dir, 'truncated');
    const r = await runWithFault(spill, (f) => truncateSync(f, 0));
    // the first I/O after the truncation fails: a read, or the read of an edge block before a write
    expectOneLine(r.stderr, r.status, /step \d+ failed: instruction \d+ \(nvme\w+, copy \S+ -> \S+ of tensor '[^']+'\): nvme tier: pread .*nvme\.bin at offset \d+: short read: got 0 of \d+ bytes/);
    const done = expectOnlyCompletedSteps(r.stdout);
    expect(r.stderr).toContain(`step ${done + 1} failed`);
    expect(leftovers(spill)).toEqual([]);
  }, 120_000);
});

describe('hw calibrate', () => {
  it('writes a profile that compile accepts', () => {
    const profile = join(dir, 'calibrated.json');
    const c = cli('hw', 'calibrate', '-o', profile, '--spill-dir', dir);
    expect(c.status, c.stderr).toBe(0);
    expect(c.stdout).toMatch(/^wrote .*calibrated\.json: matmul [\d.]+ GFLOPS/);
    const out = join(dir, 'calibrated.plan.json');
    const r = cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--hw', profile, '--gpu-mem', '400000', '-o', out);
    expect(r.status, r.stderr).toBe(0);
    const run = cli('run', out, '--steps', '2', '--json');
    expect(run.status, run.stderr).toBe(0);
    rmSync(out);
  }, 120_000);
});
