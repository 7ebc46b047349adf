// executor.test.ts — the native runtime core on tiny hand-built programs:
// stream threads and waits, copies over every link (including a real nvme file),
// fp16/bf16 conversion, validation messages and op errors. Needs the addon
// built (npx node-gyp rebuild); needs no GPU.
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import {
  DTYPE, INSTRUCTION, OP_KIND, STREAM, TIER, nativeAddon,
  type NativeInstruction, type NativeProgram,
} from '../../runtime/binding.js';

const native = nativeAddon();

// ---------------------------------------------------------------------------
// a small program builder

type Tensor = { dtype: number; shape: number[] };
type Buffer = { tensor: number; tier: number; offsetBytes: number; sizeBytes: number };
const DTYPE_BYTES = [4, 2, 2, 4, 8, 8];

class Builder {
  tensors: Tensor[] = [];
  buffers: Buffer[] = [];
  ops: { kind: number; iattr: number[]; fattr: number[] }[] = [];
  instructions: NativeInstruction[] = [];
  next = [0, 0, 0];  // bump allocator per tier, 64-byte aligned (nvme: nvmeAlign)
  nvmeAlign = 64;

  buffer(tier: number, dtype: number, shape: number[]): number {
    const numel = shape.reduce((a, b) => a * b, 1);
    const sizeBytes = numel * DTYPE_BYTES[dtype]!;
    const align = tier === TIER.nvme ? this.nvmeAlign : 64;
    this.tensors.push({ dtype, shape });
    this.buffers.push({ tensor: this.tensors.length - 1, tier, offsetBytes: this.next[tier]!, sizeBytes });
    this.next[tier]! += Math.ceil(sizeBytes / align) * align;
    return this.buffers.length - 1;
  }
  run(stream: number, kind: number, inputs: number[], outputs: number[], waits: number[] = [],
    iattr: number[] = [], fattr: number[] = []): number {
    this.ops.push({ kind, iattr, fattr });
    this.instructions.push({ stream, kind: INSTRUCTION.run, op: this.ops.length - 1, inputs, outputs, waits });
    return this.instructions.length - 1;
  }
  copy(stream: number, src: number, dst: number, waits: number[] = []): number {
    this.instructions.push({ stream, kind: INSTRUCTION.copy, op: -1, inputs: [src], outputs: [dst], waits });
    return this.instructions.length - 1;
  }
  free(stream: number, buffer: number, waits: number[] = []): number {
    this.instructions.push({ stream, kind: INSTRUCTION.free, op: -1, inputs: [buffer], outputs: [], waits });
    return this.instructions.length - 1;
  }
  program(spillDir = ''): NativeProgram {
    return {
      tiers: this.next.map((n) => ({ capacityBytes: n + 1024, arenaBytes: n })),
      spillDir,
      tensors: this.tensors,
      buffers: this.buffers,
      ops: this.ops,
      instructions: this.instructions,
    };
  }
}

const f32 = (u8: Uint8Array) => new Float32Array(u8.buffer, u8.byteOffset, u8.byteLength / 4);
const range = (n: number, f: (i: number) => number) => Float32Array.from({ length: n }, (_, i) => f(i));

/** A session of `program`, or undefined when it asks for io_uring and this build or kernel has none. */
function sessionOrNone(io: string, program: Parameters<typeof native.createSession>[0]): ReturnType<typeof native.createSession> | undefined {
  try {
    return native.createSession(program);
  } catch (e) {
    if (io === 'uring' && /io_uring is unavailable/.test(String(e))) return undefined;
    throw e;
  }
}

function matmulRef(a: Float32Array, b: Float32Array, N: number, K: number, M: number): Float32Array {
  const y = new Float32Array(N * M);
  for (let n = 0; n < N; n++)
    for (let m = 0; m < M; m++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += a[n * K + k]! * b[k * M + m]!;
      y[n * M + m] = s;
    }
  return y;
}

// ---------------------------------------------------------------------------

