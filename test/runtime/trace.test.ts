// Traces: `compile --trace` (the simulator's prediction) and `run --trace` (the
// runtime's measurement) are Chrome trace JSON with one complete event per
// instruction (per step), events of one stream never overlap — except the
// members of one NVMe batch, which share one start exactly and end in stream
// order (the executor runs ready NVMe copies and frees as one transfer and
// completes each member when its own request is done; the simulator predicts
// the same)
// — and in a run some copy overlaps compute on another stream (the streams
// really run concurrently).
// The run summary puts measured and predicted side by side.
import { describe, it, expect, beforeAll } from 'vitest';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { scratchDir } from '../scratch-dir.js';

const dir = scratchDir('tiercut-trace-');
const cli = (...args: string[]) => spawnSync(process.execPath, ['bin/tiercut.js', ...args], { encoding: 'utf8', timeout: 120_000 });

interface Ev { name: string; cat: string; ph: string; ts: number; dur: number; pid: number; tid: number; args: { id: number; step: number } }
const complete = (file: string): Ev[] => {
  const t = JSON.parse(readFileSync(file, 'utf8')) as { traceEvents: Ev[] };
  expect(Array.isArray(t.traceEvents)).toBe(true);
  return t.traceEvents.filter((e) => e.ph === 'X');
};

/** Checks the per-stream order; returns how many events were members of an NVMe batch (beyond its first). */
function expectNoOverlapPerStream(events: Ev[]): number {
  const byTid = new Map<number, Ev[]>();
  for (const e of events) byTid.set(e.tid, [...(byTid.get(e.tid) ?? []), e]);
  let batched = 0;
  for (const [tid, list] of byTid) {
    list.sort((a, b) => a.ts - b.ts || a.args.id - b.args.id);
    for (let i = 1; i < list.length; i++) {
      const prev = list[i - 1];
      if (prev.ts === list[i].ts && prev.dur > 0 && list[i].dur > 0) {
        // one batch: only on the nvme streams, only copies and frees, first member a copy;
        // each member ends no earlier than the one before it
        expect(tid === 4 || tid === 5, `tid ${tid}: '${prev.name}' and '${list[i].name}' share a start`).toBe(true);
        expect(['copy', 'free']).toContain(list[i].cat);
        expect(list[i].ts + list[i].dur, `tid ${tid}: '${list[i].name}' ends before '${prev.name}' of its batch`).toBeGreaterThanOrEqual(prev.ts + prev.dur - 1e-3);
        batched++;
        continue;
      }
      expect(prev.ts + prev.dur, `tid ${tid}: '${prev.name}' (step ${prev.args.step}) overlaps '${list[i].name}'`).toBeLessThanOrEqual(list[i].ts + 1e-3);
    }
  }
  return batched;
}

let plan: { instructions: { id: number; stream: string; kind: string }[] };
const planFile = join(dir, 'nvme.plan.json');
const STEPS = 3;
let summary: Record<string, any>;

beforeAll(() => {
  // forced onto NVMe so that all six streams have work
  const c = cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--gpu-mem', '400000', '--cpu-mem', '200000', '-o', planFile, '--trace', join(dir, 'predicted.json'));
  expect(c.status, c.stderr).toBe(0);
  plan = JSON.parse(readFileSync(planFile, 'utf8'));
  const r = cli('run', planFile, '--steps', String(STEPS), '--json', '--trace', join(dir, 'measured.json'), '--spill-dir', join(dir, 'spill'));
  expect(r.status, r.stderr).toBe(0);
  summary = JSON.parse(r.stdout.trim().split('\n').at(-1)!).summary;
}, 240_000);

describe('traces', () => {
  it('compile --trace: one event per instruction, on its stream, streams never overlap', () => {
    const ev = complete(join(dir, 'predicted.json'));
    expect(ev.length).toBe(plan.instructions.length);
    const streams = ['gpu', 'cpu', 'h2d', 'd2h', 'nvmeRead', 'nvmeWrite'];
    for (const e of ev) {
      const x = plan.instructions[e.args.id];
      expect(e.tid).toBe(streams.indexOf(x.stream));
      expect(e.cat).toBe(x.kind);
      expect(typeof e.ts === 'number' && typeof e.dur === 'number' && typeof e.pid === 'number').toBe(true);
    }
    expect(new Set(ev.map((e) => e.tid)).size).toBe(6);
    expect(ev.some((e) => /^run matmul \(.+\)$/.test(e.name))).toBe(true);
    expectNoOverlapPerStream(ev);
  });

  it('run --trace: one event per instruction per step; streams never overlap; copies overlap compute', () => {
    const ev = complete(join(dir, 'measured.json'));
    expect(ev.length).toBe(plan.instructions.length * STEPS);
    for (let s = 1; s <= STEPS; s++) expect(new Set(ev.filter((e) => e.args.step === s).map((e) => e.args.id)).size).toBe(plan.instructions.length);
    const batched = expectNoOverlapPerStream(ev);
    console.log(`nvme instructions run as members of a batch over ${STEPS} steps: ${batched}`);
    expect(batched).toBeGreaterThan(0);
    // steps follow each other: every event of step s ends before step s+1 starts
    for (let s = 1; s < STEPS; s++) {
      const end = Math.max(...ev.filter((e) => e.args.step === s).map((e) => e.ts + e.dur));
      const next = Math.min(...ev.filter((e) => e.args.step === s + 1).map((e) => e.ts));
      expect(end).toBeLessThanOrEqual(next + 1e-3);
    }
    const copies = ev.filter((e) => e.cat === 'copy' && e.dur > 0);
    const compute = ev.filter((e) => e.cat === 'run' && e.dur > 0);
    let overlaps = 0;
    for (const c of copies)
      for (const k of compute)
        if (k.tid !== c.tid && k.args.step === c.args.step && c.ts < k.ts + k.dur && k.ts < c.ts + c.dur) overlaps++;
    console.log(`copy/compute overlaps over ${STEPS} steps: ${overlaps}`);
    expect(overlaps).toBeGreaterThan(0);
  });

  it('run --json summary: measured beside predicted, bytes per link as planned', () => {
    const streams = ['gpu', 'cpu', 'h2d', 'd2h', 'nvmeRead', 'nvmeWrite'];
    for (const s of streams) {
      expect(summary.streamBusySeconds[s]).toBeGreaterThanOrEqual(0);
      expect(summary.predictedStreamBusySeconds[s]).toBeGreaterThanOrEqual(0);
    }
    expect(summary.predictedStepSeconds).toBeGreaterThan(0);
    expect(summary.meanStepSeconds).toBeGreaterThan(0);
    expect(summary.bytesPerStep).toEqual(summary.plannedBytesPerStep);
    expect(summary.bytesPerStep.nvmeRead).toBeGreaterThan(0);
    // the busiest stream's busy time never exceeds the step time
    expect(Math.max(...streams.map((s) => summary.streamBusySeconds[s]))).toBeLessThanOrEqual(summary.meanStepSeconds * 1.0001);
  });
});
