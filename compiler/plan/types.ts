// The plan: everything the runtime needs to execute one training step, and
// everything the report needs to explain it. Plain JSON; see
// docs/PLAN-FORMAT.md and compiler/plan/schema.ts.

import type { HardwareProfile } from '../cost/profiles.js';
import type { Tier } from '../cost/cost.js';
import type { AdamAttrs, Graph } from '../ir/types.js';
import type { Placement } from '../partition/placement.js';

export const FORMAT_VERSION = 1;

export type StreamName = 'gpu' | 'cpu' | 'h2d' | 'd2h' | 'nvmeRead' | 'nvmeWrite';
export const STREAMS: readonly StreamName[] = ['gpu', 'cpu', 'h2d', 'd2h', 'nvmeRead', 'nvmeWrite'];

export interface PlanBuffer {
  readonly id: number;
  readonly tensor: number;
  readonly tier: Tier;
  readonly offsetBytes: number;
  readonly sizeBytes: number;
  /** Instruction id of its first write in the step; -1: persistent (valid before the step starts). */
  readonly allocAt: number;
  /** Instruction id of its free; -1: never freed (persistent across steps). */
  readonly freeAt: number;
}

export interface PlanInstruction {
  /** Also its time: the index into the flattened step. */
  readonly id: number;
  readonly stream: StreamName;
  readonly kind: 'run' | 'copy' | 'free';
  /** run: the op id; otherwise -1. */
  readonly op: number;
  /** run: buffers of the op's inputs in operand order; copy: [src]; free: [buffer]. */
  readonly inputs: readonly number[];
  /** run: buffers of the op's outputs; copy: [dst]; free: []. */
  readonly outputs: readonly number[];
  /** Instruction ids (all earlier) that must have completed in this step first. */
  readonly waits: readonly number[];
}

export interface TierSummary { readonly capacityBytes: number; readonly peakBytes: number }

export interface Traffic {
  readonly h2dBytes: number;
  readonly d2hBytes: number;
  readonly nvmeReadBytes: number;
  readonly nvmeWriteBytes: number;
  /** Data inputs the loader writes each step (not plan copies). */
  readonly inputBytes: number;
}

export interface Predicted {
  readonly stepSeconds: number;
  readonly streamBusySeconds: Readonly<Record<StreamName, number>>;
  readonly peakBytes: Readonly<Record<Tier, number>>;
}

/**
 * Why a plan has no DPU steady step: no update runs on the CPU
 * ('nothing-to-delay'); the steady step, with `delayedUpdates` delayed, would
 * take steadyStepSeconds, no less than the plan's ('slower'); or it does not
 * fit (its delayed gradients are state: 'does-not-fit', with compile's
 * message).
 */
export interface DpuDeclined {
  readonly reason: 'nothing-to-delay' | 'slower' | 'does-not-fit';
  readonly delayedUpdates: number;
  readonly steadyStepSeconds?: number;
  readonly message?: string;
}

export interface Plan {
  readonly formatVersion: number;
  readonly generator: string;
  readonly model: { readonly source: string; readonly preset: string; readonly config: Readonly<Record<string, unknown>> };
  readonly hardware: HardwareProfile;
  readonly optimizer: AdamAttrs;
  readonly graph: Graph;
  readonly placement: Placement;
  readonly tiers: Readonly<Record<Tier, TierSummary>>;
  readonly buffers: readonly PlanBuffer[];
  readonly instructions: readonly PlanInstruction[];
  readonly traffic: Traffic;
  readonly predicted: Predicted;
  /**
   * Delayed parameter update: after `warmupSteps` steps of this plan, the
   * runtime switches to `steady` (its own graph, placement and instructions over
   * the same state), in which the updates this plan runs on the CPU are
   * delayed: step t+1 applies step t's gradients to them while its forward and
   * backward run (its other updates stay where they were). Where that does not
   * pay, no `steady` and `declined` says why; steps then run this plan
   * throughout.
   */
  readonly dpu?: { readonly warmupSteps: number; readonly steady?: Plan; readonly declined?: DpuDeclined };
  /**
   * Sequence parallelism (`compile --sp P`): this plan is the step of every one
   * of P ranks (their rank-local graphs are identical); the ranks differ only in
   * the data they hold (the sections in perRank) and in their communicator rank.
   */
  readonly sp?: PlanSp;
  /**
   * An LP this compile needed ended without an optimum (its status: e.g.
   * 'timeLimit', past --lp-time-limit): where it was the placement LP, the
   * min-cut's plan stood in (a heuristic where a capacity binds, often far
   * slower); where it was the bound's, the plan reports no bound. Absent when
   * every LP that ran reached its optimum.
   */
  readonly lpStatus?: string;
  /** The LP's proven lower bound on the step time and how far the plan is above it. */
  readonly bound?: {
    readonly lowerBoundSeconds: number;
    readonly gapPercent: number;
    readonly lp: { readonly rows: number; readonly cols: number; readonly nonzeros: number; readonly status: string };
    /**
     * The model fits on the GPU and the plan keeps it there with no traffic:
     * lowerBoundSeconds is over such plans (the GPU's own work: every op runs
     * there, one at a time), anyPlacementLowerBoundSeconds the LP's over
     * every placement (one that moves state or work off the GPU may be faster).
     */
    readonly keptOnGpu?: boolean;
    readonly anyPlacementLowerBoundSeconds?: number;
    /**
     * The plan runs forward or backward ops (or an update away from its state)
     * on the CPU, outside the LP's family: lowerBoundSeconds is the op-cost
     * floor over every placement (compiler/simulate opCostFloorSeconds), not the LP's.
     */
    readonly opCostFloor?: boolean;
    /**
     * The plan leaves the LP's one-level family these ways (chains: it
     * recomputes activations through chains; split: it rests a parameter's
     * master32 apart from its moments; stream: it updates on the GPU a
     * parameter whose state rests on the CPU; cast: it casts on the GPU a
     * p16 from master32 copied up): lowerBoundSeconds is the LP's
     * widened by just those, a relaxation of such plans (lower).
     */
    readonly widenedBy?: readonly ('chains' | 'split' | 'stream' | 'cast')[];
    /**
     * The bound LP with its fetch-then-update rows ended without an optimum
     * (the solver failed on it, as on a graph of 10^5 ops, or, not widened,
     * it ran past its time limit): lowerBoundSeconds is the same LP's
     * without those rows, a relaxation, so lower and still a bound.
     */
    readonly relaxed?: boolean;
  };
}

export interface PlanSp {
  /** P, the ranks of the ring. */
  readonly ranks: number;
  /** T, the whole sequence (each rank holds T / P tokens: zigzag chunks r and 2P-1-r of 2P). */
  readonly seq: number;
  /** Data inputs cut along `axis`: the loader slices each rank's positions out of the full tensor. */
  readonly inputs: readonly { readonly tensor: number; readonly name: string; readonly axis: number; readonly fullShape: readonly number[] }[];
  /** The i32 input [T/P] the runtime fills with the rank's positions (a gather of a [T,C] parameter). */
  readonly positions?: number;
  readonly perRank: readonly {
    readonly rank: number;
    /** The sequence positions this rank holds, in its local order. */
    readonly positions: readonly number[];
    /** Bytes this rank sends over the ring per step: ring attention (forward and backward) and the gradient all-reduce. */
    readonly ringSendBytes: { readonly attention: number; readonly allReduce: number };
    /** The largest one collective op's memory outside the arenas (ring buffers, head-major scratch). */
    readonly ringWorkspaceBytes: number;
  }[];
}
