// The executor's own costs, for `tiercut hw calibrate`: three small programs of
// `fill` instructions (one float each, so the kernel does next to nothing) run
// through a real session (native/exec/executor.cc), median over many steps.
//
//   single     1 instruction on the gpu stream:
//              stepSeconds        = step wall time - busy time
//                                   (releasing the stream threads and gathering them)
//   chain      N instructions on the gpu stream, no waits:
//              instructionSeconds = (step - busy - stepSeconds) / N
//                                   (what a stream thread spends between two instructions:
//                                   the event bookkeeping, outside the instruction itself)
//   ring       N instructions going round all six streams, each waiting for the
//              one before (so five streams are waiting at any moment, as in a
//              plan that uses them all):
//              wakeSeconds        = (step - busy - stepSeconds) / N - instructionSeconds
//                                   (how long after an instruction ends a stream waiting
//                                   on it starts running; on 2 cores: 4 µs with the
//                                   waits polling first, 24 µs when they block at once)
// The simulator (compiler/simulate/simulate.ts) charges these on top of the
// kernel and copy times. Negative estimates (noise) are clamped to 0.

import type { ExecutorOverheads } from '../compiler/cost/profiles.js';
import { INSTRUCTION, STREAM, TIER, nativeAddon, type NativeInstruction, type NativeProgram } from '../runtime/binding.js';
// (streams are numbered 0..5, runtime/binding.ts STREAM; the ring uses every one)
import { OP_CODES } from '../compiler/ir/ops.js';

const median = (a: readonly number[]) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };

/** N fills of one float each; stream(i) and waits(i) per instruction. */
function fillProgram(n: number, stream: (i: number) => number, waits: (i: number) => number[]): NativeProgram {
  const instructions: NativeInstruction[] = [];
  for (let i = 0; i < n; i++) instructions.push({ stream: stream(i), kind: INSTRUCTION.run, op: 0, inputs: [], outputs: [i], waits: waits(i) });
  return {
    tiers: [{ capacityBytes: n * 64, arenaBytes: n * 64 }, { capacityBytes: 0, arenaBytes: 0 }, { capacityBytes: 0, arenaBytes: 0 }],
    spillDir: '',
    tensors: Array.from({ length: n }, () => ({ dtype: 0, shape: [1] })),
    buffers: Array.from({ length: n }, (_, i) => ({ tensor: i, tier: TIER.gpu, offsetBytes: i * 64, sizeBytes: 4 })),
    ops: [{ kind: OP_CODES.fill, iattr: [], fattr: [1] }],
    instructions,
  };
}

/** Median over `steps` (after warm-up) of wall time minus busy time, per step. */
async function idleSeconds(program: NativeProgram, steps: number): Promise<number> {
  const session = nativeAddon().createSession(program);
  try {
    const idle: number[] = [];
    for (let k = 1; k <= steps + 5; k++) {
      const s = await session.step(k);
      if (k > 5) idle.push(s.seconds - s.streamBusySeconds.reduce((a, b) => a + b, 0));
    }
    return median(idle);
  } finally {
    session.close();
  }
}

export async function measureExecutorOverheads(opts: { instructions?: number; steps?: number } = {}): Promise<ExecutorOverheads> {
  const n = opts.instructions ?? 200, steps = opts.steps ?? 60;
  const single = await idleSeconds(fillProgram(1, () => STREAM.gpu, () => []), steps);
  const chain = await idleSeconds(fillProgram(n, () => STREAM.gpu, () => []), steps);
  const ring = await idleSeconds(fillProgram(n, (i) => i % 6, (i) => (i > 0 ? [i - 1] : [])), steps);
  const stepSeconds = Math.max(0, single);
  const instructionSeconds = Math.max(0, (chain - stepSeconds) / n);
  const wakeSeconds = Math.max(0, (ring - stepSeconds) / n - instructionSeconds);
  return { stepSeconds, instructionSeconds, wakeSeconds };
}
