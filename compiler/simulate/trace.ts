// Chrome trace JSON (opens in Perfetto and chrome://tracing) of instruction
// timings: the simulator's predicted step (`compile --trace`) and the runtime's
// measured steps (`run --trace`), in one format.
//
// Takes: a plan and, per step, every instruction's start and end in seconds.
// Gives: the bytes of { traceEvents: [...] } with one complete event (ph "X", ts and dur in
//        microseconds) per instruction per step, on tid = its stream's index
//        (STREAMS order), plus metadata events naming the process and streams.
// Keeps true: events of one stream come in instruction order; nothing is
//        invented (a free takes the time the runtime measured, 0 when predicted;
//        the members of an NVMe batch share the batch's start and end in
//        stream order, each when its own request is done, measured or
//        predicted).
// Cost: O(steps x instructions); the events of one step at a time in memory.

import type { Plan, PlanInstruction } from '../plan/types.js';
import { STREAMS } from '../plan/types.js';

export interface ChromeTraceEvent {
  readonly name: string;
  readonly cat: string;
  readonly ph: 'X' | 'M';
  readonly ts: number;
  readonly dur?: number;
  readonly pid: number;
  readonly tid: number;
  readonly args?: Readonly<Record<string, unknown>>;
}

/** One step's timings: seconds on any clock, index = instruction id. */
export interface TraceStep {
  readonly step: number;
  readonly plan: Plan;
  readonly startSeconds: ArrayLike<number>;
  readonly endSeconds: ArrayLike<number>;
}

/** The tensor an instruction is about: a run's first output, a copy's or free's buffer. */
function tensorOf(plan: Plan, x: PlanInstruction): string | undefined {
  const buffer = x.kind === 'run' ? x.outputs[0] : x.inputs[0];
  if (buffer === undefined) return undefined;
  return plan.graph.tensors[plan.buffers[buffer].tensor]?.name;
}

/** "run matmul (h.0.attn.qkv)", "copy cpu->gpu (h.0.mlp.w)", "free (h.0.att)". */
export function instructionLabel(plan: Plan, x: PlanInstruction): string {
  const tensor = tensorOf(plan, x);
  const what = x.kind === 'run' ? `run ${plan.graph.ops[x.op].kind}`
    : x.kind === 'copy' ? `copy ${plan.buffers[x.inputs[0]].tier}->${plan.buffers[x.outputs[0]].tier}` : 'free';
  return tensor !== undefined ? `${what} (${tensor})` : what;
}

/**
 * The trace file's bytes, steps in order, times shifted so that the first
 * step starts at 0: one event per line, serialized a step at a time (a long
 * run's trace built as one string had passed V8's string limit and crashed
 * after its last step).
 */
export function chromeTraceBytes(steps: readonly TraceStep[], processName: string, otherData: Record<string, unknown> = {}): Uint8Array[] {
  const pid = 1;
  const meta: ChromeTraceEvent[] = [
    { name: 'process_name', cat: '__metadata', ph: 'M', ts: 0, pid, tid: 0, args: { name: processName } },
    ...STREAMS.map((s, tid) => ({ name: 'thread_name', cat: '__metadata', ph: 'M' as const, ts: 0, pid, tid, args: { name: s } })),
    ...STREAMS.map((_, tid) => ({ name: 'thread_sort_index', cat: '__metadata', ph: 'M' as const, ts: 0, pid, tid, args: { sort_index: tid } })),
  ];
  let origin = Infinity;
  for (const s of steps) for (let i = 0; i < s.startSeconds.length; i++) origin = Math.min(origin, s.startSeconds[i]);
  if (!Number.isFinite(origin)) origin = 0;
  const us = (seconds: number) => Math.round((seconds - origin) * 1e9) / 1e3; // µs, ns resolution
  const parts = [Buffer.from(`{"displayTimeUnit":"ms","otherData":${JSON.stringify(otherData)},"traceEvents":[\n${meta.map((e) => JSON.stringify(e)).join(',\n')}`)];
  for (const s of steps) {
    const lines: string[] = [];
    for (const x of s.plan.instructions) {
      const ts = us(s.startSeconds[x.id]);
      const dur = Math.max(0, us(s.endSeconds[x.id]) - ts);
      const args: Record<string, unknown> = { id: x.id, step: s.step, waits: x.waits };
      if (x.kind === 'copy') args.bytes = s.plan.buffers[x.inputs[0]].sizeBytes;
      if (x.kind === 'run') args.op = x.op;
      const e: ChromeTraceEvent = { name: instructionLabel(s.plan, x), cat: x.kind, ph: 'X', ts, dur, pid, tid: STREAMS.indexOf(x.stream), args };
      lines.push(JSON.stringify(e));
    }
    if (lines.length) parts.push(Buffer.from(`,\n${lines.join(',\n')}`));
  }
  parts.push(Buffer.from('\n]}\n'));
  return parts;
}
