// The LP cache (compiler/partition/lp-cache.ts): a solve of the same model with
// the same limits and options is answered from the per-user cache with exactly
// the solver's outcome; a different model, limit or option is not; an outcome
// neither optimal nor infeasible is not kept; TIERCUT_LP_CACHE=0 neither reads nor writes.
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LinearProgram } from '../../compiler/partition/lp-model.js';
import { LpWorker, type HighsModelData } from '../../compiler/partition/highs-worker.js';

// minimise x + 2y subject to x + y >= 1, x - y <= 0.5, 0 <= x, y <= upper
function model(upper: number): HighsModelData {
  const lp = new LinearProgram();
  const x = lp.col('x', 1, 0, upper), y = lp.col('y', 2, 0, upper);
  lp.row([[x, 1], [y, 1]], 1, Infinity);
  lp.row([[x, 1], [y, -1]], -Infinity, 0.5);
  return lp.toHighs(Infinity) as HighsModelData; // as lp.ts passes it
}

describe('LP cache', () => {
  let dir: string, savedTmp: string | undefined, savedFlag: string | undefined;
  const entries = () => readdirSync(join(dir, `tiercut-cache-${process.getuid?.() ?? 'user'}`)).filter((f) => f.startsWith('lp-'));
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'tiercut-lpcache-test-'));
    savedTmp = process.env.TMPDIR; savedFlag = process.env.TIERCUT_LP_CACHE;
    process.env.TMPDIR = dir; delete process.env.TIERCUT_LP_CACHE;
  });
  afterEach(() => {
    if (savedTmp === undefined) delete process.env.TMPDIR; else process.env.TMPDIR = savedTmp;
    if (savedFlag === undefined) delete process.env.TIERCUT_LP_CACHE; else process.env.TIERCUT_LP_CACHE = savedFlag;
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers a repeated solve with the solver\'s own outcome, and nothing else', async () => {
    const w = new LpWorker();
    try {
      const first = await w.solve(model(10), 30);
      expect(first.status).toBe('optimal');
      expect(first.readyAt).toBeDefined(); // solved on the thread
      expect(entries().length).toBe(1);
      const again = await w.solve(model(10), 30);
      expect(again.readyAt).toBeUndefined(); // remembered
      expect(again.objective).toBe(first.objective);
      expect(Array.from(again.x)).toEqual(Array.from(first.x));
      expect(again.iterations).toBe(first.iterations);
      // another bound, limit or option: solved again
      expect((await w.solve(model(9), 30)).readyAt).toBeDefined();
      expect((await w.solve(model(10), 31)).readyAt).toBeDefined();
      expect((await w.solve(model(10), 30, undefined, { simplex_scale_strategy: 4 })).readyAt).toBeDefined();
      expect(entries().length).toBe(4);
      // infeasible (x + y >= 1 with both <= 0.25): kept, and answered as the solver did
      const bad = await w.solve(model(0.25), 30);
      expect(bad.status).toBe('infeasible');
      expect(entries().length).toBe(5);
      const badAgain = await w.solve(model(0.25), 30);
      expect(badAgain.readyAt).toBeUndefined();
      expect(badAgain.status).toBe('infeasible');
      expect(badAgain.iterations).toBe(bad.iterations);
      // stopped by its iteration limit (part of the key, so deterministic): kept, and answered as the solver did
      const stopped = await w.solve(model(10), 30, 0, { presolve: 'off' });
      expect(stopped.status).toBe('other');
      expect(stopped.iterationLimited).toBe(true);
      expect(entries().length).toBe(6);
      const stoppedAgain = await w.solve(model(10), 30, 0, { presolve: 'off' });
      expect(stoppedAgain.readyAt).toBeUndefined();
      expect(stoppedAgain.status).toBe('other');
      expect(stoppedAgain.iterationLimited).toBe(true);
      expect(stoppedAgain.iterations).toBe(stopped.iterations);
      // a higher limit is another solve, which ends optimal
      const freed = await w.solve(model(10), 30, 100, { presolve: 'off' });
      expect(freed.readyAt).toBeDefined();
      expect(freed.status).toBe('optimal');
      expect(freed.objective).toBe(first.objective);
    } finally {
      w.close();
    }
  });

  it('an entry that is a link to a device, or holds a non-finite value: solved again (the link to /dev/zero had hung the compile)', async () => {
    const w = new LpWorker();
    try {
      expect((await w.solve(model(10), 30)).readyAt).toBeDefined();
      const [name] = entries();
      const path = join(dir, `tiercut-cache-${process.getuid?.() ?? 'user'}`, name);
      const e = JSON.parse(readFileSync(path, 'utf8'));
      const nan = new Float64Array(2).fill(NaN);
      writeFileSync(path, JSON.stringify({ ...e, x: Buffer.from(nan.buffer).toString('base64') }));
      const again = await w.solve(model(10), 30);
      expect(again.readyAt).toBeDefined();
      expect(again.x.every(Number.isFinite)).toBe(true);
      rmSync(path);
      symlinkSync('/dev/zero', path);
      const linked = await w.solve(model(10), 30);
      expect(linked.readyAt).toBeDefined();
      expect(linked.status).toBe('optimal');
    } finally {
      w.close();
    }
  });

  it('a follow-up of a remembered solve is solved (or remembered) as a plain solve with the same bound', async () => {
    const w = new LpWorker();
    const after = { col: 0, relTol: 1e-6, absTol: 1e-12, iterationsFactor: 2, iterationsPlus: 1000 };
    try {
      // first time: both solved on the thread, the follow-up chained there
      let id = w.nextSolveId;
      const [a1, b1] = await Promise.all([w.solve(model(10), 30, undefined, undefined, true), w.solveAfter(id, model(10), 30, after)]);
      expect(b1!.readyAt).toBeDefined(); // chained on the thread
      expect(entries().length).toBe(2); // both remembered
      // second time: the first is remembered, so the follow-up is looked up as a plain solve
      id = w.nextSolveId;
      const a2 = await w.solve(model(10), 30, undefined, undefined, true);
      const b2 = await w.solveAfter(id, model(10), 30, after);
      expect(a2.readyAt).toBeUndefined();
      expect(b2!.readyAt).toBeUndefined();
      expect(b2!.objective).toBe(b1!.objective);
      expect(Array.from(b2!.x)).toEqual(Array.from(b1!.x));
      expect(a2.objective).toBe(a1.objective);
    } finally {
      w.close();
    }
  });

  it('a damaged entry (a solution of the wrong length, or not JSON) is solved again, not used', async () => {
    const w = new LpWorker();
    try {
      const first = await w.solve(model(10), 30);
      const cache = join(dir, `tiercut-cache-${process.getuid?.() ?? 'user'}`);
      const file = join(cache, entries()[0]!);
      const e = JSON.parse(readFileSync(file, 'utf8'));
      writeFileSync(file, JSON.stringify({ ...e, x: Buffer.from(new Float64Array([0.5, 0.5, 0.5]).buffer).toString('base64') }));
      const again = await w.solve(model(10), 30);
      expect(again.readyAt).toBeDefined(); // solved on the thread
      expect(Array.from(again.x)).toEqual(Array.from(first.x));
      writeFileSync(file, '{ not json');
      expect((await w.solve(model(10), 30)).readyAt).toBeDefined();
    } finally {
      w.close();
    }
  });

  it('TIERCUT_LP_CACHE=0 neither reads nor writes', async () => {
    process.env.TIERCUT_LP_CACHE = '0';
    const w = new LpWorker();
    try {
      expect((await w.solve(model(10), 30)).readyAt).toBeDefined();
      expect((await w.solve(model(10), 30)).readyAt).toBeDefined();
    } finally {
      w.close();
    }
    expect(() => entries()).toThrow(); // the cache directory was never made
  });
});
