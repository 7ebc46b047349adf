// follow-grad.mjs — `node bench/adam/follow-grad.mjs` (after `npm run build`):
// the runtime's CPU update following its gradient's copy down chunk by chunk
// (native/exec/executor.cc: the copy checks the whole gradient, then moves it in
// 2^18-element chunks the update's tiles wait for) against the same update
// waiting for the whole copy. One program each, on the emulated GPU (the
// gpu arena is host memory, so the copy down is a memcpy on the d2h stream's
// thread): the gradient (fp16, on the gpu) is copied to the cpu, then the fused
// adam updates p, m, v (fp32) and writes p16. In the second program the adam
// also waits for the free of the gpu gradient, which comes after the copy on
// its stream, so it starts when the copy ends. Steps interleaved, STEPS each,
// after one warm-up; prints medians and their ratio. Env: FOLLOW_BENCH_N
// (default 32_000_000 parameters), FOLLOW_BENCH_STEPS (default 9).
import { DTYPE, INSTRUCTION, OP_KIND, STREAM, TIER, nativeAddon } from '../../dist/runtime/binding.js';

const N = Number(process.env.FOLLOW_BENCH_N ?? 32_000_000);
const STEPS = Number(process.env.FOLLOW_BENCH_STEPS ?? 9);
const addon = nativeAddon();
const align = (x) => Math.ceil(x / 4096) * 4096;
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };

// cpu: p, g16, m, v, p16; gpu: g16 (the backward pass's). 0: copy g16 down; 1: free the gpu's g16; 2: adam.
function program(n, waitWhole) {
  const sizes = [4 * n, 2 * n, 4 * n, 4 * n, 2 * n];
  let off = 0;
  const cpu = sizes.map((size, k) => { const b = { tensor: k, tier: TIER.cpu, offsetBytes: off, sizeBytes: size }; off += align(size); return b; });
  return {
    tiers: [{ capacityBytes: align(2 * n), arenaBytes: align(2 * n) }, { capacityBytes: off, arenaBytes: off }, { capacityBytes: 0, arenaBytes: 0 }],
    spillDir: '',
    tensors: [DTYPE.f32, DTYPE.f16, DTYPE.f32, DTYPE.f32, DTYPE.f16, DTYPE.f16].map((dtype) => ({ dtype, shape: [n] })),
    buffers: [...cpu, { tensor: 5, tier: TIER.gpu, offsetBytes: 0, sizeBytes: 2 * n }],
    ops: [{ kind: OP_KIND.adam, iattr: [1, 0], fattr: [1e-4, 0.9, 0.999, 1e-8, 0.01] }],
    instructions: [
      { stream: STREAM.d2h, kind: INSTRUCTION.copy, op: -1, inputs: [5], outputs: [1], waits: [] },
      { stream: STREAM.d2h, kind: INSTRUCTION.free, op: -1, inputs: [5], outputs: [], waits: [0] },
      { stream: STREAM.cpu, kind: INSTRUCTION.run, op: 0, inputs: [0, 1, 2, 3], outputs: [0, 2, 3, 4], waits: waitWhole ? [0, 1] : [0] },
    ],
  };
}

const sessions = { follows: addon.createSession(program(N, false)), waits: addon.createSession(program(N, true)) };
try {
  const g = new Uint16Array(N);
  for (let i = 0; i < N; i++) g[i] = 0x2000 + (i % 4096);  // small finite fp16 values
  const p = new Float32Array(N).fill(0.5);
  for (const s of Object.values(sessions)) { s.write(0, p); s.write(5, g); }
  const times = { follows: [], waits: [] };
  let step = 1;
  for (const s of Object.values(sessions)) await s.step(step);  // warm-up
  for (let k = 0; k < STEPS; k++) {
    step++;
    for (const [name, s] of Object.entries(sessions)) {
      const st = await s.step(step);
      times[name].push(st.seconds);
    }
  }
  const [f, w] = [median(times.follows), median(times.waits)];
  console.log(`${N} parameters, fp16 gradient copied down, ${STEPS} steps each (interleaved), median step:`);
  console.log(`  update follows the copy: ${(f * 1e3).toFixed(1)} ms`);
  console.log(`  update waits for it:     ${(w * 1e3).toFixed(1)} ms`);
  console.log(`  follows / waits: ${(f / w).toFixed(3)}`);
} finally {
  for (const s of Object.values(sessions)) s.close();
}
