// Hardware profiles: what each tier holds and how fast each resource runs.
// Built-in profiles are data; a JSON file with the same fields is accepted too
// (validated field by field). Sizes in bytes, bandwidths in bytes per second,
// compute in flops per second.
//
// Optional, measured by `tiercut hw calibrate` (src/calibrate*.ts) and absent
// from the built-in profiles (which then cost as pure rooflines):
//   kernels    per kernel (cost.ts kernelKey: "gelu", "gelu[erf]", "gelu[erf]@f16",
//              ...; a kernel's fp32 cost serves its half form when that has none,
//              a plain op kind its variants), this machine against the roofline:
//              seconds = fixedSeconds + rooflineFactor x roofline seconds
//   executor   the runtime's own costs per instruction, per cross-stream wake-up
//              and per step (src/calibrate-executor.ts)
//   nvme.readLatencySeconds / writeLatencySeconds: the fixed cost of one request
//   nvme.readBatchRequestSeconds / writeBatchRequestSeconds: what each further
//              request adds to a batch of small requests handed to the store at
//              once (the executor's nvme batches; compiler/simulate)
//   nvme.queueDepth / blockBytes: the I/O settings the store runs with (the
//              plan carries its profile, so the plan names them; run flags override)

import { existsSync, readFileSync } from 'node:fs';
import { diag } from '../../src/diagnostics.js';
import { OP_CODES } from '../ir/ops.js';

export interface DeviceProfile {
  readonly capacityBytes: number;
  readonly memBandwidthBytesPerSec: number;
  readonly peakFlops: { readonly f32: number; readonly f16: number; readonly bf16: number };
}

export interface NvmeProfile {
  readonly capacityBytes: number;
  readonly readBytesPerSec: number;
  readonly writeBytesPerSec: number;
  readonly readLatencySeconds?: number;
  readonly writeLatencySeconds?: number;
  readonly readBatchRequestSeconds?: number;
  readonly writeBatchRequestSeconds?: number;
  readonly queueDepth?: number;
  readonly blockBytes?: number;
}

/** A kernel's time as measured: fixedSeconds + rooflineFactor x its roofline time. */
export interface KernelCost { readonly fixedSeconds: number; readonly rooflineFactor: number }

/** The executor's costs (native/exec/executor.cc), see src/calibrate-executor.ts. */
export interface ExecutorOverheads {
  /** A stream thread's bookkeeping between two instructions. */
  readonly instructionSeconds: number;
  /** From the end of an instruction to the start of one on another stream that was blocked on it. */
  readonly wakeSeconds: number;
  /** Releasing the stream threads at the start of a step and gathering them at its end. */
  readonly stepSeconds: number;
}

export interface HardwareProfile {
  readonly name: string;
  readonly description: string;
  /** true when the GPU tier is host memory standing in for a GPU (this machine). */
  readonly emulatedGpu: boolean;
  readonly gpu: DeviceProfile;
  readonly cpu: DeviceProfile;
  readonly nvme: NvmeProfile;
  readonly h2dBytesPerSec: number;
  readonly d2hBytesPerSec: number;
  /** Per kernel (cost.ts kernelKey, or a plain op kind for all its variants); others cost their roofline. */
  readonly kernels?: Readonly<Record<string, KernelCost>>;
  readonly executor?: ExecutorOverheads;
}

const GB = 1e9, TB = 1e12, GiB = 2 ** 30;

// CPU side of a server node: a share of the host, fp32 SIMD peak, DRAM bandwidth.
const dgx2Share = { capacityBytes: 1.5 * TB, memBandwidthBytesPerSec: 60 * GB, peakFlops: { f32: 1.0e12, f16: 0.5e12, bf16: 0.5e12 } };
const modernHost = { capacityBytes: 2 * TB, memBandwidthBytesPerSec: 150 * GB, peakFlops: { f32: 3.0e12, f16: 1.5e12, bf16: 3.0e12 } };

