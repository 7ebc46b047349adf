// Arena offsets: Program -> static byte offsets in one arena per tier, and the
// waits that make reusing an address safe across streams.
//
// Takes the buffers with their live ranges [allocAt, freeAt] (-1 = whole run).
// Gives every buffer an offset: buffers alive for the whole run are packed
// first; the others are allocated in time order from a free list (best fit,
// neighbours coalesced), each taking its bytes at its first write and giving
// them back after its free. The first writer of a buffer waits for the free
// of the last occupant of every byte range it takes (earlier occupants are
// covered transitively: that occupant's own first write waited for them).
// Alignment: 64 bytes, except 4096 (one O_DIRECT block) for every nvme buffer
// and for every cpu buffer of at least 64 KiB that an nvme copy reads or
// writes: nvme buffers then own whole blocks, so the store writes them without
// reading edge blocks first, and a large cpu side of a transfer is
// block-aligned, so it moves without a staging copy (native/tiers/nvme_store.h).
// Small cpu buffers keep 64: padding them to 4 KiB would cost tight CPU
// arenas real room for a memcpy of a few KiB. Offsets and the space a buffer
// takes are both rounded; sizeBytes stays the tensor's.
// Prefetch room (when the caller gives the tiers' capacities): a buffer that an
// nvme read fills is a prefetch, and reusing bytes freed just before it makes
// the read wait for that free (the nvmeRead stream then runs one copy ahead at
// most: each read waits for the previous one's consumer; where the moments
// rest on NVMe, the next update's reads wait for the last one's write-back).
// Such buffers go first to a ring: CPU bytes above every other CPU buffer
// (where the plain placement packs those without them) up to the capacity,
// at most the compact peak in size, where each takes the bytes after the one
// before it and starts again from the ring's bottom when the top is near, so
// it reuses the bytes freed longest ago and a read overlaps the write-back
// before it (llama2-7b on a 24 GB GPU and 32 GB of CPU: 15.9 -> 12.0 s;
// docs/BENCHMARKS.md). The other buffers are placed as below within the
// ring's bottom; where one would overlap a live buffer in the ring, or they
// rise above its bottom, the ring is not used (Arenas.ring says whether it
// is; where the CPU is tight the others then wait for more cross-stream
// frees, so compile also places small programs without it and keeps the
// faster: partition/built.ts RING_CHOICE_MAX_INSTRUCTIONS). Without it they are placed
// "far": fresh bytes above the arena while the budget allows, else the free
// range whose last occupant was freed longest ago (intervals.ts allocFar), so
// that reads run ahead and go to the store together. The budget is the compact
// peak plus the room the capacity leaves, but at most the compact peak again
// (a plan takes at most twice its minimum for prefetch, however much memory
// the capacity would allow). The compact placement is made first; the ring
// ones, then the far ones, are tried with that budget, then with half the
// extra room, and kept only when every tier still fits (fragmentation can make
// it bigger); otherwise the compact one stands.
// Quiet placement (with capacities, tried before the far-only one): every
// other buffer also avoids waits across streams where there is room — it takes
// the smallest free range whose last occupants were all freed on its first
// writer's own stream (stream order already puts that free before it: no
// wait), else fresh bytes within the same budget, else the range whose latest
// free on another stream is the oldest. Without it, a gradient's d2h copy waits
// for the CPU update that frees the bytes it reuses, and an h2d prefetch for a
// GPU free, which chains the streams into one (gpt3-6.7b/a100-80g: 0.94 s
// predicted, 0.53 s with it). Kept only when every tier fits, like the far one.
// Timed quiet placement (with a ReuseTiming, below): the same, but a range may
// be reused without waiting when its frees end, in a schedule of the program,
// before its writer is ready, and otherwise the range that delays its writer
// least is taken; compile simulates it beside the plain one (partition/built.ts
// retimed).
// Placement in time order (assignInTime, given a schedule of the program,
// e.g. schedule/gated.ts's, which lets prefetches run ahead only as far as
// memory allows): buffers take their bytes when their first write starts in
// that schedule and give them back when their free ends, so a prefetch finds
// the bytes free at that moment; a range is reused only when its last
// occupants' frees come earlier in the program (waits point back)
// (placeByTime). Where that does not fit, the same lifetimes are placed
// largest first (placeBySize), which packs them tighter, and where the GPU
// still overflows, longest-lived first; none fitting, no placement.
// State order (when the caller gives it: state-order.ts): the persistent nvme
// buffers are packed in that order — a parameter's p, m, v next to each other,
// parameters in update order — then the rest in buffer order; without it, all
// persistent buffers in buffer order (all p, then all m, then all v).
// Keeps true: two buffers whose live ranges overlap never overlap in memory;
// no write lands in memory before the previous occupant's last access has
// completed; with capacities, no tier exceeds its capacity unless the compact
// placement does. Deterministic: ties broken by buffer id. Cost: O(B log B +
// B·L), L = buffers alive at once (placeBySize: O(B^2) per tier); up to eleven placements with capacities.

