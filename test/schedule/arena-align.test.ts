// NVMe block alignment in the arenas (compiler/schedule/arena.ts): every nvme
// buffer, and every cpu buffer an nvme copy reads or writes, starts on a
// 4096-byte boundary and takes whole blocks, so no two buffers that are live
// at once share a block (the store then writes without reading edge blocks).
// The free list's aligned allocation keeps the bytes it skips free.
import { describe, expect, it } from 'vitest';
import { FreeList } from '../../compiler/schedule/intervals.js';
import { NVME_ALIGN_BYTES } from '../../compiler/schedule/arena.js';
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
});

describe('nvme plans', () => {
  it('block-align nvme buffers and the cpu buffers nvme copies touch', async () => {
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
    for (const id of touched) expect(plan.buffers[id].offsetBytes % NVME_ALIGN_BYTES, `buffer ${id}`).toBe(0);
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
