// The text report: a person reads the partition at a glance.
import type { Tier } from '../cost/cost.js';
import { formatBytes } from '../../src/sizes.js';
import { ROLES } from '../ir/types.js';
import type { PlanStats } from './stats.js';
import { capacityFlag, type WhatIf } from './what-if.js';
import { STREAMS } from '../plan/types.js';

/** Bytes for report tables: "0" for nothing, else binary units. */
export function fmtBytes(n: number): string {
  return n === 0 ? '0' : formatBytes(n);
}

/** "37.5 %"; a share that rounds to 0 or 100 without being it says so ("<0.1 %", ">99.9 %"). */
export function usedPercent(used: number, capacity: number): string {
  const pct = (100 * used) / capacity;
  if (used > 0 && pct < 0.05) return '<0.1 %';
  if (used < capacity && pct >= 99.95) return '>99.9 %';
  return `${pct.toFixed(1)} %`;
}

function fmtSeconds(s: number): string {
  return s >= 1 ? `${s.toFixed(3)} s` : s >= 1e-3 ? `${(s * 1e3).toFixed(3)} ms` : `${(s * 1e6).toFixed(1)} µs`;
}

const pad = (s: string, n: number) => s.padEnd(n);
const lpad = (s: string, n: number) => s.padStart(n);

/**
 * The critical path, a line per run of at least PATH_RUN_SHARE of the step;
 * the shorter runs between two such lines folded into one, with each
 * stream's busy time (gpt3-175b's forward pass: 124 runs of h2d copies and
 * GPU ops, mostly h2d).
 */
const PATH_RUN_SHARE = 0.02;

