// Program construction: Graph + Placement -> buffers and stream instructions.
//
// Takes a training-step Graph (ops in program order) and a Placement. Gives the
// step as one flattened list of instructions (run, copy, free), each on a stream
// (gpu, cpu, h2d, d2h, nvmeRead, nvmeWrite), with the events it waits on, and the buffers they touch
// (tier, size, live range; offsets come later from the arena pass).
// Rules:
//  - every tensor has one home buffer; persistent state, data inputs and the
//    loss keep theirs for the whole run, others from first write to last use;
//  - an op reads and writes buffers on its own tier: an operand homed elsewhere
//    is copied in (a prefetch: the copy stream runs ahead as far as its waits
//    allow), a result homed elsewhere is copied home (an eviction);
//  - a copy on a non-home tier serves the consumers that follow closely and is
//    dropped across a long gap (REFETCH_GAP ops), then fetched again; an
//    activation fetched back from its home stays until its last use (as the
//    LP's memory rows count it: one fetch before its reuse); the CPU staging
//    copy of an NVMe-homed tensor passed on to the GPU is dropped at once,
//    unless an op on the CPU uses the tensor within REFETCH_GAP ops (the update
//    right after the backward pass read the parameter): that op reads the
//    staged copy instead of reading NVMe again;
//  - a free follows the last access of every transient buffer, on that
//    access's stream, except that a GPU buffer the d2h stream reads (an
//    eviction) is freed on d2h: the GPU then never waits for an eviction to
//    finish before going on (the free on d2h waits for the GPU's last read);
//  - a rematerialised tensor (Placement.remat) has no home: when it is needed
//    and no copy is valid, its producer runs (again) there (e.g. param16 cast
//    from master32 on its way to the GPU, once for the forward and once for
//    the backward pass); a cast whose output is rematerialised runs only
//    there, not also at its own place (the step start); one run serves every
//    rematerialised output of the op that is read within REFETCH_GAP ops; a
//    half copy the CPU made for a recompute on the GPU (the recomputed op
//    reads the weight) stays on the CPU for the weight's next reader in the
//    same pass, which copies it up again rather than casting master32 read
//    once more (from NVMe where it rests: gpt3-6.7b, v100-32g, 48 GB CPU
//    5.60 -> 4.65 s);
//    on its op's tier, but on the CPU for a forward reader where the
//    placement says so (Placement.forwardCastOnCpu: a cast on the GPU from
//    master32 on the CPU, made by the CPU while it is idle in the forward);
//    the CPU casts for the GPU ops up to the CPU's next op are drafted before
//    a CPU update (the CPU stream runs in draft order: they do not wait for
//    the update);
//  - an update on the GPU whose state rests on the CPU (streamed) reads its
//    state fetched up like any operand (a copy that waited for the gradient
//    held the in-order h2d stream, and the fetches behind it, until then:
//    gpt3-13b/h200 316.3 against 341.9 ms) and sends it home after.
// Keeps true: every read waits for its buffer's writer (RAW), every in-place
// write waits for the earlier readers (WAR), every wait points to an earlier
// instruction (so no step can deadlock). Cost: O(instructions + operands).

import type { Tier } from '../cost/cost.js';
import type { Graph } from '../ir/types.js';
import type { Placement } from '../partition/placement.js';
import type { PlanBuffer, PlanInstruction, StreamName } from '../plan/types.js';
import { STREAMS } from '../plan/types.js';

const NS = STREAMS.length;
const STREAM_INDEX = Object.fromEntries(STREAMS.map((s, k) => [s, k])) as Record<StreamName, number>;

/**
 * Ops across which a copy is kept (a longer gap drops it). 24: across the
 * short gap between the last layers' forward and backward reads (lnf, the
 * head, the loss and their gradients lie between), a GPT's weight copies stay,
 * instead of going home and back behind the d2h queue (gpt3-6.7b/h100 0.205 ->
 * 0.179 s, 13b/a100 1.761 -> 1.697; 13b/h100 1.429 -> 1.477; 20-28 alike:
 * docs/BENCHMARKS.md).
 */
export const REFETCH_GAP = 24;

