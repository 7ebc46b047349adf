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
// most: each read waits for the previous one's consumer). Such buffers are
// placed "far" instead: fresh bytes above the arena while the budget allows,
// else the free range whose last occupant was freed longest ago (intervals.ts
// allocFar), so that reads run ahead and go to the store together. The budget
// is the compact peak plus the room the capacity leaves, but at most the
// compact peak again (a plan takes at most twice its minimum for prefetch,
// however much memory the capacity would allow). The compact placement is made
// first; the far one is tried with that budget, then with half the extra
// room, and kept only when every tier still fits (fragmentation can make it
// bigger); otherwise the compact one stands.
// Quiet placement (with capacities, tried before the far-only one): every
// other buffer also avoids waits across streams where there is room — it takes
// the smallest free range whose last occupants were all freed on its first
// writer's own stream (stream order already puts that free before it: no
// wait), else fresh bytes within the same budget, else the range whose latest
// free on another stream is the oldest. Without it, a gradient's d2h copy waits
// for the CPU update that frees the bytes it reuses, and an h2d prefetch for a
// GPU free, which chains the streams into one (gpt3-6.7b/a100-80g: 0.94 s
// predicted, 0.53 s with it). Kept only when every tier fits, like the far one.
// State order (when the caller gives it: state-order.ts): the persistent nvme
// buffers are packed in that order — a parameter's p, m, v next to each other,
// parameters in update order — then the rest in buffer order; without it, all
// persistent buffers in buffer order (all p, then all m, then all v).
// Keeps true: two buffers whose live ranges overlap never overlap in memory;
// no write lands in memory before the previous occupant's last access has
// completed; with capacities, no tier exceeds its capacity unless the compact
// placement does. Deterministic: ties broken by buffer id. Cost: O(B log B +
// B·L), L = buffers alive at once; up to five placements with capacities.

import type { Tier } from '../cost/cost.js';
import type { PlanBuffer, PlanInstruction } from '../plan/types.js';
import { FreeList, LastOccupant } from './intervals.js';
import type { Program } from './program.js';

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

export interface Arenas {
  readonly buffers: readonly PlanBuffer[];
  readonly instructions: readonly PlanInstruction[];
  readonly arenaBytes: Readonly<Record<Tier, number>>;
}

/** Buffers that an nvme read fills (its first write is a copy on the nvmeRead stream). */
function prefetchBuffers(prog: Program): Uint8Array {
  const far = new Uint8Array(prog.buffers.length);
  for (const b of prog.buffers) if (b.allocAt >= 0 && prog.instructions[b.allocAt].stream === 'nvmeRead') far[b.id] = 1;
  return far;
}

const fits = (a: Placed, capacity: Readonly<Record<Tier, number>>) => (['gpu', 'cpu', 'nvme'] as Tier[]).every((t) => a.arenaBytes[t] <= capacity[t]);

/** Offsets for every buffer; with `capacity`, prefetch buffers are placed far when that still fits;
 *  with `order` (per buffer, state-order.ts), persistent nvme buffers are packed in that order (see above). */
export function assignOffsets(prog: Program, capacity?: Readonly<Record<Tier, number>>, order?: Float64Array): Arenas {
  const alignOf = alignments(prog);
  const place = (far?: Uint8Array, budget?: Readonly<Record<Tier, number>>, quiet = false) => placeAll(prog, alignOf, order, far, budget, quiet);
  const compact = place();
  if (!capacity || !fits(compact, capacity)) return arenas(prog, compact);
  const far = prefetchBuffers(prog);
  const hasFar = far.some((x) => x === 1);
  for (const quiet of [true, false]) {
    if (!quiet && !hasFar) continue;
    for (const share of [1, 0.5]) {
      const room = (t: Tier) => Math.min(capacity[t] - compact.arenaBytes[t], compact.arenaBytes[t]);
      const budget = Object.fromEntries((['gpu', 'cpu', 'nvme'] as Tier[]).map((t) => [t, compact.arenaBytes[t] + share * room(t)])) as Record<Tier, number>;
      const spread = place(far, budget, quiet);
      if (fits(spread, capacity)) return arenas(prog, spread);
    }
  }
  return arenas(prog, compact);
}