import type { Tier } from '../cost/cost.js';
import { STREAMS, type PlanBuffer, type PlanInstruction } from '../plan/types.js';
import { FreeList, LastOccupant } from './intervals.js';
import { liveBytesPeak, planBuffers, type Program } from './program.js';

export const ALIGN_BYTES = 64;
/** The O_DIRECT block: alignment of nvme buffers and of the large cpu buffers nvme copies touch. */
export const NVME_ALIGN_BYTES = 4096;
/** From this size on, a cpu buffer an nvme copy touches is block-aligned too (zero-copy O_DIRECT). */
export const ZERO_COPY_MIN_BYTES = 64 * 1024;
const roundUp = (n: number, a: number) => Math.ceil(n / a) * a;

/** Per buffer, the alignment of its offset and of the space it takes. */
function alignments(prog: Program): Float64Array {
  const a = new Float64Array(prog.buffers.length).fill(ALIGN_BYTES);
  for (const b of prog.buffers) if (b.tier === 'nvme') a[b.id] = NVME_ALIGN_BYTES;
  for (const x of prog.instructions) {
    if (x.kind !== 'copy') continue;
    const [s, d] = [prog.buffers[x.inputs[0]], prog.buffers[x.outputs[0]]];
    if (s.tier !== 'nvme' && d.tier !== 'nvme') continue;
    for (const b of [s, d]) if (b.tier === 'nvme' || b.sizeBytes >= ZERO_COPY_MIN_BYTES) a[b.id] = NVME_ALIGN_BYTES;
  }
  return a;
}

/**
 * What every placement of a program starts from, whatever its budget, ring or
 * timing: each buffer's alignment, each instruction's stream (its index in
 * STREAMS: compared once per reused byte range), the moving buffers by first
 * write and by free (placeAll's slots), and the persistent buffers packed in
 * a state order. Made once per program (and again where a placement brings
 * another state order) and kept while the program lives: gpt3-175b's compile
 * places its 14 programs 75 times, gpt2-1.5b's (16 GB) its 24 programs 87
 * times (docs/BENCHMARKS.md, twenty-fifth session).
 */
interface Layout {
  alignOf: Float64Array;
  stream: Int32Array;
  /** moving buffers by first write (slot 0: before the step; slot i + 1: at instruction i), each slot in id order: slot k is allocs[allocAt[k] .. allocAt[k + 1]) */
  allocAt: Int32Array; allocs: Int32Array;
  /** and by free (slot i: at instruction i): frees[freeAt[i] .. freeAt[i + 1]) */
  freeAt: Int32Array; frees: Int32Array;
  /** the persistent buffers packed from offset 0 per tier, in `order` (packPersistent) */
  packed: { order: Float64Array | undefined; offset: Float64Array; top: Record<Tier, number>; peak: Record<Tier, number> };
}

const layouts = new WeakMap<Program, Layout>();

function layoutOf(prog: Program, order: Float64Array | undefined): Layout {
  let l = layouts.get(prog);
  if (!l) {
    const alignOf = alignments(prog);
    const n = prog.instructions.length;
    const stream = new Int32Array(n);
    for (let i = 0; i < n; i++) stream[i] = STREAMS.indexOf(prog.instructions[i].stream);
    const allocAt = new Int32Array(n + 2), allocs = new Int32Array(prog.buffers.length), freeAt = new Int32Array(n + 1), frees = new Int32Array(prog.buffers.length);
    const moving = (b: Program['buffers'][number]) => !(b.allocAt < 0 && b.freeAt < 0);
    for (const b of prog.buffers) {
      if (!moving(b)) continue;
      allocAt[Math.max(b.allocAt, -1) + 2]++;
      if (b.freeAt >= 0) freeAt[b.freeAt + 1]++;
    }
    for (let k = 0; k <= n; k++) { allocAt[k + 1] += allocAt[k]; if (k < n) freeAt[k + 1] += freeAt[k]; }
    const a = allocAt.slice(0, n + 1), f = freeAt.slice(0, n);
    for (const b of prog.buffers) {
      if (!moving(b)) continue;
      allocs[a[Math.max(b.allocAt, -1) + 1]++] = b.id;
      if (b.freeAt >= 0) frees[f[b.freeAt]++] = b.id;
    }
    l = { alignOf, stream, allocAt, allocs, freeAt, frees, packed: packPersistent(prog, alignOf, order) };
    layouts.set(prog, l);
  } else if (l.packed.order !== order) l.packed = packPersistent(prog, l.alignOf, order);
  return l;
}

