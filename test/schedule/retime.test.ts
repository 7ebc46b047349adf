// Reuse judged by when frees end (compiler/schedule/arena.ts ReuseTiming;
// compiler/partition/built.ts retimed): a quiet placement out of fresh bytes reuses the
// range whose free has ended by the time its writer is ready, not the one
// whose free stands earliest in the program; compile keeps such a placement
// only when it simulates faster, and the plan still verifies.
import { describe, expect, it } from 'vitest';
import { assignInTime, assignOffsets } from '../../compiler/schedule/arena.js';
import { gatedSchedule } from '../../compiler/schedule/gated.js';
import { buildProgram, type Program } from '../../compiler/schedule/program.js';
import { stateOrder } from '../../compiler/schedule/state-order.js';
import { simulate } from '../../compiler/simulate/simulate.js';
import { verifyPlan } from '../../compiler/simulate/verify-plan.js';
import { compiledOnce } from '../compiled-once.js';

/**
 * GPU buffers X, Z, W of 128 bytes (and S between X and Z, so their free
 * ranges stay apart). X is made on the GPU (1 s) and copied out on d2h (10 s),
 * so its free, early in the program, ends at 11 s; Z is copied in on h2d
 * (0.1 s) and freed at 0.1 s, later in the program; W is made on the GPU at
 * 1 s, when X's bytes and Z's are both free in the program and the capacity
 * leaves no fresh bytes.
 */
function lateFree(): { prog: Program; seconds: number[] } {
  const buffers: Program['buffers'][number][] = [
    { id: 0, tensor: 0, tier: 'gpu', sizeBytes: 128, allocAt: 0, freeAt: 3 },   // X
    { id: 1, tensor: 1, tier: 'gpu', sizeBytes: 128, allocAt: 1, freeAt: 4 },   // Z
    { id: 2, tensor: 2, tier: 'gpu', sizeBytes: 128, allocAt: 5, freeAt: -1 },  // W
    { id: 3, tensor: 1, tier: 'cpu', sizeBytes: 128, allocAt: -1, freeAt: -1 }, // Z's home
    { id: 4, tensor: 0, tier: 'cpu', sizeBytes: 128, allocAt: 2, freeAt: -1 },  // X's copy
    { id: 5, tensor: 3, tier: 'gpu', sizeBytes: 128, allocAt: 0, freeAt: -1 },  // S
  ];
  const instructions: Program['instructions'][number][] = [
    { id: 0, stream: 'gpu', kind: 'run', op: 0, inputs: [], outputs: [0, 5], waits: [] },
    { id: 1, stream: 'h2d', kind: 'copy', op: -1, inputs: [3], outputs: [1], waits: [] },
    { id: 2, stream: 'd2h', kind: 'copy', op: -1, inputs: [0], outputs: [4], waits: [0] },
    { id: 3, stream: 'd2h', kind: 'free', op: -1, inputs: [0], outputs: [], waits: [2] },
    { id: 4, stream: 'h2d', kind: 'free', op: -1, inputs: [1], outputs: [], waits: [1] },
    { id: 5, stream: 'gpu', kind: 'run', op: 1, inputs: [], outputs: [2], waits: [] },
  ];
  return { prog: { buffers, instructions }, seconds: [1, 0.1, 10, 0, 0, 1] };
}
const cap = { gpu: 384, cpu: 1000, nvme: 0 };

