// The predicted step's critical path (compiler/simulate/critical-path.ts) and
// how `report` shows it: on a hand-made program whose path is known, and on a
// compiled plan with state on NVMe, where it must reach from the step's start
// to its last instruction through waits and stream order.
import { describe, expect, it } from 'vitest';
import { criticalPath } from '../../compiler/simulate/critical-path.js';
import { simulate } from '../../compiler/simulate/simulate.js';
import { planStats } from '../../compiler/report/stats.js';
import { textReport } from '../../compiler/report/text.js';
import { compile } from '../../src/compile.js';
import type { PlanInstruction, StreamName } from '../../compiler/plan/types.js';

const op = (id: number, stream: StreamName, waits: number[]): PlanInstruction => ({ id, stream, kind: 'run', op: id, inputs: [], outputs: [], waits });

describe('critical path', () => {
  it('follows the wait that ended last, else its stream, and merges each stream\'s run', () => {
    // gpu 0 [0,1], gpu 1 [1,2], h2d 2 waits on 0 [1,5], gpu 3 waits on 2 [5,6], cpu 4 waits on 1 [2,3]
    const ins = [op(0, 'gpu', []), op(1, 'gpu', []), op(2, 'h2d', [0]), op(3, 'gpu', [2]), op(4, 'cpu', [1])];
    const start = [0, 1, 1, 5, 2], end = [1, 2, 5, 6, 3];
    expect(criticalPath(ins, start, end)).toEqual([
      { stream: 'gpu', startSeconds: 0, endSeconds: 1, busySeconds: 1, instructions: 1, first: 0, last: 0 },
      { stream: 'h2d', startSeconds: 1, endSeconds: 5, busySeconds: 4, instructions: 1, first: 2, last: 2 },
      { stream: 'gpu', startSeconds: 5, endSeconds: 6, busySeconds: 1, instructions: 1, first: 3, last: 3 },
    ]);
    // its stream's previous instruction when that ended last; overlapping instructions count once
    const chain = [op(0, 'nvmeWrite', []), op(1, 'nvmeWrite', []), op(2, 'cpu', [0])];
    expect(criticalPath(chain, [0, 0, 0.5], [2, 3, 2.5])).toEqual([{ stream: 'nvmeWrite', startSeconds: 0, endSeconds: 3, busySeconds: 3, instructions: 2, first: 0, last: 1 }]);
    expect(criticalPath([], [], [])).toEqual([]);
  });

  it('gpt tiny fp16 with its state on NVMe: the path runs from the start to the last instruction, in time order, and report prints it', async () => {
    const plan = await compile({ model: 'models/gpt.ts', preset: 'tiny', precision: 'fp16', gpuMemBytes: 400000, cpuMemBytes: 200000 });
    const sim = simulate(plan.graph, plan.placement, plan.buffers, plan.instructions, plan.hardware);
    const runs = criticalPath(plan.instructions, sim.start, sim.end);
    expect(runs.length).toBeGreaterThan(1);
    expect(runs[0].startSeconds).toBe(0);
    expect(runs[runs.length - 1].endSeconds).toBe(Math.max(...sim.end));
    expect(new Set(runs.map((r) => r.stream)).size).toBeGreaterThan(1); // it crosses streams: copies or NVMe I/O set the step, not the GPU alone
    for (let k = 1; k < runs.length; k++) {
      expect(runs[k].stream).not.toBe(runs[k - 1].stream);
      expect(runs[k].startSeconds).toBeGreaterThanOrEqual(runs[k - 1].startSeconds);
      expect(runs[k].endSeconds).toBeGreaterThanOrEqual(runs[k - 1].endSeconds);
    }
    for (const r of runs) expect(r.busySeconds).toBeLessThanOrEqual(r.endSeconds - r.startSeconds + 1e-15);
    const s = planStats(plan);
    expect(s.criticalPath.map((r) => r.stream)).toEqual(runs.map((r) => r.stream));
    expect(s.criticalPath[0].from).toMatch(/^(run|copy|free) /);
    // the same program without the arena's waits: no slower, and printed
    expect(s.withoutArenaWaitsSeconds).toBeGreaterThan(0);
    expect(s.withoutArenaWaitsSeconds!).toBeLessThanOrEqual(plan.predicted.stepSeconds * (1 + 1e-12));
    const text = textReport(s);
    expect(text).toContain('what sets the step');
    expect(text).toMatch(/^memory layout: \d+\.\d % of the step \(without the arena's address-reuse waits: /m);
    expect(text.split('\n').filter((l) => /^ {2}\s*(0|[\d.]+ (s|ms|µs)) - /.test(l)).length).toBeGreaterThan(0);
  }, 120_000);
});