/**
 * The compact placement's peak per tier: what assignOffsets returns as
 * arenaBytes whenever that does not fit `capacity` (it then keeps the compact
 * placement); when it fits, assignOffsets' arenas fit too. So it tells, at the
 * cost of one placement of five, whether and by how much assignOffsets' arenas
 * overflow a tier.
 */
export function compactArenaBytes(prog: Program, order?: Float64Array): Record<Tier, number> {
  return placeAll(prog, alignments(prog), order).arenaBytes;
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

function arenas(prog: Program, { offset, extra, arenaBytes }: Placed): Arenas {
  const buffers: PlanBuffer[] = prog.buffers.map((b) => ({ ...b, offsetBytes: offset[b.id] }));
  const instructions = prog.instructions.map((x) => { const more = extra.get(x.id); return more === undefined ? x : { ...x, waits: [...new Set([...x.waits, ...more])].sort((a, b) => a - b) }; });
  return { buffers, instructions, arenaBytes };
}

function placeAll(prog: Program, alignOf: Float64Array, order: Float64Array | undefined, far?: Uint8Array, budget?: Readonly<Record<Tier, number>>, quiet = false): Placed {
  const offset = new Float64Array(prog.buffers.length);
  const arenaBytes: Record<Tier, number> = { gpu: 0, cpu: 0, nvme: 0 };
  const extra = new Map<number, number[]>();
  const span = (b: { id: number; sizeBytes: number }) => roundUp(b.sizeBytes, alignOf[b.id]);
  for (const tier of ['gpu', 'cpu', 'nvme'] as Tier[]) {
    const mine = prog.buffers.filter((b) => b.tier === tier);
    let top = 0, peak = 0;
    for (const b of persistentOrder(mine, tier, order)) {
      offset[b.id] = roundUp(top, alignOf[b.id]);
      peak = offset[b.id] + b.sizeBytes;
      top = roundUp(offset[b.id] + span(b), ALIGN_BYTES);
    }
    const moving = mine.filter((b) => !(b.allocAt < 0 && b.freeAt < 0));
    const allocs = [...moving].sort((a, b) => Math.max(a.allocAt, -1) - Math.max(b.allocAt, -1) || a.id - b.id);
    const frees = moving.filter((b) => b.freeAt >= 0).sort((a, b) => a.freeAt - b.freeAt || a.id - b.id);
    const list = new FreeList(top);
    const last = new LastOccupant();
    let f = 0;
    for (const b of allocs) {
      const at = Math.max(b.allocAt, -1);
      for (; f < frees.length && frees[f].freeAt < at; f++) {
        const d = frees[f];
        list.free(offset[d.id], offset[d.id] + span(d));
        last.set(offset[d.id], offset[d.id] + span(d), d.freeAt);
      }
      let lo: number;
      if (far?.[b.id] && budget) lo = list.allocFar(span(b), alignOf[b.id], budget[tier], (at) => last.latest(at, at + span(b)));
      else if (quiet && budget && b.allocAt >= 0) {
        const mine = prog.instructions[b.allocAt].stream;
        lo = list.allocQuiet(span(b), alignOf[b.id], budget[tier], (at) => last.latestWhere(at, at + span(b), (w) => prog.instructions[w].stream !== mine));
      } else lo = list.alloc(span(b), alignOf[b.id]);
      offset[b.id] = lo;
      peak = Math.max(peak, lo + b.sizeBytes);
      for (const w of last.take(lo, lo + span(b))) {
        if (b.allocAt >= 0 && prog.instructions[w].stream !== prog.instructions[b.allocAt].stream) {
          const list = extra.get(b.allocAt);
          if (list) list.push(w); else extra.set(b.allocAt, [w]);
        }
      }
    }
    arenaBytes[tier] = peak;
  }
  return { offset, extra, arenaBytes };
}
