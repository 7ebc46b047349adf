// adam.ts — cpuAdamStep: the fused CPU Adam / AdamW (native/adam) on caller-owned
// typed arrays. Validates every argument here, with messages that name it
// ("cpuAdamStep: grads: expected 4099 elements to match params, got 4098"), then
// calls the addon through runtime/binding.ts.
//
// Sync: blocks the calling thread for the step; the work runs on the native
// thread pool (all cores unless `threads` says otherwise). Memory bound: an fp32
// step moves 28 bytes per parameter (+4 for the inf/NaN check pass).
import type { AdamAttrs } from '../compiler/ir/types.js';
import { nativeAddon, type AdamIsa, type NativeAdamArgs } from './binding.js';

export type { AdamIsa } from './binding.js';

/** Hyper-parameters as the plan's optimizer (AdamAttrs: lr, beta1, beta2, eps, weightDecay, adamw), plus: */
export interface CpuAdamArgs extends AdamAttrs {
  /** fp32 master parameters, updated in place. */
  readonly params: Float32Array;
  /** Gradients: Float32Array, or Uint16Array holding fp16 / bf16 bits (gradType). Not modified. */
  readonly grads: Float32Array | Uint16Array;
  /** Storage of grads: 'fp32' (default for a Float32Array), 'fp16' or 'bf16' (Uint16Array). */
  readonly gradType?: 'fp32' | 'fp16' | 'bf16';
  /** First and second moments (torch's exp_avg, exp_avg_sq), updated in place; zeros before step 1. */
  readonly expAvg: Float32Array;
  readonly expAvgSq: Float32Array;
  /** Step number, counting from 1 (bias corrections use it). */
  readonly step: number;
  /** Multiplies the gradient first (loss-scale unscale x clipping coefficient). Default 1. */
  readonly gradScale?: number;
  /** Receives the updated parameters rounded to halfType (nearest, ties to even). */
  readonly half?: Uint16Array;
  /** Default 'fp16'. */
  readonly halfType?: 'fp16' | 'bf16';
  /** Threads of the shared native pool to use, 1 .. all cores (default: all). */
  readonly threads?: number;
  /** Check the gradients for inf/NaN before updating (default true). false saves one read of the
   *  gradients, for callers that checked them already; a non-finite gradient then reaches the state. */
  readonly checkFinite?: boolean;
  /** Forces an instruction-set path (tests, benchmarks). Default: TIERCUT_ADAM_ISA, else the best
   *  this CPU has. Throws when the CPU lacks it. */
  readonly isa?: AdamIsa;
  /** Parameters per tile (default 32768). */
  readonly tileElems?: number;
}

export interface CpuAdamResult {
  /** false: some grads[i] * gradScale was inf or NaN; params, expAvg, expAvgSq and half are untouched. */
  readonly finite: boolean;
  /** The instruction-set path that ran. */
  readonly isa: AdamIsa;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (ArrayBuffer.isView(v)) return (v.constructor as { name?: string }).name ?? 'a typed array';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'number') return String(v);
  if (typeof v === 'string') return `'${v}'`;
  return typeof v === 'object' ? 'an object' : String(v);
}

function fail(field: string, expected: string, got: unknown): never {
  const Kind = typeof got === 'number' && !Number.isNaN(got) ? RangeError : TypeError;
  throw new Kind(`cpuAdamStep: ${field}: expected ${expected}, got ${describe(got)}`);
}

function finite(field: string, v: unknown, lo = -Infinity, hiExclusive = Infinity, range = ''): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) fail(field, 'a finite number', v);
  if (v < lo || v >= hiExclusive) fail(field, range, v);
  return v;
}

function overlaps(a: ArrayBufferView, b: ArrayBufferView): boolean {
  return a.buffer === b.buffer && a.byteOffset < b.byteOffset + b.byteLength && b.byteOffset < a.byteOffset + a.byteLength;
}

const CODE = { fp32: 0, fp16: 1, bf16: 2 } as const;

/** One Adam / AdamW step, torch 1.13's formula (bias corrections in double;
 *  denom = sqrt(v) / sqrt(1 - beta2^step) + eps; p -= lr / (1 - beta1^step) * m / denom).
 *  Sync. Throws TypeError / RangeError naming the argument on bad input, before touching anything. */