describe('executor', () => {
  it('runs a two-stream program: cpu matmul -> h2d -> gpu add -> d2h', async () => {
    const N = 3, K = 5, M = 4;
    const b = new Builder();
    const A = b.buffer(TIER.cpu, DTYPE.f32, [N, K]);
    const B = b.buffer(TIER.cpu, DTYPE.f32, [K, M]);
    const Y = b.buffer(TIER.cpu, DTYPE.f32, [N, M]);
    const Yg = b.buffer(TIER.gpu, DTYPE.f32, [N, M]);
    const bias = b.buffer(TIER.gpu, DTYPE.f32, [M]);
    const Z = b.buffer(TIER.gpu, DTYPE.f32, [N, M]);
    const Zc = b.buffer(TIER.cpu, DTYPE.f32, [N, M]);
    const mm = b.run(STREAM.cpu, OP_KIND.matmul, [A, B], [Y], [], [0]);
    const up = b.copy(STREAM.h2d, Y, Yg, [mm]);
    const add = b.run(STREAM.gpu, OP_KIND.add, [Yg, bias], [Z], [up]);
    b.free(STREAM.gpu, Yg, [add]);
    b.copy(STREAM.d2h, Z, Zc, [add]);

    const s = native.createSession(b.program());
    const a = range(N * K, (i) => (i % 7) - 3), bb = range(K * M, (i) => ((i * 3) % 5) - 2);
    const bi = range(M, (i) => i * 0.5);
    s.write(A, a); s.write(B, bb); s.write(bias, bi);
    const want = matmulRef(a, bb, N, K, M).map((v, i) => v + bi[i % M]!);
    for (let step = 1; step <= 2; step++) {
      const st = await s.step(step);
      expect(Array.from(f32(s.read(Zc)))).toEqual(Array.from(want));
      expect(st.streamInstructions).toEqual([2, 1, 1, 1, 0, 0]);
      expect(st.bytes).toEqual({ h2d: N * M * 4, d2h: N * M * 4, nvmeRead: 0, nvmeWrite: 0, cpuToCpu: 0, ringSent: 0 });
      expect(st.seconds).toBeGreaterThan(0);
      expect(st.streamBusySeconds[STREAM.cpu]).toBeGreaterThan(0);
    }
    const m = s.stats();
    expect(m.peakBytes[TIER.gpu]).toBe(b.buffers[Z]!.offsetBytes + N * M * 4);
    // gpu: bias (16) + Yg (48) + Z (48) live together before Yg's free
    expect(m.peakLiveBytes[TIER.gpu]).toBe(16 + 48 + 48);
    s.close();
    s.close();  // idempotent
    expect(s.stats().peakLiveBytes[TIER.gpu]).toBe(16 + 48 + 48);
    expect(() => s.read(Zc)).toThrow(/session.read: the session is closed/);
  });

  it('a copy waiting on a slow op on another stream sees the op\'s finished result', async () => {
    const N = 192;
    const b = new Builder();
    const A = b.buffer(TIER.cpu, DTYPE.f32, [N, N]);
    const B = b.buffer(TIER.cpu, DTYPE.f32, [N, N]);
    const Y = b.buffer(TIER.cpu, DTYPE.f32, [N, N]);
    const Yg = b.buffer(TIER.gpu, DTYPE.f32, [N, N]);
    const mm = b.run(STREAM.cpu, OP_KIND.matmul, [A, B], [Y], [], [0]);
    b.copy(STREAM.h2d, Y, Yg, [mm]);
    const s = native.createSession(b.program());
    const a = range(N * N, (i) => (i % 5) - 2), bb = range(N * N, (i) => (i % 3) - 1);
    const want = matmulRef(a, bb, N, N, N);  // small integers: exact in float
    s.write(A, a); s.write(B, bb);
    for (let step = 1; step <= 3; step++) {
      s.write(Y, new Float32Array(N * N).fill(-7));  // a sentinel an early copy would carry over
      s.write(Yg, new Float32Array(N * N));
      const st = await s.step(step);
      expect(f32(s.read(Yg))).toEqual(want);
      // the copy could not start before the matmul ended, so the step took at least the matmul
      expect(st.seconds).toBeGreaterThanOrEqual(st.streamBusySeconds[STREAM.cpu]! * 0.99);
    }
    s.close();
  });

  it('widens fp16 operands for the kernel and rounds results back (ties to even)', async () => {
    const b = new Builder();
    const x = b.buffer(TIER.gpu, DTYPE.f16, [8]);
    const y = b.buffer(TIER.gpu, DTYPE.f16, [8]);
    const z = b.buffer(TIER.gpu, DTYPE.f16, [8]);
    b.run(STREAM.gpu, OP_KIND.add, [x, y], [z]);
    const s = native.createSession(b.program());
    const xs = new Float32Array([1, 2048, 0.1, 65504, -3, 1e-7, 0.5, 1000]);
    const ys = new Float32Array([2 ** -11, 1, 0.2, 16, 3, 1e-7, 2 ** -12, 0.25]);
    const xh = native.halfRound(xs, 'fp16'), yh = native.halfRound(ys, 'fp16');
    s.write(x, xh); s.write(y, yh);
    await s.step(1);
    const xw = native.halfWiden(xh, 'fp16'), yw = native.halfWiden(yh, 'fp16');
    const want = native.halfRound(xw.map((v, i) => v + yw[i]!), 'fp16');
    expect(new Uint16Array(s.read(z).buffer)).toEqual(want);
    expect(new Uint16Array(s.read(z).buffer)[1]).toBe(0x6800);  // 2048 + 1 = 2049 -> 2048 (tie, even)
    s.close();
  });

  it('gives adam the step number and the lr override, in place', async () => {
    const b = new Builder();
    const p = b.buffer(TIER.cpu, DTYPE.f32, [4]);
    const g = b.buffer(TIER.cpu, DTYPE.f32, [4]);
    const m = b.buffer(TIER.cpu, DTYPE.f32, [4]);
    const v = b.buffer(TIER.cpu, DTYPE.f32, [4]);
    const [b1, b2, eps] = [0.9, 0.999, 1e-8];
    b.run(STREAM.cpu, OP_KIND.adam, [p, g, m, v], [p, m, v], [], [0, 0], [0.5, b1, b2, eps, 0]);
    const s = native.createSession(b.program());
    const p0 = new Float32Array([1, -2, 3, 0.5]), g0 = new Float32Array([0.1, -0.2, 0.3, -0.4]);
    s.write(p, p0); s.write(g, g0); s.write(m, new Float32Array(4)); s.write(v, new Float32Array(4));
    const step = 3, lr = 0.01;
    await s.step(step, { lr });
    const got = f32(s.read(p));
    for (let i = 0; i < 4; i++) {
      const mi = (1 - b1) * g0[i]!, vi = (1 - b2) * g0[i]! ** 2;
      const want = p0[i]! - (lr / (1 - b1 ** step)) * mi / (Math.sqrt(vi) / Math.sqrt(1 - b2 ** step) + eps);
      expect(Math.abs(got[i]! - want)).toBeLessThan(1e-6);
    }
    s.close();
  });

  it('rejects the step with the kernel message and stays usable and closable', async () => {
    const b = new Builder();
    const ids = b.buffer(TIER.cpu, DTYPE.i32, [4]);
    const table = b.buffer(TIER.cpu, DTYPE.f32, [10, 3]);
    const y = b.buffer(TIER.cpu, DTYPE.f32, [4, 3]);
    const yg = b.buffer(TIER.gpu, DTYPE.f32, [4, 3]);
    const emb = b.run(STREAM.cpu, OP_KIND.embedding, [ids, table], [y]);
    b.copy(STREAM.h2d, y, yg, [emb]);  // waits on the failing op: must be released, not hang
    const s = native.createSession(b.program());
    s.write(table, range(30, (i) => i));
    s.write(ids, new Int32Array([1, 2, 99, 3]));
    await expect(s.step(1)).rejects.toThrow(
      'instruction 0 (cpu, run embedding): embedding: id 99 at position 2 is outside [0, 10)');
    s.write(ids, new Int32Array([1, 2, 9, 3]));
    const st = await s.step(2);
    expect(st.streamInstructions[STREAM.h2d]).toBe(1);
    expect(Array.from(f32(s.read(yg)))).toEqual([3, 4, 5, 6, 7, 8, 27, 28, 29, 9, 10, 11]);
    s.close();
  });

  it('close() during a step waits for it; steps after close reject', async () => {
    const N = 128;
    const b = new Builder();
    const A = b.buffer(TIER.cpu, DTYPE.f32, [N, N]);
    const Y = b.buffer(TIER.cpu, DTYPE.f32, [N, N]);
    b.run(STREAM.cpu, OP_KIND.matmul, [A, A], [Y], [], [0]);
    const s = native.createSession(b.program());
    s.write(A, range(N * N, (i) => i % 3));
    const running = s.step(1);
    expect(() => s.write(A, new Float32Array(N * N))).toThrow(/session.write: a step is running/);
    const queued = s.step(2);
    s.close();
    const results = await Promise.allSettled([running, queued]);
    // the first step either ran to completion before close or was closed before it started
    for (const r of results) if (r.status === 'rejected') expect(String(r.reason)).toMatch(/closed before step/);
    expect(() => s.step(3)).toThrow(/session.step: the session is closed/);
  });
});