describe('quiet placement by when frees end', () => {
  it('by program position, W takes the bytes freed first in the program and waits 10 s for them', () => {
    const a = assignOffsets(lateFree().prog, cap);
    expect(a.arenaBytes.gpu).toBe(384);
    expect(a.buffers[2].offsetBytes).toBe(a.buffers[0].offsetBytes);
    expect(a.instructions[5].waits).toContain(3);
  });

  it('by an estimate made as it places, W takes the bytes whose free has ended', () => {
    const { prog, seconds } = lateFree();
    const a = assignOffsets(prog, cap, undefined, { seconds: (i) => seconds[i], follows: new Int32Array(6).fill(-1) });
    expect(a.arenaBytes.gpu).toBe(384);
    expect(a.buffers[2].offsetBytes).toBe(a.buffers[1].offsetBytes);
    expect(a.instructions[5].waits).not.toContain(3);
  });

  it('by a given schedule, the same', () => {
    const { prog } = lateFree();
    const start = Float64Array.from([0, 0, 1, 11, 0.1, 1]), end = Float64Array.from([1, 0.1, 11, 11, 0.1, 2]);
    const a = assignOffsets(prog, cap, undefined, { start, end });
    expect(a.buffers[2].offsetBytes).toBe(a.buffers[1].offsetBytes);
    expect(a.instructions[5].waits).not.toContain(3);
  });

  it('where the capacity leaves room, fresh bytes first either way', () => {
    const { prog, seconds } = lateFree();
    const a = assignOffsets(prog, { ...cap, gpu: 512 }, undefined, { seconds: (i) => seconds[i], follows: new Int32Array(6).fill(-1) });
    expect(a.buffers[2].offsetBytes).toBe(a.buffers[1].offsetBytes);   // Z's free has ended: no wait, no fresh bytes
    const b = assignOffsets(prog, { ...cap, gpu: 512 });
    expect(b.buffers[2].offsetBytes).toBe(384);                         // by program position: fresh bytes
  });
});

/**
 * A prefetch that memory holds back: GPU op 0 makes A (128 bytes, 1 s), op 1
 * reads it (1 s), then A is freed; an h2d copy (0.5 s, no waits: a prefetch)
 * brings B (128 bytes) in for op 2. With room for one of them, the copy can
 * only start when A's free has ended (2 s).
 */
function prefetch(): { prog: Program; seconds: number[] } {
  const buffers: Program['buffers'][number][] = [
    { id: 0, tensor: 0, tier: 'gpu', sizeBytes: 128, allocAt: 0, freeAt: 2 },   // A
    { id: 1, tensor: 1, tier: 'gpu', sizeBytes: 128, allocAt: 3, freeAt: 5 },   // B
    { id: 2, tensor: 1, tier: 'cpu', sizeBytes: 128, allocAt: -1, freeAt: -1 }, // B's home
  ];
  const instructions: Program['instructions'][number][] = [
    { id: 0, stream: 'gpu', kind: 'run', op: 0, inputs: [], outputs: [0], waits: [] },
    { id: 1, stream: 'gpu', kind: 'run', op: 1, inputs: [0], outputs: [], waits: [] },
    { id: 2, stream: 'gpu', kind: 'free', op: -1, inputs: [0], outputs: [], waits: [] },
    { id: 3, stream: 'h2d', kind: 'copy', op: -1, inputs: [2], outputs: [1], waits: [] },
    { id: 4, stream: 'gpu', kind: 'run', op: 2, inputs: [1], outputs: [], waits: [3] },
    { id: 5, stream: 'gpu', kind: 'free', op: -1, inputs: [1], outputs: [], waits: [] },
  ];
  return { prog: { buffers, instructions }, seconds: [1, 1, 0, 0.5, 1, 0] };
}
const none = new Int32Array(6).fill(-1);
/** assignInTime's arenas, failing the test where it names an overflowing tier instead. */
function placed(r: ReturnType<typeof assignInTime>) {
  if ('overflows' in r) throw new Error(`the ${r.overflows} arena overflows`);
  return r;
}

