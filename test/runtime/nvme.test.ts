// The nvme tier, on both I/O backends (io_uring and the pread/pwrite thread
// pool; TIERCUT_NVME_IO forces one): the store round trip checked byte by byte
// (unaligned ranges and memory, O_DIRECT and buffered), no read-modify-write
// when requests own their blocks, bit-identical training with optimizer state
// on NVMe, spill files removed on SIGTERM, and faults — an unwritable spill
// directory, a full disk, a spill file removed or truncated during the run —
// each end the run with one line naming the tier, the tensor (when a step was
// running) and the OS error, exit code 2, no step reported that did not
// complete, and nothing left in the spill directory. Child processes of
// bin/tiercut.js. Where the addon was built without liburing (or the kernel
// refuses io_uring) the io_uring cases check that forcing it fails with the
// reason, and say so; they do not pretend to have run.
import { describe, it, expect, beforeAll } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, truncateSync, unlinkSync, watch, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { nativeAddon } from '../../runtime/binding.js';
import { scratchDir } from '../scratch-dir.js';

const dir = scratchDir('tiercut-nvme-');
const planFile = join(dir, 'nvme.plan.json');
const cli = (...args: string[]) => spawnSync(process.execPath, ['bin/tiercut.js', ...args], { encoding: 'utf8', timeout: 120_000 });
/** The CLI with TIERCUT_NVME_IO set. */
const cliWith = (io: string, ...args: string[]) =>
  spawnSync(process.execPath, ['bin/tiercut.js', ...args], { encoding: 'utf8', timeout: 120_000, env: { ...process.env, TIERCUT_NVME_IO: io } });
const backends = nativeAddon().nvmeBackends();
/** Backends that can run here: always threads; uring when built with liburing and allowed. */
const BACKENDS = [{ io: 'threads', name: 'threads' }, { io: 'uring', name: 'io_uring' }] as const;
const usable = (io: string) => io === 'threads' || backends.uring;
if (!backends.uring) console.warn(`nvme tests: io_uring backend unavailable here (${backends.uringWhy}); its cases check the refusal only`);

