// HiGHS on a worker thread, so that an LP solves while the main thread goes on
// (compile starts the bound's LP first and searches the min-cut placement
// meanwhile; on a machine with two or more cores the solve costs no wall time).
//
// Takes LP models in HiGHS's ModelData form (lp-model.ts toHighs) and solver
// options; gives the model status, the objective and the column values. One
// worker per LpWorker; models are solved one at a time in the order given,
// each within its time limit (kept here: a run past it has its thread
// replaced, see HIGHS_TIME_LIMIT_SECONDS); close() ends the thread. The worker is plain JavaScript (a string evaluated
// by node:worker_threads) because it must run under both the compiled package
// and the test runner, which loads TypeScript sources; it loads the same
// `highs` package the main thread resolves.

import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { mark } from '../../src/timing.js';
import { lpCached, lpCacheOn, lpKey, lpRemember } from './lp-cache.js';

export type HighsStatus = 'optimal' | 'infeasible' | 'timeLimit' | 'other';

export interface HighsModelData {
  numCols: number; numRows: number;
  colCost: Float64Array; colLower: Float64Array; colUpper: Float64Array;
  rowLower: Float64Array; rowUpper: Float64Array;
  matrix: { format: 'csr'; numRows: number; numCols: number; starts: Int32Array; indices: Int32Array; values: Float64Array };
}

export interface HighsResult {
  status: HighsStatus; objective: number; x: Float64Array; /** simplex iterations it took */ iterations: number;
  /** status 'other' because it reached its iteration limit (deterministic: remembered as an optimum is, lp-cache.ts) */
  iterationLimited?: boolean;
  /** when the worker began and ended this solve (ms since the epoch, performance.timeOrigin-based; for TIERCUT_TIMING) */
  readyAt?: number; endAt?: number;
}

