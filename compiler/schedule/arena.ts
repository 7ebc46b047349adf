// Arena offsets: Program -> static byte offsets in one arena per tier, and the
// waits that make reusing an address safe across streams.
//
// Takes the buffers with their live ranges [allocAt, freeAt] (-1 = whole run).
// Gives every buffer an offset: buffers alive for the whole run are packed
// first, then transient buffers are placed largest first at the lowest offset
// that no buffer with an overlapping live range occupies (greedy by size, the
// usual static-arena heuristic). Then, for every transient buffer, its first
// writer waits for the free of every earlier buffer whose bytes it reuses and
// that a later occupant of those bytes has not already waited for.
// Keeps true: two buffers whose live ranges overlap never overlap in memory;
// no write lands in memory before the previous occupant's last access has
// completed. Deterministic: ties broken by buffer id. Cost: O(B^2) worst case
// in the overlap scan, B = buffers.

import type { Tier } from '../cost/cost.js';
import type { PlanBuffer, PlanInstruction } from '../plan/types.js';
import type { Program } from './program.js';

export const ALIGN_BYTES = 64;
const align = (n: number) => Math.ceil(n / ALIGN_BYTES) * ALIGN_BYTES;

export interface Arenas {
  readonly buffers: readonly PlanBuffer[];
  readonly instructions: readonly PlanInstruction[];
  readonly arenaBytes: Readonly<Record<Tier, number>>;
}

const END = Number.MAX_SAFE_INTEGER;
const startOf = (b: { allocAt: number }) => (b.allocAt < 0 ? -1 : b.allocAt);
const endOf = (b: { freeAt: number }) => (b.freeAt < 0 ? END : b.freeAt);

export function assignOffsets(prog: Program): Arenas {
  const offset = new Float64Array(prog.buffers.length);
  const arenaBytes: Record<Tier, number> = { gpu: 0, cpu: 0, nvme: 0 };
  for (const tier of ['gpu', 'cpu', 'nvme'] as Tier[]) {
    const mine = prog.buffers.filter((b) => b.tier === tier);
    let top = 0;
    const whole = mine.filter((b) => b.allocAt < 0 && b.freeAt < 0);
    for (const b of whole) { offset[b.id] = top; top = align(top + b.sizeBytes); }
    const base = top;
    const rest = mine.filter((b) => !(b.allocAt < 0 && b.freeAt < 0)).sort((a, b) => b.sizeBytes - a.sizeBytes || a.id - b.id);
    const placed: { start: number; end: number; lo: number; hi: number }[] = [];
    let peak = top;
    for (const b of rest) {
      const s = startOf(b), e = endOf(b);
      const busy = placed.filter((q) => q.start <= e && s <= q.end).sort((x, y) => x.lo - y.lo);
      let at = base;
      const size = align(b.sizeBytes);
      for (const q of busy) {
        if (q.lo >= at + size) break;
        if (q.hi > at) at = q.hi;
      }
      offset[b.id] = at;
      placed.push({ start: s, end: e, lo: at, hi: at + size });
      peak = Math.max(peak, at + b.sizeBytes);
    }
    arenaBytes[tier] = Math.max(peak, top > 0 ? top : 0);
  }
  const buffers: PlanBuffer[] = prog.buffers.map((b) => ({ ...b, offsetBytes: offset[b.id] }));
  return { buffers, instructions: addReuseWaits(buffers, prog.instructions), arenaBytes };
}

/** The first write of each transient buffer waits for the frees of the buffers whose bytes it takes over. */
function addReuseWaits(buffers: readonly PlanBuffer[], ins: readonly PlanInstruction[]): PlanInstruction[] {
  const extra: Set<number>[] = ins.map(() => new Set());
  for (const tier of ['gpu', 'cpu', 'nvme'] as Tier[]) {
    const freed = buffers.filter((b) => b.tier === tier && b.freeAt >= 0).sort((a, b) => b.freeAt - a.freeAt);
    for (const b of buffers) {
      if (b.tier !== tier || b.allocAt < 0) continue;
      const lo = b.offsetBytes, hi = b.offsetBytes + b.sizeBytes;
      const covered: [number, number][] = [];
      for (const a of freed) {
        if (a.freeAt >= b.allocAt) continue;
        const olo = Math.max(lo, a.offsetBytes), ohi = Math.min(hi, a.offsetBytes + a.sizeBytes);
        if (olo >= ohi) continue;
        if (isCovered(covered, olo, ohi)) continue;
        if (ins[a.freeAt].stream !== ins[b.allocAt].stream) extra[b.allocAt].add(a.freeAt);
        covered.push([a.offsetBytes, a.offsetBytes + a.sizeBytes]);
        if (isCovered(covered, lo, hi)) break;
      }
    }
  }
  return ins.map((i) => (extra[i.id].size === 0 ? i : { ...i, waits: [...new Set([...i.waits, ...extra[i.id]])].sort((a, b) => a - b) }));
}

function isCovered(intervals: [number, number][], lo: number, hi: number): boolean {
  const sorted = [...intervals].sort((a, b) => a[0] - b[0]);
  let at = lo;
  for (const [s, e] of sorted) {
    if (s > at) break;
    if (e > at) at = e;
    if (at >= hi) return true;
  }
  return at >= hi;
}
