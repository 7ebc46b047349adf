// Memory-gated schedule of a program: Program + each instruction's duration +
// a byte budget per tier -> when each instruction starts and ends, for the
// arena's placement in time order (arena.ts, ReuseTiming byTime).
//
// Takes the program (instructions with their waits; buffers with their first
// write and free), each instruction's seconds, the producer each copy follows
// (simulate.ts followedProducers, -1 for none) and a budget per tier. Gives a
// schedule in which every stream runs its instructions in program order and
// each starts when its stream is free and its waits have ended (a following
// copy once its producer has started; it ends no earlier than that producer),
// as the simulator's rule without its overheads and NVMe batches, and also
// only when the bytes its first writes take fit in the budget beside what is
// alive then (a buffer's bytes come back when its free ends). So a prefetch
// runs ahead only as far as memory lets it: the schedule the program could
// have with arenas of that size, fragmentation aside. Instructions start in
// time order (the one that can start earliest; ties by id). When nothing can
// start for want of room, the lowest such instruction starts anyway (the
// budget is then exceeded there). Keeps true: per stream, program order; a
// start is at or after every wait's end (a follower's: its producer's start).
// Cost: O(instructions x streams x pending frees) at worst.

import type { Tier } from '../cost/cost.js';
import type { StreamName } from '../plan/types.js';
import { STREAMS } from '../plan/types.js';
import type { Program } from './program.js';

const TIERS: Tier[] = ['gpu', 'cpu', 'nvme'];

export function gatedSchedule(prog: Program, seconds: (instruction: number) => number, follows: Int32Array, budget: Readonly<Record<Tier, number>>): { start: Float64Array; end: Float64Array } {
  const ins = prog.instructions, n = ins.length;
  const start = new Float64Array(n).fill(NaN), end = new Float64Array(n).fill(NaN);
  // bytes each instruction takes (first writes) and gives back (frees), per tier; the room left once the
  // persistent buffers and those alive at the step's start are in
  const takes = new Map<number, Record<Tier, number>>(), gives = new Map<number, Record<Tier, number>>();
  const room: Record<Tier, number> = { ...budget };
  const add = (m: Map<number, Record<Tier, number>>, i: number, t: Tier, b: number) => { let r = m.get(i); if (!r) m.set(i, r = { gpu: 0, cpu: 0, nvme: 0 }); r[t] += b; };
  for (const b of prog.buffers) {
    if (b.allocAt < 0) room[b.tier] -= b.sizeBytes; else add(takes, b.allocAt, b.tier, b.sizeBytes);
    if (b.freeAt >= 0) add(gives, b.freeAt, b.tier, b.sizeBytes);
  }
  // frees scheduled but not yet ended, per tier, by end time
  const pending: Record<Tier, [number, number][]> = { gpu: [], cpu: [], nvme: [] };
  const queue: number[][] = STREAMS.map(() => []);
  const streamOf = new Map<StreamName, number>(STREAMS.map((s, k) => [s, k]));
  for (let i = 0; i < n; i++) queue[streamOf.get(ins[i].stream)!].push(i);
  const head = new Int32Array(STREAMS.length), streamFree = new Float64Array(STREAMS.length);
  // the earliest time at or after t when `need` more bytes fit in the tier (Infinity: not before some unscheduled free)
  const fitsAt = (tier: Tier, need: number, t: number): number => {
    let free = room[tier];
    if (need <= free) return t;
    for (const [e, b] of pending[tier]) { free += b; if (need <= free) return Math.max(t, e); }
    return Infinity;
  };
  for (let done = 0; done < n; done++) {
    let pick = -1, pickAt = Infinity, forced = -1, forcedAt = Infinity;
    for (let k = 0; k < STREAMS.length; k++) {
      if (head[k] >= queue[k].length) continue;
      const i = queue[k][head[k]];
      let ready = streamFree[k], waiting = false;
      for (const w of ins[i].waits) { if (Number.isNaN(end[w])) { waiting = true; break; } ready = Math.max(ready, w === follows[i] ? start[w] : end[w]); }
      if (waiting) continue;
      let at = ready;
      const need = takes.get(i);
      if (need) for (const t of TIERS) if (need[t] > 0) at = Math.max(at, fitsAt(t, need[t], ready));
      if (at < pickAt || (at === pickAt && i < pick)) { pick = i; pickAt = at; }
      if (forced < 0 || i < forced) { forced = i; forcedAt = ready; }
    }
    if (pick < 0) { pick = forced; pickAt = forcedAt; } // no room for anything: the lowest goes over the budget
    const i = pick, k = streamOf.get(ins[i].stream)!;
    start[i] = pickAt;
    end[i] = Math.max(pickAt + seconds(i), follows[i] >= 0 ? end[follows[i]] : 0);
    streamFree[k] = end[i];
    head[k]++;
    // frees that ended by this start give their bytes back; this one's first writes take theirs
    for (const t of TIERS) {
      const p = pending[t];
      let j = 0;
      while (j < p.length && p[j][0] <= pickAt) room[t] += p[j++][1];
      if (j) p.splice(0, j);
    }
    const need = takes.get(i), back = gives.get(i);
    if (need) for (const t of TIERS) room[t] -= need[t];
    if (back) for (const t of TIERS) if (back[t] > 0) {
      const p = pending[t];
      let j = p.length;
      while (j > 0 && p[j - 1][0] > end[i]) j--;
      p.splice(j, 0, [end[i], back[t]]);
    }
  }
  return { start, end };
}