// The worker: load highs once, then answer each { id, data, timeLimit,
// iterationLimit?, options?, keep?, after? } with { id, started } as its run
// begins (when, in ms since the epoch: the main thread times it from
// there), then { id, status,
// objective, x, iterations } or { id, error }. keep: remember the outcome for a follow-up. With after = { id, col, relTol, absTol,
// iterationsFactor, iterationsPlus } the model is a follow-up of solve
// after.id (posted before it, so solved after it): it runs only when that one
// was optimal (else it answers status 'skipped'), with column col's upper
// bound set to that optimum * (1 + relTol) + absTol and an iteration limit of
// iterationsFactor * its iterations + iterationsPlus (skipped as well when
// that is above iterationsMax, if given); so the follow-up starts the moment
// the first ends, without a round trip through a busy main thread.
// Before highs compiles its WebAssembly, the worker tells V8 which of its two
// compilers makes HiGHS's code: the baseline (Liftoff) alone, or the
// optimising one (TurboFan) alone (liftoffOnly). In a fresh process V8 spent
// ~1 s of CPU optimising HiGHS's large functions during the first solve:
// gpt2-1.5b's three solves took ~2.1 s cold optimised and ~0.9 s at the
// baseline tier alone (0.15–0.2 s each once optimised), so for LPs of that
// size the optimised code never pays for its compile; gpt3-175b's larger
// solves (3325–7274 iterations) took ~2.1 s optimised and ~2.7 s without. So
// a worker made with deferLoad loads highs on load(optimise), which compile
// calls once the step's graph (and so the LP's size) is known, or on its
// first solve (baseline tier).
// Never both compilers in one run (V8's default, dynamic tier-up: a function
// starts in Liftoff and is swapped for TurboFan code once it has run enough,
// at a moment that depends on timing): with tier-up the same gpt-1t bound LP
// took 3678 or 3703 simplex iterations and its 98 %-GPU variant 3687 or 4089,
// from run to run (two optima 1 ulp apart), and the 1T plan changed with
// them (3461.6 or 3993.1 s); with either compiler alone, 3703 and 4089 every
// time (docs/BENCHMARKS.md, tenth session). Lazy compilation stays on: each
// function is compiled by its one compiler when first called.
// The flags are V8's, so process-wide (set again, either way, by each load):
// other WebAssembly compiled in the same process afterwards gets the same
// compiler (tiercut has none). TIERCUT_WASM_TIERUP=1 leaves V8's default
// (tier-up, not deterministic) for measurements.
// A solve's time limit is kept by the main thread (LpWorker), not by HiGHS:
// HiGHS's presolve gives its search for dependent equations a share of the
// run's time_limit (1 %, at least 1 s, at most 1000 s) and stops it when it
// expects to pass that, so under load the same LP was presolved differently
// and ended at another vertex (gpt-1t's bound LP 3703 or 3678 simplex
// iterations, its 98 %-GPU variant 4089 or 3687, from run to run beside two
// busy processes; with time_limit 1e5, the same every time: docs/
// BENCHMARKS.md, twentieth session). So HiGHS gets HIGHS_TIME_LIMIT_SECONDS,
// and a solve still running at its own limit has its thread stopped: it
// answers 'timeLimit' (as HiGHS's limit did), and what was queued behind it
// goes to a fresh thread.
const HIGHS_TIME_LIMIT_SECONDS = 1e5;
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const HIGHS_TIME_LIMIT = ${HIGHS_TIME_LIMIT_SECONDS};
let highsReady;
const load = (liftoffOnly) => (highsReady ??= (() => {
  const v8 = require('node:v8');
  const flags = workerData.tierUp ? ['--liftoff', '--no-liftoff-only', '--wasm-dynamic-tiering']
    : liftoffOnly ? ['--liftoff', '--liftoff-only', '--no-wasm-dynamic-tiering'] : ['--no-liftoff', '--no-liftoff-only', '--no-wasm-dynamic-tiering'];
  for (const f of flags) v8.setFlagsFromString(f);
  const mod = require(workerData.highsPath);
  return (mod.default ?? mod)().then(warmUp);
})());
// A small LP of the bound LP's shape (shares summing to 1, loads, an
// epigraph, a suffix chain), solved once as highs loads: V8 compiles each
// function of HiGHS on its first call, and this makes those calls while the
// thread waits for the main thread's first LP, not inside that solve
// (gpt2-1.5b/a100's one LP: ~0.07 s sooner; docs/BENCHMARKS.md, thirty-third
// session). Its answer is not read; each solve's model is its own.
const warmUp = (highs) => {
  const n = 40, starts = [0], indices = [], values = [], lower = [], upper = [];
  const row = (terms, lo, hi) => { for (const [c, v] of terms) { indices.push(c); values.push(v); } starts.push(indices.length); lower.push(lo); upper.push(hi); };
  const x = (g) => 1 + 3 * g, y = (g) => 2 + 3 * g, s = (g) => 3 + 3 * g, b = (g) => 2 + ((g * 3) % 7) / 3;
  const each = (f) => Array.from({ length: n }, (_, g) => f(g));
  for (let g = 0; g < n; g++) row([[x(g), 1], [y(g), 1]], 1, 1);
  row([[0, 1], ...each((g) => [x(g), -(1 + ((g * 7) % 5) / 4)])], 0.3 * n, Infinity);
  row([[0, 1], ...each((g) => [y(g), -b(g)])], 0, Infinity);
  row([[0, 1], ...each((g) => [y(g), -(0.5 + ((g * 5) % 3) / 2)])], 0, Infinity);
  for (let g = n - 1; g >= 0; g--) {
    row(g + 1 < n ? [[s(g), 1], [y(g), -b(g)], [s(g + 1), -1]] : [[s(g), 1], [y(g), -b(g)]], 0, 0);
    row([[0, 1], [s(g), -1]], 0.2 * g, Infinity);
  }
  const cols = 1 + 3 * n, colCost = new Float64Array(cols), colUpper = new Float64Array(cols).fill(Infinity);
  colCost[0] = 1;
  for (let g = 0; g < n; g++) colUpper[x(g)] = colUpper[y(g)] = 1;
  const model = highs.createModel({ numCols: cols, numRows: lower.length, colCost, colLower: new Float64Array(cols), colUpper, rowLower: Float64Array.from(lower), rowUpper: Float64Array.from(upper),
    matrix: { format: 'csr', numRows: lower.length, numCols: cols, starts: Int32Array.from(starts), indices: Int32Array.from(indices), values: Float64Array.from(values) } });
  try { model.options.set({ output_flag: false, simplex_scale_strategy: 4 }); model.run(); } catch {} finally { model.dispose(); }
  return highs;
};
if (!workerData.deferLoad) load(workerData.liftoffOnly);
const done = new Map(); // id -> { status, objective, iterations } of solves a follow-up may name
parentPort.on('message', async ({ load: loadNow, liftoffOnly, id, data, timeLimit, iterationLimit, options, after, keep }) => {
  if (loadNow) { load(liftoffOnly); return; }
  try {
    const highs = await load(workerData.liftoffOnly);
    if (after) {
      const prev = done.get(after.id);
      done.delete(after.id);
      if (!prev || prev.status !== 'optimal') { parentPort.postMessage({ id, status: 'skipped', objective: NaN, x: new Float64Array(0), iterations: 0 }); return; }
      data.colUpper[after.col] = prev.objective * (1 + after.relTol) + after.absTol;
      iterationLimit = after.iterationsFactor * prev.iterations + after.iterationsPlus;
      if (after.iterationsMax !== undefined && iterationLimit > after.iterationsMax) { parentPort.postMessage({ id, status: 'skipped', objective: NaN, x: new Float64Array(0), iterations: 0 }); return; }
    }
    const readyAt = performance.timeOrigin + performance.now();
    parentPort.postMessage({ id, started: readyAt });
    const c = highs.constants.modelStatus;
    const model = highs.createModel(data);
    let aborted = false;
    try {
      model.options.set({ output_flag: false, time_limit: HIGHS_TIME_LIMIT });
      if (iterationLimit !== undefined) model.options.set({ simplex_iteration_limit: iterationLimit });
      if (options) model.options.set(options);
      // HiGHS's simplex can fail on a badly scaled model (it ends 'unknown' or
      // 'solve error', or run() itself reports an error): its strongest scaling
      // often solves it, else the interior-point solver (with crossover, so the
      // solution is a vertex as the simplex's would be)
      // An abort (std::bad_alloc past the build's 2 GiB heap, or an assertion:
      // a WebAssembly RuntimeError) leaves the instance unusable: every later
      // run on it fails at once (status -1). So no more attempts, and the next
      // solve on this thread loads a fresh one (a 100 821-op GPT's bound LP
      // had aborted, and every solve behind it on the thread failed as well).
      const failed = (k) => k === c.unknown || k === c.solveError || k === c.notSet;
      const attempt = () => {
        try { model.run(); } catch (e) { if (e instanceof WebAssembly.RuntimeError) { aborted = true; highsReady = undefined; } return c.notSet; }
        return model.getModelStatus();
      };
      let code = attempt();
      if (failed(code) && !aborted) { model.options.set({ simplex_scale_strategy: 4 }); code = attempt(); }
      if (failed(code) && !aborted) { model.options.set({ solver: 'ipm', run_crossover: 'on' }); code = attempt(); }
      // every model here is bounded below (it minimises loads >= 0), so "unbounded or infeasible" means infeasible
      const status = code === c.optimal ? 'optimal' : code === c.infeasible || code === c.unboundedOrInfeasible ? 'infeasible' : code === c.timeLimit ? 'timeLimit' : 'other';
      const x = status === 'optimal' ? Float64Array.from(model.getSolution().colValue) : new Float64Array(data.numCols);
      const iterations = aborted ? 0 : Number(model.info.get('simplex_iteration_count'));
      if (keep) done.set(id, { status, objective: status === 'optimal' ? model.getObjectiveValue() : NaN, iterations });
      const endAt = performance.timeOrigin + performance.now();
      parentPort.postMessage({ id, status, iterationLimited: code === c.iterationLimit, objective: status === 'optimal' ? model.getObjectiveValue() : NaN, x, iterations, readyAt, endAt, rows: data.numRows, nnz: data.matrix.values.length }, [x.buffer]);
    } finally {
      // (an aborted instance's dispose may throw: the result is already sent)
      try { model.dispose(); } catch (e) { if (!aborted) throw e; }
    }
  } catch (e) {
    parentPort.postMessage({ id, error: String(e && e.stack || e) });
  }
});
`;

const tierUpForced = () => process.env.TIERCUT_WASM_TIERUP === '1';

/**
 * V8 keeps HiGHS's compiled code (one module, shared by every thread of the
 * process that loads highs) only while a thread that loaded it lives: a
 * solver thread made after the last one closed compiled it all again, 1.5-2
 * s of CPU per compile in a process that compiles many (tiercut fit, the test
 * suite; gpt2-1.5b compiled three times in one process, bench/compile/
 * repeat.mjs: 10.6-13.2 s of CPU each after the first with this thread,
 * 16.4-18.1 s without; docs/BENCHMARKS.md, twenty-second session). So an
 * LpWorker that loads highs optimised (load(true): the large models') also
 * starts this thread once a solve of its own has answered, which loads it so
 * too and then only waits, unref'd (it keeps no process alive). Not at the
 * load itself: then the keeper loaded highs beside the solver threads at the
 * compile's start, on a 2-core machine, and a one-compile process paid for it
 * (docs/BENCHMARKS.md, twenty-ninth session).
 * Not for the baseline compiler: a module kept from small models' compiles
 * ran the large ones' solves at that tier (gpt2-1.5b 14.7 s after two tiny
 * models, 11.4 s without). A small model's compile in a process that keeps
 * the optimised code runs that (any function not yet compiled, optimised
 * too); HiGHS's answers do not depend on which compiler made the code
 * (WebAssembly's arithmetic is the same under both; the run-to-run
 * differences once seen came from HiGHS's time budget, see WORKER_SOURCE),
 * only how fast they come: bench/compile/plans.mjs's 31 plans, solved cold in
 * one process, the same as each alone.
 */
let keeper: Worker | undefined;

function keepCompiledCode(workerData: Record<string, unknown>): void {
  if (keeper) return;
  keeper = new Worker(WORKER_SOURCE, { eval: true, workerData: { ...workerData, deferLoad: false, liftoffOnly: false } });
  keeper.unref();
  keeper.on('error', () => { keeper = undefined; });
  keeper.on('exit', () => { keeper = undefined; });
}

/** The outcome of a solve stopped at its time limit (as HiGHS's own limit gave it). */
const timedOut = (numCols: number): HighsResult => ({ status: 'timeLimit', objective: NaN, x: new Float64Array(numCols), iterations: 0 });

/** How a follow-up solve (LpWorker.solveAfter) is made from the solve it follows. */
type SolveAfter = { col: number; relTol: number; absTol: number; iterationsFactor: number; iterationsPlus: number; iterationsMax?: number };

/** A follow-up's model and iteration limit from the outcome of the solve it follows (as the solver thread makes them). */
function followUpOf(data: HighsModelData, prev: { objective: number; iterations: number }, after: SolveAfter): { data: HighsModelData; iterationLimit: number } {
  const colUpper = Float64Array.from(data.colUpper);
  colUpper[after.col] = prev.objective * (1 + after.relTol) + after.absTol;
  return { data: { ...data, colUpper }, iterationLimit: after.iterationsFactor * prev.iterations + after.iterationsPlus };
}

export class LpWorker {
  private worker: Worker;
  private readonly pending = new Map<number, { resolve(r: HighsResult): void; reject(e: Error): void }>();
  /** The messages of the pending solves, by id (posted again to a fresh thread when one is stopped). */
  private readonly sent = new Map<number, { timeLimit: number; data: HighsModelData; after?: SolveAfter & { id: number } } & Record<string, unknown>>();
  /** The time limit of the solve now running on the thread. */
  private limit?: { id: number; timer: ReturnType<typeof setTimeout> };
  private nextId = 0;
  /** Outcomes of solves started with keep, by id (for solveAfter). */
  private readonly kept = new Map<number, HighsResult>();
  private readonly workerData: Record<string, unknown>;
  /** What load() asked for, so that a fresh thread loads highs the same way. */
  private loaded?: boolean;

  /** deferLoad: highs is loaded on load() or the first solve, not at once (see WORKER_SOURCE). */
  constructor(opts: { deferLoad?: boolean } = {}) {
    const highsPath = createRequire(import.meta.url).resolve('highs');
    this.workerData = { highsPath, liftoffOnly: true, tierUp: tierUpForced(), deferLoad: opts.deferLoad ?? false };
    this.worker = this.start();
  }

  private start(): Worker {
    const w = new Worker(WORKER_SOURCE, { eval: true, workerData: this.workerData });
    w.unref(); // a pending solve must not keep a finished process alive
    w.on('message', (m: { id: number; started?: number; error?: string; rows?: number; nnz?: number } & HighsResult) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      const seconds = this.sent.get(m.id)!.timeLimit;
      if (m.started !== undefined) {
        // its run began then: the thread is stopped at its time limit from then
        // (this thread may hear of the start late, when it was busy)
        const timer = setTimeout(() => this.stop(m.id), Math.max(0, m.started + seconds * 1000 - (performance.timeOrigin + performance.now())));
        timer.unref(); // (the thread keeps the process alive while a solve is pending)
        this.limit = { id: m.id, timer };
        return;
      }
      if (this.limit?.id === m.id) { clearTimeout(this.limit.timer); this.limit = undefined; }
      this.pending.delete(m.id);
      this.sent.delete(m.id);
      // (the solver thread lives and holds the code: the keeper loads it from there)
      if (this.loaded === true) keepCompiledCode(this.workerData);
      if (m.readyAt !== undefined) mark(`HiGHS solve ${m.id} start`, m.readyAt);
      if (m.endAt !== undefined) mark(`HiGHS solve ${m.id} end`, m.endAt, `${m.iterations} iterations, ${m.status}, ${m.rows} rows, ${m.nnz} nonzeros`);
      if (m.error !== undefined) p.reject(new Error(`internal: the LP solver failed: ${m.error}`));
      // (a run that ended past its limit, heard of before the timer fired, is one that ran out of time too)
      else if (m.readyAt !== undefined && m.endAt !== undefined && m.endAt - m.readyAt > seconds * 1000) p.resolve(timedOut(m.x.length));
      else p.resolve({ status: m.status, objective: m.objective, x: m.x, iterations: m.iterations, readyAt: m.readyAt, endAt: m.endAt, ...(m.iterationLimited ? { iterationLimited: true } : {}) });
    });
    w.on('error', (e) => this.failAll(e));
    w.on('exit', (code) => this.failAll(new Error(`internal: the LP solver thread exited (code ${code})`)));
    return w;
  }

  /**
   * Solve `id` ran past its time limit (HiGHS cannot be interrupted from
   * this thread): its thread is stopped, it answers 'timeLimit', and the
   * solves queued behind it go, in order, to a fresh thread. A follow-up
   * (solveAfter) of a solve the old thread finished goes as a plain solve,
   * made here as the thread would make it; one of this solve is skipped.
   */
  private stop(id: number): void {
    const msg = this.sent.get(id), p = this.pending.get(id);
    this.limit = undefined;
    if (!msg || !p) return;
    const old = this.worker;
    old.removeAllListeners();
    void old.terminate();
    this.pending.delete(id);
    this.sent.delete(id);
    mark(`HiGHS solve ${id} stopped at its time limit (${msg.timeLimit} s)`);
    p.resolve(timedOut(msg.data.numCols));
    this.worker = this.start();
    if (this.loaded !== undefined) this.worker.postMessage({ load: true, liftoffOnly: !this.loaded });
    for (const [k, m] of [...this.sent].sort((a, b) => a[0] - b[0])) {
      // (a follow-up whose first is queued too goes as it was: its first goes ahead of it)
      const first = m.after && m.after.id !== id ? this.kept.get(m.after.id) : undefined;
      if (!m.after || (m.after.id !== id && !first)) { this.worker.postMessage({ id: k, ...m }); continue; }
      const f = first?.status === 'optimal' ? followUpOf(m.data, first, m.after) : undefined;
      if (!f || (m.after.iterationsMax !== undefined && f.iterationLimit > m.after.iterationsMax)) {
        this.pending.get(k)!.resolve({ status: 'skipped' as HighsStatus, objective: NaN, x: new Float64Array(0), iterations: 0 });
        this.pending.delete(k);
        this.sent.delete(k);
        continue;
      }
      const { after: _, ...plain } = m;
      this.worker.postMessage({ id: k, ...plain, data: f.data, iterationLimit: f.iterationLimit });
    }
    if (this.pending.size) this.worker.ref();
  }

  /**
   * Solves `data` as a follow-up of the solve `first` (which must have been
   * started with keep): at once after it on the solver thread, with column
   * `col`'s upper bound set to first's optimum * (1 + relTol) + absTol and an
   * iteration limit of iterationsFactor * first's iterations + iterationsPlus.
   * Undefined when first did not end optimal, or when that limit is above
   * iterationsMax (nothing was solved).
   */
  solveAfter(first: number, data: HighsModelData, timeLimitSeconds: number, after: SolveAfter, options?: Readonly<Record<string, number | string>>): Promise<HighsResult | undefined> {
    // the follow-up's model and limit, as the solver thread makes them
    const followUp = (prev: HighsResult) => followUpOf(data, prev, after);
    const known = this.kept.get(first);
    if (known) {
      // first is done (or was remembered): solve the follow-up as a plain solve (which may be remembered too)
      this.kept.delete(first);
      if (known.status !== 'optimal') return Promise.resolve(undefined);
      const f = followUp(known);
      if (after.iterationsMax !== undefined && f.iterationLimit > after.iterationsMax) return Promise.resolve(undefined);
      return this.solve(f.data, timeLimitSeconds, f.iterationLimit, options);
    }
    return this.post({ data, timeLimit: timeLimitSeconds, options, after: { id: first, ...after } }).then((r) => {
      if (r.status === ('skipped' as HighsStatus)) return undefined;
      const prev = this.kept.get(first);
      this.kept.delete(first);
      if (prev && lpCacheOn()) { const f = followUp(prev); lpRemember(lpKey(f.data, timeLimitSeconds, f.iterationLimit, options, WORKER_SOURCE), r); }
      return r;
    });
  }

  /**
   * Loads highs now on the solver thread (a worker made with deferLoad; later
   * calls, and calls after a solve, change nothing): with optimise, V8 tiers
   * its hot functions up to optimised code (worth it for long solves), else
   * it keeps the baseline code (see WORKER_SOURCE). Returns at once.
   */
  load(optimise: boolean): void {
    this.loaded ??= optimise;
    this.worker.postMessage({ load: true, liftoffOnly: !optimise });
  }

  /** The id the next solve will get (to name it in solveAfter). */
  get nextSolveId(): number { return this.nextId; }

  /**
   * Solves one model; an iteration limit (deterministic, unlike the time limit)
   * ends it with status 'other'; `options` are HiGHS options set before the run.
   */
  solve(data: HighsModelData, timeLimitSeconds: number, iterationLimit?: number, options?: Readonly<Record<string, number | string>>, keep = false): Promise<HighsResult> {
    // an optimal, infeasible or iteration-limited outcome of this very model and these limits is remembered across processes (lp-cache.ts)
    const key = lpCacheOn() ? lpKey(data, timeLimitSeconds, iterationLimit, options, WORKER_SOURCE) : undefined;
    const hit = key !== undefined ? lpCached(key, data.numCols) : undefined;
    const id = this.nextId;
    if (hit) {
      this.nextId++;
      mark(`HiGHS solve ${id} remembered`, undefined, `${hit.iterations} iterations`);
      if (keep) this.kept.set(id, hit);
      return Promise.resolve(hit);
    }
    return this.post({ data, timeLimit: timeLimitSeconds, iterationLimit, options, keep }).then((r) => {
      if (keep) this.kept.set(id, r);
      if (key !== undefined) lpRemember(key, r);
      return r;
    });
  }

  private post(msg: { timeLimit: number; data: HighsModelData; after?: SolveAfter & { id: number } } & Record<string, unknown>): Promise<HighsResult> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.sent.set(id, msg);
      this.worker.ref();
      this.worker.postMessage({ id, ...msg });
    }).finally(() => { if (this.pending.size === 0) this.worker.unref(); }) as Promise<HighsResult>;
  }

  close(): void {
    if (this.limit) clearTimeout(this.limit.timer);
    this.limit = undefined;
    void this.worker.terminate();
  }

  private failAll(e: Error): void {
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
  }
}