export interface ProgramBuffer {
  readonly id: number;
  readonly tensor: number;
  readonly tier: Tier;
  readonly sizeBytes: number;
  /** First write in the step; -1 when valid before the step. */
  readonly allocAt: number;
  /** Its free instruction; -1 when never freed. */
  readonly freeAt: number;
}

export interface Program {
  readonly buffers: readonly ProgramBuffer[];
  readonly instructions: readonly PlanInstruction[];
}

interface Draft {
  stream: StreamName;
  kind: 'run' | 'copy' | 'free';
  op: number;
  inputs: number[];
  outputs: number[];
  /** Distinct draft indices (a handful: a list, not a Set). */
  waits: number[];
}

interface DraftBuffer { tensor: number; tier: Tier; sizeBytes: number; keep: boolean; preset: boolean }

const computeStream = (t: 'gpu' | 'cpu'): StreamName => t;
const direct = (from: Tier, to: Tier) => from === 'cpu' || to === 'cpu';

function copyStream(from: Tier, to: Tier): StreamName {
  if (from === 'cpu' && to === 'gpu') return 'h2d';
  if (from === 'gpu' && to === 'cpu') return 'd2h';
  if (from === 'nvme' && to === 'cpu') return 'nvmeRead';
  if (from === 'cpu' && to === 'nvme') return 'nvmeWrite';
  throw new Error(`no copy stream ${from} -> ${to}`);
}

/** The stream a buffer's free goes on: that of its last access, except that a
 *  GPU buffer the d2h stream also reads (an eviction) is freed on d2h, so the
 *  GPU never blocks on the eviction's progress. */
function freeStream(last: StreamName, tier: Tier, d2hAccess: boolean): StreamName {
  return last === 'gpu' && tier === 'gpu' && d2hAccess ? 'd2h' : last;
}

/**
 * Per tensor, the buffer holding its current value on each tier, with the
 * order the tiers got it (first(): the earliest still valid) — what a
 * Map<Tier, buffer> per tensor gave, in three typed arrays.
 */
class ValidCopies {
  private readonly buf: Int32Array;
  private readonly since: Float64Array;
  private clock = 0;
  constructor(tensors: number) {
    this.buf = new Int32Array(3 * tensors).fill(-1);
    this.since = new Float64Array(3 * tensors);
  }
  private static k(tier: Tier): number { return tier === 'gpu' ? 0 : tier === 'cpu' ? 1 : 2; }
  get(x: number, tier: Tier): number | undefined { const b = this.buf[3 * x + ValidCopies.k(tier)]; return b < 0 ? undefined : b; }
  set(x: number, tier: Tier, b: number): void {
    const i = 3 * x + ValidCopies.k(tier);
    if (this.buf[i] < 0) this.since[i] = ++this.clock; // a tier already holding x keeps its place in the order
    this.buf[i] = b;
  }
  delete(x: number, tier: Tier): void { this.buf[3 * x + ValidCopies.k(tier)] = -1; }
  /** Drops every copy of x other than buffer b. */
  keepOnly(x: number, b: number): void { for (let k = 0; k < 3; k++) if (this.buf[3 * x + k] !== b) this.buf[3 * x + k] = -1; }
  /** The copy that became valid first among those still valid, or undefined. */
  first(x: number): number | undefined {
    let best = -1;
    for (let k = 0; k < 3; k++) { const i = 3 * x + k; if (this.buf[i] >= 0 && (best < 0 || this.since[i] < this.since[best])) best = i; }
    return best < 0 ? undefined : this.buf[best];
  }
}

