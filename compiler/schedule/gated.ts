// Memory-gated schedule of a program: Program + each instruction's duration +
// a byte budget per tier -> when each instruction starts and ends, for the
// arena's placement in time order (arena.ts assignInTime).
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
// have with arenas of that size, fragmentation aside. Instructions are
// picked one at a time, the one that can start earliest (ties by id); plain,
// a later pick may start before an earlier one (its stream and waits allow
// it), so the room it saw is approximate, and a prefetch that runs ahead can
// take the room an earlier GPU op then needs. Reserving, time only moves on
// (no pick starts before the last), and an instruction starts only when the
// room left beside it covers what the instructions not yet started below it
// in the program need, run in program order (a segment tree of (sum, largest
// prefix) of takes and gives per tier): the program order's own need is
// never given away (gpt3-13b/h100's leanest candidate: 80.15 GB at once
// plain, 79.96 of 80 reserving, at the same makespan). When nothing can
// start for want of room, the lowest such instruction starts anyway (the
// budget is then exceeded there). Keeps true: per stream, program order; a
// start is at or after every wait's end (a follower's: its producer's start).
// Cost: O(instructions x streams x (pending frees + log instructions)) at worst.

import type { Tier } from '../cost/cost.js';
import type { StreamName } from '../plan/types.js';
import { STREAMS } from '../plan/types.js';
import type { Program } from './program.js';

const TIERS: Tier[] = ['gpu', 'cpu', 'nvme'];