// ---------------------------------------------------------------------------

describe('nvme tier', () => {
  const spillRoot = mkdtempSync(join(tmpdir(), 'tiercut-test-'));
  afterAll(() => rmSync(spillRoot, { recursive: true, force: true }));

  it('round-trips bytes through the spill file and removes it on close', async () => {
    const b = new Builder();
    const x = b.buffer(TIER.cpu, DTYPE.f32, [100]);
    const xn = b.buffer(TIER.nvme, DTYPE.f32, [100]);
    const xg = b.buffer(TIER.gpu, DTYPE.f32, [100]);
    const wr = b.copy(STREAM.nvmeWrite, x, xn);
    b.copy(STREAM.nvmeRead, xn, xg, [wr]);
    const program = b.program(spillRoot);
    const s = native.createSession(program);
    const dirs = readdirSync(spillRoot);
    expect(dirs).toHaveLength(1);
    expect(dirs[0]).toMatch(new RegExp(`^tiercut-${process.pid}-\\d+$`));
    const file = join(spillRoot, dirs[0]!, 'nvme.bin');
    expect(statSync(file).size).toBe(Math.ceil(program.tiers[TIER.nvme]!.arenaBytes / 4096) * 4096); // whole O_DIRECT blocks

    const data = range(100, (i) => Math.sin(i));
    s.write(x, data);
    const st = await s.step(1);
    expect(f32(s.read(xg))).toEqual(data);
    expect(f32(s.read(xn))).toEqual(data);  // pread straight from the file
    expect(st.bytes).toEqual({ h2d: 0, d2h: 0, nvmeRead: 400, nvmeWrite: 400, cpuToCpu: 0, ringSent: 0 });
    expect(st.streamInstructions).toEqual([0, 0, 0, 0, 1, 1]);
    s.write(xn, new Float32Array(100).fill(2));  // session.write on nvme is a pwrite
    expect(f32(s.read(xn))[99]).toBe(2);
    s.close();
    expect(existsSync(join(spillRoot, dirs[0]!))).toBe(false);
    expect(readdirSync(spillRoot)).toEqual([]);
  });

  it('completes a ready free with the instruction before it, and a free still waiting on its own', async () => {
    const b = new Builder();
    const N = 96;
    const A = b.buffer(TIER.cpu, DTYPE.f32, [N, N]), Bm = b.buffer(TIER.cpu, DTYPE.f32, [N, N]), Y = b.buffer(TIER.cpu, DTYPE.f32, [N, N]);
    const g1 = b.buffer(TIER.gpu, DTYPE.f32, [64]), g2 = b.buffer(TIER.gpu, DTYPE.f32, [64]), g3 = b.buffer(TIER.gpu, DTYPE.f32, [64]);
    const slow = b.run(STREAM.cpu, OP_KIND.matmul, [A, Bm], [Y], [], [0]);   // the gpu stream's last free waits for it
    const f1 = b.run(STREAM.gpu, OP_KIND.fill, [], [g1], [], [], [1]);
    const free1 = b.free(STREAM.gpu, g1);
    const f2 = b.run(STREAM.gpu, OP_KIND.fill, [], [g2], [], [], [2]);
    const free2 = b.free(STREAM.gpu, g2), free3 = b.free(STREAM.gpu, g3);   // two ready frees in a row
    b.run(STREAM.gpu, OP_KIND.fill, [], [g3], [], [], [3]);
    const late = b.free(STREAM.gpu, g1, [slow]);
    const s = native.createSession(b.program());
    for (let step = 1; step <= 3; step++) {
      const st = await s.step(step, { trace: true });
      const t = st.trace!;
      expect([t.startSeconds[free1], t.endSeconds[free1]]).toEqual([t.endSeconds[f1], t.endSeconds[f1]]);
      for (const f of [free2, free3]) expect([t.startSeconds[f], t.endSeconds[f]]).toEqual([t.endSeconds[f2], t.endSeconds[f2]]);
      expect(t.startSeconds[late]).toBeGreaterThanOrEqual(t.endSeconds[slow]);
      expect(st.streamInstructions).toEqual([7, 1, 0, 0, 0, 0]);
    }
    // the folded frees still end their buffers' lives: g3 lives from its fill to free3 of the
    // next step, beside g1 or g2 but never both (without the frees: 3 x 256)
    expect(s.stats().peakLiveBytes[TIER.gpu]).toBe(2 * 256);
    s.close();
  });

  it('runs nvme copies that are ready together as one batch, and keeps apart those that touch the same bytes', async () => {
    for (const nvmeAlign of [4096, 64]) {
      const b = new Builder();
      b.nvmeAlign = nvmeAlign;
      const n = 4;
      const src = [...Array(n)].map(() => b.buffer(TIER.cpu, DTYPE.f32, [100]));
      const file = [...Array(n)].map(() => b.buffer(TIER.nvme, DTYPE.f32, [100]));
      const dst = [...Array(n)].map(() => b.buffer(TIER.gpu, DTYPE.f32, [100]));
      const writes = src.map((x, i) => b.copy(STREAM.nvmeWrite, x, file[i]!));
      // (each read waits on the last write: the writes complete one by one, in order, so every
      // read is ready at once only when the last write is done)
      const reads = file.map((f, i) => b.copy(STREAM.nvmeRead, f, dst[i]!, [writes[n - 1]!]));
      // a second read into dst[3], after the first in stream order: it must land last
      const last = b.copy(STREAM.nvmeRead, file[0]!, dst[3]!, [writes[n - 1]!]);
      const s = native.createSession(b.program(spillRoot));
      const data = src.map((_, i) => range(100, (j) => i * 1000 + j));
      src.forEach((x, i) => s.write(x, data[i]!));
      const st = await s.step(1, { trace: true });
      for (let i = 0; i < n - 1; i++) expect(f32(s.read(dst[i]!))).toEqual(data[i]);
      expect(f32(s.read(dst[3]!))).toEqual(data[0]);
      for (let i = 0; i < n; i++) expect(f32(s.read(file[i]!))).toEqual(data[i]);
      const t = st.trace!;
      if (nvmeAlign === 4096) {
        // every write is ready at once and owns its blocks: one batch (one shared start; each
        // member ends when its own request and those before it are done, in stream order)
        for (const w of writes) expect(t.startSeconds[w]).toBe(t.startSeconds[writes[0]!]);
        for (let i = 1; i < n; i++) expect(t.endSeconds[writes[i]!]).toBeGreaterThanOrEqual(t.endSeconds[writes[i - 1]!]);
        // then every read is ready at once: one batch, but not with the read into the same bytes
        for (const r of reads) expect(t.startSeconds[r]).toBe(t.startSeconds[reads[0]!]);
        expect(t.startSeconds[last]).toBeGreaterThanOrEqual(t.endSeconds[reads[3]!]);
      } else {
        // 400-byte files 64 bytes apart share one 4096-byte block: writes never overlap in time
        for (let i = 1; i < n; i++) expect(t.startSeconds[writes[i]!]).toBeGreaterThanOrEqual(t.endSeconds[writes[i - 1]!]);
      }
      // aligned: no read-modify-write; 64-byte packing: each write lies inside one shared block, read once first
      expect(s.info().nvmeEdgeReads).toBe(nvmeAlign === 4096 ? 0 : n);
      expect(st.bytes.nvmeRead).toBe((n + 1) * 400);
      expect(st.streamInstructions[STREAM.nvmeRead]).toBe(n + 1);
      s.close();
    }
  });

  // Per-request completion: a stream waiting on the first read of a batch starts when that
  // read is done, not when the batch is. The batch is one small read then one large one
  // (32 MiB: tens of ms from a disk, milliseconds from the page cache; the small read takes
  // well under one); a gpu fill waits on the small read.
  it.each(['uring', 'threads'])('completes each member of an nvme batch when its own request is done (%s)', async (io) => {
    const before = process.env.TIERCUT_NVME_IO;
    process.env.TIERCUT_NVME_IO = io;
    try {
      const b = new Builder();
      b.nvmeAlign = 4096;
      const smallFile = b.buffer(TIER.nvme, DTYPE.f32, [1024]);
      const bigFile = b.buffer(TIER.nvme, DTYPE.f32, [8 << 20]);
      const small = b.buffer(TIER.cpu, DTYPE.f32, [1024]);
      const big = b.buffer(TIER.cpu, DTYPE.f32, [8 << 20]);
      const scratch = b.buffer(TIER.gpu, DTYPE.f32, [16]);
      const g = b.buffer(TIER.gpu, DTYPE.f32, [16]);
      // the scratch buffer's fill comes first, so the free of it is ready when the batch forms
      const fill0 = b.run(STREAM.gpu, OP_KIND.fill, [], [scratch], [], [], [1]);
      const r0 = b.copy(STREAM.nvmeRead, smallFile, small, [fill0]);
      const f = b.free(STREAM.nvmeRead, scratch, [fill0]);
      const r1 = b.copy(STREAM.nvmeRead, bigFile, big, [fill0]);
      const fill = b.run(STREAM.gpu, OP_KIND.fill, [], [g], [r0], [], [7]);
      const s = sessionOrNone(io, b.program(spillRoot));
      if (!s) return;
      s.write(smallFile, range(1024, (j) => j));
      s.write(bigFile, range(8 << 20, (j) => j % 1000));
      let ranBefore = 0;
      for (let step = 0; step < 3; step++) {
        const st = await s.step(1, { trace: true });
        const t = st.trace!;
        // one batch: both reads start together
        expect(t.startSeconds[r1]).toBe(t.startSeconds[r0]);
        // the small read completes before the large one, and the gpu op waiting on it may start then
        expect(t.endSeconds[r0]).toBeLessThan(t.endSeconds[r1]);
        expect(t.startSeconds[fill]).toBeGreaterThanOrEqual(t.endSeconds[r0]);
        // that it starts before the large read ends depends on the gpu thread being scheduled in
        // time, which a loaded 2-core CI machine may not do in every step (seen once): counted below
        if (t.startSeconds[fill]! < t.endSeconds[r1]!) ranBefore++;
        // the free between them is a member too and completes with the small read
        expect(t.startSeconds[f]).toBe(t.startSeconds[r0]);
        expect(t.endSeconds[f]).toBe(t.endSeconds[r0]);
        expect(st.streamInstructions[STREAM.nvmeRead]).toBe(3);
        expect(st.bytes.nvmeRead).toBe(4 * 1024 + 4 * (8 << 20));
      }
      expect(ranBefore).toBeGreaterThan(0);
      expect(f32(s.read(big)).subarray(0, 2000)).toEqual(range(2000, (j) => j % 1000));
      expect(f32(s.read(small))).toEqual(range(1024, (j) => j));
      expect(f32(s.read(g))).toEqual(new Float32Array(16).fill(7));
      s.close();
    } finally {
      if (before === undefined) delete process.env.TIERCUT_NVME_IO; else process.env.TIERCUT_NVME_IO = before;
    }
  });

  // Merged I/O (native/tiers/nvme_run.h): the members of a batch whose file ranges follow each
  // other go as one vectored I/O (preadv/pwritev, io_uring readv/writev), host memory mixed:
  // a zero-copy buffer, one with an unaligned tail (zero-copy body + staged tail), two staged
  // ones. Each member still completes in stream order, a gpu op waiting on the first read starts
  // after it, the bytes round-trip; with TIERCUT_NVME_MERGE=0 the same program takes one I/O per
  // chunk. A spill file removed before a step: the step fails naming the batch's first copy and
  // the store's message, and nothing waiting on the batch runs.
  it.each(['uring', 'threads'])('merges file-contiguous members of an nvme batch into one I/O and completes each in order (%s)', async (io) => {
    const env = { io: process.env.TIERCUT_NVME_IO, merge: process.env.TIERCUT_NVME_MERGE };
    process.env.TIERCUT_NVME_IO = io;
    try {
      for (const merge of ['1', '0']) {
        process.env.TIERCUT_NVME_MERGE = merge;
        const b = new Builder();
        b.nvmeAlign = 4096;
        const sizes = [4096, 2048 + 100, 100, 1000];  // floats: 16 KiB, 8 KiB + 400 B, 400 B, 4000 B
        // host buffers side by side: hostW[0] at 0 and hostR[0] at 16 KiB are block-aligned
        // (zero copy), hostW[1] at 32 KiB too, the rest are not
        const host = sizes.map((n) => [b.buffer(TIER.cpu, DTYPE.f32, [n]), b.buffer(TIER.cpu, DTYPE.f32, [n])]);
        const [hostW, hostR] = [host.map((h) => h[0]!), host.map((h) => h[1]!)];
        const file = sizes.map((n) => b.buffer(TIER.nvme, DTYPE.f32, [n]));
        const g = b.buffer(TIER.gpu, DTYPE.f32, [16]);
        const writes = sizes.map((_, i) => b.copy(STREAM.nvmeWrite, hostW[i]!, file[i]!));
        const reads = sizes.map((_, i) => b.copy(STREAM.nvmeRead, file[i]!, hostR[i]!, [writes[sizes.length - 1]!]));
        const fill = b.run(STREAM.gpu, OP_KIND.fill, [], [g], [reads[0]!], [], [7]);
        const s = sessionOrNone(io, b.program(spillRoot));
        if (!s) return;
        const data = sizes.map((n, i) => range(n, (j) => i * 10000 + j));
        hostW.forEach((h, i) => s.write(h, data[i]!));
        for (let step = 1; step <= 2; step++) {
          const before = s.info();
          const st = await s.step(step, { trace: true });
          const after = s.info();
          // file-contiguous chunks: 5 written (hostW[0] zero-copy, hostW[1] zero-copy body +
          // staged tail, two staged: 3 iovecs), 4 read (hostR[0] zero-copy, three staged: 2 iovecs)
          expect(after.nvmeIos - before.nvmeIos).toBe(merge === '1' ? 2 : 9);
          expect(after.nvmeMergedChunks - before.nvmeMergedChunks).toBe(merge === '1' ? 7 : 0);
          const t = st.trace!;
          for (const batch of [writes, reads]) {
            for (const x of batch) expect(t.startSeconds[x]).toBe(t.startSeconds[batch[0]!]);  // one batch
            for (let i = 1; i < batch.length; i++) expect(t.endSeconds[batch[i]!]).toBeGreaterThanOrEqual(t.endSeconds[batch[i - 1]!]);
          }
          expect(t.startSeconds[fill]).toBeGreaterThanOrEqual(t.endSeconds[reads[0]!]);
          expect(st.streamInstructions[STREAM.nvmeRead]).toBe(sizes.length);
          expect(st.bytes.nvmeRead).toBe(4 * sizes.reduce((a, n) => a + n, 0));
          hostR.forEach((h, i) => expect(f32(s.read(h)), `buffer ${i}`).toEqual(data[i]));
          file.forEach((f, i) => expect(f32(s.read(f)), `file ${i}`).toEqual(data[i]));
        }
        // a removed spill file: the batch's first copy is named, nothing after it completes
        s.write(g, new Float32Array(16));
        unlinkSync(s.info().nvmeFile);
        await expect(s.step(3)).rejects.toThrow(new RegExp(`^instruction ${writes[0]} \\(nvmeWrite, copy .*nvme tier: the spill file .*nvme\\.bin was removed during the run \\(No such file or directory\\)`));
        expect(f32(s.read(g))).toEqual(new Float32Array(16));
        s.close();
      }
      expect(readdirSync(spillRoot)).toEqual([]);
    } finally {
      for (const [k, v] of [['TIERCUT_NVME_IO', env.io], ['TIERCUT_NVME_MERGE', env.merge]] as const) {
        if (v === undefined) delete process.env[k]; else process.env[k] = v;
      }
    }
  });
});

