// Discrete-event simulation of one step: Plan instructions + hardware profile
// -> predicted step time and per-stream busy time.
//
// Each stream runs its instructions in order; an instruction starts when its
// stream is free and every instruction it waits on has finished; it lasts its
// cost (compiler/cost: roofline, or the measured kernel cost). With the
// executor's overheads in the profile (`hw calibrate`, src/calibrate-executor.ts):
// a stream is free instructionSeconds after its previous instruction ends; a
// stream that had to block for an instruction of another stream starts
// wakeSeconds after that instruction ends; the step ends stepSeconds after its
// last instruction. Busy time counts instruction durations only (as the runtime
// measures it). A free whose waits have ended when the instruction before it on
// its stream ends completes with that instruction (start = end = its end, no
// overhead), as the executor folds it into that completion; so do the ready
// frees after it.
//
// NVMe batches, as the executor forms them (native/exec/executor.cc,
// gather_nvme_batch): when an nvme copy starts at time t, the copies (same
// direction) and frees right after it on its stream join it while they are
// ready at t and touch nothing an earlier member touches (host bytes of a
// read, 4096-byte file blocks of a write); up to 64. The batch's i-th copy
// (from 0) ends, after the batch starts, when the batch's requests are
// answered — one request latency + (requests - 1) x the profile's batch cost
// per request (nvme.read/writeBatchRequestSeconds, measured by `hw calibrate`
// over whole batches; without it, ceil((i + 1) / queue depth) latencies) — and
// the bytes of copies 0..i have moved (/ bandwidth); the executor completes
// each member when its own request (and those before it) are done, but the
// disk answers a small batch at once, not one request after another (this
// VM's virtio disk and the device machine's: five 16 KiB O_DIRECT reads on
// one io_uring complete within a microsecond of each other; traced runs of
// gpt tiny on NVMe saw a batch's first read end with its last, where in-order
// answers had predicted it 60-80 us sooner: docs/BENCHMARKS.md, thirty-first
// session). A free in the batch ends with the copy before it. The batch, and
// its stream's busy time, lasts until its last copy ends.
// Merged requests, as the store makes them (native/tiers/nvme_run.h): a copy
// whose file blocks start where the previous copy's in the batch end goes in
// that copy's I/O (up to the profile's nvme.blockBytes in all, 64 copies), and
// such a run of copies is priced as one request: above, i counts runs, not
// copies, and every copy of a run ends when the run's last byte is moved.
//
// Tiled copy overlap, as the executor does it (native/exec/executor.cc,
// prepare_arrivals): a host-to-host copy of the half-precision output of a
// fused adam (its 4th output) or of a cast f32 -> fp16/bf16 (`reshape`), that
// waits on that producer and shares no bytes with its operands, follows the
// producer: it starts once the producer has started (and its other waits are
// done) and ends no earlier than the producer's end plus the copy of the last
// chunk it takes (FOLLOW_CHUNK elements). Busy time stays its own duration.
// The other way round, as the executor does it too: a fused CPU adam (p, m, v
// f32, updated in place) whose gradient's last writer is a copy down from the
// GPU that it waits on follows that copy chunk by chunk: it starts once the copy has
// started and ends no earlier than the copy's end plus the update of the
// last chunk (the copy checks the whole gradient for inf/NaN before it moves
// any of it, so the update knows the verdict first; on a GPU a pass where the
// backward pass left the gradient, not priced here).
//
// Instructions start in time order (always the one that can start earliest;
// ties by id), so that when a batch forms at t every instruction that ended by
// t is known. Since every wait points to an earlier instruction, the lowest
// unstarted one can always start: the loop never stalls. Cost:
// O(instructions x (streams + waits)).

import { copySeconds, opSeconds } from '../cost/cost.js';
import type { HardwareProfile } from '../cost/profiles.js';
import type { Graph } from '../ir/types.js';
import { numel } from '../ir/types.js';
import type { Placement } from '../partition/placement.js';
import type { PlanBuffer, PlanInstruction, StreamName } from '../plan/types.js';
import { planBuffers, type Program } from '../schedule/program.js';
import { STREAMS } from '../plan/types.js';

export interface Simulation {
  stepSeconds: number;
  streamBusySeconds: Record<StreamName, number>;
  start: Float64Array;
  end: Float64Array;
}