export function cpuAdamStep(args: CpuAdamArgs): CpuAdamResult {
  if (typeof args !== 'object' || args === null) fail('arguments', 'an options object', args);
  const { params, grads, expAvg, expAvgSq, half } = args;
  if (!(params instanceof Float32Array)) fail('params', 'a Float32Array', params);
  const n = params.length;
  const gradType = args.gradType ?? (grads instanceof Uint16Array ? undefined : 'fp32');
  if (gradType === undefined) fail('gradType', "'fp16' or 'bf16' for Uint16Array grads", args.gradType);
  if (gradType !== 'fp32' && gradType !== 'fp16' && gradType !== 'bf16') fail('gradType', "'fp32', 'fp16' or 'bf16'", gradType);
  if (gradType === 'fp32' && !(grads instanceof Float32Array)) fail('grads', "a Float32Array (gradType 'fp32')", grads);
  if (gradType !== 'fp32' && !(grads instanceof Uint16Array)) fail('grads', `a Uint16Array (gradType '${gradType}')`, grads);
  const sameLength = (field: string, a: ArrayBufferView & { length: number }) => {
    if (a.length !== n) throw new RangeError(`cpuAdamStep: ${field}: expected ${n} elements to match params, got ${a.length}`);
  };
  sameLength('grads', grads);
  if (!(expAvg instanceof Float32Array)) fail('expAvg', 'a Float32Array', expAvg);
  sameLength('expAvg', expAvg);
  if (!(expAvgSq instanceof Float32Array)) fail('expAvgSq', 'a Float32Array', expAvgSq);
  sameLength('expAvgSq', expAvgSq);
  let halfType: 0 | 1 | 2 = 0;
  if (half !== undefined) {
    if (!(half instanceof Uint16Array)) fail('half', 'a Uint16Array', half);
    sameLength('half', half);
    const t = args.halfType ?? 'fp16';
    if (t !== 'fp16' && t !== 'bf16') fail('halfType', "'fp16' or 'bf16'", t);
    halfType = CODE[t];
  } else if (args.halfType !== undefined && args.halfType !== 'fp16' && args.halfType !== 'bf16') {
    fail('halfType', "'fp16' or 'bf16'", args.halfType);
  }
  const arrays: [string, ArrayBufferView][] = [['params', params], ['grads', grads], ['expAvg', expAvg], ['expAvgSq', expAvgSq]];
  if (half) arrays.push(['half', half]);
  for (let i = 1; i < arrays.length; i++)
    for (let j = 0; j < i; j++)
      if (overlaps(arrays[i]![1], arrays[j]![1]))
        throw new RangeError(`cpuAdamStep: ${arrays[i]![0]}: shares memory with ${arrays[j]![0]}; every array must be distinct`);

  const step = args.step;
  if (typeof step !== 'number' || !Number.isSafeInteger(step) || step < 1) fail('step', 'an integer >= 1', step);
  const lr = finite('lr', args.lr, 0, Infinity, 'lr >= 0');
  const beta1 = finite('beta1', args.beta1, 0, 1, '0 <= beta1 < 1');
  const beta2 = finite('beta2', args.beta2, 0, 1, '0 <= beta2 < 1');
  const eps = finite('eps', args.eps, 0, Infinity, 'eps >= 0');
  const weightDecay = finite('weightDecay', args.weightDecay, 0, Infinity, 'weightDecay >= 0');
  const gradScale = finite('gradScale', args.gradScale ?? 1);
  if (typeof args.adamw !== 'boolean') fail('adamw', 'a boolean', args.adamw);
  const addon = nativeAddon();
  if (args.threads !== undefined) {
    const max = addon.adamInfo().maxThreads;
    if (typeof args.threads !== 'number' || !Number.isInteger(args.threads) || args.threads < 1 || args.threads > max)
      fail('threads', `an integer in [1, ${max}]`, args.threads);
  }
  if (args.tileElems !== undefined && (typeof args.tileElems !== 'number' || !Number.isSafeInteger(args.tileElems) || args.tileElems < 1))
    fail('tileElems', 'an integer >= 1', args.tileElems);
  if (args.checkFinite !== undefined && typeof args.checkFinite !== 'boolean') fail('checkFinite', 'a boolean', args.checkFinite);
  if (args.isa !== undefined && args.isa !== 'scalar' && args.isa !== 'avx2' && args.isa !== 'avx512')
    fail('isa', "'scalar', 'avx2' or 'avx512'", args.isa);

  const native: NativeAdamArgs = {
    params, grads, gradType: CODE[gradType], expAvg, expAvgSq, half, halfType,
    step, lr, beta1, beta2, eps, weightDecay, adamw: args.adamw, gradScale,
    threads: args.threads, tileElems: args.tileElems, checkFinite: args.checkFinite ?? true, isa: args.isa,
  };
  try {
    return addon.adamStep(native);
  } catch (e) {
    // the native checks use the addon's name; the public one is cpuAdamStep
    if (e instanceof Error) e.message = e.message.replace(/^adamStep: /, 'cpuAdamStep: ');
    throw e;
  }
}

/** The Adam paths this CPU runs, the best one, and the native pool's thread count. Sync. */
export function cpuAdamInfo(): { best: AdamIsa; supported: AdamIsa[]; maxThreads: number; tileElems: number } {
  return nativeAddon().adamInfo();
}