// ---------------------------------------------------------------------------

describe('createSession validation', () => {
  function base(): Builder {
    const b = new Builder();
    const a = b.buffer(TIER.cpu, DTYPE.f32, [4]);
    const c = b.buffer(TIER.gpu, DTYPE.f32, [4]);
    b.copy(STREAM.h2d, a, c);
    return b;
  }

  it('names the field for an offset out of range', () => {
    const p = base().program();
    const bad = { ...p, buffers: p.buffers.map((x, i) => (i === 1 ? { ...x, offsetBytes: 64 } : x)) };
    expect(() => native.createSession(bad)).toThrow(
      'program.buffers[1]: offset 64 + size 16 exceeds the gpu arena (64 bytes)');
  });

  it('names the field for a wait on a later instruction', () => {
    const b = base();
    b.copy(STREAM.d2h, 1, 0, [5]);
    expect(() => native.createSession(b.program())).toThrow('program.instructions[1].waits[0]: 5 is not an earlier instruction');
  });

  it('names the field for a size mismatch', () => {
    const p = base().program();
    const bad = { ...p, buffers: p.buffers.map((x, i) => (i === 0 ? { ...x, sizeBytes: 12 } : x)) };
    expect(() => native.createSession(bad)).toThrow(/^program\.buffers\[0\]\.sizeBytes: expected 16 .*got 12$/);
    const b = base();
    const small = b.buffer(TIER.gpu, DTYPE.f32, [3]);
    b.copy(STREAM.h2d, 0, small);
    expect(() => native.createSession(b.program())).toThrow(
      'program.instructions[1]: copy from buffer 0 (16 bytes) to buffer 2 (12 bytes): sizes differ');
  });

  it('rejects an arena over capacity, overlapping persistent buffers and op operands on nvme', () => {
    const p = base().program();
    expect(() => native.createSession({ ...p, tiers: [{ capacityBytes: 16, arenaBytes: 64 }, p.tiers[1]!, p.tiers[2]!] }))
      .toThrow('program.tiers[0]: arena 64 bytes exceeds capacity 16 bytes');
    const overlap = { ...p, buffers: [...p.buffers, { tensor: 1, tier: TIER.gpu, offsetBytes: 0, sizeBytes: 16 }] };
    expect(() => native.createSession(overlap)).toThrow(/program\.buffers\[2\]: .*overlap buffer 1/);
    // freeing one of them makes the overlap the TypeScript verifier's business
    expect(() => native.createSession({
      ...overlap,
      instructions: [...p.instructions, { stream: 0, kind: INSTRUCTION.free, op: -1, inputs: [2], outputs: [], waits: [] }],
    }).close()).not.toThrow();
    const b = new Builder();
    const xn = b.buffer(TIER.nvme, DTYPE.f32, [4]);
    const y = b.buffer(TIER.cpu, DTYPE.f32, [4]);
    b.run(STREAM.cpu, OP_KIND.gelu, [xn], [y]);
    expect(() => native.createSession(b.program(tmpdir()))).toThrow(
      'program.instructions[0].inputs[0]: buffer 0 is on nvme; ops read and write only gpu or cpu buffers');
  });

  it('names the field for malformed values', () => {
    const p = base().program();
    expect(() => native.createSession({ ...p, tiers: p.tiers.slice(0, 2) })).toThrow('program.tiers: expected 3 tiers');
    const bad = { ...p, tensors: [{ dtype: 0, shape: [4] }, { dtype: 0, shape: ['4'] }] } as unknown as NativeProgram;
    expect(() => native.createSession(bad)).toThrow('program.tensors[1].shape[0]: expected a number, got a string');
  });
});