/** fn with TIERCUT_NVME_IO=io in this process (the native store reads it at open). */
function withBackend<T>(io: string, fn: () => T): T {
  const before = process.env.TIERCUT_NVME_IO;
  process.env.TIERCUT_NVME_IO = io;
  try { return fn(); } finally { if (before === undefined) delete process.env.TIERCUT_NVME_IO; else process.env.TIERCUT_NVME_IO = before; }
}
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
async function runWithFault(spill: string, fault: (file: string) => void, io: string): Promise<{ status: number | null; signal: string | null; stdout: string; stderr: string }> {
  mkdirSync(spill, { recursive: true });
  const child = spawn(process.execPath, ['bin/tiercut.js', 'run', planFile, '--steps', '1000000', '--json', '--spill-dir', spill], { env: { ...process.env, TIERCUT_NVME_IO: io } });
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

describe('nvme I/O backends', () => {
  it('reports what this build can use', () => {
    expect(backends.threads).toBe(true);
    expect(typeof backends.uring).toBe('boolean');
    if (!backends.uring) expect(backends.uringWhy).toMatch(/liburing|io_uring_queue_init/);
    expect(withBackend('threads', () => nativeAddon().nvmeBackends().default)).toBe('threads');
    expect(withBackend('uring', () => nativeAddon().nvmeBackends().default)).toBe(backends.uring ? 'io_uring' : 'threads');
  });

  it('nvmeLatency times small requests alone and both directions at once, and leaves no file', () => {
    const r = nativeAddon().nvmeLatency({ dir, requests: 16, requestBytes: 4096 + 5 });
    for (const k of ['readSeconds', 'writeSeconds', 'mixedReadSeconds', 'mixedWriteSeconds'] as const) {
      expect(r[k], k).toBeGreaterThan(0);
      expect(r[k], k).toBeLessThan(1);
    }
    expect(r.backend).toBe(backends.default);
    expect(readdirSync(dir).filter((f) => f.startsWith('tiercut-nvme-latency-'))).toEqual([]);
  });

  it('nvmeBatch times batches of small requests for each size asked, and leaves no file', () => {
    const r = nativeAddon().nvmeBatch({ dir, sizes: [1, 3, 8], requests: 16, requestBytes: 4096 + 5 });
    expect(r.sizes).toEqual([1, 3, 8]);
    for (const k of ['readSeconds', 'writeSeconds'] as const) {
      expect(r[k], k).toHaveLength(3);
      for (const s of r[k]) { expect(s, k).toBeGreaterThan(0); expect(s, k).toBeLessThan(1); }
    }
    expect(r.backend).toBe(backends.default);
    expect(readdirSync(dir).filter((f) => f.startsWith('tiercut-nvme-batch-'))).toEqual([]);
    expect(() => nativeAddon().nvmeBatch({ dir, sizes: [4, 65] })).toThrow(/nvmeBatch: sizes\[1\]/);
    expect(() => nativeAddon().nvmeBatch({ dir, sizes: [] })).toThrow(/nvmeBatch: sizes: expected a non-empty array/);
  });

  it('forcing io_uring where it is unavailable fails with the reason; a bad TIERCUT_NVME_IO is named', () => {
    if (!backends.uring) {
      expect(() => withBackend('uring', () => nativeAddon().nvmeBench({ dir, bytes: 8192 }))).toThrow(/TIERCUT_NVME_IO=uring but io_uring is unavailable: /);
      const r = cliWith('uring', 'run', planFile, '--steps', '1', '--json', '--spill-dir', join(dir, 'no-uring'));
      expectOneLine(r.stderr, r.status, /nvme tier: TIERCUT_NVME_IO=uring but io_uring is unavailable/);
    } else {
      expect(withBackend('uring', () => nativeAddon().nvmeBench({ dir, bytes: 8192 })).backend).toBe('io_uring');
    }
    expect(() => withBackend('aio', () => nativeAddon().nvmeBench({ dir, bytes: 8192 }))).toThrow(/TIERCUT_NVME_IO: expected 'uring' or 'threads', got 'aio'/);
    const r = cliWith('aio', 'run', planFile, '--steps', '1', '--json', '--spill-dir', join(dir, 'bad-io'));
    expectOneLine(r.stderr, r.status, /nvme tier: TIERCUT_NVME_IO: expected 'uring' or 'threads', got 'aio'/);
    expect(leftovers(join(dir, 'bad-io'))).toEqual([]);
    expect(existsSync(join(dir, 'bad-io')), 'the spill directory the failed run made').toBe(false);
  });

  it('a --spill-dir that does not exist is made for the run and removed after it; what was there before stays', () => {
    const made = join(dir, 'made', 'a', 'b');
    const r = cli('run', planFile, '--steps', '1', '--json', '--spill-dir', made);
    expect(r.status, r.stderr).toBe(0);
    expect(existsSync(join(dir, 'made')), 'made/a/b and its parents, made by the run').toBe(false);
    // a directory that was there keeps its own file; only the part the run made goes
    mkdirSync(join(dir, 'kept'));
    writeFileSync(join(dir, 'kept', 'mine.txt'), 'not the run\'s');
    const inner = cli('run', planFile, '--steps', '1', '--json', '--spill-dir', join(dir, 'kept', 'x', 'y'));
    expect(inner.status, inner.stderr).toBe(0);
    expect(readdirSync(join(dir, 'kept'))).toEqual(['mine.txt']);
  });
});

describe.each(BACKENDS)('nvme store ($name)', ({ io, name }) => {
  it.runIf(usable(io))('round-trips every byte: unaligned ranges and memory, O_DIRECT and buffered', () => {
    const addon = nativeAddon();
    // bytes, request, memory offset from a 4096 boundary, block size
    const cases: [number, number, number, number][] = [
      [3 * 4096 + 100, 4096 + 7, 0, 4096], [1 << 20, 1 << 16, 0, 8192], [(1 << 20) + 5, 12345, 3, 8192], [5 << 20, 1 << 20, 17, 1 << 20], [1, 1, 0, 4096],
    ];
    for (const direct of [true, false]) {
      for (const [bytes, requestBytes, offsetBytes, blockBytes] of cases) {
        const r = withBackend(io, () => addon.nvmeBench({ dir, bytes, requestBytes, offsetBytes, queueDepth: 3, blockBytes, direct, verify: true }));
        expect(r.backend).toBe(name);
        expect(r.mismatches, `${bytes} bytes in ${requestBytes}-byte requests, memory +${offsetBytes}, direct ${direct}`).toBe(0);
        if (!direct) expect(r.direct).toBe(false);
        expect(existsSync(r.file)).toBe(false);
      }
    }
  });

  it.runIf(usable(io))('writes whole blocks without reading them when requests own their blocks', () => {
    const addon = nativeAddon();
    const aligned = withBackend(io, () => addon.nvmeBench({ dir, bytes: 64 * 4096 + 100, requestBytes: 4 * 4096, queueDepth: 4, blockBytes: 8192, verify: true }));
    expect(aligned.mismatches).toBe(0);
    if (aligned.direct) expect(aligned.edgeReads).toBe(0);
    // requests that share blocks must keep their neighbours' bytes: read-modify-write
    const shared = withBackend(io, () => addon.nvmeBench({ dir, bytes: 64 * 4096 + 100, requestBytes: 4096 + 7, queueDepth: 4, blockBytes: 8192, verify: true }));
    expect(shared.mismatches).toBe(0);
    if (shared.direct) expect(shared.edgeReads).toBeGreaterThan(0);
  });

  it.runIf(usable(io))('trains with optimizer state on NVMe, bit-identical across backends, buffered I/O and odd queue depth / block size', () => {
    const plan = JSON.parse(readFileSync(planFile, 'utf8'));
    const onNvme = new Set(plan.buffers.filter((b: { tier: string }) => b.tier === 'nvme').map((b: { tensor: number }) => plan.graph.tensors[b.tensor].role));
    expect(onNvme.has('adamM') && onNvme.has('adamV')).toBe(true);
    const losses = (who: string, extra: string[]) => {
      const r = cliWith(who, 'run', planFile, '--steps', '4', '--json', '--spill-dir', join(dir, `modes-${io}`), ...extra);
      expect(r.status, r.stderr).toBe(0);
      const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
      return { loss: lines.slice(0, 4).map((l) => l.loss), nvme: lines.at(-1).summary.nvme };
    };
    const reference = losses('threads', []);
    // and bit-identical to the all-in-memory plan (no nvme: nothing read back in a batch)
    const residentFile = join(dir, `resident-${io}.plan.json`);
    const c = cli('compile', 'models/gpt.ts', '--preset', 'tiny', '-o', residentFile);
    expect(c.status, c.stderr).toBe(0);
    const resident = cli('run', residentFile, '--steps', '4', '--json');
    expect(resident.status, resident.stderr).toBe(0);
    expect(resident.stdout.trim().split('\n').slice(0, 4).map((l) => JSON.parse(l).loss)).toEqual(reference.loss);
    const runs = [losses(io, []), losses(io, ['--nvme-buffered']), losses(io, ['--nvme-queue-depth', '3', '--nvme-block-size', '8KiB'])];
    for (const r of runs) {
      expect(r.loss).toEqual(reference.loss);
      expect(r.nvme.backend).toBe(name);
    }
    expect(runs[0].nvme.direct).toBe(true);
    expect(runs[0].nvme.edgeReads).toBe(0);  // block-aligned nvme buffers: no read-modify-write
    expect(runs[1].nvme.direct).toBe(false);
    expect(runs[2].nvme.queueDepth).toBe(3);
    expect(runs[2].nvme.blockBytes).toBe(8192);
    expect(leftovers(join(dir, `modes-${io}`))).toEqual([]);
  }, 120_000);

  it.runIf(usable(io))('a spill file removed during the run', async () => {
    const spill = join(dir, `removed-${io}`);
    const r = await runWithFault(spill, (f) => unlinkSync(f), io);
    expectOneLine(r.stderr, r.status, /step \d+ failed: instruction \d+ \(nvme\w+, copy \S+ -> \S+ of tensor '[^']+'\): nvme tier: the spill file .*nvme\.bin was removed during the run \(No such file or directory\)/);
    const done = expectOnlyCompletedSteps(r.stdout);
    expect(r.stderr).toContain(`step ${done + 1} failed`);
    expect(leftovers(spill)).toEqual([]);
  }, 120_000);

  it.runIf(usable(io))('a short read (the spill file truncated during the run)', async () => {
    const spill = join(dir, `truncated-${io}`);
    const r = await runWithFault(spill, (f) => truncateSync(f, 0), io);
    // caught before the I/O (the file's size), or by it when the truncation lands in between; a
    // write-back after the truncation may have grown the file again part of the way
    expectOneLine(r.stderr, r.status, /step \d+ failed: instruction \d+ \(nvme\w+, copy \S+ -> \S+ of tensor '[^']+'\): nvme tier: (the spill file .*nvme\.bin is \d+ bytes, expected \d+ \(it was truncated during the run\)|pread .*nvme\.bin at offset \d+: short read: got \d+ of \d+ bytes)/);
    const done = expectOnlyCompletedSteps(r.stdout);
    expect(r.stderr).toContain(`step ${done + 1} failed`);
    expect(leftovers(spill)).toEqual([]);
  }, 120_000);
});

describe('nvme store', () => {
  it.each([['SIGTERM', 143], ['SIGINT', 130], ['SIGHUP', 129]] as const)('%s during a run removes the spill files and exits %i (128 + the signal)', async (signal, code) => {
    const spill = join(dir, signal.toLowerCase());
    mkdirSync(spill);
    const child = spawn(process.execPath, ['bin/tiercut.js', 'run', planFile, '--steps', '1000000', '--json', '--spill-dir', spill]);
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    for (let i = 0; i < 600 && out.split('\n').length < 3; i++) await sleep(50);
    expect(leftovers(spill).some((f) => f.endsWith('nvme.bin'))).toBe(true);
    const exit = new Promise<number | null>((res) => child.on('close', (c) => res(c)));
    child.kill(signal);
    expect(await exit).toBe(code);
    expect(leftovers(spill)).toEqual([]);
  }, 120_000);

  // (the handlers had been installed after the session was made: a signal
  // while it wrote its initial state killed the run with the spill file left;
  // and a second Ctrl-C while the first closed the session did the same)
  it('a signal while the session is being made, and two signals at once, remove the spill files', async () => {
    const early = join(dir, 'sig-early');
    mkdirSync(early);
    const watcher = watch(early);
    const child = spawn(process.execPath, ['bin/tiercut.js', 'run', planFile, '--steps', '1000000', '--json', '--spill-dir', early]);
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    const exit = new Promise<number | null>((res) => child.on('close', (c) => res(c)));
    // the session's spill directory appears as its constructor begins to make the store
    await new Promise<void>((res) => watcher.once('change', () => res()));
    child.kill('SIGINT');
    watcher.close();
    expect(await exit).toBe(130);
    expect(out).toBe('');
    expect(leftovers(early)).toEqual([]);

    const twice = join(dir, 'sig-twice');
    mkdirSync(twice);
    const run = spawn(process.execPath, ['bin/tiercut.js', 'run', planFile, '--steps', '1000000', '--json', '--spill-dir', twice]);
    let lines = '';
    run.stdout.on('data', (d) => { lines += d; });
    for (let i = 0; i < 600 && lines.split('\n').length < 3; i++) await sleep(50);
    const ended = new Promise<number | null>((res) => run.on('close', (c) => res(c)));
    run.kill('SIGINT');
    run.kill('SIGINT');
    expect(await ended).toBe(130);
    expect(leftovers(twice)).toEqual([]);
  }, 120_000);

  it('a reader that goes away (`run ... | head -1`) leaves no spill files', async () => {
    const spill = join(dir, 'epipe');
    mkdirSync(spill);
    const child = spawn(process.execPath, ['bin/tiercut.js', 'run', planFile, '--steps', '1000000', '--json', '--spill-dir', spill]);
    const exit = new Promise<number | null>((res) => child.on('close', (code) => res(code)));
    await new Promise<void>((res) => child.stdout.once('data', () => res()));
    expect(leftovers(spill).some((f) => f.endsWith('nvme.bin'))).toBe(true);
    child.stdout.destroy(); // the next step's line meets a closed pipe (EPIPE)
    expect(await exit).toBe(0);
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
});

describe('hw calibrate', () => {
  it('writes a profile with kernel costs, executor overheads and nvme latency and I/O settings, that compile and run use', () => {
    const profile = join(dir, 'calibrated.json');
    // (with what-if capacities, which stand in for the measured ones in the profile written)
    const c = cli('hw', 'calibrate', '-o', profile, '--spill-dir', dir, '--gpu-mem', '2GiB', '--nvme', '5GB');
    expect(c.status, c.stderr).toBe(0);
    expect(c.stdout).toMatch(/^wrote .*calibrated\.json: matmul [\d.]+ GFLOPS.*executor per instruction [\d.]+ µs wake-up [\d.]+ µs step [\d.]+ µs, \d+ kernel kinds fitted/);
    const p = JSON.parse(readFileSync(profile, 'utf8'));
    expect(p.gpu.capacityBytes).toBe(2 ** 31);
    expect(p.nvme.capacityBytes).toBe(5e9);
    for (const f of ['instructionSeconds', 'wakeSeconds', 'stepSeconds']) expect(p.executor[f]).toBeGreaterThanOrEqual(0);
    // every op kind of the calibration workload got a cost; the costs are non-negative and not all zero
    // (and in half precision: keyed apart, cost.ts opKernelKey)
    for (const k of ['matmul', 'matmulGradA', 'matmulGradB', 'gelu', 'layerNorm', 'causalAttention', 'crossEntropy', 'adam', 'rmsNorm', 'rope',
      'matmul@f16', 'matmul@bf16', 'layerNorm@f16', 'causalAttention@bf16', 'adam@f16', 'adam@bf16']) {
      expect(p.kernels[k], k).toBeDefined();
      expect(p.kernels[k].fixedSeconds).toBeGreaterThanOrEqual(0);
      expect(p.kernels[k].rooflineFactor).toBeGreaterThanOrEqual(0);
      expect(p.kernels[k].fixedSeconds + p.kernels[k].rooflineFactor).toBeGreaterThan(0);
    }
    expect(p.nvme.readLatencySeconds).toBeGreaterThanOrEqual(0);
    expect(p.nvme.writeLatencySeconds).toBeGreaterThanOrEqual(0);
    expect(p.nvme.readBatchRequestSeconds).toBeGreaterThanOrEqual(0);
    expect(p.nvme.writeBatchRequestSeconds).toBeGreaterThanOrEqual(0);
    expect(c.stdout).toMatch(/nvme batch cost per further request read [\d.]+ µs write [\d.]+ µs \(batches of 1\/2\/4\/8\/16\/32: read [\d/]+ µs, write [\d/]+ µs\)/);
    expect(p.nvme).toMatchObject({ queueDepth: 8, blockBytes: 1 << 20 });
    // the plan names the store's settings through its profile; run flags still override them
    writeFileSync(profile, JSON.stringify({ ...p, nvme: { ...p.nvme, queueDepth: 5, blockBytes: 16384 } }));
    const out = join(dir, 'calibrated.plan.json');
    const r = cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--hw', profile, '--gpu-mem', '400000', '--cpu-mem', '200000', '-o', out);
    expect(r.status, r.stderr).toBe(0);
    const summary = (extra: string[]) => {
      const run = cli('run', out, '--steps', '2', '--json', '--spill-dir', join(dir, 'calibrated'), ...extra);
      expect(run.status, run.stderr).toBe(0);
      return JSON.parse(run.stdout.trim().split('\n').at(-1)!).summary;
    };
    const s = summary([]);
    expect(s.nvme).toMatchObject({ queueDepth: 5, blockBytes: 16384 });
    expect(summary(['--nvme-queue-depth', '2']).nvme).toMatchObject({ queueDepth: 2, blockBytes: 16384 });
    rmSync(out);
  }, 180_000);
});