export interface Arenas {
  readonly buffers: readonly PlanBuffer[];
  readonly instructions: readonly PlanInstruction[];
  readonly arenaBytes: Readonly<Record<Tier, number>>;
  /** Whether the CPU buffers NVMe reads fill are in the ring (see the header). */
  readonly ring: boolean;
  /** The ring's bytes where it is used, else 0. */
  readonly ringBytes: number;
}

/** Buffers that an nvme read fills (its first write is a copy on the nvmeRead stream). */
function prefetchBuffers(prog: Program): Uint8Array {
  const far = new Uint8Array(prog.buffers.length);
  for (const b of prog.buffers) if (b.allocAt >= 0 && prog.instructions[b.allocAt].stream === 'nvmeRead') far[b.id] = 1;
  return far;
}

/**
 * The most CPU bytes that buffers NVMe reads fill hold at once in program
 * order (each from its first write to its free): what the ring must hold at
 * the least; compile compares the ring's size with it.
 */
export function readBuffersPeak(prog: Program): number {
  const far = prefetchBuffers(prog);
  return liveBytesPeak(prog, (b) => far[b.id] === 1).cpu;
}

const fits = (a: Placed, capacity: Readonly<Record<Tier, number>>) => (['gpu', 'cpu', 'nvme'] as Tier[]).every((t) => a.arenaBytes[t] <= capacity[t]);

/** Offsets for every buffer; with `capacity`, prefetch buffers are placed in the ring (unless `useRing` is false), else far, when that still fits;
 *  with `order` (per buffer, state-order.ts), persistent nvme buffers are packed in that order (see above);
 *  with `timing`, the quiet placements judge reuse by when frees end (ReuseTiming). */
export function assignOffsets(prog: Program, capacity?: Readonly<Record<Tier, number>>, order?: Float64Array, timing?: ReuseTiming, useRing = true): Arenas {
  const l = layoutOf(prog, order);
  const place = (far?: Uint8Array, budget?: Readonly<Record<Tier, number>>, quiet = false, ring?: Ring, keepIf?: Readonly<Record<Tier, number>>) => placeAll(prog, l, far, budget, quiet, timing, ring, keepIf);
  const compact = place();
  if (!capacity || !fits(compact, capacity)) return arenas(prog, compact);
  const far = prefetchBuffers(prog);
  const hasFar = far.some((x) => x === 1);
  // the ring: above the CPU's other buffers as the plain placement packs them,
  // up to the capacity, but at most the compact peak again (as the far room)
  let ring: Ring | undefined;
  if (hasFar && useRing) {
    const lo = roundUp(place(far, undefined, false, UNBOUNDED_RING).mainTop, ALIGN_BYTES);
    const size = Math.min(capacity.cpu - lo, compact.arenaBytes.cpu);
    if (size > 0) ring = { lo, size };
  }
  const room = (t: Tier) => Math.min(capacity[t] - compact.arenaBytes[t], compact.arenaBytes[t]);
  for (const r of ring ? [ring, undefined] : [undefined]) {
    for (const quiet of [true, false]) {
      if (!quiet && !hasFar) continue;
      for (const share of [1, 0.5]) {
        const budget = Object.fromEntries((['gpu', 'cpu', 'nvme'] as Tier[]).map((t) => [t, compact.arenaBytes[t] + share * room(t)])) as Record<Tier, number>;
        if (r) budget.cpu = Math.min(budget.cpu, r.lo);
        const spread = place(far, budget, quiet, r, capacity);
        if (!spread.stopped) return arenas(prog, spread, r);
      }
    }
  }
  return arenas(prog, compact);
}

/**
 * Offsets for a schedule of the program (start/end per instruction, e.g.
 * gated.ts's): in its time order (placeByTime), else largest first
 * (placeBySize), else, where that overflows the GPU, longest-lived first;
 * when none fits the capacities, the first tier that largest first
 * overflows (the caller has assignOffsets' placement already). Longest-lived
 * first packs some lifetimes tighter and others looser (on gpt3-13b/h200's
 * kept program, gated reserving at the whole GPU: 141.28 GB against 141.43,
 * 141.00 alive at once); it moved one plan of bench/compile/plans.mjs's 31,
 * gpt3-13b/h200 0.3163 -> 0.3130 s; tried for the host tiers too, gpt2-1.5b on 8 + 6 GB
 * went 3.113 -> 3.591 s (another candidate retimed faster early in the
 * search, and its families led elsewhere; docs/BENCHMARKS.md).
 */