export function instructionSeconds(g: Graph, p: Placement, buffers: readonly PlanBuffer[], x: PlanInstruction, hw: HardwareProfile): number {
  // (a run costs where it runs: its stream; a cast's forward runs may be on the CPU, Placement.forwardCastOnCpu)
  if (x.kind === 'run') return opSeconds(g, g.ops[x.op], x.stream === 'cpu' ? 'cpu' : 'gpu', hw);
  if (x.kind === 'copy') { const s = buffers[x.inputs[0]], d = buffers[x.outputs[0]]; return copySeconds(s.sizeBytes, s.tier, d.tier, hw); }
  return 0;
}

/**
 * A floor under the simulated step of every program of placement p: each
 * compute stream's own work. Every op runs at least once, on its tier's
 * stream (buildProgram; a cast whose rematerialised output is made again at
 * each reader is left out here, as it may not run at its own place), and a
 * stream runs one instruction at a time, so simulate's step is at least that
 * stream's busy time, which is at least this sum. compile uses it to skip
 * scheduling a candidate placement that cannot beat one already simulated.
 */
export function computeFloorSeconds(g: Graph, p: Placement, hw: HardwareProfile): number {
  let gpu = 0, cpu = 0;
  for (const op of g.ops) {
    if (op.phase === 'update' && op.outputs.length > 0 && op.outputs.every((x) => p.remat?.[x])) continue;
    const s = opSeconds(g, op, p.opTier[op.id], hw);
    if (p.opTier[op.id] === 'cpu') cpu += s; else gpu += s;
  }
  return Math.max(gpu, cpu);
}

/**
 * A floor under the simulated step of every plan of g on hw, whatever its
 * placement (any op on either compute tier), program or update timing
 * (delayed or not). Two facts, each a floor:
 *  - an op starts after the ops that make its inputs end, so the forward and
 *    backward ops on any chain of data edges run one after another, each at
 *    least its faster tier's time: the longest such chain;
 *  - each compute stream runs one instruction at a time and every forward,
 *    backward and adam op runs at least once a step (a delayed update's too,
 *    in the steady state), so the two streams share at least that work: at
 *    best split as the LP over op shares splits it (ops in order of their
 *    GPU / CPU time ratio to the GPU until the two loads meet).
 * Casts of master32 into p16 are left out (a plan may remake one at its
 * readers instead), and so are the update's edges (a delayed update runs off
 * the step's chain). compile reports this as the bound of a plan that
 * computes on the CPU, outside the LP's family (forward and backward on the
 * GPU), which the LP's bound does not cover.
 */
export function opCostFloorSeconds(g: Graph, hw: HardwareProfile): number {
  const stepOp = (o: Graph['ops'][number]) => o.phase !== 'update';
  const maker = new Int32Array(g.tensors.length).fill(-1);
  const ends = new Float64Array(g.ops.length);
  let chain = 0;
  const work: { gpu: number; cpu: number }[] = [];
  for (const op of g.ops) {
    const gpu = opSeconds(g, op, 'gpu', hw), cpu = opSeconds(g, op, 'cpu', hw);
    if (op.kind === 'adam' || stepOp(op)) work.push({ gpu, cpu });
    if (!stepOp(op)) continue;
    let start = 0;
    for (const t of op.inputs) if (maker[t] >= 0) start = Math.max(start, ends[maker[t]]); // (ops come in program order: a maker is earlier)
    ends[op.id] = start + Math.min(gpu, cpu);
    chain = Math.max(chain, ends[op.id]);
    for (const t of op.outputs) if (!g.tensors[t].persistent) maker[t] = op.id;
  }
  // the split: all on the CPU, then the ops that gain most moved to the GPU one by one
  work.sort((a, b) => a.gpu * b.cpu - b.gpu * a.cpu);
  let onGpu = 0, onCpu = work.reduce((s, w) => s + w.cpu, 0), split = onCpu;
  for (const w of work) {
    if (w.gpu + w.cpu === 0) continue;
    if (onGpu + w.gpu >= onCpu - w.cpu) { split = onGpu + ((onCpu - onGpu) / (w.gpu + w.cpu)) * w.gpu; break; }
    onGpu += w.gpu; onCpu -= w.cpu; split = Math.max(onGpu, onCpu);
  }
  return Math.max(chain, split);
}

