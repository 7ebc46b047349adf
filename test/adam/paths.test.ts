// paths.test.ts — every instruction-set path of the fused CPU Adam against the
// scalar reference, bit for bit: fp32/fp16/bf16 gradients x no/fp16/bf16 copy x
// Adam, Adam+L2, AdamW x awkward sizes, several steps, 1 and all threads, odd
// tiles. Also: the scalar path against the executor's generic adam
// (native/kernels/adam.cc through runOp), the fp16/bf16 copy against half.h,
// each path's half conversion on special values, and TIERCUT_ADAM_ISA.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

import { OP_KIND, nativeAddon, type AdamIsa } from '../../runtime/binding.js';
import { cpuAdamInfo, cpuAdamStep, type CpuAdamArgs } from '../../src/index.js';
import { expectSameBits, randomState, xorshiftFloats } from './helpers.js';

const addon = nativeAddon();
const info = cpuAdamInfo();
const SIMD: AdamIsa[] = info.supported.filter((isa) => isa !== 'scalar');
const SIZES = [1, 15, 16, 17, 31, 33, 4099, 1_000_003];
const MODES = [
  { name: 'Adam', adamw: false, weightDecay: 0 },
  { name: 'Adam+L2', adamw: false, weightDecay: 0.05 },
  { name: 'AdamW', adamw: true, weightDecay: 0.05 },
] as const;

type State = ReturnType<typeof randomState> & { half?: Uint16Array };

function run(isa: AdamIsa, n: number, gradType: 'fp32' | 'fp16' | 'bf16', halfType: 'fp16' | 'bf16' | undefined,
  mode: (typeof MODES)[number], extra: Partial<CpuAdamArgs> = {}): State {
  const s: State = randomState(n, 12345 + n);
  const grads = gradType === 'fp32' ? s.grads : addon.halfRound(s.grads, gradType);
  if (halfType) s.half = new Uint16Array(n);
  for (let step = 1; step <= 3; step++) {
    const r = cpuAdamStep({
      params: s.params, grads, gradType, expAvg: s.expAvg, expAvgSq: s.expAvgSq, half: s.half, halfType, step,
      lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: mode.weightDecay, adamw: mode.adamw,
      gradScale: 0.75, isa, ...extra,
    });
    expect(r.isa).toBe(isa);
    expect(r.finite).toBe(true);
  }
  return s;
}