export function gatedSchedule(prog: Program, seconds: (instruction: number) => number, follows: Int32Array, budget: Readonly<Record<Tier, number>>, reserving = false): { start: Float64Array; end: Float64Array } {
  const ins = prog.instructions, n = ins.length;
  const start = new Float64Array(n).fill(NaN), end = new Float64Array(n).fill(NaN);
  // bytes each instruction takes (first writes) and gives back (frees), per
  // tier (its index in TIERS: plain arrays, not records keyed by name, in the
  // loops below that run for every instruction); the room left once the
  // persistent buffers and those alive at the step's start are in
  // (per tier, indexed by instruction; takesAny/givesAny: whether it takes or gives any)
  const T = TIERS.length;
  const takes = TIERS.map(() => new Float64Array(n)), gives = TIERS.map(() => new Float64Array(n));
  const takesAny = new Uint8Array(n), givesAny = new Uint8Array(n);
  const room = TIERS.map((t) => budget[t]);
  for (const b of prog.buffers) {
    const t = TIERS.indexOf(b.tier);
    if (b.allocAt < 0) room[t] -= b.sizeBytes; else { takes[t][b.allocAt] += b.sizeBytes; takesAny[b.allocAt] = 1; }
    if (b.freeAt >= 0) { gives[t][b.freeAt] += b.sizeBytes; givesAny[b.freeAt] = 1; }
  }
  // reserving: the most the instructions not yet started below i need beside
  // what is alive, run in program order from here — per tier, the largest
  // prefix sum of (takes, then less gives) over the unstarted ones in
  // [lowest unstarted, i): a segment tree of (sum, largest prefix) per tier,
  // an instruction's leaf zeroed when it starts
  const size = reserving ? 1 << Math.ceil(Math.log2(Math.max(n, 1))) : 0;
  const sums = TIERS.map(() => new Float64Array(2 * size)), prefix = TIERS.map(() => new Float64Array(2 * size));
  const pull = (s: Float64Array, pre: Float64Array, v: number) => {
    const l = 2 * v, r = l + 1;
    s[v] = s[l] + s[r];
    pre[v] = Math.max(pre[l], s[l] + pre[r]);
  };
  if (reserving) {
    for (let t = 0; t < T; t++) for (let i = 0; i < n; i++) { sums[t][size + i] = takes[t][i] - gives[t][i]; prefix[t][size + i] = takes[t][i]; }
    for (let t = 0; t < T; t++) for (let v = size - 1; v >= 1; v--) pull(sums[t], prefix[t], v);
  }
  const started = (i: number) => {
    if (!reserving) return;
    for (let t = 0; t < T; t++) {
      const s = sums[t], pre = prefix[t];
      let v = size + i;
      if (s[v] === 0 && pre[v] === 0) continue; // (a leaf already zero: its tree is unchanged)
      s[v] = pre[v] = 0;
      for (v >>= 1; v >= 1; v >>= 1) pull(s, pre, v);
    }
  };
  let lowest = 0, now = 0;
  const right = new Int32Array(64); // (reserve's right-hand nodes: one per tree level at most)
  const reserve = (t: number, i: number): number => {
    if (!reserving || i <= lowest) return 0;
    const s = sums[t], pre = prefix[t];
    // [lowest, i): the left-to-right combination of the covering nodes
    let sum = 0, most = 0, rights = 0;
    for (let lo = lowest + size, hi = i + size; lo < hi; lo >>= 1, hi >>= 1) {
      if (lo & 1) { most = Math.max(most, sum + pre[lo]); sum += s[lo]; lo++; }
      if (hi & 1) right[rights++] = --hi;
    }
    for (let k = rights - 1; k >= 0; k--) { const v = right[k]; most = Math.max(most, sum + pre[v]); sum += s[v]; }
    return most;
  };
  // frees scheduled but not yet ended, per tier, by end time
  const pending: [number, number][][] = TIERS.map(() => []);
  const queue: number[][] = STREAMS.map(() => []);
  const streamOf = new Map<StreamName, number>(STREAMS.map((s, k) => [s, k]));
  for (let i = 0; i < n; i++) queue[streamOf.get(ins[i].stream)!].push(i);
  const head = new Int32Array(STREAMS.length), streamFree = new Float64Array(STREAMS.length);
  // the earliest time at or after t when `need` more bytes fit in the tier (Infinity: not before some unscheduled free)
  const fitsAt = (tier: number, need: number, t: number): number => {
    let free = room[tier];
    if (need <= free) return t;
    const p = pending[tier];
    for (let j = 0; j < p.length; j++) { free += p[j][1]; if (need <= free) return Math.max(t, p[j][0]); }
    return Infinity;
  };
  // per stream, when its next instruction's stream and waits let it start
  // (NaN: a wait has not been scheduled yet): fixed once known, until the
  // stream moves on
  const known = new Float64Array(STREAMS.length).fill(NaN);
  for (let done = 0; done < n; done++) {
    let pick = -1, pickAt = Infinity, forced = -1, forcedAt = Infinity;
    for (let k = 0; k < STREAMS.length; k++) {
      if (head[k] >= queue[k].length) continue;
      const i = queue[k][head[k]];
      if (Number.isNaN(known[k])) {
        let base = streamFree[k], waiting = false;
        for (const w of ins[i].waits) { if (Number.isNaN(end[w])) { waiting = true; break; } base = Math.max(base, w === follows[i] ? start[w] : end[w]); }
        if (waiting) continue;
        known[k] = base;
      }
      const ready = reserving ? Math.max(known[k], now) : known[k];
      let at = ready;
      if (takesAny[i]) for (let t = 0; t < T; t++) if (takes[t][i] > 0) at = Math.max(at, fitsAt(t, takes[t][i] + reserve(t, i), ready));
      if (at < pickAt || (at === pickAt && i < pick)) { pick = i; pickAt = at; }
      if (forced < 0 || i < forced) { forced = i; forcedAt = ready; }
    }
    if (pick < 0) { pick = forced; pickAt = forcedAt; } // no room for anything: the lowest goes over the budget
    const i = pick, k = streamOf.get(ins[i].stream)!;
    now = Math.max(now, pickAt);
    start[i] = pickAt;
    end[i] = Math.max(pickAt + seconds(i), follows[i] >= 0 ? end[follows[i]] : 0);
    streamFree[k] = end[i];
    head[k]++;
    known[k] = NaN;
    started(i);
    while (lowest < n && !Number.isNaN(start[lowest])) lowest++;
    // frees that ended by this start give their bytes back; this one's first writes take theirs
    for (let t = 0; t < T; t++) {
      const p = pending[t];
      let j = 0;
      while (j < p.length && p[j][0] <= pickAt) room[t] += p[j++][1];
      if (j) p.splice(0, j);
    }
    if (takesAny[i]) for (let t = 0; t < T; t++) room[t] -= takes[t][i];
    if (givesAny[i]) for (let t = 0; t < T; t++) if (gives[t][i] > 0) {
      const p = pending[t];
      let j = p.length;
      while (j > 0 && p[j - 1][0] > end[i]) j--;
      p.splice(j, 0, [end[i], gives[t][i]]);
    }
  }
  return { start, end };
}
