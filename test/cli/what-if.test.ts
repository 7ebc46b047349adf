// What-if capacities on report and run (issue 5: --gpu-mem, --cpu-mem, --nvme
// work on every command): a compiled plan checked against capacities given
// with it, its arenas being fixed.
import { describe, it, expect, beforeAll } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, expectUserError } from '../cli-helpers.js';
import { compile } from '../../src/compile.js';
import { ringBytes, whatIf } from '../../compiler/report/what-if.js';
import { readPlan } from '../../compiler/plan/io.js';
import { scratchDir } from '../scratch-dir.js';

const dir = scratchDir('tiercut-whatif-');
let file: string;
let peak: { gpu: number; cpu: number };

beforeAll(() => {
  file = join(dir, 'tiny.plan.json');
  const r = cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--gpu-mem', '400000', '-o', file);
  expect(r.status, r.stderr).toBe(0);
  const plan = JSON.parse(readFileSync(file, 'utf8'));
  peak = { gpu: plan.tiers.gpu.peakBytes, cpu: plan.tiers.cpu.peakBytes };
  expect(peak.gpu).toBeGreaterThan(0);
  expect(peak.cpu).toBeGreaterThan(0);
});

describe('what-if capacities', () => {
  it('report: a GPU one byte short of the plan\'s peak does not fit, by 1 byte; its peak fits; more room may give a faster plan', () => {
    const short = cli('report', file, '--json', '--gpu-mem', String(peak.gpu - 1));
    expect(short.status, short.stderr).toBe(0);
    const w = JSON.parse(short.stdout).whatIf;
    expect(w.fits).toBe(false);
    expect(w.given).toEqual(['gpu']);
    expect(w.over).toEqual([{ tier: 'gpu', step: 'plain', peakBytes: peak.gpu, ringBytes: 0, capacityBytes: peak.gpu - 1, overBytes: 1 }]);
    const text = cli('report', file, '--gpu-mem', String(peak.gpu - 1), '--cpu-mem', String(peak.cpu - 5));
    expect(text.stdout).toMatch(/what-if capacities: gpu .* \(--gpu-mem\), cpu .* \(--cpu-mem\), nvme/);
    expect(text.stdout).toMatch(/does not fit: the gpu peak .* by 1 B; compile again with these capacities/);
    expect(text.stdout).toMatch(/does not fit: the cpu peak .* by 5 B/);
    const exact = JSON.parse(cli('report', file, '--json', '--gpu-mem', String(peak.gpu)).stdout).whatIf;
    expect(exact).toMatchObject({ fits: true, over: [], roomier: false });
    const roomy = cli('report', file, '--gpu-mem', '1GB');
    expect(roomy.stdout).toMatch(/fits: every tier's peak is within them; more room than the plan was compiled for: a compile for these capacities may find a faster plan/);
    // without capacities: no what-if
    expect(JSON.parse(cli('report', file, '--json').stdout).whatIf).toBeUndefined();
    expectUserError(cli('report', file, '--gpu-mem', '0'), /--gpu-mem: expected a capacity above 0 bytes, got 0/);
  });

  it('run: refuses a plan over the capacities given, naming the tier and the bytes; runs one within them', () => {
    expectUserError(cli('run', file, '--steps', '1', '--gpu-mem', String(peak.gpu - 1)),
      /tiny\.plan\.json: does not fit the capacities given: its gpu arena needs .*, --gpu-mem gives .* \(short by 1 B\); compile it again with them \[TC301\]$/);
    const ok = cli('run', file, '--steps', '1', '--json', '--gpu-mem', String(peak.gpu), '--cpu-mem', String(peak.cpu));
    expect(ok.status, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout.trim().split('\n')[1]).summary.peakBytes.gpu).toBe(peak.gpu);
  });

  it('a DPU plan: its steady step\'s arenas are checked too', async () => {
    const plan = await compile({ model: 'models/gpt.ts', preset: 'tiny', precision: 'fp16', hw: 'v100-32g', gpuMemBytes: 300_000, dpuWarmupSteps: 4 });
    const steady = plan.dpu?.steady;
    expect(steady, JSON.stringify(plan.dpu?.declined)).toBeDefined();
    // (its CPU holds the delayed updates' gradients: more than the plain step's)
    const cpu = steady!.tiers.cpu.peakBytes;
    expect(cpu).toBeGreaterThan(plan.tiers.cpu.peakBytes);
    const w = whatIf(plan, { cpuMemBytes: cpu - 1 })!;
    expect(w.fits).toBe(false);
    expect(w.over).toEqual([{ tier: 'cpu', step: 'steady', peakBytes: cpu, ringBytes: 0, capacityBytes: cpu - 1, overBytes: 1 }]);
    expect(whatIf(plan, { cpuMemBytes: cpu })!.fits).toBe(true);
    expect(whatIf(plan, {})).toBeUndefined();
  });

  it('a sequence-parallel plan: the ring buffers beside its GPU arena count, as compile counts them', () => {
    const sp = join(dir, 'tiny.sp2.json');
    expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--sp', '2', '-o', sp).status).toBe(0);
    const plan = readPlan(sp), ring = ringBytes(plan).gpu;
    expect(ring).toBeGreaterThan(0);
    const need = plan.tiers.gpu.peakBytes + ring;
    expect(whatIf(plan, { gpuMemBytes: need })!.fits).toBe(true);
    expect(whatIf(plan, { gpuMemBytes: need - 1 })!.over).toEqual([{ tier: 'gpu', step: 'plain', peakBytes: plan.tiers.gpu.peakBytes, ringBytes: ring, capacityBytes: need - 1, overBytes: 1 }]);
    expect(cli('report', sp, '--gpu-mem', String(need - 1)).stdout).toMatch(/does not fit: the gpu peak .* plus .* of ring buffers is over .* by 1 B/);
    expectUserError(cli('run', sp, '--steps', '1', '--gpu-mem', String(need - 1)), /its gpu arena needs .* and .* of ring buffers beside it, --gpu-mem gives .* \(short by 1 B\)/);
  });

  it('hw list shows the profiles with the capacities given; a capacity of 0 is refused before hw calibrate measures anything', () => {
    const r = cli('hw', 'list', '--gpu-mem', '16GB', '--cpu-mem', '64GiB', '--nvme', '0');
    expect(r.status, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines.length).toBeGreaterThanOrEqual(5);
    for (const l of lines) expect(l).toMatch(/gpu +14\.90 GiB +cpu +64\.00 GiB +nvme +0 +h2d/);
    expect(cli('hw', 'list').stdout).toMatch(/v100-32g +gpu +29\.80 GiB +cpu +1\.36 TiB +nvme +1\.71 TiB/);
    expectUserError(cli('hw', 'calibrate', '--cpu-mem', '0'), /--cpu-mem: expected a capacity above 0 bytes, got 0/);
  });
});
