// tiles.test.ts — tile-by-tile completion: the kernel reports tiles 0, 1, 2, ...
// in order, each as soon as every tile up to it is done, while later tiles are
// still being updated; a copy started from the event (here: of the fp16 output
// tile into a shadow buffer, as a runtime would start a copy towards the GPU)
// sees the tile's final values.
import { describe, expect, it } from 'vitest';

import { nativeAddon } from '../../runtime/binding.js';
import { cpuAdamInfo } from '../../src/index.js';
import { expectSameBits } from './helpers.js';

const addon = nativeAddon();
const info = cpuAdamInfo();

describe('tile completion events', () => {
  for (const threads of [...new Set([1, info.maxThreads])]) {
    for (const isa of info.supported) {
      it(`${isa}, ${threads} thread(s): in order, during the update, copies see final values`, () => {
        const n = 1_000_003, tileElems = 4096;
        const t = addon.adamTileTrace({ n, tileElems, threads, isa });
        const tiles = Math.ceil(n / tileElems);
        expect(t.tiles).toBe(tiles);
        expect(t.tile.length).toBe(tiles);
        let lateStarts = 0;
        for (let k = 0; k < tiles; k++) {
          expect(t.tile[k]).toBe(k);
          expect(t.begin[k]).toBe(k * tileElems);
          expect(t.end[k]).toBe(Math.min(n, (k + 1) * tileElems));
          if (k > 0) expect(t.claimed[k]!).toBeGreaterThanOrEqual(t.claimed[k - 1]!);
          expect(t.claimed[k]!).toBeGreaterThan(k);  // a tile is reported only after it was handed out
          if (t.claimed[k]! < tiles) lateStarts++;
        }
        console.log(`${isa} x${threads}: tile 0 reported with ${t.claimed[0]} of ${tiles} tiles handed out; ` +
          `${lateStarts} events came before the last tile was handed out`);
        // one thread: each tile is reported right after it is done, before the next is handed out;
        // more threads: scheduling varies, but the first report comes while tiles are still to be done
        if (threads === 1) for (let k = 0; k < tiles; k++) expect(t.claimed[k]).toBe(k + 1);
        expect(t.claimed[0]!).toBeLessThan(tiles);
        expectSameBits('shadow copy', t.shadow, t.half);
      });
    }
  }
});
