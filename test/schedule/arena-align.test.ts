// NVMe block alignment in the arenas (compiler/schedule/arena.ts): every nvme
// buffer, and every cpu buffer of 64 KiB or more an nvme copy reads or writes,
// starts on a 4096-byte boundary and takes whole blocks, so no two nvme buffers
// that are live at once share a block (the store then writes without reading
// edge blocks); small cpu buffers stay 64-byte aligned. The free list's
// aligned allocation keeps the bytes it skips free.
import { describe, expect, it } from 'vitest';
import { FreeList } from '../../compiler/schedule/intervals.js';
import { assignOffsets, NVME_ALIGN_BYTES, ZERO_COPY_MIN_BYTES } from '../../compiler/schedule/arena.js';
import type { Program } from '../../compiler/schedule/program.js';
import { verifyPlan } from '../../compiler/simulate/verify-plan.js';
import { compile } from '../../src/compile.js';

describe('free list with alignment', () => {
  it('starts at multiples of the alignment and keeps the skipped bytes free', () => {
    const f = new FreeList(0);
    expect(f.alloc(100)).toBe(0);
    expect(f.alloc(10, 4096)).toBe(4096);        // [100, 4096) stays free
    expect(f.alloc(3000)).toBe(100);             // and is found again
    f.free(0, 100);
    expect(f.alloc(64, 64)).toBe(0);
    expect(f.top).toBe(4106);
    expect(f.alloc(5000, 4096)).toBe(8192);      // the top rounds up; [4106, 8192) free
    expect(f.alloc(3500, 4)).toBe(4108);         // the first multiple of 4 of the range that fits
  });

  it('extends a free range that ends at the top from its first aligned byte', () => {
    const f = new FreeList(0);
    f.alloc(5000);
    f.free(0, 5000);
    expect(f.alloc(8192, 4096)).toBe(0);
    expect(f.top).toBe(8192);
    const g = new FreeList(100);
    g.alloc(50);                                 // [100, 150)
    g.free(100, 150);
    expect(g.alloc(10, 4096)).toBe(4096);
    expect(g.alloc(50)).toBe(100);               // [100, 4096) was kept
  });

  it('quiet allocation: a range whose reuse adds no wait, else fresh bytes within the budget, else the oldest free', () => {
    const f = new FreeList(0);
    for (let k = 0; k < 4; k++) f.alloc(100);    // [0, 400)
    f.free(0, 100); f.free(200, 300);
    // score: < 0 = no wait (range at 200), else the age of its free (range at 0 freed later)
    const score = (at: number) => (at === 200 ? -1 : at === 0 ? 7 : 3);
    expect(f.allocQuiet(100, 1, 500, score)).toBe(200);
    // no quiet range left: fresh bytes while the budget allows
    expect(f.allocQuiet(100, 1, 500, score)).toBe(400);
    expect(f.top).toBe(500);
    // budget spent: the fitting range with the lowest score
    expect(f.allocQuiet(100, 1, 500, score)).toBe(0);
  });
});

describe('nvme plans', () => {
  it('align large cpu staging buffers to blocks, small ones to 64 bytes', () => {
    // nvme -> cpu copies of a 100 KiB and a 1000-byte tensor, and a cpu buffer no copy touches
    const sizes = { big: 100 * 1024, small: 1000 };
    const prog: Program = {
      buffers: [
        { id: 0, tensor: 0, tier: 'nvme', sizeBytes: sizes.small, allocAt: -1, freeAt: -1 },
        { id: 1, tensor: 1, tier: 'nvme', sizeBytes: sizes.big, allocAt: -1, freeAt: -1 },
        { id: 2, tensor: 2, tier: 'cpu', sizeBytes: 100, allocAt: -1, freeAt: -1 },
        { id: 3, tensor: 0, tier: 'cpu', sizeBytes: sizes.small, allocAt: 0, freeAt: 2 },
        { id: 4, tensor: 1, tier: 'cpu', sizeBytes: sizes.big, allocAt: 1, freeAt: 3 },
      ],
      instructions: [
        { id: 0, stream: 'nvmeRead', kind: 'copy', op: -1, inputs: [0], outputs: [3], waits: [] },
        { id: 1, stream: 'nvmeRead', kind: 'copy', op: -1, inputs: [1], outputs: [4], waits: [] },
        { id: 2, stream: 'cpu', kind: 'free', op: -1, inputs: [3], outputs: [], waits: [0] },
        { id: 3, stream: 'cpu', kind: 'free', op: -1, inputs: [4], outputs: [], waits: [1] },
      ],
    };
    const { buffers } = assignOffsets(prog);
    expect(buffers[0].offsetBytes % NVME_ALIGN_BYTES).toBe(0);
    expect(buffers[1].offsetBytes % NVME_ALIGN_BYTES).toBe(0);
    expect(buffers[1].offsetBytes).toBeGreaterThanOrEqual(NVME_ALIGN_BYTES);  // the small one takes a whole block
    expect(buffers[3].offsetBytes % 64).toBe(0);
    expect(buffers[3].offsetBytes % NVME_ALIGN_BYTES).not.toBe(0);           // 64-aligned right after the 100-byte buffer
    expect(buffers[4].offsetBytes % NVME_ALIGN_BYTES).toBe(0);
    expect(sizes.big).toBeGreaterThanOrEqual(ZERO_COPY_MIN_BYTES);
  });

  it('block-align nvme buffers and the large cpu buffers nvme copies touch', async () => {
    const plan = await compile({ model: 'models/gpt.ts', preset: 'tiny', gpuMemBytes: 400000, cpuMemBytes: 200000 });
    expect(verifyPlan(plan)).toEqual([]);
    const nvme = plan.buffers.filter((b) => b.tier === 'nvme');
    expect(nvme.length).toBeGreaterThan(0);
    const touched = new Set<number>();
    for (const x of plan.instructions) {
      if (x.kind !== 'copy') continue;
      const s = plan.buffers[x.inputs[0]], d = plan.buffers[x.outputs[0]];
      if (s.tier === 'nvme' || d.tier === 'nvme') { touched.add(s.id); touched.add(d.id); }
    }
    expect(touched.size).toBeGreaterThan(nvme.length);
    for (const id of touched) {
      const b = plan.buffers[id];
      if (b.tier === 'nvme' || b.sizeBytes >= ZERO_COPY_MIN_BYTES) expect(b.offsetBytes % NVME_ALIGN_BYTES, `buffer ${id}`).toBe(0);
      else expect(b.offsetBytes % 64, `buffer ${id}`).toBe(0);
    }
    // no block of the nvme arena is shared by two buffers whose live ranges overlap
    const live = (b: { allocAt: number; freeAt: number }) => [b.allocAt < 0 ? -1 : b.allocAt, b.freeAt < 0 ? Infinity : b.freeAt];
    const blocks = (b: { offsetBytes: number; sizeBytes: number }) => [Math.floor(b.offsetBytes / NVME_ALIGN_BYTES), Math.ceil((b.offsetBytes + b.sizeBytes) / NVME_ALIGN_BYTES)];
    for (let i = 0; i < nvme.length; i++) {
      for (let j = i + 1; j < nvme.length; j++) {
        const [a0, a1] = live(nvme[i]), [b0, b1] = live(nvme[j]);
        if (a1 < b0 || b1 < a0) continue;
        const [x0, x1] = blocks(nvme[i]), [y0, y1] = blocks(nvme[j]);
        expect(x1 <= y0 || y1 <= x0, `buffers ${nvme[i].id} and ${nvme[j].id} share a block`).toBe(true);
      }
    }
  }, 60_000);
});