export function assignInTime(prog: Program, capacity: Readonly<Record<Tier, number>>, order: Float64Array | undefined, start: Float64Array, end: Float64Array): Arenas | { overflows: Tier } {
  const over = (a: Record<Tier, number>) => (['gpu', 'cpu', 'nvme'] as Tier[]).find((t) => a[t] > capacity[t]);
  // (the lifetimes in time order, sorted once for the reads below)
  const events = lifetimeEvents(prog, start, end);
  // no placement takes less than the bytes alive at once in the schedule
  const live = over(liveInTime(prog, events));
  if (live) return { overflows: live };
  const l = layoutOf(prog, order);
  const byTime = placeByTime(prog, l, capacity, events);
  if (!over(byTime.arenaBytes)) return arenas(prog, byTime);
  const bySize = placeBySize(prog, l, start, end, events, false);
  const tier = over(bySize.arenaBytes);
  if (tier !== 'gpu') return tier ? { overflows: tier } : arenas(prog, bySize);
  const byLength = placeBySize(prog, l, start, end, events, true);
  return over(byLength.arenaBytes) ? { overflows: tier } : arenas(prog, byLength);
}

/**
 * The non-persistent buffers' lifetimes in a schedule, as events in time
 * order: [time, kind (0 free, 1 first write), instruction, buffer]; a buffer
 * lives from its first write's start (-Infinity: alive at the step's start)
 * to its free's end; frees first at equal times.
 */
type LifetimeEvent = [number, number, number, number];
function lifetimeEvents(prog: Program, start: Float64Array, end: Float64Array): LifetimeEvent[] {
  const events: LifetimeEvent[] = [];
  for (const b of prog.buffers) {
    if (b.allocAt < 0 && b.freeAt < 0) continue;
    events.push([b.allocAt < 0 ? -Infinity : start[b.allocAt], 1, b.allocAt, b.id]);
    if (b.freeAt >= 0) events.push([end[b.freeAt], 0, b.freeAt, b.id]);
  }
  return events.sort((x, y) => x[0] - y[0] || x[1] - y[1] || x[2] - y[2] || x[3] - y[3]);
}

/** Per tier, the most bytes alive at once in a schedule (persistent buffers included). */
function liveInTime(prog: Program, events: LifetimeEvent[]): Record<Tier, number> {
  const alive: Record<Tier, number> = { gpu: 0, cpu: 0, nvme: 0 };
  for (const b of prog.buffers) if (b.allocAt < 0 && b.freeAt < 0) alive[b.tier] += b.sizeBytes;
  const peak = { ...alive };
  for (const [, kind, , id] of events) {
    const b = prog.buffers[id];
    alive[b.tier] += kind === 1 ? b.sizeBytes : -b.sizeBytes;
    if (alive[b.tier] > peak[b.tier]) peak[b.tier] = alive[b.tier];
  }
  return peak;
}

/**
 * The compact placement's peak per tier: what assignOffsets returns as
 * arenaBytes whenever that does not fit `capacity` (it then keeps the compact
 * placement); when it fits, assignOffsets' arenas fit too. So it tells, at the
 * cost of one placement of five, whether and by how much assignOffsets' arenas
 * overflow a tier.
 */
export function compactArenaBytes(prog: Program, order?: Float64Array): Record<Tier, number> {
  return placeAll(prog, layoutOf(prog, order)).arenaBytes;
}

/** Persistent buffers of a tier in packing order: on nvme with an order, the ordered ones by key, then the rest; else by id. */
function persistentOrder(mine: readonly Program['buffers'][number][], tier: Tier, order?: Float64Array) {
  const persistent = mine.filter((b) => b.allocAt < 0 && b.freeAt < 0);
  if (tier !== 'nvme' || !order) return persistent;
  const k = (id: number) => (Number.isNaN(order[id]) ? Infinity : order[id]);
  return [...persistent].sort((a, b) => (k(a.id) === k(b.id) ? a.id - b.id : k(a.id) < k(b.id) ? -1 : 1));
}

/** One placement's offsets, the waits it adds (instruction -> frees it must wait for) and peaks; only the kept one becomes Arenas. */
interface Placed { offset: Float64Array; extra: Map<number, number[]>; arenaBytes: Record<Tier, number> }

function arenas(prog: Program, { offset, extra, arenaBytes }: Placed, ring?: Ring): Arenas {
  const buffers = planBuffers(prog, offset);
  const instructions = prog.instructions.slice();
  for (const [i, more] of extra) { const x = instructions[i]; instructions[i] = { ...x, waits: [...new Set([...x.waits, ...more])].sort((a, b) => a - b) }; }
  return { buffers, instructions, arenaBytes, ring: ring !== undefined, ringBytes: ring?.size ?? 0 };
}