export const BUILTIN_PROFILES: Readonly<Record<string, HardwareProfile>> = {
  'v100-32g': {
    name: 'v100-32g', description: 'one V100 32 GB of a DGX-2 (PCIe 3 x16, 1.5 TB host share, as in the ZeRO-Offload paper)', emulatedGpu: false,
    gpu: { capacityBytes: 32 * GB, memBandwidthBytesPerSec: 900 * GB, peakFlops: { f32: 15.7e12, f16: 125e12, bf16: 15.7e12 } },
    cpu: dgx2Share,
    nvme: { capacityBytes: 30 * TB / 16, readBytesPerSec: 3 * GB, writeBytesPerSec: 2 * GB },
    h2dBytesPerSec: 12 * GB, d2hBytesPerSec: 12 * GB,
  },
  'a100-80g': {
    name: 'a100-80g', description: 'one A100 80 GB SXM (PCIe 4 x16 to the host)', emulatedGpu: false,
    gpu: { capacityBytes: 80 * GB, memBandwidthBytesPerSec: 2039 * GB, peakFlops: { f32: 19.5e12, f16: 312e12, bf16: 312e12 } },
    cpu: modernHost,
    nvme: { capacityBytes: 15 * TB, readBytesPerSec: 6.8 * GB, writeBytesPerSec: 4 * GB },
    h2dBytesPerSec: 24 * GB, d2hBytesPerSec: 24 * GB,
  },
  'h100-80g': {
    name: 'h100-80g', description: 'one H100 80 GB SXM (PCIe 5 x16 to the host)', emulatedGpu: false,
    gpu: { capacityBytes: 80 * GB, memBandwidthBytesPerSec: 3350 * GB, peakFlops: { f32: 67e12, f16: 989e12, bf16: 989e12 } },
    cpu: modernHost,
    nvme: { capacityBytes: 30 * TB, readBytesPerSec: 12 * GB, writeBytesPerSec: 8 * GB },
    h2dBytesPerSec: 50 * GB, d2hBytesPerSec: 50 * GB,
  },
  'h200-141g': {
    name: 'h200-141g', description: 'one H200 141 GB SXM (PCIe 5 x16 to the host)', emulatedGpu: false,
    gpu: { capacityBytes: 141 * GB, memBandwidthBytesPerSec: 4800 * GB, peakFlops: { f32: 67e12, f16: 989e12, bf16: 989e12 } },
    cpu: modernHost,
    nvme: { capacityBytes: 30 * TB, readBytesPerSec: 12 * GB, writeBytesPerSec: 8 * GB },
    h2dBytesPerSec: 50 * GB, d2hBytesPerSec: 50 * GB,
  },
  local: {
    name: 'local', description: 'this machine: the GPU tier emulated in host memory (capacity from --gpu-mem), kernels on the CPU', emulatedGpu: true,
    // The emulated GPU stands in for a real one: it is planned as a compute-rich,
    // memory-poor tier (10x the CPU), so plans made here have the shape they would
    // have on a GPU box. Predicted times are for that stand-in, not for this CPU.
    gpu: { capacityBytes: 1 * GiB, memBandwidthBytesPerSec: 80 * GB, peakFlops: { f32: 80e9, f16: 80e9, bf16: 80e9 } },
    cpu: { capacityBytes: 16 * GiB, memBandwidthBytesPerSec: 8 * GB, peakFlops: { f32: 8e9, f16: 8e9, bf16: 8e9 } },
    nvme: { capacityBytes: 64 * GiB, readBytesPerSec: 1.5 * GB, writeBytesPerSec: 2 * GB },
    h2dBytesPerSec: 6 * GB, d2hBytesPerSec: 6 * GB,
  },
};

export interface ProfileOverrides { gpuMemBytes?: number; cpuMemBytes?: number; nvmeBytes?: number }

