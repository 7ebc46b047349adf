// Solved LPs remembered across processes: the outcome of an optimal HiGHS solve,
// keyed by the SHA-256 of everything the solve depends on — the model's arrays
// byte for byte, the time and iteration limits, the options, the highs
// package's version, the solver thread's code and this format's version.
// HiGHS is deterministic (the same model and options give the same vertex), so
// a hit returns exactly what the solve would: plans stay byte-identical. Only
// optimal, infeasible and iteration-limited outcomes are kept (a time-limited
// one depends on the machine; an infeasible one is the solver's answer as an
// optimum is: fit's probes and its full compile of the answer meet the same
// infeasible LPs; the iteration limit is in the key, and gpt3-175b's bound LP
// stage 2 reaches it in every compile, ~5 s of a solver thread that compile
// waits for at the end). A
// compile of an unchanged model on unchanged hardware skips the solver
// (gpt2-1.5b/16 GB: ~1.2 s of HiGHS). Lives in the per-user cache directory
// (src/cache-dir.ts), at most MAX_ENTRIES files (the oldest go first);
// TIERCUT_LP_CACHE=0 turns it off. Cost: hashing the model (~1 MB for
// gpt2-1.5b: a few ms) per solve.

import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { cacheDir, remember } from '../../src/cache-dir.js';
import type { HighsModelData, HighsResult } from './highs-worker.js';

const FORMAT = 'tiercut-lp-1';
const MAX_ENTRIES = 256;

let highsVersion: string | undefined;
function highs(): string {
  if (highsVersion === undefined) {
    try {
      const main = createRequire(import.meta.url).resolve('highs');
      highsVersion = String(JSON.parse(readFileSync(join(dirname(main), '..', 'package.json'), 'utf8')).version);
    } catch {
      highsVersion = 'unknown';
    }
  }
  return highsVersion;
}

export const lpCacheOn = () => process.env.TIERCUT_LP_CACHE !== '0';

/**
 * The key of a solve: model arrays, limits, options, the highs version, this
 * format's version and `solver` (the text of the code that runs the solve: a
 * change to its retries or settings must not reuse outcomes of the old one).
 */
export function lpKey(data: HighsModelData, timeLimitSeconds: number, iterationLimit: number | undefined, options: Readonly<Record<string, number | string>> | undefined, solver: string): string {
  const h = createHash('sha256');
  h.update(JSON.stringify([FORMAT, highs(), solver, data.numCols, data.numRows, timeLimitSeconds, iterationLimit ?? null, options ?? null]));
  for (const a of [data.colCost, data.colLower, data.colUpper, data.rowLower, data.rowUpper, data.matrix.starts, data.matrix.indices, data.matrix.values]) {
    h.update(JSON.stringify(a.length));
    h.update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
  }
  return h.digest('hex').slice(0, 40);
}

/** The remembered outcome of a solve of a model with `numCols` columns, if any (a file of another shape is not used). */
export function lpCached(key: string, numCols: number): HighsResult | undefined {
  const dir = lpCacheOn() ? cacheDir() : undefined;
  if (!dir) return undefined;
  const file = join(dir, `lp-${key}.json`);
  if (!existsSync(file)) return undefined;
  try {
    // a regular file of the size such an entry has, at most (a link to /dev/zero had hung the compile)
    const st = statSync(file);
    if (!st.isFile() || st.size > 4096 + Math.ceil((8 * numCols) / 3) * 4) return undefined;
    const e = JSON.parse(readFileSync(file, 'utf8')) as { status: string; objective: number; iterations: number; x: string };
    if (e.status === 'infeasible' && typeof e.iterations === 'number') return { status: 'infeasible', objective: NaN, iterations: e.iterations, x: new Float64Array(numCols) };
    if (e.status === 'iterationLimit' && typeof e.iterations === 'number') return { status: 'other', iterationLimited: true, objective: NaN, iterations: e.iterations, x: new Float64Array(numCols) };
    if (e.status !== 'optimal' || typeof e.objective !== 'number' || typeof e.iterations !== 'number') return undefined;
    const bytes = Buffer.from(e.x, 'base64');
    if (bytes.length !== 8 * numCols) return undefined;
    const x = new Float64Array(bytes.length / 8);
    new Uint8Array(x.buffer).set(bytes);
    if (!x.every(Number.isFinite) || !Number.isFinite(e.objective)) return undefined;
    return { status: 'optimal', objective: e.objective, iterations: e.iterations, x };
  } catch {
    return undefined; // unreadable: solve again
  }
}

/** Remembers an optimal, infeasible or iteration-limited outcome (others are not kept; the last two without their x). */
export function lpRemember(key: string, r: HighsResult): void {
  const status = r.status === 'other' && r.iterationLimited ? 'iterationLimit' : r.status;
  const dir = (status === 'optimal' || status === 'infeasible' || status === 'iterationLimit') && lpCacheOn() ? cacheDir() : undefined;
  if (!dir) return;
  const x = r.status === 'optimal' ? Buffer.from(r.x.buffer, r.x.byteOffset, r.x.byteLength).toString('base64') : '';
  remember(dir, `lp-${key}.json`, JSON.stringify({ status, objective: r.objective, iterations: r.iterations, x }), (f) => f.startsWith('lp-') && f.endsWith('.json'), MAX_ENTRIES);
}
