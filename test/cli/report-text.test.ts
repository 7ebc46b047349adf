// What `report` prints about a plan: the model as compiled (its --batch and
// --seq, an ONNX file alone), the tiers' use, what is alive when most is, and
// sizes in their units. Each case here had printed something that misread.
import { describe, it, expect, beforeAll } from 'vitest';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { cli, expectUserError } from '../cli-helpers.js';
import { formatBytes } from '../../src/sizes.js';
import { usedPercent } from '../../compiler/report/text.js';
import { planStats } from '../../compiler/report/stats.js';
import { parsePlan } from '../../compiler/plan/io.js';
import { simulate } from '../../compiler/simulate/simulate.js';
import { scratchDir } from '../scratch-dir.js';

const dir = scratchDir('tiercut-report-');
let small: string;

beforeAll(() => {
  small = join(dir, 'small.plan.json');
  const r = cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--batch', '2', '--seq', '8', '--gpu-mem', '400000', '-o', small);
  expect(r.status, r.stderr).toBe(0);
});

describe('report', () => {
  it('names the model as compiled: the preset with its --batch and --seq (they had been left out), an ONNX file without a --preset', () => {
    expect(cli('report', small).stdout.split('\n')[0]).toBe('tiercut plan: models/gpt.ts --preset tiny --batch 2 --seq 8');
    const onnx = join(dir, 'onnx.plan.json');
    expect(cli('compile', 'fixtures/onnx/gpt-tiny.onnx', '-o', onnx).status).toBe(0);
    // (its path absolute: run reads the model again, from wherever it runs)
    expect(cli('report', onnx).stdout.split('\n')[0]).toBe(`tiercut plan: ${resolve('fixtures/onnx/gpt-tiny.onnx')}`);
    expect(JSON.parse(cli('report', onnx, '--json').stdout).model).toBe(resolve('fixtures/onnx/gpt-tiny.onnx'));
  });

  it('what is alive when most is: its sum beside the arena it sits in (the arena holds prefetch room too)', () => {
    const plan = JSON.parse(readFileSync(small, 'utf8'));
    const text = cli('report', small).stdout;
    const line = text.split('\n').find((l) => l.startsWith('gpu when most is alive'))!;
    expect(line).toBeDefined();
    const m = /^gpu when most is alive \(instruction \d+, (.+?) of its (.+?) arena\): (.*)$/.exec(line)!;
    expect(m).not.toBeNull();
    expect(m[2]).toBe(formatBytes(plan.tiers.gpu.peakBytes));
    const json = JSON.parse(cli('report', small, '--json').stdout);
    const alive = Object.values(json.atPeak.gpu.bytes as Record<string, number>).reduce((a, b) => a + b, 0);
    expect(m[1]).toBe(formatBytes(alive));
    expect(alive).toBeLessThanOrEqual(plan.tiers.gpu.peakBytes);
  });

  // (program order had been taken for time: on gpt2-124m the CPU's "most alive" was 570 MiB where the streams held 946 MiB together, as run measured)
  it('what is alive when most is, in the predicted step\'s time: the most bytes alive at any one moment of the six streams', () => {
    const plan = parsePlan(readFileSync(small, 'utf8'), small);
    const stats = planStats(plan);
    const sim = simulate(plan.graph, plan.placement, plan.buffers, plan.instructions, plan.hardware);
    for (const tier of ['gpu', 'cpu'] as const) {
      const mine = plan.buffers.filter((b) => b.tier === tier);
      const from = (b: typeof mine[0]) => (b.allocAt < 0 ? 0 : sim.start[b.allocAt]), to = (b: typeof mine[0]) => (b.freeAt < 0 ? Infinity : sim.end[b.freeAt]);
      // every moment a buffer begins: what is alive then (a free at that moment has ended)
      const most = Math.max(...mine.map((b) => mine.filter((c) => from(c) <= from(b) && from(b) < to(c)).reduce((n, c) => n + c.sizeBytes, 0)));
      const alive = Object.values(stats.atPeak[tier].bytes).reduce((n, v) => n + (v ?? 0), 0);
      expect(alive, tier).toBe(most);
    }
  });

  it('a share that rounds to 0 or 100 % says it is not (a tier nearly full had read "100.0 %", a used one "0.0 %")', () => {
    expect(usedPercent(74.49, 74.51)).toBe('>99.9 %');
    expect(usedPercent(10, 10)).toBe('100.0 %');
    expect(usedPercent(467 * 1024, 2 ** 30)).toBe('<0.1 %');
    expect(usedPercent(0, 2 ** 30)).toBe('0.0 %');
    expect(usedPercent(1, 8)).toBe('12.5 %');
  });

  it('sizes: the unit chosen after rounding, up to PiB', () => {
    expect(formatBytes(1048575)).toBe('1.00 MiB');   // (had been "1024.00 KiB")
    expect(formatBytes(1073741823)).toBe('1.00 GiB');
    expect(formatBytes(1048064)).toBe('1023.50 KiB');
    expect(formatBytes(2 ** 50)).toBe('1.00 PiB');    // (had been "1024.00 TiB")
    expect(formatBytes(1023)).toBe('1023 B');
  });

  it('compile to a path that cannot take the plan or the trace: refused before compiling (the trace\'s had failed after the plan was written)', () => {
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '-o', join(dir, 'no', 'such', 'x.json')), /cannot write the plan to .*x\.json: ENOENT .*; nothing was done \[TC108\]$/);
    const out = join(dir, 'never.plan.json');
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '-o', out, '--trace', join(dir, 'no', 't.json')), /cannot write the trace to/);
    expect(() => readFileSync(out)).toThrow();
  });
});