/**
 * How a quiet placement may judge the reuse of freed bytes by when frees end
 * rather than by where they stand in the program (a d2h copy's free early in
 * the program can end late when that stream is behind):
 *  - `start`/`end`: a simulation of the program's schedule without the
 *    arena's waits (the ideal the arena should not spoil): a writer that
 *    starts there after a free ends may reuse its bytes;
 *  - `seconds`/`follows` (each instruction's duration; the producer a copy
 *    follows, simulate.ts followedProducers): the placement estimates when each
 *    instruction starts and ends as it goes, in program order, with the waits
 *    it adds — the simulator's rule without its overheads and NVMe batches —
 *    and a writer may reuse bytes whose frees have ended by the time it is
 *    otherwise ready.
 * Either way a quiet buffer then takes the smallest free range it may reuse
 * without waiting, else fresh bytes within the budget, else the range that
 * delays its writer least. Neither wins every case (docs/BENCHMARKS.md): the
 * caller simulates them beside the plain quiet placement.
 */
export type ReuseTiming =
  | { readonly start: Float64Array; readonly end: Float64Array }
  | { readonly seconds: (instruction: number) => number; readonly follows: Int32Array };

/** Persistent buffers packed from offset 0 per tier, in state order on nvme (persistentOrder): their offsets, each tier's top and peak. */
function packPersistent(prog: Program, alignOf: Float64Array, order: Float64Array | undefined): Layout['packed'] {
  const offset = new Float64Array(prog.buffers.length);
  const top = { gpu: 0, cpu: 0, nvme: 0 }, peak = { gpu: 0, cpu: 0, nvme: 0 };
  for (const tier of ['gpu', 'cpu', 'nvme'] as Tier[]) {
    for (const b of persistentOrder(prog.buffers.filter((x) => x.tier === tier), tier, order)) {
      offset[b.id] = roundUp(top[tier], alignOf[b.id]);
      peak[tier] = offset[b.id] + b.sizeBytes;
      top[tier] = roundUp(offset[b.id] + roundUp(b.sizeBytes, alignOf[b.id]), ALIGN_BYTES);
    }
  }
  return { order, offset, top, peak };
}

/** A placement's start: the persistent buffers' offsets and peaks, each tier's free list above them and an empty last-occupant map. */
function startPlacement(l: Layout) {
  const lists = {} as Record<Tier, FreeList>, lasts = {} as Record<Tier, LastOccupant>;
  for (const tier of ['gpu', 'cpu', 'nvme'] as Tier[]) { lists[tier] = new FreeList(l.packed.top[tier]); lasts[tier] = new LastOccupant(); }
  return { offset: l.packed.offset.slice(), arenaBytes: { ...l.packed.peak }, lists, lasts };
}

/** Buffer `id` takes [lo, lo + span): its offset, its tier's peak, and a wait of its first writer for every last occupant's free on another stream. */
function occupy(prog: Program, p: Placed, stream: Int32Array, last: LastOccupant, id: number, lo: number, span: number): void {
  const b = prog.buffers[id];
  p.offset[id] = lo;
  if (lo + b.sizeBytes > p.arenaBytes[b.tier]) p.arenaBytes[b.tier] = lo + b.sizeBytes;
  const taken = last.take(lo, lo + span);
  if (b.allocAt < 0) return;
  for (const w of taken) {
    if (stream[w] !== stream[b.allocAt]) {
      const more = p.extra.get(b.allocAt);
      if (more) more.push(w); else p.extra.set(b.allocAt, [w]);
    }
  }
}

/**
 * A placement in the order of a schedule of the program (start/end per
 * instruction, e.g. the program's schedule without the arena's waits): each
 * buffer takes its bytes when its first write starts there and gives them
 * back when its free ends, so a prefetch that runs ahead finds the bytes the
 * schedule has free at that moment, not those free at its place in the
 * program. A range is reused only when every last occupant's free comes
 * before the new first writer in the program (a wait may only point back);
 * best fit among those, else fresh bytes within `budget`, else fresh bytes
 * above it (the placement then does not fit and is not kept).
 */
