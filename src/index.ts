// tiercut's public API: the stages a program can call without the CLI.
export { compile, trainingGraph, place, planFor, type CompileOptions } from './compile.js';
export { readPlan, writePlan, parsePlan, serializePlan, checkPlan } from '../compiler/plan/io.js';
export { planStats, type PlanStats } from '../compiler/report/stats.js';
export { textReport } from '../compiler/report/text.js';
export { TrainingSession, type SessionOptions, type StepResult } from '../runtime/session.js';
export { syntheticData, fileData, spFullGraph, spRankData, type StepData } from '../runtime/data.js';
export type { StepStats } from '../runtime/binding.js';
export { SequenceParallelSession, type SpStepResult } from '../runtime/sp-session.js';
export { readSafetensors, writeSafetensors } from '../runtime/safetensors.js';
export { BUILTIN_PROFILES, loadProfile, type HardwareProfile } from '../compiler/cost/profiles.js';
export { UserError } from './diagnostics.js';
export { cpuAdamStep, cpuAdamInfo, type CpuAdamArgs, type CpuAdamResult, type AdamIsa } from '../runtime/adam.js';
export type { Plan } from '../compiler/plan/types.js';
export type { Graph, Tensor, Op, AdamAttrs, Precision } from '../compiler/ir/types.js';
export {
  ringAttention, ringAttentionBackward, zigzagChunk, shardRows,
  type RingAttentionOptions, type RingAttentionBackwardOptions, type RingAttentionResult,
  type RingAttentionGradients, type RingRankStats,
} from '../runtime/ring.js';