const MAX_NVME_BATCH = 64;  // kMaxNvmeBatch in native/exec/executor.h
const NVME_BLOCK = 4096;

/** A copy to or from nvme: its direction, host range and file blocks. */
function nvmeCopy(buffers: readonly PlanBuffer[], x: PlanInstruction) {
  if (x.kind !== 'copy') return undefined;
  const s = buffers[x.inputs[0]], d = buffers[x.outputs[0]];
  if (s.tier !== 'nvme' && d.tier !== 'nvme') return undefined;
  const host = s.tier === 'nvme' ? d : s, file = s.tier === 'nvme' ? s : d;
  return {
    write: d.tier === 'nvme', bytes: s.sizeBytes, hostTier: host.tier, h0: host.offsetBytes, h1: host.offsetBytes + host.sizeBytes,
    f0: Math.floor(file.offsetBytes / NVME_BLOCK) * NVME_BLOCK, f1: Math.ceil((file.offsetBytes + file.sizeBytes) / NVME_BLOCK) * NVME_BLOCK,
  };
}

const DEFAULT_BLOCK_BYTES = 1 << 20;  // NvmeSettings::block_bytes

/** Per copy of a batch (in order): the index of the merged I/O it goes in (see the header). */
export function mergedRuns(copies: readonly { f0: number; f1: number }[], blockBytes: number): number[] {
  const run: number[] = [];
  let r = -1, len = 0, count = 0;
  copies.forEach((c, k) => {
    const n = c.f1 - c.f0;
    if (k > 0 && c.f0 === copies[k - 1].f1 && len + n <= blockBytes && count < MAX_NVME_BATCH) { len += n; count++; }
    else { r++; len = n; count = 1; }
    run.push(r);
  });
  return run;
}

const FOLLOW_CHUNK = 1 << 18;  // kFollowChunk in native/exec/executor.cc

/** Per instruction: the producer a copy follows tile by tile, or the copy down an adam follows chunk by chunk (see the header), or -1. */
export function followedProducers(g: Graph, buffers: readonly PlanBuffer[], ins: readonly PlanInstruction[]): Int32Array {
  const follows = new Int32Array(ins.length).fill(-1);
  const lastWriter = new Int32Array(buffers.length).fill(-1);
  const overlaps = (a: PlanBuffer, b: PlanBuffer) => a.tier === b.tier && a.offsetBytes < b.offsetBytes + b.sizeBytes && b.offsetBytes < a.offsetBytes + a.sizeBytes;
  const halfOut = (w: PlanInstruction, buffer: number) => {
    if (w.kind !== 'run') return false;
    const op = g.ops[w.op];
    const t = (b: number) => g.tensors[buffers[b].tensor];
    const half = (b: number) => t(b).dtype === 'f16' || t(b).dtype === 'bf16';
    if (op.kind === 'adam') return w.outputs.length === 4 && w.outputs[3] === buffer && half(buffer);
    return op.kind === 'reshape' && w.inputs.length === 1 && t(w.inputs[0]).dtype === 'f32' && half(buffer) &&
      buffers[w.inputs[0]].tier !== 'nvme' && buffers[buffer].tier !== 'nvme';
  };
  // the executor's fused adam (fused_adam_types): p, m, v f32 and updated in place, on host tiers
  const fusedAdam = (x: PlanInstruction) => {
    if (g.ops[x.op].kind !== 'adam' || x.inputs.length !== 4 || (x.outputs.length !== 3 && x.outputs.length !== 4)) return false;
    if (x.outputs[0] !== x.inputs[0] || x.outputs[1] !== x.inputs[2] || x.outputs[2] !== x.inputs[3]) return false;
    return [0, 2, 3].every((j) => g.tensors[buffers[x.inputs[j]].tensor].dtype === 'f32') && [...x.inputs, ...x.outputs].every((b) => buffers[b].tier !== 'nvme');
  };
  const claimed = new Uint8Array(ins.length);
  for (const x of ins) {
    if (x.kind === 'copy') {
      const src = buffers[x.inputs[0]], dst = buffers[x.outputs[0]];
      const w = lastWriter[x.inputs[0]];
      if (w >= 0 && src.tier !== 'nvme' && dst.tier !== 'nvme' && !overlaps(src, dst) && x.waits.includes(w) && halfOut(ins[w], x.inputs[0]) &&
          [...ins[w].inputs, ...ins[w].outputs].every((b) => !overlaps(dst, buffers[b]))) follows[x.id] = w;
    }
    if (x.kind === 'run' && fusedAdam(x)) {
      const w = lastWriter[x.inputs[1]], grad = buffers[x.inputs[1]];
      if (w >= 0 && !claimed[w] && ins[w].kind === 'copy' && x.waits.includes(w) && buffers[ins[w].inputs[0]].sizeBytes === grad.sizeBytes) {
        claimed[w] = 1;  // (the copy checks this adam's gradient: no other adam's)
        // (the executor also asks that the gradient share no bytes with the adam's other operands: all
        // alive at the adam, so the arena keeps them apart; before it places them, offsets are not set)
        if (buffers[ins[w].inputs[0]].tier === 'gpu' && grad.tier === 'cpu') follows[x.id] = w;
      }
    }
    for (const b of x.outputs) lastWriter[b] = x.id;
  }
  return follows;
}

