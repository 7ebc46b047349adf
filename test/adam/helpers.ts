// Shared by the test/adam tests: the fixture's integer PRNG and bit comparisons.
import { expect } from 'vitest';

/** scripts/fixtures/gen_adam.py's xorshift32 stream: u = ((s >>> 8) / 2^24) * 2 - 1, exact in float32. */
export function xorshiftFloats(seed: number, count: number): Float64Array {
  let s = seed >>> 0;
  const out = new Float64Array(count);
  for (let i = 0; i < count; i++) {
    s = (s ^ (s << 13)) >>> 0;
    s = (s ^ (s >>> 17)) >>> 0;
    s = (s ^ (s << 5)) >>> 0;
    out[i] = ((s >>> 8) / 16777216) * 2 - 1;
  }
  return out;
}

/** Random Adam state for n parameters: p in [-1, 1), g in [-0.1, 0.1), m small, v >= 0 small. */
export function randomState(n: number, seed: number) {
  const u = xorshiftFloats(seed, 4 * n);
  const params = new Float32Array(n), grads = new Float32Array(n), expAvg = new Float32Array(n), expAvgSq = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    params[i] = u[i]!;
    grads[i] = u[n + i]! * 0.1;
    expAvg[i] = u[2 * n + i]! * 0.01;
    expAvgSq[i] = Math.abs(u[3 * n + i]!) * 1e-4;
  }
  return { params, grads, expAvg, expAvgSq };
}

export function bytesOf(a: ArrayBufferView): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** Asserts a and b hold the same bits; reports the first difference and how many differ. */
export function expectSameBits(name: string, a: Float32Array | Uint16Array, b: Float32Array | Uint16Array): void {
  expect(a.length, `${name}: length`).toBe(b.length);
  const wa = a instanceof Float32Array ? new Uint32Array(a.buffer, a.byteOffset, a.length) : a;
  const wb = b instanceof Float32Array ? new Uint32Array(b.buffer, b.byteOffset, b.length) : b;
  let first = -1, count = 0;
  for (let i = 0; i < wa.length; i++) if (wa[i] !== wb[i]) { if (first < 0) first = i; count++; }
  if (count) console.log(`${name}: ${count} of ${a.length} differ, first at ${first}: ${a[first]} vs ${b[first]}`);
  expect(count, `${name}: elements whose bits differ (first at ${first})`).toBe(0);
}

/** A session's step, the buffers it may not touch when it fails. */
interface StepSession { read(buffer: number): ArrayBufferView; step(step: number): Promise<unknown> }

/** Asserts that step `k` fails with `message` and leaves every buffer in `kept` byte-for-byte as it was. */
export async function expectStepFailsUntouched(s: StepSession, k: number, message: string, kept: number[], label = ''): Promise<void> {
  const before = kept.map((b) => bytesOf(s.read(b)).slice());
  await expect(s.step(k), label).rejects.toThrow(message);
  kept.forEach((b, i) => expect(Buffer.compare(bytesOf(s.read(b)), before[i]!), `${label} buffer ${b}`).toBe(0));
}