// ---------------------------------------------------------------------------
// Reference rounding in plain JS, on doubles (every float32 is exact in a double):
// a format with `mant` mantissa bits and exponent bias `bias`.

function roundRef(x: number, mant: number, bias: number): number {
  const maxExp = bias;                         // largest unbiased exponent of a finite value
  const minExp = 1 - bias;                     // exponent of the smallest normal
  const expBits = Math.log2(2 * bias + 2);     // 5 for fp16, 8 for bf16
  const sign = x < 0 || Object.is(x, -0) ? 1 << (mant + expBits) : 0;
  if (Number.isNaN(x)) return ((1 << expBits) - 1) << mant | 1 << (mant - 1);
  const a = Math.abs(x);
  if (a === Infinity) return sign | ((1 << expBits) - 1) << mant;
  const roundEven = (q: number) => {
    const f = Math.floor(q), d = q - f;
    return d > 0.5 || (d === 0.5 && f % 2 === 1) ? f + 1 : f;
  };
  if (a < 2 ** minExp) return sign | roundEven(a / 2 ** (minExp - mant));  // subnormal (may reach the min normal)
  let e = 0;
  while (a >= 2 ** (e + 1)) e++;
  while (a < 2 ** e) e--;
  let m = roundEven((a / 2 ** e - 1) * 2 ** mant);
  if (m === 2 ** mant) { m = 0; e++; }
  if (e > maxExp) return sign | ((1 << expBits) - 1) << mant;  // rounds past the largest finite: inf
  return sign | (e + bias) << mant | m;
}

