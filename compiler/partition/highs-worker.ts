// HiGHS on a worker thread, so that an LP solves while the main thread goes on
// (compile starts the bound's LP first and searches the min-cut placement
// meanwhile; on a machine with two or more cores the solve costs no wall time).
//
// Takes LP models in HiGHS's ModelData form (lp-model.ts toHighs) and solver
// options; gives the model status, the objective and the column values. One
// worker per LpWorker; models are solved one at a time in the order given;
// close() ends the thread. The worker is plain JavaScript (a string evaluated
// by node:worker_threads) because it must run under both the compiled package
// and the test runner, which loads TypeScript sources; it loads the same
// `highs` package the main thread resolves.

import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

export type HighsStatus = 'optimal' | 'infeasible' | 'timeLimit' | 'other';

export interface HighsModelData {
  numCols: number; numRows: number;
  colCost: Float64Array; colLower: Float64Array; colUpper: Float64Array;
  rowLower: Float64Array; rowUpper: Float64Array;
  matrix: { format: 'csr'; numRows: number; numCols: number; starts: Int32Array; indices: Int32Array; values: Float64Array };
}

export interface HighsResult { status: HighsStatus; objective: number; x: Float64Array; /** simplex iterations it took */ iterations: number }

// The worker: load highs once, then answer each { id, data, timeLimit,
// iterationLimit?, options? } with { id, status, objective, x, iterations } or { id, error }.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const mod = require(workerData.highsPath);
const highsReady = (mod.default ?? mod)();
parentPort.on('message', async ({ id, data, timeLimit, iterationLimit, options }) => {
  try {
    const highs = await highsReady;
    const c = highs.constants.modelStatus;
    const model = highs.createModel(data);
    try {
      model.options.set({ output_flag: false, time_limit: timeLimit });
      if (iterationLimit !== undefined) model.options.set({ simplex_iteration_limit: iterationLimit });
      if (options) model.options.set(options);
      // HiGHS's simplex can fail on a badly scaled model (it ends 'unknown' or
      // 'solve error', or run() itself reports an error): its strongest scaling
      // often solves it, else the interior-point solver (with crossover, so the
      // solution is a vertex as the simplex's would be)
      const failed = (k) => k === c.unknown || k === c.solveError || k === c.notSet;
      const attempt = () => { try { model.run(); } catch (e) { return c.notSet; } return model.getModelStatus(); };
      let code = attempt();
      if (failed(code)) { model.options.set({ simplex_scale_strategy: 4 }); code = attempt(); }
      if (failed(code)) { model.options.set({ solver: 'ipm', run_crossover: 'on' }); code = attempt(); }
      // every model here is bounded below (it minimises loads >= 0), so "unbounded or infeasible" means infeasible
      const status = code === c.optimal ? 'optimal' : code === c.infeasible || code === c.unboundedOrInfeasible ? 'infeasible' : code === c.timeLimit ? 'timeLimit' : 'other';
      const x = status === 'optimal' ? Float64Array.from(model.getSolution().colValue) : new Float64Array(data.numCols);
      const iterations = Number(model.info.get('simplex_iteration_count'));
      parentPort.postMessage({ id, status, objective: status === 'optimal' ? model.getObjectiveValue() : NaN, x, iterations }, [x.buffer]);
    } finally {
      model.dispose();
    }
  } catch (e) {
    parentPort.postMessage({ id, error: String(e && e.stack || e) });
  }
});
`;

export class LpWorker {
  private readonly worker: Worker;
  private readonly pending = new Map<number, { resolve(r: HighsResult): void; reject(e: Error): void }>();
  private nextId = 0;

  constructor() {
    const highsPath = createRequire(import.meta.url).resolve('highs');
    this.worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { highsPath } });
    this.worker.unref(); // a pending solve must not keep a finished process alive
    this.worker.on('message', (m: { id: number; error?: string } & HighsResult) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.error !== undefined) p.reject(new Error(`internal: the LP solver failed: ${m.error}`));
      else p.resolve({ status: m.status, objective: m.objective, x: m.x, iterations: m.iterations });
    });
    this.worker.on('error', (e) => this.failAll(e));
    this.worker.on('exit', (code) => this.failAll(new Error(`internal: the LP solver thread exited (code ${code})`)));
  }

  /**
   * Solves one model; an iteration limit (deterministic, unlike the time limit)
   * ends it with status 'other'; `options` are HiGHS options set before the run.
   */
  solve(data: HighsModelData, timeLimitSeconds: number, iterationLimit?: number, options?: Readonly<Record<string, number | string>>): Promise<HighsResult> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.ref();
      this.worker.postMessage({ id, data, timeLimit: timeLimitSeconds, iterationLimit, options });
    }).finally(() => { if (this.pending.size === 0) this.worker.unref(); }) as Promise<HighsResult>;
  }

  close(): void { void this.worker.terminate(); }

  private failAll(e: Error): void {
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
  }
}
