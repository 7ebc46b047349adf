// A placement: where every op runs and where every tensor rests between uses.
import type { Tier } from '../cost/cost.js';

export interface Placement {
  /** Per op id: the tier whose compute runs it (gpu or cpu). */
  readonly opTier: readonly ('gpu' | 'cpu')[];
  /** Per tensor id: its home tier (where it rests between uses). */
  readonly home: readonly Tier[];
  readonly method: 'all-gpu' | 'mincut' | 'lp';
  /** The Lagrange multiplier on GPU bytes that made the GPU capacity hold (seconds per byte). */
  readonly lambdaSecondsPerByte: number;
  /** The cut's value: predicted compute + transfer seconds, without the memory penalty. */
  readonly cutSeconds: number;
  /** Per tensor (when present): true = no home; made again by its producer each time it is needed (rematerialised). */
  readonly remat?: readonly boolean[];
  /**
   * Per op (when present): true for a cast on the GPU (opTier 'gpu') of a p16
   * made again from master32 resting on the CPU whose runs for the forward
   * pass's reads run on the CPU instead (idle then), those for the backward
   * pass's on the GPU (master32 copied up).
   */
  readonly forwardCastOnCpu?: readonly boolean[];
  /**
   * How many more CPU updates the CPU's casts of remade p16 for the GPU's next
   * ops are drafted ahead of (schedule/program.ts hoistCasts; absent: 0, those
   * up to the CPU's next op): a cast behind an update that waits for its
   * moments from NVMe waits with it (partition/candidates.ts lpTryCastLead).
   */
  readonly castLead?: number;
  /**
   * Ops within which the output of a producer run again (a recomputed
   * activation, a remade p16) is kept for its next reader on the same tier
   * (schedule/program.ts; absent: 0, each reader runs the producer again):
   * the GPU runs less, but the output holds its bytes until that reader
   * (partition/candidates.ts lpTryRerunHeld).
   */
  readonly rerunHeld?: number;
}