function widenRef(h: number, mant: number, bias: number): number {
  const expBits = Math.log2(2 * bias + 2);
  const s = h >> (mant + expBits) ? -1 : 1;
  const e = (h >> mant) & ((1 << expBits) - 1), m = h & ((1 << mant) - 1);
  if (e === (1 << expBits) - 1) return m ? NaN : s * Infinity;
  if (e === 0) return s * m * 2 ** (1 - bias - mant);
  return s * (1 + m / 2 ** mant) * 2 ** (e - bias);
}

describe('halfRound / halfWiden', () => {
  const tricky = [
    0, -0, 0.1, -0.1, 1 / 3, 1, -1, 65504, 65519.99, 65520, -65520, 65536, 1e6, Infinity, -Infinity, NaN,
    2 ** -14, 2 ** -24, 2 ** -25, 3 * 2 ** -26, 2 ** -25 + 2 ** -40, 5 * 2 ** -26, 1023 * 2 ** -24, 2 ** -14 - 2 ** -25,
    6e-8, 1e-8, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 2049, 2051, 4097, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 257, 259,
    3.4e38, -3.4e38, 2 ** -126, 2 ** -133, 2 ** -134, 3 * 2 ** -135, 1e-40, 3.1415927,
  ];
  const values = Float32Array.from(tricky);
  const formats = [['fp16', 10, 15], ['bf16', 7, 127]] as const;

  for (const [type, mant, bias] of formats) {
    it(`${type}: rounds to nearest even bit-exactly, NaN stays NaN`, () => {
      const got = native.halfRound(values, type);
      const isNaNBits = (h: number) => ((h >> mant) & ((2 * bias + 1))) === 2 * bias + 1 && (h & ((1 << mant) - 1)) !== 0;
      for (let i = 0; i < values.length; i++) {
        const want = roundRef(values[i]!, mant, bias);
        if (Number.isNaN(values[i])) expect(isNaNBits(got[i]!), `NaN -> ${got[i]!.toString(16)}`).toBe(true);
        else expect(got[i], `${type}(${values[i]})`).toBe(want);
      }
      if (type === 'fp16') {
        const [, , c01] = got;
        expect(c01).toBe(0x2e66);                                            // 0.1
        expect(got[tricky.indexOf(65504)]).toBe(0x7bff);
        expect(got[tricky.indexOf(65520)]).toBe(0x7c00);                     // 65520 -> inf
        expect(got[tricky.indexOf(65519.99)]).toBe(0x7bff);
        expect(got[tricky.indexOf(2 ** -25)]).toBe(0);                       // tie between 0 and 2^-24 -> 0
        expect(got[tricky.indexOf(3 * 2 ** -26)]).toBe(1);
        expect(got[tricky.indexOf(1 + 2 ** -11)]).toBe(0x3c00);              // tie -> even (1)
        expect(got[tricky.indexOf(1 + 3 * 2 ** -11)]).toBe(0x3c02);          // tie -> even (up)
      }
    });

    it(`${type}: widens every bit pattern exactly`, () => {
      const bits = Uint16Array.from({ length: 65536 }, (_, i) => i);
      const got = native.halfWiden(bits, type);
      for (let h = 0; h < 65536; h++) {
        const want = widenRef(h, mant, bias);
        if (Number.isNaN(want)) { if (!Number.isNaN(got[h])) expect(got[h], `bits ${h}`).toBeNaN(); }
        else if (got[h] !== want || Object.is(got[h], -0) !== Object.is(want, -0)) expect(got[h], `bits ${h}`).toBe(want);
      }
      // widen then round is the identity on every non-NaN pattern
      const back = native.halfRound(got, type);
      for (let h = 0; h < 65536; h++) if (!Number.isNaN(got[h]) && back[h] !== h) expect(back[h], `bits ${h}`).toBe(h);
    });
  }

  it('rejects bad arguments with the field', () => {
    expect(() => native.halfRound(new Float64Array(2) as unknown as Float32Array, 'fp16'))
      .toThrow('halfRound: values: expected a Float32Array, got Float64Array');
    expect(() => native.halfWiden(new Uint16Array(2), 'fp8' as 'fp16')).toThrow("halfWiden: type: expected 'fp16' or 'bf16', got 'fp8'");
  });
});

describe('runOp', () => {
  it('runs one kernel in f64 and throws the kernel message', () => {
    const [y] = native.runOp(OP_KIND.matmul, 'f64', [0], [], [
      { shape: [2, 3], data: Float64Array.from([1, 2, 3, 4, 5, 6]) },
      { shape: [3, 1], data: Float64Array.from([1, 0, -1]) },
    ], [{ shape: [2, 1] }]);
    expect(y).toBeInstanceOf(Float64Array);
    expect(Array.from(y!)).toEqual([-2, -2]);
    expect(() => native.runOp(OP_KIND.crossEntropy, 'f32', [], [], [
      { shape: [4, 96], data: new Float32Array(4 * 96) },
      { shape: [4], data: Int32Array.from([0, 1, 2, 99]) },
    ], [{ shape: [] }])).toThrow('cross_entropy: target 99 at position 3 is outside [0, 96)');
    expect(() => native.runOp(OP_KIND.gelu, 'f32', [], [], [{ shape: [2], data: new Float64Array(2) }], [{ shape: [2] }]))
      .toThrow('runOp: inputs[0].data: expected Float32Array or Int32Array, got Float64Array');
  });
});