describe('placement in the order of a schedule gated by memory', () => {
  it('the gated schedule holds a prefetch back until a free makes room, and not otherwise', () => {
    const { prog, seconds } = prefetch();
    const tight = gatedSchedule(prog, (i) => seconds[i], none, { gpu: 128, cpu: 1000, nvme: 0 });
    expect(tight.start[3]).toBe(2);
    expect(tight.end[4]).toBe(3.5);
    const roomy = gatedSchedule(prog, (i) => seconds[i], none, { gpu: 256, cpu: 1000, nvme: 0 });
    expect(roomy.start[3]).toBe(0);
    expect(roomy.end[4]).toBe(3);
  });

  it('reserving, a prefetch never takes the room an earlier GPU op needs; plain, it can', () => {
    // GPU: op0 makes A, op1 reads A and makes C (A and C alive at once), A freed, op2 reads C, C freed;
    // then an h2d prefetch of B (no waits) for op3. 256 bytes: the program in order just fits.
    const buffers: Program['buffers'][number][] = [
      { id: 0, tensor: 0, tier: 'gpu', sizeBytes: 128, allocAt: 0, freeAt: 2 },   // A
      { id: 1, tensor: 1, tier: 'gpu', sizeBytes: 128, allocAt: 1, freeAt: 4 },   // C
      { id: 2, tensor: 2, tier: 'gpu', sizeBytes: 128, allocAt: 5, freeAt: 7 },   // B
      { id: 3, tensor: 2, tier: 'cpu', sizeBytes: 128, allocAt: -1, freeAt: -1 }, // B's home
    ];
    const instructions: Program['instructions'][number][] = [
      { id: 0, stream: 'gpu', kind: 'run', op: 0, inputs: [], outputs: [0], waits: [] },
      { id: 1, stream: 'gpu', kind: 'run', op: 1, inputs: [0], outputs: [1], waits: [] },
      { id: 2, stream: 'gpu', kind: 'free', op: -1, inputs: [0], outputs: [], waits: [] },
      { id: 3, stream: 'gpu', kind: 'run', op: 2, inputs: [1], outputs: [], waits: [] },
      { id: 4, stream: 'gpu', kind: 'free', op: -1, inputs: [1], outputs: [], waits: [] },
      { id: 5, stream: 'h2d', kind: 'copy', op: -1, inputs: [3], outputs: [2], waits: [] },
      { id: 6, stream: 'gpu', kind: 'run', op: 3, inputs: [2], outputs: [], waits: [5] },
      { id: 7, stream: 'gpu', kind: 'free', op: -1, inputs: [2], outputs: [], waits: [] },
    ];
    const prog: Program = { buffers, instructions };
    const seconds = [1, 1, 0, 1, 0, 0.5, 1, 0], none8 = new Int32Array(8).fill(-1), budget = { gpu: 256, cpu: 1000, nvme: 0 };
    const peak = (s: { start: Float64Array; end: Float64Array }) => {
      const ev = buffers.filter((b) => b.tier === 'gpu').flatMap((b) => [[s.start[b.allocAt], b.sizeBytes], [s.end[b.freeAt], -b.sizeBytes]]).sort((x, y) => x[0] - y[0] || x[1] - y[1]);
      let alive = 0, most = 0;
      for (const [, d] of ev) { alive += d; most = Math.max(most, alive); }
      return most;
    };
    const plain = gatedSchedule(prog, (i) => seconds[i], none8, budget);
    expect(plain.start[5]).toBe(0);                 // the prefetch ran ahead at once...
    expect(peak(plain)).toBe(384);                  // ...and op1 went over the budget
    const kept = gatedSchedule(prog, (i) => seconds[i], none8, budget, true);
    expect(kept.start[1]).toBe(1);
    expect(kept.start[5]).toBe(2);                  // held back until A's free
    expect(peak(kept)).toBe(256);
    expect(kept.end[6]).toBe(4);                    // op3 still right after op2
  });

  it('placed in that order, B takes A\'s bytes and its copy waits for A\'s free', () => {
    const { prog, seconds } = prefetch();
    const s = gatedSchedule(prog, (i) => seconds[i], none, { gpu: 128, cpu: 1000, nvme: 0 });
    const a = placed(assignInTime(prog, { gpu: 128, cpu: 1000, nvme: 0 }, undefined, s.start, s.end));
    expect(a.arenaBytes.gpu).toBe(128);
    expect(a.buffers[1].offsetBytes).toBe(a.buffers[0].offsetBytes);
    expect(a.instructions[3].waits).toContain(2);
  });

  it('never reuses bytes whose free comes later in the program than the new writer, even when the schedule frees them first', () => {
    const { prog } = prefetch();
    // a schedule in which A's free (instruction 2) ends before B's copy (3) starts, but the copy is moved before it in the program
    const instructions = prog.instructions.map((x) => (x.id === 3 ? { ...x, id: 0 } : x.id < 3 ? { ...x, id: x.id + 1, waits: x.waits.map((w) => w + 1) } : x));
    instructions.sort((x, y) => x.id - y.id);
    const buffers = [{ ...prog.buffers[0], allocAt: 1, freeAt: 3 }, { ...prog.buffers[1], allocAt: 0 }, prog.buffers[2]];
    const moved: Program = { buffers, instructions };
    const start = Float64Array.from([2, 0, 1, 2, 2.5, 3.5]), end = Float64Array.from([2.5, 1, 2, 2, 3.5, 3.5]);
    const a = placed(assignInTime(moved, { gpu: 256, cpu: 1000, nvme: 0 }, undefined, start, end));
    expect(a.buffers[1].offsetBytes).not.toBe(a.buffers[0].offsetBytes);
    for (const x of a.instructions) for (const w of x.waits) expect(w).toBeLessThan(x.id);
    // nor when the capacity leaves no room beside A (largest first neither): then there is no placement, and the tier is named
    expect(assignInTime(moved, { gpu: 128, cpu: 1000, nvme: 0 }, undefined, start, end)).toEqual({ overflows: 'gpu' });
  });

  it('where the time order leaves a hole too small for a later large buffer, the largest first packs the same lifetimes into the live peak', () => {
    // A (64 bytes) and B (64) made at 0; A freed at 2, when C (128) is made; B freed at 4.
    // In time order A takes 0, B 64, and C finds only A's 64 bytes free: 256 in all.
    // Largest first C takes 0, A (over before C begins) 0 too, B 128: 192, the live peak.
    const buffers: Program['buffers'][number][] = [
      { id: 0, tensor: 0, tier: 'gpu', sizeBytes: 64, allocAt: 0, freeAt: 2 },  // A
      { id: 1, tensor: 1, tier: 'gpu', sizeBytes: 64, allocAt: 0, freeAt: 5 },  // B
      { id: 2, tensor: 2, tier: 'gpu', sizeBytes: 128, allocAt: 3, freeAt: -1 }, // C
    ];
    const instructions: Program['instructions'][number][] = [
      { id: 0, stream: 'gpu', kind: 'run', op: 0, inputs: [], outputs: [0, 1], waits: [] },
      { id: 1, stream: 'gpu', kind: 'run', op: 1, inputs: [0], outputs: [], waits: [] },
      { id: 2, stream: 'gpu', kind: 'free', op: -1, inputs: [0], outputs: [], waits: [] },
      { id: 3, stream: 'gpu', kind: 'run', op: 2, inputs: [], outputs: [2], waits: [] },
      { id: 4, stream: 'gpu', kind: 'run', op: 3, inputs: [1], outputs: [], waits: [] },
      { id: 5, stream: 'gpu', kind: 'free', op: -1, inputs: [1], outputs: [], waits: [] },
    ];
    const prog: Program = { buffers, instructions };
    const start = Float64Array.from([0, 1, 2, 2, 3, 4]), end = Float64Array.from([1, 2, 2, 3, 4, 4]);
    const roomy = placed(assignInTime(prog, { gpu: 256, cpu: 0, nvme: 0 }, undefined, start, end));
    expect(roomy.arenaBytes.gpu).toBe(256); // in time order where that fits
    const a = placed(assignInTime(prog, { gpu: 192, cpu: 0, nvme: 0 }, undefined, start, end));
    expect(a.arenaBytes.gpu).toBe(192);
    expect(a.buffers[2].offsetBytes).toBe(0);
    expect(a.buffers[0].offsetBytes).toBe(0);
    expect(a.buffers[1].offsetBytes).toBe(128);
  });

  it('where the largest first leaves a hole too small too, the longest-lived first packs the GPU into the live peak', () => {
    // C (192) lives [0, 2), D (128) [1, 7), B (128) [2, 7), A (128) [5, 9): 384 alive at once in [5, 7).
    // Largest first: C 0, D 192, B 0 (after C), and A finds only 64 bytes between B and D: 448 in all.
    // Longest-lived first: D 0, B 128, A 256, C 128 (B starts as C ends): 384.
    const buffers: Program['buffers'][number][] = [
      { id: 0, tensor: 0, tier: 'gpu', sizeBytes: 128, allocAt: 4, freeAt: 7 }, // A
      { id: 1, tensor: 1, tier: 'gpu', sizeBytes: 128, allocAt: 3, freeAt: 5 }, // B
      { id: 2, tensor: 2, tier: 'gpu', sizeBytes: 192, allocAt: 0, freeAt: 2 }, // C
      { id: 3, tensor: 3, tier: 'gpu', sizeBytes: 128, allocAt: 1, freeAt: 6 }, // D
    ];
    const made = (id: number, out: number) => ({ id, stream: 'gpu' as const, kind: 'run' as const, op: id, inputs: [], outputs: [out], waits: [] });
    const freed = (id: number, buf: number) => ({ id, stream: 'gpu' as const, kind: 'free' as const, op: -1, inputs: [buf], outputs: [], waits: [] });
    const prog: Program = { buffers, instructions: [made(0, 2), made(1, 3), freed(2, 2), made(3, 1), made(4, 0), freed(5, 1), freed(6, 3), freed(7, 0)] };
    const start = Float64Array.from([0, 1, 2, 2, 5, 7, 7, 9]), end = Float64Array.from([0.5, 1.5, 2, 2.5, 5.5, 7, 7, 9]);
    const a = placed(assignInTime(prog, { gpu: 384, cpu: 0, nvme: 0 }, undefined, start, end));
    expect(a.arenaBytes.gpu).toBe(384);
    expect(a.buffers.map((b) => b.offsetBytes)).toEqual([256, 128, 128, 0]);
    // and below the live peak nothing places
    expect(assignInTime(prog, { gpu: 383, cpu: 0, nvme: 0 }, undefined, start, end)).toEqual({ overflows: 'gpu' });
  });
});

