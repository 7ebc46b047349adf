// A sequence-parallel training session: a plan made by `compile --sp P` run as
// P ranks, threads of this process. Every rank is a TrainingSession of the same
// plan (their graphs are identical) made as one rank of a shared ring group
// (native ThreadGroup); they are initialised identically, get their own zigzag
// slice of each step's data, and step together through the addon's stepGroup
// (one native thread per rank, outside the libuv pool). The step's loss is the
// mean of the rank losses (every rank holds as many tokens), which is the loss
// of the whole sequence; parameters stay identical on every rank because the
// all-reduce gives every rank the same bits.

import type { Tier } from '../compiler/cost/cost.js';
import type { Plan } from '../compiler/plan/types.js';
import { checkPlan } from '../compiler/plan/io.js';
import { diag, UserError } from '../src/diagnostics.js';
import { nativeAddon, type StepStats } from './binding.js';
import { spRankData, type StepData } from './data.js';
import { checkSessionOptions, TrainingSession, type SessionOptions } from './session.js';

export interface SpStepResult {
  step: number;
  /** The mean of the rank losses. */
  loss: number;
  rankLosses: number[];
  seconds: number;
  /** Per rank. */
  stats: StepStats[];
}

export class SequenceParallelSession {
  readonly ranks: TrainingSession[] = [];
  private readonly rankData: (step: number) => Map<number, Float64Array>[];

  /** `whole`: the data at the whole sequence's shapes (syntheticData / fileData of spFullGraph(plan)). */
  constructor(readonly plan: Plan, whole: StepData, opts: SessionOptions & { ringTimeoutMs?: number } = {}) {
    checkSessionOptions(opts);
    checkPlan(plan, 'the plan'); // (once for the ranks: each TrainingSession of a ring takes it as checked)
    const sp = plan.sp;
    if (!sp) throw diag.usage('SequenceParallelSession: the plan has no sp section (compile it with --sp P; run a plain plan with TrainingSession)');
    if (opts.trace) throw diag.usage('run --trace is not supported for sequence-parallel plans yet');
    this.rankData = spRankData(plan, whole); // (checks the data source before any rank is made)
    const group = nativeAddon().createRingGroup(sp.ranks, opts.ringTimeoutMs);
    try {
      for (let rank = 0; rank < sp.ranks; rank++) this.ranks.push(new TrainingSession(plan, { ...opts, ring: { group, rank } }));
    } catch (e) {
      this.close();
      throw e;
    }
  }

  async step(step: number): Promise<SpStepResult> {
    // (as TrainingSession.step: a plain Error after close, step 0 reported as a ring failure)
    if (this.closed) throw diag.runtime(`step ${step}: the session is closed`);
    if (!(Number.isSafeInteger(step) && step >= 1)) throw diag.badNumber('step', String(step), 'an integer >= 1');
    let stats: StepStats[];
    try {
      const data = this.rankData(step);
      this.ranks.forEach((s, r) => s.writeInputs(step, data[r]));
      stats = await nativeAddon().stepGroup(this.ranks.map((s) => s.nativeSession), step);
    } catch (e) {
      throw e instanceof UserError ? e : diag.ringFailed(`step ${step} failed: ${(e as Error).message}`);
    }
    const rankLosses = this.ranks.map((s) => s.loss());
    const loss = rankLosses.reduce((a, b) => a + b, 0) / rankLosses.length;
    return { step, loss, rankLosses, seconds: Math.max(...stats.map((s) => s.seconds)), stats };
  }

  /** Measured arena use per tier, per rank. */
  memory(): { peakBytes: Record<Tier, number>; peakLiveBytes: Record<Tier, number> }[] {
    return this.ranks.map((s) => s.memory());
  }

  /** Rank r's parameters (every rank holds the same values). */
  parameters(rank = 0): Map<string, Float32Array> { return this.ranks[rank].parameters(); }

  saveCheckpoint(file: string, step: number): Promise<void> { return this.ranks[0].saveCheckpoint(file, step); }

  private closed = false;

  close(): void {
    this.closed = true;
    for (const s of this.ranks) s.close();
  }
}