describe(`fused Adam paths (this CPU: ${info.supported.join(', ')}; ${info.maxThreads} threads)`, () => {
  it('this x86-64 CPU has at least AVX2', () => {
    if (process.arch === 'x64') expect(SIMD.length).toBeGreaterThan(0);
  });

  for (const isa of SIMD) {
    for (const gradType of ['fp32', 'fp16', 'bf16'] as const) {
      for (const halfType of [undefined, 'fp16', 'bf16'] as const) {
        it(`${isa} = scalar, bit for bit: grads ${gradType}, copy ${halfType ?? 'none'}, sizes ${SIZES.join(' ')}`, () => {
          for (const n of SIZES) {
            for (const mode of MODES) {
              if (n > 5000 && (mode.name !== 'AdamW' || halfType === 'bf16')) continue;  // the big size once per combination
              const want = run('scalar', n, gradType, halfType, mode);
              const threads = n > 5000 ? info.maxThreads : 1;
              const got = run(isa, n, gradType, halfType, mode, { threads, tileElems: n > 5000 ? 10_007 : undefined });
              const tag = `${isa} n=${n} ${mode.name}`;
              expectSameBits(`${tag} p`, got.params, want.params);
              expectSameBits(`${tag} m`, got.expAvg, want.expAvg);
              expectSameBits(`${tag} v`, got.expAvgSq, want.expAvgSq);
              if (halfType) expectSameBits(`${tag} half`, got.half!, want.half!);
            }
          }
        });
      }
    }
  }

  it('scalar path = the generic adam kernel (native/kernels/adam.cc via runOp), bit for bit', () => {
    for (const n of [1, 17, 4099]) {
      for (const mode of MODES) {
        const s = randomState(n, 99 + n);
        const inputs = [s.params, s.grads, s.expAvg, s.expAvgSq].map((data) => ({ shape: [n], data: data.slice() }));
        const [p, m, v] = addon.runOp(OP_KIND.adam, 'f32', [mode.adamw ? 1 : 0, 3], [1e-2, 0.9, 0.999, 1e-8, mode.weightDecay],
          inputs, [{ shape: [n] }, { shape: [n] }, { shape: [n] }]) as Float32Array[];
        cpuAdamStep({ ...s, step: 3, lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: mode.weightDecay, adamw: mode.adamw, isa: 'scalar' });
        expectSameBits(`n=${n} ${mode.name} p`, s.params, p!);
        expectSameBits(`n=${n} ${mode.name} m`, s.expAvg, m!);
        expectSameBits(`n=${n} ${mode.name} v`, s.expAvgSq, v!);
      }
    }
  });

  for (const isa of info.supported) {
    it(`${isa}: the fp16/bf16 copy is half.h's rounding of the updated params`, () => {
      for (const halfType of ['fp16', 'bf16'] as const) {
        const s = run(isa, 4099, 'fp32', halfType, MODES[2]);
        expectSameBits(`${isa} ${halfType}`, s.half!, addon.halfRound(s.params, halfType));
      }
    });

    it(`${isa}: float -> fp16/bf16 conversion = half.h on special values and random bit patterns`, () => {
      const specials = [0, -0, 1, -1, 65504, 65519.99, 65520, -65520, 65536, 1e6, 1e-8, 6e-8, 5.960464477539063e-8,
        2.9802322387695312e-8, 6.103515625e-5, 6.097555160522461e-5, Infinity, -Infinity, NaN, 3.3895313892515355e38];
      const n = 1 << 16;
      const bits = new Uint32Array(n + specials.length);
      const u = xorshiftFloats(7, n);
      for (let i = 0; i < n; i++) bits[i] = Math.floor((u[i]! + 1) * 2147483648) >>> 0;
      // ties and payload NaNs
      bits[0] = 0x3f801000; bits[1] = 0x3f803000; bits[2] = 0x7f800001; bits[3] = 0xffc00001; bits[4] = 0x7fbfffff;
      bits[5] = 0x3f808000; bits[6] = 0x3f818000; bits[7] = 0x00000001; bits[8] = 0x33000000; bits[9] = 0x33000001;
      const values = new Float32Array(bits.buffer);
      values.set(specials, n);
      for (const type of ['fp16', 'bf16'] as const)
        expectSameBits(`${isa} ${type}`, addon.adamHalfRound(values, type, isa), addon.halfRound(values, type));
    });

    it(`${isa}: fp16/bf16 -> float widening (the executor's, around every kernel with half operands) = half.h on all 65536 bit patterns`, () => {
      const all = new Uint16Array(1 << 16);
      for (let i = 0; i < all.length; i++) all[i] = i;
      for (const type of ['fp16', 'bf16'] as const) {
        const got = new Uint32Array(addon.adamHalfWiden(all, type, isa).buffer), want = new Uint32Array(addon.halfWiden(all, type).buffer);
        // F16C quiets an fp16 signalling NaN (exponent 31, top mantissa bit clear, rest not 0); half.h keeps its bits
        let differ = 0, quieted = 0;
        for (let i = 0; i < all.length; i++) {
          if (got[i] === want[i]) continue;
          const snan = type === 'fp16' && (i & 0x7c00) === 0x7c00 && (i & 0x200) === 0 && (i & 0x3ff) !== 0;
          if (snan && got[i] === (want[i]! | 0x400000) >>> 0) quieted++; else differ++;
        }
        expect(differ, `${isa} ${type}: values widened differently from half.h`).toBe(0);
        if (type === 'bf16') expect(quieted).toBe(0);
      }
    });
  }

  it('TIERCUT_ADAM_ISA forces a path; an unknown or missing one is an error naming the variable', () => {
    const script = `import('./dist/runtime/adam.js').then(({ cpuAdamStep }) => {
      const a = () => new Float32Array(33).fill(0.5);
      try { console.log(cpuAdamStep({ params: a(), grads: a(), expAvg: a(), expAvgSq: a(), step: 1, lr: 1e-3, beta1: 0.9,
        beta2: 0.999, eps: 1e-8, weightDecay: 0, adamw: false }).isa); } catch (e) { console.log('error: ' + e.message); }
    })`;
    const child = (value: string) =>
      spawnSync(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, TIERCUT_ADAM_ISA: value }, encoding: 'utf8' }).stdout.trim();
    for (const isa of ['scalar', 'avx2', 'avx512'] as const) {
      const out = child(isa);
      console.log(`TIERCUT_ADAM_ISA=${isa}: ${out}`);
      if (info.supported.includes(isa)) expect(out).toBe(isa);
      else expect(out).toMatch(new RegExp(`^error: cpuAdamStep: TIERCUT_ADAM_ISA: ${isa} is not supported by this CPU`));
    }
    expect(child('sse9')).toBe('error: cpuAdamStep: TIERCUT_ADAM_ISA: expected scalar, avx2 or avx512, got "sse9"');
    expect(child('')).toBe(info.best);
  });
});