function placeByTime(prog: Program, l: Layout, budget: Readonly<Record<Tier, number>>, events: LifetimeEvent[]): Placed {
  const { alignOf, stream } = l;
  const { offset, arenaBytes, lists, lasts } = startPlacement(l);
  const extra = new Map<number, number[]>();
  const span = (b: { id: number; sizeBytes: number }) => roundUp(b.sizeBytes, alignOf[b.id]);
  const placed: Placed = { offset, extra, arenaBytes };
  for (const [, kind, at, id] of events) {
    const b = prog.buffers[id], tier = b.tier, list = lists[tier], last = lasts[tier];
    if (kind === 0) { const lo = offset[id]; list.free(lo, lo + span(b)); last.set(lo, lo + span(b), at); continue; }
    const allowed = (x: number) => last.latest(x, x + span(b)) < Math.max(at, 0);
    let lo = list.allocBefore(span(b), alignOf[id], budget[tier], allowed);
    if (lo < 0) lo = list.allocBefore(span(b), alignOf[id], Infinity, allowed); // no room: above the budget (the placement is not kept)
    occupy(prog, placed, stream, last, id, lo, span(b));
  }
  return placed;
}

/** placeBySize's record of a placed buffer: its fields, and their count. */
const OFF = 0, END = 1, LO = 2, HI = 3, ALLOC = 4, FREE = 5, R = 6;
/** placeBySize's places per block of its skip: 1 << BLOCK_BITS (see there). */
const BLOCK_BITS = 6, BLOCK_MASK = (1 << BLOCK_BITS) - 1;

/**
 * An offline placement of a schedule's lifetimes (start/end per instruction,
 * e.g. the memory-gated one): a buffer lives from its first write's start to
 * its free's end there. Largest first (ties: earlier start, then id), or
 * longest-lived first (ties: largest, earlier start, id), each at
 * the lowest offset where it overlaps no placed buffer it may not share bytes
 * with: one alive at the same time, or one whose order against it the program
 * cannot keep — the earlier one's free must come before the later one's first
 * write in the program (a wait may only point back). The waits are then the
 * last occupants' frees, replayed in the schedule's time order (occupy).
 * Placing in time order instead (placeByTime) leaves holes that a larger
 * buffer later cannot use; placing the large ones first packs the same
 * lifetimes tighter (the planner of TensorFlow Lite's "greedy by size").
 * Cost: O(B^2) in the non-persistent buffers of a tier at worst; blocks of
 * 64 placed buffers wholly below the gap being tried are passed in one step
 * (gpt3-13b/h200's compile: 1.12e9 steps -> 0.76e9, the same offsets).
 */