describe('compile keeps the faster arena placement', () => {
  it('gpt2-1.5b on 16 GB: faster than its placement placed by program position, never under its floor; verifies', async () => {
    const plan = await compiledOnce({ model: 'models/gpt.ts', preset: 'gpt2-1.5b', hw: 'v100-32g', gpuMemBytes: 16e9, precision: 'fp16', batch: 1, seq: 1024 });
    expect(verifyPlan(plan)).toEqual([]);
    const g = plan.graph, p = plan.placement, hw = plan.hardware;
    const prog = buildProgram(g, p);
    const byPosition = assignOffsets(prog, { gpu: hw.gpu.capacityBytes, cpu: hw.cpu.capacityBytes, nvme: hw.nvme.capacityBytes }, stateOrder(g, prog));
    const quiet = simulate(g, p, byPosition.buffers, byPosition.instructions, hw).stepSeconds;
    const floor = simulate(g, p, plan.buffers, prog.instructions, hw).stepSeconds;   // the program without the arena's waits
    expect(plan.predicted.stepSeconds).toBeLessThan(0.95 * quiet);
    expect(plan.predicted.stepSeconds).toBeGreaterThanOrEqual(floor);
    for (const t of ['gpu', 'cpu'] as const) expect(plan.tiers[t].peakBytes).toBeLessThanOrEqual(plan.tiers[t].capacityBytes);
  }, 120_000);
});