function pathLines(s: PlanStats): string[] {
  const step = s.predicted.stepSeconds;
  const span = (a: number, b: number) => `${lpad(a === 0 ? '0' : fmtSeconds(a), 11)} - ${lpad(fmtSeconds(b), 11)}`;
  const out = ['what sets the step (its critical path: runs of instructions on one stream, each waiting for the run before):'];
  const line = (r: PlanStats['criticalPath'][number]) => `  ${span(r.startSeconds, r.endSeconds)}  ${pad(r.stream, 9)} ${r.instructions === 1 ? r.from : `${r.instructions} instructions, busy ${fmtSeconds(r.busySeconds)}: ${r.from} .. ${r.to}`}`;
  let short: PlanStats['criticalPath'] = [];
  const flush = () => {
    if (short.length === 1) out.push(line(short[0]));
    else if (short.length > 1) {
      const busy = new Map<string, number>();
      for (const r of short) busy.set(r.stream, (busy.get(r.stream) ?? 0) + r.busySeconds);
      out.push(`  ${span(short[0].startSeconds, short[short.length - 1].endSeconds)}  ${short.length} shorter runs, busy: ${[...busy].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${fmtSeconds(v)}`).join(', ')}`);
    }
    short = [];
  };
  for (const r of s.criticalPath) {
    if (r.endSeconds - r.startSeconds < step * PATH_RUN_SHARE) { short.push(r); continue; }
    flush();
    out.push(line(r));
  }
  flush();
  return out;
}

/** The DPU section in one line: the steady step, or why there is none (also compile's stderr note then). */
export function dpuLine(d: NonNullable<PlanStats['dpu']>, plainSeconds: number): string {
  if (d.steady) {
    const t = d.steady;
    return `delayed parameter update: after ${d.warmupSteps} warm-up steps, ${d.delayedUpdates} CPU updates delayed, predicted step ${fmtSeconds(t.stepSeconds)}; gpu peak ${fmtBytes(t.tiers.gpu.peakBytes)}, cpu peak ${fmtBytes(t.tiers.cpu.peakBytes)}; h2d ${fmtBytes(t.traffic.h2dBytes)}, d2h ${fmtBytes(t.traffic.d2hBytes)} per step`;
  }
  const why = d.declined?.reason === 'slower' ? `with its ${d.delayedUpdates} CPU updates delayed the step would take ${fmtSeconds(d.declined.steadyStepSeconds ?? NaN)}, no faster than this plan's ${fmtSeconds(plainSeconds)}`
    : d.declined?.reason === 'does-not-fit' ? `with its ${d.delayedUpdates} CPU updates delayed the step does not fit (their gradients are state): ${d.declined.message ?? ''}`
    : 'every update runs on the GPU, beside its own work (nothing to delay)';
  return `delayed parameter update: declined: ${why}; every step runs this plan`;
}

/**
 * What an LP that ended without an optimum (plan.lpStatus) means for the
 * plan: one line, for the report and for compile's stderr. hasBound: the plan
 * has a bound all the same (a model kept on the GPU: the GPU's own work), so
 * only the LP's bound over every placement is missing.
 */
export function lpStatusNote(status: string, method: string, hasBound = false): string {
  if (status === 'smallerGpu') return "the placement LP's rounding could not be made to fit this GPU: this plan is the LP's placement for a smaller one (3/4, 1/2 or 1/4 of it), which fits this one too, and reports no lower bound (that GPU's bound does not hold for this one)";
  // (infeasible: no time limit helps; the LP's placements run every forward
  // and backward op on the GPU, and its working set does not fit there, where
  // the cut may run ops on the CPU: a tiny GPU)
  if (status === 'infeasible') {
    return method === 'mincut'
      ? "the placement LP found no placement within the capacities (its placements run every forward and backward op on the GPU): this plan is the min-cut's, which stood in (a heuristic where a capacity binds, often far slower; it may run those ops on the CPU); raise --gpu-mem (or another capacity) for the LP's placement"
      : `the bound LP found no placement within the capacities: ${hasBound ? "the LP's bound over every placement is missing" : 'this plan reports no lower bound'}`;
  }
  // (only a time limit is helped by a longer one: HiGHS stops with another
  // status when it fails, e.g. on an LP past the 2 GiB heap of its
  // WebAssembly build, and the note had said to raise it all the same)
  const timedOut = status === 'timeLimit';
  const why = timedOut ? 'ran past its time limit' : `ended without an optimum (status ${status}: the solver failed on it)`;
  return method === 'mincut'
    ? `the placement LP ${why}: this plan is the min-cut's, which stood in (a heuristic where a capacity binds, often far slower)${timedOut ? "; raise --lp-time-limit for the LP's placement" : ''}`
    : `the bound LP ${why}: ${hasBound ? "the LP's bound over every placement is missing" : 'this plan reports no lower bound'}${timedOut ? '; raise --lp-time-limit' : ''}`;
}

/** The what-if capacities' verdict (report --gpu-mem/--cpu-mem/--nvme): the capacities, then whether every arena fits them. */
export function whatIfLines(w: WhatIf): string[] {
  const caps = (['gpu', 'cpu', 'nvme'] as Tier[]).map((t) => `${t} ${fmtBytes(w.capacityBytes[t])}${w.given.includes(t) ? ` (${capacityFlag(t)})` : ''}`).join(', ');
  const L = [`what-if capacities: ${caps}`];
  if (w.fits) L.push(`  fits: every tier's peak is within them${w.roomier ? '; more room than the plan was compiled for: a compile for these capacities may find a faster plan' : ''}`);
  else for (const o of w.over) L.push(`  does not fit: the ${o.step === 'steady' ? 'DPU steady step\'s ' : ''}${o.tier} peak ${fmtBytes(o.peakBytes)}${o.ringBytes ? ` plus ${fmtBytes(o.ringBytes)} of ring buffers` : ''} is over ${fmtBytes(o.capacityBytes)} by ${fmtBytes(o.overBytes)}; compile again with these capacities`);
  return L;
}

export function textReport(s: PlanStats): string {
  const L: string[] = [];
  L.push(`tiercut plan: ${s.model}`);
  L.push(`  hardware ${s.hardware}, precision ${s.precision}, ${s.params.toLocaleString('en-US')} parameters, placement by ${s.method}`);
  if (s.paramsInParts) L.push(`  ${s.paramsInParts.parameters} parameters in ${s.paramsInParts.parts} parts (blocks' MLP and attention as parallel parts, placed apart; checkpoints and initial values as the whole parameters)`);
  L.push('');
  L.push('tier        peak         capacity     used');
  for (const t of ['gpu', 'cpu', 'nvme'] as Tier[]) {
    const { peakBytes, capacityBytes } = s.tiers[t];
    // (a tier of no capacity, --nvme 0, had printed "NaN %")
    L.push(`${pad(t, 10)}  ${lpad(fmtBytes(peakBytes), 11)}  ${lpad(fmtBytes(capacityBytes), 11)}  ${lpad(capacityBytes > 0 ? usedPercent(peakBytes, capacityBytes) : '-', 7)}`);
  }
  if (s.whatIf) L.push(...whatIfLines(s.whatIf));
  L.push('');
  // (each tensor's bytes once, on its home tier, whatever its lifetime: a
  // sum over the step, not what is there at once; the peaks are above)
  L.push('homed by role   gpu          cpu          nvme      (bytes of the tensors that rest there, not at once)');
  for (const r of ROLES) {
    const row = s.placement[r];
    if (row.gpu + row.cpu + row.nvme === 0) continue;
    L.push(`${pad(r, 14)}  ${lpad(fmtBytes(row.gpu), 11)}  ${lpad(fmtBytes(row.cpu), 11)}  ${lpad(fmtBytes(row.nvme), 11)}`);
  }
  L.push('');
  L.push('ops             gpu     cpu');
  for (const ph of ['forward', 'backward', 'update'] as const) L.push(`${pad(ph, 14)}  ${lpad(String(s.ops[ph].gpu), 5)}  ${lpad(String(s.ops[ph].cpu), 6)}`);
  L.push('');
  L.push(`traffic per step: h2d ${fmtBytes(s.traffic.h2dBytes)}, d2h ${fmtBytes(s.traffic.d2hBytes)}, nvme read ${fmtBytes(s.traffic.nvmeReadBytes)}, nvme write ${fmtBytes(s.traffic.nvmeWriteBytes)} (${s.traffic.copies} copies; data inputs ${fmtBytes(s.traffic.inputBytes)})`);
  L.push(`predicted step: ${fmtSeconds(s.predicted.stepSeconds)} (${s.predicted.tflops.toFixed(3)} TFLOPS); busy: ${STREAMS.filter((k) => s.predicted.streamBusySeconds[k] > 0).map((k) => `${k} ${fmtSeconds(s.predicted.streamBusySeconds[k])}`).join(', ')}`);
  if (s.withoutArenaWaitsSeconds !== undefined) {
    const cost = (100 * (s.predicted.stepSeconds - s.withoutArenaWaitsSeconds)) / s.predicted.stepSeconds;
    L.push(`memory layout: ${cost.toFixed(1)} % of the step (without the arena's address-reuse waits: ${fmtSeconds(s.withoutArenaWaitsSeconds)})`);
  }
  L.push(s.costModel.kind === 'roofline' ? 'cost model: rooflines (no measured costs in the profile)'
    : `cost model: calibrated (${s.costModel.kernelKinds} kernel kinds fitted${s.costModel.executorOverheads ? ', executor overheads' : ''}${s.costModel.nvmeLatency ? ', nvme request latency' : ''})`);
  if (s.nvmeIo) {
    const q = s.nvmeIo.queueDepth, b = s.nvmeIo.blockBytes;
    L.push(`nvme I/O: queue depth ${q ?? '8 (runtime default)'}, blocks ${b !== null ? fmtBytes(b) : '1 MiB (runtime default)'}; the runtime uses io_uring when built with liburing, else a pread/pwrite thread pool (run --json summary.nvme says which)`);
  }
  if (s.lpStatus !== undefined) L.push(`note: ${lpStatusNote(s.lpStatus, s.method, s.lowerBoundSeconds !== undefined)}`);
  if (s.lowerBoundSeconds !== undefined) {
    const ways = { chains: 'recompute through chains', split: "master32 apart from its moments", stream: 'updates streamed to the GPU', cast: 'p16 cast on the GPU from master32 copied up' } as const;
    const widened = s.widenedBy?.length ? `, widened to plans with ${s.widenedBy.map((w) => ways[w]).join(', ')}, as this one` : '';
    const what = s.opCostFloor ? "op costs over every placement: this plan computes on the CPU, outside the LP's family"
      : s.keptOnGpu ? "the GPU's own work, over the plans that keep this model on the GPU, where it fits"
      : `LP${widened}${s.relaxed ? ', without its fetch-then-update rows, as the full LP ended without an optimum: a looser bound' : ''}`;
    L.push(`lower bound (${what}): ${fmtSeconds(s.lowerBoundSeconds)}; this plan is ${s.gapPercent!.toFixed(1)} % above it`);
    if (s.anyPlacementLowerBoundSeconds !== undefined) L.push(`lower bound over every placement (LP): ${fmtSeconds(s.anyPlacementLowerBoundSeconds)} (a plan moving state or work off the GPU, which compile does not make for a model that fits)`);
  }
  if (s.dpu) L.push(dpuLine(s.dpu, s.predicted.stepSeconds));
  for (const t of ['gpu', 'cpu', 'nvme'] as Tier[]) {
    const parts = Object.entries(s.atPeak[t].bytes).filter(([, b]) => b! > 0).sort((a, b) => b[1]! - a[1]!);
    // (the tier's peak above is its arena, which holds prefetch room and the layout's gaps too: this is the most alive at once, and says so)
    const alive = parts.reduce((a, [, b]) => a + b!, 0);
    if (parts.length) L.push(`${t} when most is alive (instruction ${s.atPeak[t].at}, ${fmtBytes(alive)} of its ${fmtBytes(s.tiers[t].peakBytes)} arena): ${parts.map(([r, b]) => `${r} ${fmtBytes(b!)}`).join(', ')}`);
  }
  L.push(...pathLines(s));
  if (s.sp) {
    L.push('');
    L.push(`sequence parallel: ${s.sp.ranks} ranks (threads of one process), ${s.sp.tokensPerRank} of ${s.sp.seq} tokens each (zigzag chunks)`);
    L.push('rank  gpu peak    cpu peak    nvme peak   ring buffers  ring attention  all-reduce  ring total');
    for (const r of s.sp.perRank) {
      L.push(`${lpad(String(r.rank), 4)}  ${lpad(fmtBytes(r.peakBytes.gpu), 10)}  ${lpad(fmtBytes(r.peakBytes.cpu), 10)}  ${lpad(fmtBytes(r.peakBytes.nvme), 10)}  ${lpad(fmtBytes(r.ringWorkspaceBytes), 12)}  ${lpad(fmtBytes(r.ringSendBytes.attention), 14)}  ${lpad(fmtBytes(r.ringSendBytes.allReduce), 10)}  ${lpad(fmtBytes(r.ringSendBytes.total), 10)}`);
    }
    L.push('(peaks: the plan\'s arenas, the same step on every rank; ring buffers: the largest collective op\'s memory outside them; ring columns: bytes each rank sends per step)');
  }
  // (names come from the model and the plan file: an escape sequence or a carriage return in one had reached the terminal)
  return L.join('\n').replace(/[\x00-\x09\x0b-\x1f\x7f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}