function placeBySize(prog: Program, l: Layout, start: Float64Array, end: Float64Array, events: LifetimeEvent[], longestFirst: boolean): Placed {
  const { alignOf, stream } = l;
  const { offset, arenaBytes, lists, lasts } = startPlacement(l);
  const extra = new Map<number, number[]>();
  const span = (b: { id: number; sizeBytes: number }) => roundUp(b.sizeBytes, alignOf[b.id]);
  const from = (b: Program['buffers'][number]) => (b.allocAt < 0 ? -Infinity : start[b.allocAt]);
  const to = (b: Program['buffers'][number]) => (b.freeAt < 0 ? Infinity : end[b.freeAt]);
  for (const tier of ['gpu', 'cpu', 'nvme'] as Tier[]) {
    const base = lists[tier].top;
    const mine = prog.buffers.filter((b) => b.tier === tier && !(b.allocAt < 0 && b.freeAt < 0));
    const length = (b: Program['buffers'][number]) => to(b) - from(b);
    if (longestFirst) mine.sort((a, b) => (length(a) === length(b) ? 0 : length(a) < length(b) ? 1 : -1) || span(b) - span(a) || from(a) - from(b) || a.id - b.id);
    else mine.sort((a, b) => span(b) - span(a) || from(a) - from(b) || a.id - b.id);
    // placed buffers in offset order (equal offsets: in placing order), their
    // facts in flat arrays by that place: offset, end, lifetime, first write
    // and free in the program; each buffer goes in the first gap, lowest
    // first, between those it may not overlap
    const m = mine.length;
    // (one record of R numbers per placed buffer, in offset order: OFF, END,
    // LO, HI, ALLOC, FREE; one array, so that the scan below reads one
    // cache line per buffer and a placement shifts one array)
    const P = new Float64Array(R * m);
    // (per block of 1 << BLOCK_BITS places, the largest span among its
    // buffers and how many have it, kept as buffers are placed and the later
    // places shift up by one; the block is searched again only when the last
    // of those leaves it. Where the block's last offset plus that span is at
    // or below the gap's bottom, all its buffers end there, and the scan
    // passes the block in one step, as it would pass each of them: two-thirds
    // of its steps over gpt3-13b/h200's GPU buffers had been such passes)
    const blockSpan = new Float64Array((m >> BLOCK_BITS) + 1), blockSpans = new Int32Array((m >> BLOCK_BITS) + 1);
    const spanAt = (q: number) => P[R * q + END] - P[R * q + OFF];
    for (let k = 0; k < m; k++) {
      const b = mine[k], align = alignOf[b.id];
      const spK = span(b), loK = from(b), hiK = to(b), allocK = b.allocAt, freeK = b.freeAt;
      let lo = roundUp(base, align);
      for (let q = 0; q < k; q++) {
        const r = R * q;
        if (lo + spK <= P[r + OFF]) break;
        if ((q & BLOCK_MASK) === 0 && spK > 0 && P[R * Math.min(q + BLOCK_MASK, k - 1) + OFF] + blockSpan[q >> BLOCK_BITS] <= lo) { q += BLOCK_MASK; continue; }
        if (P[r + END] <= lo) continue;
        // they may share bytes when one's free ends before the other's first
        // write starts and comes before it in the program
        if (P[r + FREE] >= 0 && allocK >= 0 && P[r + HI] <= loK && P[r + FREE] < allocK) continue;
        if (freeK >= 0 && P[r + ALLOC] >= 0 && hiK <= P[r + LO] && freeK < P[r + ALLOC]) continue;
        lo = roundUp(P[r + END], align);
      }
      offset[b.id] = lo;
      // its place: after every placed buffer at or below its offset
      let at = 0, hi = k;
      while (at < hi) { const mid = (at + hi) >> 1; if (P[R * mid + OFF] <= lo) at = mid + 1; else hi = mid; }
      P.copyWithin(R * (at + 1), R * at, R * k);
      const r = R * at;
      P[r + OFF] = lo; P[r + END] = lo + spK; P[r + LO] = loK; P[r + HI] = hiK; P[r + ALLOC] = allocK; P[r + FREE] = freeK;
      // each block from the one it lands in on: its first place's buffer came
      // in (this one, or the block before's last), its last's went to the
      // next block (the places now 0..k)
      for (let blk = at >> BLOCK_BITS; blk <= k >> BLOCK_BITS; blk++) {
        const first = blk << BLOCK_BITS, gone = first + BLOCK_MASK + 1;
        const came = spanAt(blk === at >> BLOCK_BITS ? at : first);
        if (came > blockSpan[blk]) { blockSpan[blk] = came; blockSpans[blk] = 1; } else if (came === blockSpan[blk]) blockSpans[blk]++;
        if (gone <= k && spanAt(gone) === blockSpan[blk] && --blockSpans[blk] === 0) {
          let most = 0, count = 0;
          for (let q = first; q < gone; q++) { const sq = spanAt(q); if (sq > most) { most = sq; count = 1; } else if (sq === most) count++; }
          blockSpan[blk] = most; blockSpans[blk] = count;
        }
      }
    }
  }
  // the waits: replay the lifetimes in time order, each first write taking its bytes' last occupants
  const placed: Placed = { offset, extra, arenaBytes };
  for (const [, kind, at, id] of events) {
    const b = prog.buffers[id], lo = offset[id];
    if (kind === 0) lasts[b.tier].set(lo, lo + span(b), at);
    else occupy(prog, placed, stream, lasts[b.tier], id, lo, span(b));
  }
  return placed;
}

/** CPU bytes [lo, lo + size) for the buffers NVMe reads fill (placeAll's ring). */
interface Ring { lo: number; size: number }
/** A ring above every address: the placement's mainTop is then what the CPU's other buffers take without the ring's. */
const UNBOUNDED_RING: Ring = { lo: 2 ** 52, size: 2 ** 52 };

/**
 * One placement. Buffers are allocated in program order (each at its first
 * write, after every free before it), all tiers in one pass; with `ring`, the
 * CPU buffers NVMe reads fill go there. With `keepIf` (the capacities), it
 * stops as soon as it cannot be kept (`stopped`): a tier above its capacity,
 * or with a ring, a buffer the ring could not take or the CPU's other buffers
 * above its bottom (each only grows as the placement goes on).
 */