/** A profile's every field checked (a file's, or a plan's `hardware`: `file` then names where, and an NVMe of 0 bytes is none); one UserError line for the first bad one. */
export function checkProfile(file: string, p: unknown): HardwareProfile {
  const bad = (field: string, want: string, got: unknown) => diag.badHardware(file, `field '${field}': expected ${want}, got ${JSON.stringify(got)}`);
  const o = p as Record<string, unknown>;
  if (typeof o !== 'object' || o === null || Array.isArray(o)) throw diag.badHardware(file, 'expected a JSON object');
  // Rates and sizes in the range tiercut models: the LP's coefficients are
  // times in units of the GPU's work, and HiGHS rejects a model whose
  // coefficients span more than ~1e20 (a rate of 1e-9 bytes/s had made
  // compile stop with an internal solver error)
  const RATE = [1e6, 1e18] as const;      // bytes/s or flop/s: 1 MB/s .. 1 EB/s
  const CAPACITY = [1, 1e17] as const;    // bytes: up to 100 PB
  const num = (path: string, [min, max]: readonly [number, number]) => {
    let v: unknown = o;
    for (const k of path.split('.')) v = (v as Record<string, unknown> | undefined)?.[k];
    if (typeof v !== 'number' || !(v > 0) || !Number.isFinite(v)) throw bad(path, 'a positive number', v);
    if (v < min || v > max) throw bad(path, `a number from ${min.toExponential()} to ${max.toExponential()}`, v);
    // (25276194816.5 bytes had compiled, and run then refused the plan naming program.tiers[1])
    if (path.endsWith('capacityBytes') && !Number.isInteger(v)) throw bad(path, 'a whole number of bytes', v);
  };
  for (const dev of ['gpu', 'cpu']) {
    num(`${dev}.capacityBytes`, CAPACITY); num(`${dev}.memBandwidthBytesPerSec`, RATE);
    for (const d of ['f32', 'f16', 'bf16']) num(`${dev}.peakFlops.${d}`, RATE);
  }
  // (an NVMe of 0 bytes is none, as --nvme 0 says: `hw calibrate --nvme 0` had written a profile that compile refused)
  if ((o.nvme as Record<string, unknown> | undefined)?.capacityBytes !== 0) num('nvme.capacityBytes', CAPACITY);
  num('nvme.readBytesPerSec', RATE); num('nvme.writeBytesPerSec', RATE); num('h2dBytesPerSec', RATE); num('d2hBytesPerSec', RATE);
  // optional fields: absent, or numbers in range (a measured time: at most a second)
  const get = (path: string): unknown => { let v: unknown = o; for (const k of path.split('.')) v = (v as Record<string, unknown> | undefined)?.[k]; return v; };
  const optNum = (path: string, min: number, integer = false, max = Infinity) => {
    const v = get(path);
    if (v === undefined) return;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) throw bad(path, `${integer ? 'an integer' : 'a number'} ${max < Infinity ? `from ${min} to ${max}` : `>= ${min}`}`, v);
  };
  optNum('nvme.readLatencySeconds', 0, false, 1); optNum('nvme.writeLatencySeconds', 0, false, 1);
  optNum('nvme.readBatchRequestSeconds', 0, false, 1); optNum('nvme.writeBatchRequestSeconds', 0, false, 1);
  optNum('nvme.queueDepth', 1, true, 64);
  optNum('nvme.blockBytes', 4096, true);
  const bb = get('nvme.blockBytes');
  if (typeof bb === 'number' && (bb % 4096 !== 0 || bb > 64 * 2 ** 20)) throw bad('nvme.blockBytes', 'a multiple of 4096 from 4096 to 67108864', bb);
  if (o.executor !== undefined && (typeof o.executor !== 'object' || o.executor === null || Array.isArray(o.executor))) throw bad('executor', 'an object', o.executor);
  if (o.executor !== undefined) for (const f of ['instructionSeconds', 'wakeSeconds', 'stepSeconds']) { if (get(`executor.${f}`) === undefined) throw bad(`executor.${f}`, 'a number >= 0', undefined); optNum(`executor.${f}`, 0, false, 1); }
  if (o.kernels !== undefined) {
    if (typeof o.kernels !== 'object' || o.kernels === null || Array.isArray(o.kernels)) throw bad('kernels', 'an object keyed by op kind', o.kernels);
    for (const k of Object.keys(o.kernels)) {
      // a key is an op kind, with its variant and dtype ("gelu[erf]@f16"): another had been ignored without a word
      const kind = /^([A-Za-z0-9]+)(\[[^\]]*\])?(@\w+)?$/.exec(k)?.[1];
      if (kind === undefined || !Object.hasOwn(OP_CODES, kind)) throw bad(`kernels.${k}`, 'a key naming an op kind (e.g. "matmul", "gelu[erf]@f16")', k);
      for (const f of ['fixedSeconds', 'rooflineFactor']) if (get(`kernels.${k}.${f}`) === undefined) throw bad(`kernels.${k}.${f}`, 'a number >= 0', undefined);
      optNum(`kernels.${k}.fixedSeconds`, 0, false, 1); optNum(`kernels.${k}.rooflineFactor`, 0, false, 1e6);
    }
  }
  if (typeof o.name !== 'string' || o.name.trim() === '') throw bad('name', 'a non-empty string', o.name);
  if (o.description !== undefined && typeof o.description !== 'string') throw bad('description', 'a string', o.description);
  if (o.emulatedGpu !== undefined && typeof o.emulatedGpu !== 'boolean') throw bad('emulatedGpu', 'true or false', o.emulatedGpu);
  return { description: '', emulatedGpu: false, ...(o as object) } as HardwareProfile;
}