describe('largest-first placement of a schedule: the block skip finds the offsets a buffer-by-buffer scan finds', () => {
  // A seeded random program of 600 GPU buffers (sizes 64 B-16 kB, lifetimes
  // of 1-80 instructions, frees on two streams so that time and program order
  // cross), scheduled one instruction per second. The reference places them
  // largest first, each in the lowest gap between the placed buffers it may not
  // share bytes with, scanning every placed buffer (arena.ts placeBySize as it
  // was before its blocks of 64 were passed in one step); given exactly the
  // reference's bytes, the time-order placement overflows, and assignInTime's
  // largest-first placement must put every buffer where the reference does.
  it('600 buffers, offsets identical to the reference scan', () => {
    let seed = 12345;
    const rand = () => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return seed / 2 ** 31; };
    const n = 1200, buffers: Program['buffers'][number][] = [], frees: number[][] = Array.from({ length: n }, () => []);
    for (let id = 0; id < 600; id++) {
      const allocAt = Math.floor(rand() * (n - 100)), freeAt = allocAt + 1 + Math.floor(rand() * 80);
      buffers.push({ id, tensor: id, tier: 'gpu', sizeBytes: 64 * (1 + Math.floor(rand() ** 3 * 256)), allocAt, freeAt });
      frees[freeAt].push(id);
    }
    const instructions: Program['instructions'][number][] = [];
    for (let i = 0; i < n; i++) {
      const outputs = buffers.filter((b) => b.allocAt === i).map((b) => b.id);
      instructions.push({ id: i, stream: frees[i].length && i % 2 ? 'd2h' : 'gpu', kind: 'run', op: i, inputs: frees[i], outputs, waits: [] });
    }
    const prog: Program = { buffers, instructions };
    // one instruction per second, but the d2h stream's run 3 s late (its frees end later than the program says)
    const start = Float64Array.from(instructions, (x) => x.id + (x.stream === 'd2h' ? 3 : 0)), end = start.map((s) => s + 1);
    // the reference: largest first, every placed buffer scanned in offset order
    const mine = [...buffers].sort((a, b) => b.sizeBytes - a.sizeBytes || start[a.allocAt] - start[b.allocAt] || a.id - b.id);
    const placedRef: { off: number; end: number; lo: number; hi: number; alloc: number; free: number }[] = [];
    const offset = new Float64Array(buffers.length);
    let arena = 0;
    for (const b of mine) {
      const lo0 = start[b.allocAt], hi0 = end[b.freeAt];
      let lo = 0;
      for (const q of placedRef) {
        if (lo + b.sizeBytes <= q.off) break;
        if (q.end <= lo) continue;
        if (q.hi <= lo0 && q.free < b.allocAt) continue;
        if (hi0 <= q.lo && b.freeAt < q.alloc) continue;
        lo = q.end;
      }
      offset[b.id] = lo;
      arena = Math.max(arena, lo + b.sizeBytes);
      let at = 0;
      while (at < placedRef.length && placedRef[at].off <= lo) at++;
      placedRef.splice(at, 0, { off: lo, end: lo + b.sizeBytes, lo: lo0, hi: hi0, alloc: b.allocAt, free: b.freeAt });
    }
    const a = placed(assignInTime(prog, { gpu: arena, cpu: 0, nvme: 0 }, undefined, start, end));
    expect(a.arenaBytes.gpu).toBe(arena);
    let differ = 0;
    for (const b of buffers) if (a.buffers[b.id].offsetBytes !== offset[b.id]) differ++;
    expect(differ).toBe(0);
    // (that was the largest-first placement: with room to spare assignInTime
    // keeps the time-order one, which puts buffers elsewhere and takes more)
    const roomy = placed(assignInTime(prog, { gpu: 1e12, cpu: 0, nvme: 0 }, undefined, start, end));
    expect(roomy.arenaBytes.gpu).toBeGreaterThan(arena);
    expect(buffers.some((b) => roomy.buffers[b.id].offsetBytes !== offset[b.id])).toBe(true);
  });
});