function placeAll(prog: Program, l: Layout, far?: Uint8Array, budget?: Readonly<Record<Tier, number>>, quiet = false, timing?: ReuseTiming, ring?: Ring, keepIf?: Readonly<Record<Tier, number>>): Placed & { /** the top of the CPU's buffers outside the ring */ mainTop: number; ringMissed: boolean; stopped: boolean } {
  const { alignOf, stream, allocAt, allocs, freeAt, frees } = l;
  const { offset, arenaBytes, lists, lasts } = startPlacement(l);
  const extra = new Map<number, number[]>();
  const span = (b: { id: number; sizeBytes: number }) => roundUp(b.sizeBytes, alignOf[b.id]);
  const n = prog.instructions.length;
  // with timing: when each instruction starts (or is ready, before the waits its own buffers add) and ends
  const timed = quiet && budget ? timing : undefined;
  const estimate = timed && 'seconds' in timed ? timed : undefined;
  const begin = timed && 'start' in timed ? timed.start : new Float64Array(timed ? n : 0);
  const end = timed && 'end' in timed ? timed.end : new Float64Array(timed ? n : 0);
  const streamEnd = new Float64Array(STREAMS.length);
  const placed: Placed = { offset, extra, arenaBytes };
  // the ring: each buffer an NVMe read fills takes the bytes after the one
  // before it, from the ring's bottom again when it would pass the top; one
  // that would overlap a buffer still live there goes to the free list
  // instead, and the placement says so (ringMissed: the caller drops it)
  const inRing = new Uint8Array(ring ? prog.buffers.length : 0);
  const ringLive: number[] = [];
  let cursor = 0, ringMissed = false;
  const ringPlace = (b: Program['buffers'][number], r: Ring): number => {
    const z = span(b);
    const aligned = (x: number) => roundUp(r.lo + x, alignOf[b.id]) - r.lo;
    let at = aligned(cursor);
    if (at + z > r.size) at = aligned(0);
    if (at + z > r.size || ringLive.some((k) => { const lo = offset[k] - r.lo; return lo < at + z && at < lo + span(prog.buffers[k]); })) { ringMissed = true; return -1; }
    cursor = at + z;
    inRing[b.id] = 1;
    ringLive.push(b.id);
    return r.lo + at;
  };
  const allocate = (id: number, ready: number) => {
    const b = prog.buffers[id], tier = b.tier, list = lists[tier], last = lasts[tier];
    let lo = ring && far?.[b.id] && tier === 'cpu' ? ringPlace(b, ring) : -1;
    if (lo >= 0) { /* in the ring */ }
    else if (far?.[b.id] && budget) lo = list.allocFar(span(b), alignOf[b.id], budget[tier], (at) => last.latest(at, at + span(b)));
    else if (quiet && budget && b.allocAt >= 0) {
      const mine = stream[b.allocAt];
      const other = (w: number) => stream[w] !== mine;
      // the score: < 0 when reusing the range adds no wait, else how long (timed) or how recent (by program position) its latest free is
      lo = timed
        ? list.allocQuiet(span(b), alignOf[b.id], budget[tier], (at) => { const e = last.mostWhere(at, at + span(b), other, end); return e <= ready ? -1 : e - ready; })
        : list.allocQuiet(span(b), alignOf[b.id], budget[tier], (at) => last.latestWhere(at, at + span(b), other));
    } else lo = list.alloc(span(b), alignOf[b.id]);
    occupy(prog, placed, stream, last, b.id, lo, span(b));
  };
  const kept = () => arenaBytes.gpu <= keepIf!.gpu && arenaBytes.cpu <= keepIf!.cpu && arenaBytes.nvme <= keepIf!.nvme && (!ring || (!ringMissed && lists.cpu.top <= ring.lo));
  for (let j = allocAt[0]; j < allocAt[1]; j++) allocate(allocs[j], 0);
  for (let i = 0; i < n; i++) {
    if (keepIf && !kept()) return { offset, extra, arenaBytes, mainTop: lists.cpu.top, ringMissed, stopped: true };
    const x = prog.instructions[i];
    let ready = timed && !estimate ? begin[i] : 0;
    const follows = estimate ? estimate.follows[i] : -1;
    if (estimate) { ready = streamEnd[stream[i]]; for (const w of x.waits) ready = Math.max(ready, w === follows ? begin[w] : end[w]); }
    for (let j = allocAt[i + 1]; j < allocAt[i + 2]; j++) allocate(allocs[j], ready);
    if (estimate) {
      for (const w of extra.get(i) ?? []) ready = Math.max(ready, end[w]);
      begin[i] = ready;
      end[i] = Math.max(ready + estimate.seconds(i), follows >= 0 ? end[follows] : 0);
      streamEnd[stream[i]] = end[i];
    }
    for (let j = freeAt[i]; j < freeAt[i + 1]; j++) {
      const id = frees[j], d = prog.buffers[id], lo = offset[id], hi = lo + span(d);
      if (ring && inRing[id]) ringLive.splice(ringLive.indexOf(id), 1);
      else lists[d.tier].free(lo, hi);
      lasts[d.tier].set(lo, hi, i);
    }
  }
  return { offset, extra, arenaBytes, mainTop: lists.cpu.top, ringMissed, stopped: keepIf !== undefined && !kept() };
}
