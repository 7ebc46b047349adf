// bad-input.test.ts — cpuAdamStep rejects bad arguments with an error that names
// the argument, before touching anything; never a crash.
import { describe, expect, it } from 'vitest';

import { nativeAddon } from '../../runtime/binding.js';
import { cpuAdamStep, type CpuAdamArgs } from '../../src/index.js';
import { bytesOf, randomState } from './helpers.js';

function args(n = 4099): CpuAdamArgs {
  return { ...randomState(n, 3), step: 1, lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, adamw: false };
}

const CASES: [string, (a: CpuAdamArgs) => unknown, string][] = [
  ['short grads', (a) => ({ ...a, grads: new Float32Array(4098) }), 'cpuAdamStep: grads: expected 4099 elements to match params, got 4098'],
  ['long expAvg', (a) => ({ ...a, expAvg: new Float32Array(4100) }), 'cpuAdamStep: expAvg: expected 4099 elements to match params, got 4100'],
  ['short expAvgSq', (a) => ({ ...a, expAvgSq: new Float32Array(1) }), 'cpuAdamStep: expAvgSq: expected 4099 elements to match params, got 1'],
  ['short half', (a) => ({ ...a, half: new Uint16Array(7) }), 'cpuAdamStep: half: expected 4099 elements to match params, got 7'],
  ['params Float64Array', (a) => ({ ...a, params: new Float64Array(4099) }), 'cpuAdamStep: params: expected a Float32Array, got Float64Array'],
  ['params plain array', (a) => ({ ...a, params: [1, 2] }), 'cpuAdamStep: params: expected a Float32Array, got an array'],
  ['expAvg Uint16Array', (a) => ({ ...a, expAvg: new Uint16Array(4099) }), 'cpuAdamStep: expAvg: expected a Float32Array, got Uint16Array'],
  ['fp16 grads in a Float32Array', (a) => ({ ...a, gradType: 'fp16' }), "cpuAdamStep: grads: expected a Uint16Array (gradType 'fp16'), got Float32Array"],
  ['Uint16Array grads without gradType', (a) => ({ ...a, grads: new Uint16Array(4099) }), "cpuAdamStep: gradType: expected 'fp16' or 'bf16' for Uint16Array grads, got undefined"],
  ['gradType fp8', (a) => ({ ...a, gradType: 'fp8' }), "cpuAdamStep: gradType: expected 'fp32', 'fp16' or 'bf16', got 'fp8'"],
  ['halfType fp8', (a) => ({ ...a, half: new Uint16Array(4099), halfType: 'fp8' }), "cpuAdamStep: halfType: expected 'fp16' or 'bf16', got 'fp8'"],
  ['half Float32Array', (a) => ({ ...a, half: new Float32Array(4099) }), 'cpuAdamStep: half: expected a Uint16Array, got Float32Array'],
  ['lr NaN', (a) => ({ ...a, lr: NaN }), 'cpuAdamStep: lr: expected a finite number, got NaN'],
  ['lr Infinity', (a) => ({ ...a, lr: Infinity }), 'cpuAdamStep: lr: expected a finite number, got Infinity'],
  ['lr string', (a) => ({ ...a, lr: '0.1' }), "cpuAdamStep: lr: expected a finite number, got '0.1'"],
  ['lr negative', (a) => ({ ...a, lr: -1 }), 'cpuAdamStep: lr: expected lr >= 0, got -1'],
  ['beta1 = 1', (a) => ({ ...a, beta1: 1 }), 'cpuAdamStep: beta1: expected 0 <= beta1 < 1, got 1'],
  ['beta2 NaN', (a) => ({ ...a, beta2: NaN }), 'cpuAdamStep: beta2: expected a finite number, got NaN'],
  ['eps -Infinity', (a) => ({ ...a, eps: -Infinity }), 'cpuAdamStep: eps: expected a finite number, got -Infinity'],
  ['weightDecay negative', (a) => ({ ...a, weightDecay: -0.1 }), 'cpuAdamStep: weightDecay: expected weightDecay >= 0, got -0.1'],
  ['gradScale NaN', (a) => ({ ...a, gradScale: NaN }), 'cpuAdamStep: gradScale: expected a finite number, got NaN'],
  ['step 0', (a) => ({ ...a, step: 0 }), 'cpuAdamStep: step: expected an integer >= 1, got 0'],
  ['step 1.5', (a) => ({ ...a, step: 1.5 }), 'cpuAdamStep: step: expected an integer >= 1, got 1.5'],
  ['adamw missing', (a) => ({ ...a, adamw: undefined }), 'cpuAdamStep: adamw: expected a boolean, got undefined'],
  ['threads 0', (a) => ({ ...a, threads: 0 }), 'cpuAdamStep: threads: expected an integer in [1, '],
  ['isa sse9', (a) => ({ ...a, isa: 'sse9' }), "cpuAdamStep: isa: expected 'scalar', 'avx2' or 'avx512', got 'sse9'"],
  ['expAvg aliasing params', (a) => ({ ...a, expAvg: a.params }), 'cpuAdamStep: expAvg: shares memory with params; every array must be distinct'],
  ['not an object', () => null, 'cpuAdamStep: arguments: expected an options object, got null'],
];

describe('cpuAdamStep: bad input', () => {
  for (const [name, make, message] of CASES) {
    it(`${name}: "${message}"`, () => {
      const a = args();
      const before = bytesOf(a.params).slice();
      let err: unknown;
      try { cpuAdamStep(make(a) as CpuAdamArgs); } catch (e) { err = e; }
      expect(err).toBeInstanceOf(Error);
      expect((err as Error).message.startsWith(message), (err as Error).message).toBe(true);
      expect(Buffer.compare(bytesOf(a.params), before)).toBe(0);
    });
  }

  it('the addon itself checks lengths and types (a caller skipping runtime/adam.ts cannot crash it)', () => {
    const a = args(16);
    const call = (over: object) => () => nativeAddon().adamStep({ ...a, gradType: 0, halfType: 0, gradScale: 1, checkFinite: true, ...over } as never);
    expect(call({ grads: new Float32Array(3) })).toThrow('adamStep: grads: expected 16 elements to match params, got 3');
    expect(call({ gradType: 1 })).toThrow('adamStep: grads: expected a Uint16Array, got a typed array');
    expect(call({ halfType: 2 })).toThrow('adamStep: half: expected a Uint16Array, got undefined');
    expect(call({ lr: NaN })).toThrow('adamStep: lr: expected a finite number, got NaN');
    expect(call({ step: 0 })).toThrow('adamStep: step: expected an integer in [1, 9007199254740992], got 0');
  });
});
