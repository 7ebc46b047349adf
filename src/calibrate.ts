// `tiercut hw calibrate`: measures this machine and writes a hardware profile
// (compiler/cost/profiles.ts) that `compile --hw FILE` accepts.
//
// What is measured, and which profile field it sets (the GPU tier is emulated:
// its kernels run on this CPU, one stream thread each):
//   matmul throughput   runOp(matmul) f32, 256^3          -> gpu/cpu peakFlops (all dtypes)
//   triad bandwidth     hostBandwidth, one thread         -> gpu.memBandwidthBytesPerSec
//   fused Adam          cpuAdamStep, fp32, all threads    -> cpu.memBandwidthBytesPerSec
//                       (28 bytes per parameter, the IR's bytesTouched of an fp32 adam)
//   memcpy host->host   hostBandwidth, one thread         -> h2dBytesPerSec, d2hBytesPerSec
//   nvme store          nvmeBench in the spill directory  -> nvme.read/writeBytesPerSec
//                       (one 256 MiB request, queue depth 8, 1 MiB blocks: the
//                       store's settings, also written as nvme.queueDepth / blockBytes)
//   nvme request        nvmeLatency, 4 KiB requests       -> nvme.read/writeLatencySeconds
//                       (mean time per request with reads and writes in flight at
//                       once, as a plan's nvmeRead and nvmeWrite streams run them,
//                       - 4 KiB / bandwidth; median of 5 passes of 256 requests:
//                       a shared disk's latency wanders)
//   nvme batches        nvmeBatch, k 4 KiB requests in    -> nvme.read/writeBatchRequestSeconds
//                       one transfer, k = 1..32, reads and   (the least-squares slope of the
//                       writes at once; median of 3 passes   time per batch over k: what each
//                       per k                                 further request adds to a batch)
//   kernels             src/calibrate-kernels.ts          -> kernels (per op kind)
//   executor            src/calibrate-executor.ts         -> executor (per instruction,
//                                                            wake-up, step)
// Capacities: gpu as the built-in `local` profile (override with --gpu-mem at
// compile time), cpu = physical memory, nvme = free bytes of the spill directory.

import { mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { cpus, totalmem, tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILTIN_PROFILES, type ExecutorOverheads, type HardwareProfile, type KernelCost } from '../compiler/cost/profiles.js';
import { OP_CODES } from '../compiler/ir/ops.js';
import { cpuAdamStep } from '../runtime/adam.js';
import { nativeAddon } from '../runtime/binding.js';
import { measureExecutorOverheads } from './calibrate-executor.js';
import { measureKernels } from './calibrate-kernels.js';
import { diag } from './diagnostics.js';

export interface CalibrateOptions {
  /** Where the O_DIRECT test file goes (default: the OS temp dir). */
  spillDir?: string;
  /** Bytes written and read by the NVMe test (default 256 MiB). */
  nvmeBytes?: number;
}

export interface Calibration {
  profile: HardwareProfile;
  measured: {
    matmulFlops: number; triadBytesPerSec: number; copyBytesPerSec: number;
    adamParamsPerSec: number; adamBytesPerSec: number;
    nvmeReadBytesPerSec: number; nvmeWriteBytesPerSec: number; nvmeDirect: boolean; nvmeNote: string; nvmeBackend: string;
    nvmeReadLatencySeconds: number; nvmeWriteLatencySeconds: number;
    /** Per batch size k, median seconds per batch (reads and writes at once), and the fitted slopes. */
    nvmeBatch: { sizes: number[]; readSeconds: number[]; writeSeconds: number[] };
    nvmeReadBatchRequestSeconds: number; nvmeWriteBatchRequestSeconds: number;
    /** Mean seconds per 4 KiB request with one direction alone (for comparison; the profile takes the mixed figure). */
    nvmeReadAloneSeconds: number; nvmeWriteAloneSeconds: number;
    executor: ExecutorOverheads; kernels: Record<string, KernelCost>; kernelSamples: Record<string, number>; kernelWorkloads: string[];
  };
}

const best = (n: number, f: () => number) => { let b = Infinity; for (let i = 0; i < n; i++) b = Math.min(b, f()); return b; };
const seconds = (f: () => void) => { const t0 = process.hrtime.bigint(); f(); return Number(process.hrtime.bigint() - t0) / 1e9; };

function matmulFlops(): number {
  const addon = nativeAddon();
  const n = 256;
  const a = new Float32Array(n * n).fill(0.5), b = new Float32Array(n * n).fill(0.25);
  const run = () => addon.runOp(OP_CODES.matmul, 'f32', [], [], [{ shape: [n, n], data: a }, { shape: [n, n], data: b }], [{ shape: [n, n] }]);
  run();
  return (2 * n * n * n) / best(3, () => seconds(run));
}

function adamParamsPerSec(): number {
  const n = 1 << 22;
  const params = new Float32Array(n).fill(0.1), grads = new Float32Array(n).fill(0.01);
  const expAvg = new Float32Array(n), expAvgSq = new Float32Array(n);
  let step = 0;
  const run = () => { cpuAdamStep({ params, grads, expAvg, expAvgSq, step: ++step, lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, adamw: false }); };
  run();
  return n / best(3, () => seconds(run));
}

const NVME_QUEUE_DEPTH = 8, NVME_BLOCK_BYTES = 1 << 20;

/** Least-squares slope of y over x (0 when x does not vary). */
export function slope(x: readonly number[], y: readonly number[]): number {
  const n = x.length, mx = x.reduce((a, b) => a + b, 0) / n, my = y.reduce((a, b) => a + b, 0) / n;
  let sxy = 0, sxx = 0;
  for (let i = 0; i < n; i++) { sxy += (x[i] - mx) * (y[i] - my); sxx += (x[i] - mx) ** 2; }
  return sxx > 0 ? sxy / sxx : 0;
}

/** The test directories a calibration has open (its 256 MiB NVMe file among them), for a signal to remove. */
const openDirs = new Set<string>();

/** Removes the test directories of a calibration still running (`hw calibrate` on SIGINT/SIGTERM: the test file had been left). */
export function removeCalibrationFiles(): void {
  for (const d of openDirs) rmSync(d, { recursive: true, force: true });
  openDirs.clear();
}

/** A temp directory in `parent`, tracked until `done` removes it; one that cannot be made is one line. */
function testDir(parent: string, what: string): { dir: string; done(): void } {
  let dir: string;
  try {
    dir = mkdtempSync(join(parent, 'tiercut-calibrate-'));
  } catch (e) {
    throw diag.runtime(`${what}: cannot create a test directory in ${parent}: ${(e as NodeJS.ErrnoException).message}`);
  }
  openDirs.add(dir);
  return { dir, done() { rmSync(dir, { recursive: true, force: true }); openDirs.delete(dir); } };
}

export async function calibrate(opts: CalibrateOptions = {}): Promise<Calibration> {
  const addon = nativeAddon();
  const host = addon.hostBandwidth({ bytes: 64 << 20, repeats: 5 });
  const flops = matmulFlops();
  const adam = adamParamsPerSec();
  const test = testDir(opts.spillDir ?? tmpdir(), 'nvme tier'), dir = test.dir;
  let nvme: ReturnType<typeof addon.nvmeBench>, small: { read: number; write: number; readAlone: number; writeAlone: number };
  let batch: Calibration['measured']['nvmeBatch'];
  let freeBytes: number;
  try {
    const bytes = opts.nvmeBytes ?? 256 << 20;
    nvme = addon.nvmeBench({ dir, bytes, requestBytes: bytes, queueDepth: NVME_QUEUE_DEPTH, blockBytes: NVME_BLOCK_BYTES });
    const passes = Array.from({ length: 5 }, () => addon.nvmeLatency({ dir, requests: 256, requestBytes: 4096, queueDepth: NVME_QUEUE_DEPTH, blockBytes: NVME_BLOCK_BYTES }));
    const med = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1];
    const batches = Array.from({ length: 3 }, () => addon.nvmeBatch({ dir, sizes: [1, 2, 4, 8, 16, 32], requests: 256, requestBytes: 4096, queueDepth: NVME_QUEUE_DEPTH, blockBytes: NVME_BLOCK_BYTES }));
    const sizes = batches[0].sizes;
    batch = { sizes, readSeconds: sizes.map((_, i) => med(batches.map((b) => b.readSeconds[i]))), writeSeconds: sizes.map((_, i) => med(batches.map((b) => b.writeSeconds[i]))) };
    small = {
      read: med(passes.map((r) => r.mixedReadSeconds)), write: med(passes.map((r) => r.mixedWriteSeconds)),
      readAlone: med(passes.map((r) => r.readSeconds)), writeAlone: med(passes.map((r) => r.writeSeconds)),
    };
    const fs = statfsSync(dir);
    freeBytes = Number(fs.bavail) * Number(fs.bsize);
  } catch (e) {
    throw diag.runtime(`calibrate: ${(e as Error).message}`);
  } finally {
    test.done();
  }
  const latency = (perRequest: number, bandwidth: number) => Math.max(0, perRequest - 4096 / bandwidth);
  const readLatencySeconds = latency(small.read, nvme.readBytesPerSec);
  const writeLatencySeconds = latency(small.write, nvme.writeBytesPerSec);
  // what each further request adds to a batch (the bytes' own time taken out, as for the latency)
  const perRequest = (seconds: number[], bandwidth: number) => Math.max(0, slope(batch.sizes, seconds) - 4096 / bandwidth);
  const readBatchRequestSeconds = perRequest(batch.readSeconds, nvme.readBytesPerSec);
  const writeBatchRequestSeconds = perRequest(batch.writeSeconds, nvme.writeBytesPerSec);
  const peak = { f32: flops, f16: flops, bf16: flops };
  const local = BUILTIN_PROFILES.local;
  const base: HardwareProfile = {
    name: 'calibrated',
    description: `this machine as measured by tiercut hw calibrate on ${new Date().toISOString().slice(0, 10)} (${cpus().length} cores, ${cpus()[0]?.model ?? 'unknown CPU'}); GPU tier emulated`,
    emulatedGpu: true,
    gpu: { capacityBytes: local.gpu.capacityBytes, memBandwidthBytesPerSec: host.triadBytesPerSec, peakFlops: peak },
    cpu: { capacityBytes: totalmem(), memBandwidthBytesPerSec: adam * 28, peakFlops: peak },
    nvme: {
      capacityBytes: Math.max(1, freeBytes), readBytesPerSec: nvme.readBytesPerSec, writeBytesPerSec: nvme.writeBytesPerSec,
      readLatencySeconds, writeLatencySeconds, readBatchRequestSeconds, writeBatchRequestSeconds, queueDepth: NVME_QUEUE_DEPTH, blockBytes: NVME_BLOCK_BYTES,
    },
    h2dBytesPerSec: host.copyBytesPerSec,
    d2hBytesPerSec: host.copyBytesPerSec,
  };
  // the kernels are fitted against the rooflines just measured
  // (a temp directory that could not be made or written had ended the calibration with a stack trace)
  const scratch = testDir(tmpdir(), 'calibrate (the roofline profile the kernels are fitted against)');
  let fit: Awaited<ReturnType<typeof measureKernels>>;
  try {
    const baseFile = join(scratch.dir, 'roofline.json');
    try { writeFileSync(baseFile, JSON.stringify(base)); } catch (e) { throw diag.runtime(`calibrate: cannot write ${baseFile}: ${(e as Error).message}`); }
    fit = await measureKernels(baseFile);
  } finally {
    scratch.done();
  }
  const executor = await measureExecutorOverheads();
  const profile: HardwareProfile = { ...base, kernels: fit.kernels, executor };
  return {
    profile,
    measured: {
      matmulFlops: flops, triadBytesPerSec: host.triadBytesPerSec, copyBytesPerSec: host.copyBytesPerSec,
      adamParamsPerSec: adam, adamBytesPerSec: adam * 28,
      nvmeReadBytesPerSec: nvme.readBytesPerSec, nvmeWriteBytesPerSec: nvme.writeBytesPerSec, nvmeDirect: nvme.direct, nvmeNote: nvme.note,
      nvmeBackend: nvme.backend, nvmeReadLatencySeconds: readLatencySeconds, nvmeWriteLatencySeconds: writeLatencySeconds,
      nvmeReadAloneSeconds: small.readAlone, nvmeWriteAloneSeconds: small.writeAlone,
      nvmeBatch: batch, nvmeReadBatchRequestSeconds: readBatchRequestSeconds, nvmeWriteBatchRequestSeconds: writeBatchRequestSeconds,
      executor, kernels: fit.kernels, kernelSamples: fit.samples, kernelWorkloads: fit.workloads,
    },
  };
}