export function buildProgram(g: Graph, p: Placement): Program {
  const drafts: Draft[] = [];
  const bufs: DraftBuffer[] = [];
  const writer: number[] = [];                  // per buffer: draft index of its write this step, -1 = before
  const readers: number[] = []; // per buffer and stream (NS per buffer, STREAMS order): latest reading draft, -1 none
  const home = new Int32Array(g.tensors.length).fill(-1);
  const valid = new ValidCopies(g.tensors.length);

  const newBuffer = (tensor: number, tier: Tier, keep: boolean, preset: boolean): number => {
    bufs.push({ tensor, tier, sizeBytes: g.tensors[tensor].sizeBytes, keep, preset });
    writer.push(-1);
    for (let k = 0; k < NS; k++) readers.push(-1);
    return bufs.length - 1;
  };
  const emit = (d: Draft): number => { drafts.push(d); return drafts.length - 1; };
  const addWait = (i: number, w: number) => { const ws = drafts[i].waits; if (!ws.includes(w)) ws.push(w); };
  const waitWriter = (i: number, b: number) => { const w = writer[b]; if (w >= 0 && drafts[w].stream !== drafts[i].stream) addWait(i, w); };
  const waitReaders = (i: number, b: number) => { const own = STREAM_INDEX[drafts[i].stream]; for (let k = 0; k < NS; k++) { const r = readers[b * NS + k]; if (r >= 0 && k !== own) addWait(i, r); } };
  const read = (i: number, b: number) => { waitWriter(i, b); readers[b * NS + STREAM_INDEX[drafts[i].stream]] = i; };
  const write = (i: number, b: number) => { waitReaders(i, b); waitWriter(i, b); writer[b] = i; };

  // state, data inputs and the loss keep a home buffer for the whole run
  for (const t of g.tensors) {
    if (t.persistent || t.role === 'input') {
      home[t.id] = newBuffer(t.id, p.home[t.id], true, true);
      valid.set(t.id, p.home[t.id], home[t.id]);
    }
  }

  // next use of tensor x on tier T after op i (for the refetch gap): per tier,
  // each tensor's reading ops in order (an op reading x twice counted once),
  // flattened (offsets per tensor) so that no per-tensor lists are allocated
  const TIER_INDEX: Record<Tier, number> = { gpu: 0, cpu: 1, nvme: 2 };
  const nT = g.tensors.length;
  const useStart = [0, 1, 2].map(() => new Int32Array(nT + 1));
  const firstRead = (op: Graph['ops'][number], j: number) => op.inputs.indexOf(op.inputs[j]) === j;
  for (const op of g.ops) {
    const starts = useStart[TIER_INDEX[p.opTier[op.id]]];
    for (let j = 0; j < op.inputs.length; j++) if (firstRead(op, j)) starts[op.inputs[j] + 1]++;
  }
  for (const starts of useStart) for (let x = 0; x < nT; x++) starts[x + 1] += starts[x];
  const useOps = useStart.map((starts) => new Int32Array(starts[nT]));
  const fillAt = useStart.map((starts) => starts.slice(0, nT));
  for (const op of g.ops) {
    const k = TIER_INDEX[p.opTier[op.id]];
    for (let j = 0; j < op.inputs.length; j++) if (firstRead(op, j)) useOps[k][fillAt[k][op.inputs[j]]++] = op.id;
  }
  const nextUse = (x: number, tier: Tier, after: number): number => {
    const k = TIER_INDEX[tier], list = useOps[k];
    let lo = useStart[k][x], hi = useStart[k][x + 1];
    const end = hi;
    while (lo < hi) { const m = (lo + hi) >> 1; if (list[m] <= after) lo = m + 1; else hi = m; }
    return lo < end ? list[lo] : Infinity;
  };

  const remat = (x: number) => p.remat?.[x] === true;
  const producerOf = new Int32Array(g.tensors.length).fill(-1);
  for (const op of g.ops) for (const t of op.outputs) if (!op.inputs.includes(t)) producerOf[t] = op.id;

  const copy = (src: number, dst: number): number => {
    const i = emit({ stream: copyStream(bufs[src].tier, bufs[dst].tier), kind: 'copy', op: -1, inputs: [src], outputs: [dst], waits: [] });
    read(i, src);
    write(i, dst);
    return i;
  };

  // activations fetched back from their home (for the backward pass) stay until their last use
  const fetchedBack = new Uint8Array(g.tensors.length);
  // outputs of a rerun kept for their next reader (Placement.rerunHeld: within heldGap ops)
  const heldGap = p.rerunHeld ?? 0, held = new Int32Array(g.tensors.length).fill(-1); // per tensor: its held buffer, -1 none
  let current = -1;  // the op whose operands are being fetched
  /** A buffer holding x's current value on `tier`, copying it there if needed (NVMe <-> GPU through CPU staging). */
  function fetch(x: number, tier: Tier): number {
    const have = valid.get(x, tier);
    if (have !== undefined) return have;
    let src = valid.get(x, p.home[x]) ?? valid.first(x);
    if (src === undefined && remat(x) && producerOf[x] >= 0) {
      src = rerun(x);
      // its output kept for x's next reader here where that comes within
      // Placement.rerunHeld ops, rather than its producer run once more
      if (bufs[src].tier === tier && nextUse(x, tier, current) - current <= heldGap) { valid.set(x, tier, src); held[x] = src; }
    }
    if (src === undefined) throw new Error(`schedule: ${g.tensors[x].name} is read before it is written`);
    if (bufs[src].tier === tier) return src;
    const staged = !direct(bufs[src].tier, tier);
    if (staged) src = fetch(x, 'cpu');
    const b = newBuffer(x, tier, false, false);
    copy(src, b);
    valid.set(x, tier, b);
    if (g.tensors[x].role === 'activation' && bufs[src].tier === p.home[x] && !remat(x)) fetchedBack[x] = 1;
    // the staging copy is dropped once passed on, unless a cpu op reads x soon
    if (staged && nextUse(x, 'cpu', current) - current > REFETCH_GAP) valid.delete(x, 'cpu');
    // so is a rematerialised source, except a half copy the CPU made for a
    // recompute on the GPU (no op here reads x): kept for the next reader of
    // x in this pass, which then copies it up again instead of making it
    // anew (from master32 read again, from NVMe where it rests)
    if (remat(x) && bufs[src].tier !== tier) {
      if (bufs[src].tier === 'cpu' && keptForReader(x, tier)) valid.set(x, 'cpu', src);
      else valid.delete(x, bufs[src].tier);
    }
    return b;
  }
  /** Whether x is fetched for a recompute (the op being fetched for does not read x) and read next on `tier` in the same pass. */
  const keptForReader = (x: number, tier: Tier): boolean => {
    if (current < 0 || g.ops[current].inputs.includes(x)) return false;
    const next = nextUse(x, tier, current);
    return next < g.ops.length && g.ops[next].phase === g.ops[current].phase;
  };
  /** Runs x's producer again on its own tier; returns the buffer now holding x (valid until passed on). */
  function rerun(x: number): number {
    const op = g.ops[producerOf[x]];
    // (a cast on the GPU whose forward runs the CPU makes: Placement.forwardCastOnCpu)
    const tier = p.forwardCastOnCpu?.[op.id] && g.ops[current]?.phase === 'forward' ? 'cpu' : p.opTier[op.id];
    const ins = op.inputs.map((t) => fetch(t, tier));
    const outs = op.outputs.map((t) => newBuffer(t, tier, false, false));
    const i = emit({ stream: computeStream(tier), kind: 'run', op: op.id, inputs: ins, outputs: outs, waits: [] });
    ins.forEach((b) => read(i, b));
    outs.forEach((b) => write(i, b));
    // the run makes every output: a rematerialised sibling read soon (an
    // attention's lse beside its output, a norm's statistics) is taken from it,
    // not made by running the op once more
    op.outputs.forEach((y, k) => {
      if (y !== x && remat(y) && !op.inputs.includes(y) && valid.get(y, tier) === undefined && nextUse(y, tier, current) - current <= REFETCH_GAP) valid.set(y, tier, outs[k]);
    });
    // inputs fetched for the rerun are dropped after it (e.g. a master copy
    // staged from NVMe; keeping it for the update right after the backward's
    // cast holds CPU room that the next NVMe reads want: measured slower in 4
    // of 7 cases where the CPU binds, docs/BENCHMARKS.md, eighth session)
    // on the CPU; on the GPU one is kept where the op being fetched for, or
    // another within REFETCH_GAP ops, reads it next (a weight fetched for a
    // recompute in the backward pass, then read by its gradient's op, as the
    // LPs count one fetch per cluster of reads: llama2-13b/a100 fetched two
    // weights three times a step)
    const readSoon = (t: number) => tier === 'gpu' && (g.ops[current]?.inputs.includes(t) || nextUse(t, tier, current) - current <= REFETCH_GAP);
    for (const t of op.inputs) if (p.home[t] !== tier && !op.outputs.includes(t) && !fetchedBack[t] && !readSoon(t)) valid.delete(t, tier);
    return outs[op.outputs.indexOf(x)];
  }

  /** Copies buffer b (on its tier) into x's home, staging through the CPU when there is no direct link. */
  const sendHome = (x: number, b: number) => {
    let src = b;
    if (!direct(bufs[b].tier, p.home[x])) {
      src = newBuffer(x, 'cpu', false, false);
      copy(b, src);
    }
    copy(src, home[x]);
  };

  const retireIfGap = (x: number, tier: Tier, opId: number) => {
    if (tier === p.home[x] && !remat(x)) return;
    if (fetchedBack[x]) return;
    // (a held output by the held gap; any other copy, a later one of x too, by REFETCH_GAP)
    const gap = held[x] >= 0 && valid.get(x, tier) === held[x] ? heldGap : REFETCH_GAP;
    if (nextUse(x, tier, opId) - opId > gap) { valid.delete(x, tier); held[x] = -1; }
  };

  const isCpuUpdate = (j: number) => g.ops[j].phase === 'update' && p.opTier[j] === 'cpu';
  /**
   * Before the CPU update at o, the CPU casts of the remade p16 that the GPU
   * ops up to the CPU's next op read (past Placement.castLead more CPU
   * updates, where set): the CPU stream runs in this order, and
   * a cast drafted at its reader came after this update, so the GPU's next
   * layer waited for the update, the update for that layer's gradient
   * (docs/BENCHMARKS.md: gpt3-13b, v100-32g, 128 GB CPU 11.05 -> 9.07 s).
   */
  function hoistCasts(o: number) {
    let j = o + 1;
    while (j < g.ops.length && isCpuUpdate(j)) j++;
    // (and past castLead more CPU updates)
    let lead = p.castLead ?? 0;
    for (; j < g.ops.length && (p.opTier[j] === 'gpu' || (isCpuUpdate(j) && lead-- > 0)); j++) {
      if (p.opTier[j] !== 'gpu') continue;
      for (const x of g.ops[j].inputs) {
        if (!remat(x) || producerOf[x] < 0 || p.opTier[producerOf[x]] !== 'cpu' || g.ops[producerOf[x]].phase !== 'update') continue;
        if (valid.first(x) !== undefined) continue;
        const saved = current;
        current = j;
        valid.set(x, 'cpu', rerun(x));
        current = saved;
      }
    }
  }

  for (const op of g.ops) {
    current = op.id;
    if (op.kind === 'adam' && isCpuUpdate(op.id)) hoistCasts(op.id);
    // a cast whose output is rematerialised (param16 made again for each use)
    // runs where it is read (rerun), not here: run here too, at the step start,
    // its result was dropped unread (and its master32 read from NVMe twice).
    // A recomputed activation's producer still runs here: its first reader
    // follows at once, and moving it changed the arena for the worse
    if (op.phase === 'update' && op.outputs.length > 0 && op.outputs.every((x) => remat(x) && !op.inputs.includes(x))) continue;
    const tier = p.opTier[op.id];
    const ins = op.inputs.map((x) => fetch(x, tier));
    // outputs: in place over the matching input buffer, else the home buffer
    // when it is on this tier, else a fresh buffer here
    const outs = op.outputs.map((x) => {
      const k = op.inputs.indexOf(x);
      if (k >= 0) return ins[k];
      if (p.home[x] === tier) {
        if (home[x] < 0) home[x] = newBuffer(x, tier, g.tensors[x].role === 'loss', false);
        return home[x];
      }
      return newBuffer(x, tier, false, false);
    });
    const i = emit({ stream: computeStream(tier), kind: 'run', op: op.id, inputs: ins, outputs: outs, waits: [] });
    ins.forEach((b) => read(i, b));
    outs.forEach((b) => write(i, b));
    op.outputs.forEach((x, k) => {
      const b = outs[k];
      valid.keepOnly(x, b); // the old value is stale everywhere else
      valid.set(x, tier, b);
      if (p.home[x] !== tier && !remat(x)) {
        if (home[x] < 0) home[x] = newBuffer(x, p.home[x], g.tensors[x].role === 'loss', false);
        sendHome(x, b);
        valid.set(x, p.home[x], home[x]);
      }
    });
    for (const x of op.inputs) retireIfGap(x, tier, op.id);
    for (const x of op.outputs) retireIfGap(x, tier, op.id);
  }

  // frees after each transient buffer's last access, then final ids
  const lastAccess = new Int32Array(bufs.length).fill(-1);
  // per buffer and stream: its latest accessing draft, -1 none
  const accessors = new Int32Array(bufs.length * NS).fill(-1);
  drafts.forEach((d, i) => {
    const k = STREAM_INDEX[d.stream];
    for (const b of d.inputs) { lastAccess[b] = i; accessors[b * NS + k] = i; }
    for (const b of d.outputs) { lastAccess[b] = i; accessors[b * NS + k] = i; }
  });
  const freesAfter: number[][] = drafts.map(() => []);
  bufs.forEach((b, id) => { if (!b.keep && lastAccess[id] >= 0) freesAfter[lastAccess[id]].push(id); });

  const newId = new Int32Array(drafts.length);
  // made with their final ids in place (key order as PlanInstruction's, so plans serialise as before)
  const out: PlanInstruction[] = [];
  const freeAt = new Int32Array(bufs.length).fill(-1);
  const firstWrite = new Int32Array(bufs.length).fill(-1);
  drafts.forEach((d, i) => {
    newId[i] = out.length;
    out.push({ id: out.length, stream: d.stream, kind: d.kind, op: d.op, inputs: d.inputs, outputs: d.outputs, waits: d.waits.map((w) => newId[w]).sort((a, b) => a - b) });
    for (const b of d.outputs) if (firstWrite[b] < 0) firstWrite[b] = newId[i];
    for (const b of freesAfter[i]) {
      const stream = freeStream(d.stream, bufs[b].tier, accessors[b * NS + STREAM_INDEX.d2h] >= 0);
      const waits: number[] = [];
      for (let k = 0; k < NS; k++) { const j = accessors[b * NS + k]; if (j >= 0 && STREAMS[k] !== stream) waits.push(newId[j]); }
      freeAt[b] = out.length;
      out.push({ id: out.length, stream, kind: 'free', op: -1, inputs: [b], outputs: [], waits: waits.sort((a, c) => a - c) });
    }
  });

  const instructions = out;
  const buffers: ProgramBuffer[] = bufs.map((b, id) => ({
    id, tensor: b.tensor, tier: b.tier, sizeBytes: b.sizeBytes,
    allocAt: b.preset ? -1 : firstWrite[id], freeAt: b.keep ? -1 : freeAt[id],
  }));
  return { buffers, instructions };
}