/** Instruction ids per stream, in order. */
function streamOrder(ins: readonly PlanInstruction[]) {
  const order = new Map<StreamName, number[]>();
  for (const x of ins) { const l = order.get(x.stream) ?? []; l.push(x.id); order.set(x.stream, l); }
  return { order };
}

/**
 * A program simulated before its arenas are placed: every buffer at offset 0,
 * no arena waits. The candidate searches (partition/moves.ts, lpTrySwaps)
 * take it as a floor to skip builds that cannot win.
 */
export function simulateFloor(g: Graph, p: Placement, prog: Program, hw: HardwareProfile): Simulation {
  return simulate(g, p, planBuffers(prog, new Float64Array(prog.buffers.length)), prog.instructions, hw);
}

export function simulate(g: Graph, p: Placement, buffers: readonly PlanBuffer[], ins: readonly PlanInstruction[], hw: HardwareProfile): Simulation {
  const start = new Float64Array(ins.length), end = new Float64Array(ins.length);
  const started = new Uint8Array(ins.length);  // its start and end are known
  const busy = Object.fromEntries(STREAMS.map((s) => [s, 0])) as Record<StreamName, number>;
  const over = hw.executor ?? { instructionSeconds: 0, wakeSeconds: 0, stepSeconds: 0 };
  const queueDepth = hw.nvme.queueDepth ?? 8;
  const { order } = streamOrder(ins);
  const lists = STREAMS.map((s) => order.get(s) ?? []);
  const next = STREAMS.map(() => 0);   // per stream: position of its next instruction
  const free = STREAMS.map(() => 0);   // per stream: when it can start its next instruction
  const follows = followedProducers(g, buffers, ins);
  const folds = STREAMS.map(() => -1); // per stream: end of its last instruction run in a round of its own (-1: none yet)

  /** Whether x, stream s's next instruction, is a free that completes with the instruction before it. */
  const folded = (s: number, x: PlanInstruction) => x.kind === 'free' && folds[s] >= 0 && x.waits.every((w) => started[w] && end[w] <= folds[s]);
  /** When stream s can start its next instruction, or undefined while a wait has not started yet. */
  const startTime = (s: number): number | undefined => {
    const x = ins[lists[s][next[s]]];
    if (folded(s, x)) return folds[s];
    const ready = free[s];
    let t = ready;
    for (const w of x.waits) {
      if (!started[w]) return undefined;
      if (w === follows[x.id]) { t = Math.max(t, start[w]); continue; }  // follows its tiles (see the header)
      // blocked on another stream's instruction: woken after it ends
      t = Math.max(t, end[w] > ready && ins[w].stream !== x.stream ? end[w] + over.wakeSeconds : end[w]);
    }
    return t;
  };

  // Event order: always start the instruction that can start earliest (ties: lowest id), so
  // that when an nvme copy starts at t, every instruction ending by t is already known.
  // A stream's start time, once every wait of its next instruction has
  // started, depends only on what is fixed until that stream moves on (its
  // free time, its last round's end, the waits' starts and ends): kept until
  // then (NaN: not known yet)
  const known = new Float64Array(STREAMS.length).fill(NaN);
  let step = 0;
  for (let done = 0; done < ins.length;) {
    let s = -1, t = Infinity;
    for (let k = 0; k < STREAMS.length; k++) {
      if (next[k] >= lists[k].length) continue;
      let tk = known[k];
      if (Number.isNaN(tk)) { const v = startTime(k); if (v === undefined) continue; known[k] = tk = v; }
      if (tk < t || (tk === t && lists[k][next[k]] < lists[s][next[s]])) { s = k; t = tk; }
    }
    if (s < 0) throw new Error('simulate: no instruction can start (a wait on a later instruction?)');
    known[s] = NaN;
    const x = ins[lists[s][next[s]]];
    if (folded(s, x)) {
      // folded into the completion before it: no round, no overhead
      start[x.id] = end[x.id] = t; started[x.id] = 1; next[s]++; done++;
      continue;
    }
    let d = instructionSeconds(g, p, buffers, x, hw);
    let members: number[] | undefined;     // an nvme copy's batch, x first (none for other instructions)
    let memberEnds: number[] | undefined;  // per member of an nvme batch: its end after t (see the header)
    const first = nvmeCopy(buffers, x);
    if (first) {
      // the batch: ready copies (same direction, nothing shared) and frees after x on its stream
      members = [x.id];
      const copies = [first];
      for (let j = next[s] + 1; j < lists[s].length && members.length < MAX_NVME_BATCH; j++) {
        const y = ins[lists[s][j]];
        if (!y.waits.every((w) => started[w] && end[w] <= t)) break;
        const c = nvmeCopy(buffers, y);
        if (y.kind !== 'free' && (!c || c.write !== first.write)) break;
        if (c && copies.some((m) => (c.write ? c.f0 < m.f1 && m.f0 < c.f1 : c.hostTier === m.hostTier && c.h0 < m.h1 && m.h0 < c.h1))) break;
        if (c) copies.push(c);
        members.push(y.id);
      }
      if (copies.length > 1) {
        const latency = (first.write ? hw.nvme.writeLatencySeconds : hw.nvme.readLatencySeconds) ?? 0;
        const perRequest = first.write ? hw.nvme.writeBatchRequestSeconds : hw.nvme.readBatchRequestSeconds;
        const bandwidth = first.write ? hw.nvme.writeBytesPerSec : hw.nvme.readBytesPerSec;
        // per copy: its run (merged I/O) and the bytes moved when that run is done
        const run = mergedRuns(copies, hw.nvme.blockBytes ?? DEFAULT_BLOCK_BYTES);
        // (the batch's requests answered together; a ring-full at a time without a measured batch cost)
        const requests = (i: number) => perRequest !== undefined ? latency + run[run.length - 1] * perRequest : Math.ceil((i + 1) / queueDepth) * latency;
        const upTo: number[] = [];   // bytes of copies 0..k
        copies.forEach((c, k) => { upTo[k] = (k > 0 ? upTo[k - 1] : 0) + c.bytes; });
        const lastOf = new Map<number, number>();  // run -> its last copy
        run.forEach((r, k) => lastOf.set(r, k));
        memberEnds = [];
        let k = -1;
        for (const m of members) {
          if (nvmeCopy(buffers, ins[m])) k++;
          memberEnds.push(requests(run[k]) + upTo[lastOf.get(run[k])!] / bandwidth);
        }
        d = memberEnds[memberEnds.length - 1];
      }
    }
    let e = t + d;
    const producer = follows[x.id];
    // (a copy follows its producer's output, an adam its gradient: input 1)
    if (producer >= 0) e = Math.max(e, end[producer] + d * Math.min(1, FOLLOW_CHUNK / Math.max(1, numel(g.tensors[buffers[x.inputs[x.kind === 'run' ? 1 : 0]].tensor].shape))));
    if (members) members.forEach((m, i) => { start[m] = t; end[m] = memberEnds ? t + memberEnds[i] : e; started[m] = 1; });
    else { start[x.id] = t; end[x.id] = e; started[x.id] = 1; }
    next[s] += members?.length ?? 1;
    done += members?.length ?? 1;
    free[s] = e + over.instructionSeconds;
    folds[s] = e;
    busy[x.stream] += d;
    step = Math.max(step, e);
  }
  return { stepSeconds: ins.length > 0 ? step + over.stepSeconds : 0, streamBusySeconds: busy, start, end };
}
