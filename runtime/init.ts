// Parameter initialisation and synthetic data, deterministic from a seed.
// Each parameter gets its own random stream, keyed by (seed, name), so values
// do not depend on the order parameters appear in or on the placement.

import type { InitSpec } from '../compiler/ir/types.js';

/** xoshiro128** seeded by splitmix32 of a string hash. */
export class Rng {
  private s = new Uint32Array(4);
  constructor(seed: number, key = '') {
    let h = (seed >>> 0) ^ 0x9e3779b9;
    for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x85ebca6b) >>> 0;
    for (let i = 0; i < 4; i++) {
      h = (h + 0x9e3779b9) >>> 0;
      let z = h;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      this.s[i] = (z ^ (z >>> 16)) >>> 0;
    }
  }
  nextU32(): number {
    const s = this.s;
    const r = Math.imul(rotl(Math.imul(s[1], 5) >>> 0, 7), 9) >>> 0;
    const t = (s[1] << 9) >>> 0;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = rotl(s[3], 11);
    return r;
  }
  /** Uniform in [0, 1). */
  uniform(): number { return this.nextU32() / 4294967296; }
  /** Uniform integer in [0, n). */
  int(n: number): number { return Math.floor(this.uniform() * n); }
  /** Standard normal (Box-Muller). */
  normal(): number {
    const u = 1 - this.uniform(), v = this.uniform();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }
}

function rotl(x: number, k: number): number { return ((x << k) | (x >>> (32 - k))) >>> 0; }

export function initValues(spec: InitSpec | undefined, count: number, seed: number, name: string): Float32Array {
  const out = new Float32Array(count);
  if (!spec || spec.kind === 'normal') {
    const std = spec?.std ?? 0.02, mean = spec?.mean ?? 0;
    const rng = new Rng(seed, name);
    for (let i = 0; i < count; i++) out[i] = mean + std * rng.normal();
  } else if (spec.kind === 'constant') {
    out.fill(spec.value);
  } else if (spec.kind === 'data') {
    const bytes = Buffer.from(spec.f32Base64, 'base64');
    if (bytes.length !== count * 4) throw new Error(`init data of ${name}: ${bytes.length} bytes for ${count} values`);
    for (let i = 0; i < count; i++) out[i] = bytes.readFloatLE(i * 4);
  } else {
    throw new Error(`init of ${name}: ONNX initializers are read by the session (runtime/session.ts)`);
  }
  return out;
}