/** The program's buffers at the given offsets (each field named: one literal shape for the simulator, cheaper than a spread). */
export function planBuffers(prog: Program, offset: ArrayLike<number>): PlanBuffer[] {
  return prog.buffers.map((b) => ({ id: b.id, tensor: b.tensor, tier: b.tier, sizeBytes: b.sizeBytes, allocAt: b.allocAt, freeAt: b.freeAt, offsetBytes: offset[b.id] }));
}

/** Peak of the summed sizes of live buffers per tier (a lower bound on the arena); `only`: of those buffers alone. */
export function liveBytesPeak(prog: Program, only?: (b: ProgramBuffer) => boolean): Record<Tier, number> {
  const n = prog.instructions.length;
  const delta: Record<Tier, Float64Array> = { gpu: new Float64Array(n + 1), cpu: new Float64Array(n + 1), nvme: new Float64Array(n + 1) };
  const base: Record<Tier, number> = { gpu: 0, cpu: 0, nvme: 0 };
  for (const b of prog.buffers) {
    if (only && !only(b)) continue;
    if (b.allocAt < 0) base[b.tier] += b.sizeBytes; else delta[b.tier][b.allocAt] += b.sizeBytes;
    if (b.freeAt >= 0) delta[b.tier][b.freeAt + 1] -= b.sizeBytes;
  }
  const peak: Record<Tier, number> = { gpu: 0, cpu: 0, nvme: 0 };
  for (const tier of ['gpu', 'cpu', 'nvme'] as Tier[]) {
    let cur = base[tier];
    peak[tier] = cur;
    for (let i = 0; i <= n; i++) { cur += delta[tier][i]; if (cur > peak[tier]) peak[tier] = cur; }
  }
  return peak;
}