/**
 * A built-in profile by name, or a JSON file, with capacity overrides applied
 * (as withCapacities; checked before the profile is read, so that a capacity
 * of 0 is named before an unknown profile).
 */
export function loadProfile(nameOrFile: string, over: ProfileOverrides = {}): HardwareProfile {
  checkOverrides(over);
  let base = BUILTIN_PROFILES[nameOrFile];
  if (!base) {
    if (!nameOrFile.endsWith('.json')) throw diag.unknownHardware(nameOrFile, Object.keys(BUILTIN_PROFILES));
    if (!existsSync(nameOrFile)) throw diag.fileNotFound(nameOrFile, 'hardware profile file');
    let json: unknown;
    try { json = JSON.parse(readFileSync(nameOrFile, 'utf8')); } catch (e) { throw diag.badHardware(nameOrFile, `not valid JSON (${(e as Error).message})`); }
    base = checkProfile(nameOrFile, json);
  }
  return applied(base, over);
}

/**
 * A profile with the capacities given on the command line (--gpu-mem,
 * --cpu-mem, --nvme: what-if) in place of its own. The GPU and the CPU need
 * some memory, as a profile file's must be positive (a GPU of 0 bytes gave a
 * plan that ran every op on the CPU, its placement LP "infeasible"); NVMe may
 * be 0: none.
 */
export function withCapacities(base: HardwareProfile, over: ProfileOverrides): HardwareProfile {
  checkOverrides(over);
  return applied(base, over);
}

/** base with the capacities `over` gives (checked by the caller). */
function applied(base: HardwareProfile, over: ProfileOverrides): HardwareProfile {
  return {
    ...base,
    gpu: { ...base.gpu, capacityBytes: over.gpuMemBytes ?? base.gpu.capacityBytes },
    cpu: { ...base.cpu, capacityBytes: over.cpuMemBytes ?? base.cpu.capacityBytes },
    nvme: { ...base.nvme, capacityBytes: over.nvmeBytes ?? base.nvme.capacityBytes },
  };
}

/** Capacities given on the command line are sizes, and the GPU's and the CPU's above 0 (withCapacities). */
export function checkOverrides(over: ProfileOverrides): void {
  for (const [flag, v] of [['--gpu-mem', over.gpuMemBytes], ['--cpu-mem', over.cpuMemBytes], ['--nvme', over.nvmeBytes]] as const) {
    // (whole bytes, within a profile file's range: the API had taken 0.5 and 1e18)
    if (v !== undefined && !(Number.isSafeInteger(v) && v >= 0 && v <= 1e17)) throw diag.badSize(flag, String(v));
  }
  if (over.gpuMemBytes === 0) throw diag.noCapacity('--gpu-mem', "every op on the GPU reads and writes its memory (a profile file's gpu.capacityBytes must be positive too)");
  if (over.cpuMemBytes === 0) throw diag.noCapacity('--cpu-mem', "the host stages every copy and runs the CPU's ops in its memory (a profile file's cpu.capacityBytes must be positive too)");
}
