// binding.ts — the only file that loads the native addon (build/Release/tiercut_native.node)
// and the declaration of its contract. Everything else in TypeScript goes through
// the types and the loader here.
//
// Native side: native/addon.cc (export table), native/napi/ (argument parsing and
// result building, main thread only), native/plan/program.cc (the program struct
// and its validation), native/exec/executor.cc (stream threads).
//
// Numbering used throughout (part of the plan contract, docs/PLAN-FORMAT.md):
//   tiers    gpu = 0, cpu = 1, nvme = 2
//   streams  gpu = 0, cpu = 1, h2d = 2, d2h = 3, nvmeRead = 4, nvmeWrite = 5
//   dtypes   f32 = 0, f16 = 1, bf16 = 2, i32 = 3, i64 = 4, f64 = 5
//   ops      native/kernels/dispatch.h OpKind (matmul = 0 ... adam = 21)
//   instruction kinds  run = 0, copy = 1, free = 2
//
// Error messages name the field, what was expected and what came, e.g.
//   "program.instructions[12].waits[0]: 99 is not an earlier instruction"
//   "session.write: data: expected 512 bytes (buffer 7), got 256"
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { constants as osConstants } from 'node:os';
import { fileURLToPath } from 'node:url';
import { diag } from '../src/diagnostics.js';

export const TIER = { gpu: 0, cpu: 1, nvme: 2 } as const;
export const STREAM = { gpu: 0, cpu: 1, h2d: 2, d2h: 3, nvmeRead: 4, nvmeWrite: 5 } as const;
export const DTYPE = { f32: 0, f16: 1, bf16: 2, i32: 3, i64: 4, f64: 5 } as const;
export const INSTRUCTION = { run: 0, copy: 1, free: 2 } as const;
export const OP_KIND = {
  matmul: 0, add: 1, mul: 2, gelu: 3, layernorm: 4, softmax: 5, causalAttention: 6, embedding: 7,
  crossEntropy: 8, reshape: 9, transpose: 10, matmulGradA: 11, matmulGradB: 12, sumToShape: 13,
  geluBackward: 14, layernormBackward: 15, softmaxBackward: 16, causalAttentionBackward: 17,
  embeddingBackward: 18, crossEntropyBackward: 19, fill: 20, adam: 21,
} as const;

/** One step of training as the native runtime sees it. Checked by createSession (see there). */
export interface NativeProgram {
  /** Length 3, index = tier. arenaBytes <= capacityBytes; an arena of 0 bytes allocates nothing. */
  readonly tiers: readonly { readonly capacityBytes: number; readonly arenaBytes: number }[];
  /** Directory for the nvme arena; used only when tiers[2].arenaBytes > 0 (created if missing). */
  readonly spillDir: string;
  /** The nvme store (native/tiers/nvme_store.h): queueDepth I/Os in flight (1..64, default 8), blockBytes
   *  per pread/pwrite (a multiple of 4096 up to 64 MiB, default 1 MiB), direct: try O_DIRECT (default
   *  true; buffered I/O when the file system refuses it). Backend: io_uring when built with liburing and
   *  the kernel allows it, else a pread/pwrite thread pool; TIERCUT_NVME_IO=uring|threads forces one. */
  readonly nvme?: { readonly queueDepth?: number; readonly blockBytes?: number; readonly direct?: boolean };
  /** Index = tensor id. At most 8 dims. `name` (optional) appears in error messages. */
  readonly tensors: readonly { readonly name?: string; readonly dtype: number; readonly shape: readonly number[] }[];
  /** Index = buffer id. sizeBytes = numel x dtype size; offsetBytes a multiple of the dtype size. */
  readonly buffers: readonly {
    readonly tensor: number; readonly tier: number; readonly offsetBytes: number; readonly sizeBytes: number;
  }[];
  /** Index = op id. At most 8 of each attribute; meaning per kind in native/kernels/dispatch.h. */
  readonly ops: readonly { readonly kind: number; readonly iattr: readonly number[]; readonly fattr: readonly number[] }[];
  /** Index = instruction id = its time; the whole step in one valid sequential order. */
  readonly instructions: readonly NativeInstruction[];
}

export interface NativeInstruction {
  /** 0..5, see STREAM. Each stream runs its instructions in increasing id order. */
  readonly stream: number;
  /** 0 = run op, 1 = copy, 2 = free. */
  readonly kind: number;
  /** run: op id; copy and free: -1. */
  readonly op: number;
  /** run: buffer ids in the op's operand order (gpu or cpu only); copy: [src]; free: [buffer]. */
  readonly inputs: readonly number[];
  /** run: output buffer ids (adam: the same p, m, v as its inputs [, p16]); copy: [dst]; free: []. */
  readonly outputs: readonly number[];
  /** Earlier instruction ids that must complete in this step before this one starts. */
  readonly waits: readonly number[];
}

export interface StepStats {
  /** Wall time of the step. */
  seconds: number;
  /** Per stream (index = STREAM): sum of the durations of its instructions. */
  streamBusySeconds: number[];
  /** Per stream: instructions completed. */
  streamInstructions: number[];
  /** Bytes copied per link: cpu->gpu = h2d, gpu->cpu = d2h, nvme->gpu|cpu = nvmeRead,
   *  gpu|cpu->nvme = nvmeWrite, cpu->cpu = cpuToCpu (gpu->gpu copies are counted nowhere). */
  bytes: { h2d: number; d2h: number; nvmeRead: number; nvmeWrite: number; cpuToCpu: number;
    /** Bytes this rank sent to its ring neighbour in collective ops (ring attention, all-reduce). */
    ringSent: number };
  /** The largest one collective op's memory outside the arenas this step (0 without collectives). */
  ringWorkspaceBytes: number;
  /** With step(…, { trace: true }): per instruction (index = id) its start and end in this step, in
   *  seconds of steady_clock since the session began; stepStartSeconds on the same clock. */
  trace?: { stepStartSeconds: number; startSeconds: Float64Array; endSeconds: Float64Array };
}

export interface NativeSessionInfo {
  /** The spill file ('' without an nvme arena). */
  nvmeFile: string;
  /** true: opened with O_DIRECT. */
  nvmeDirect: boolean;
  /** The I/O backend ('' without an nvme arena). */
  nvmeBackend: NvmeBackendName | '';
  /** Blocks read only to be rewritten (read-modify-write of partial blocks) since the session opened;
   *  0 when every nvme buffer is block-aligned (plans from this compiler). */
  nvmeEdgeReads: number;
  /** I/Os the nvme store issued since open, and chunks that went in the I/O of the chunk before
   *  them because their file ranges follow each other (native/tiers/nvme_run.h; 0 with TIERCUT_NVME_MERGE=0). */
  nvmeIos: number;
  nvmeMergedChunks: number;
  /** Why buffered I/O is used, or ''. */
  nvmeNote: string;
  nvmeQueueDepth: number;
  nvmeBlockBytes: number;
}

export interface NativeMemoryStats {
  /** Per tier: max over the buffers touched so far of offsetBytes + sizeBytes. */
  peakBytes: number[];
  /** Per tier: max of the sum of live buffer bytes (live from the first write, or from
   *  session.write, until a free instruction). */
  peakLiveBytes: number[];
}

export interface NativeSession {
  /** Sync. Copies data's bytes into the buffer (pwrite for nvme); the buffer is live from now on.
   *  Throws: the session is closed; a step is in flight; buffer id out of range; data not an
   *  ArrayBufferView; byteLength != sizeBytes; an I/O error. */
  write(buffer: number, data: ArrayBufferView): void;
  /** Sync. A copy of the buffer's bytes. Throws like write. */
  read(buffer: number): Uint8Array;
  /** Async (AsyncWorker on the libuv pool; the stream threads were started by createSession).
   *  Runs every instruction once. `step` (an integer >= 1) is adam's step number (iattr[1]);
   *  opts.lr, when given, replaces adam's fattr[0]; opts.skipUpdate makes every adam instruction a
   *  no-op; opts.delayedStep (default `step`) is the step number of the delayed updates (adam ops
   *  with iattr[2] = 1: a DPU steady step's, which apply the previous step's gradient), 0 makes
   *  them no-ops (the first steady step has no such gradient yet); opts.onlyDelayed makes every
   *  other adam a no-op (a DPU session applying its pending updates). Steps of one session run one at a time.
   *  Throws synchronously on bad arguments or a closed session. The promise rejects with
   *  "instruction <id> (<stream>, <what>): <message>" for the first kernel or I/O error
   *  (the step is abandoned at the next instruction boundary of every stream; the session
   *  stays usable and closable), or when the session was closed before the step ran. */
  step(step: number, opts?: { lr?: number; skipUpdate?: boolean; onlyDelayed?: boolean; delayedStep?: number; trace?: boolean }): Promise<StepStats>;
  /** Sync. Never throws on an open or closed session (after close: the final values). */
  stats(): NativeMemoryStats;
  /** Sync. How the nvme tier is served. Throws on a closed session. */
  info(): NativeSessionInfo;
  /** Sync. Waits for a running step, joins the stream threads, frees the arenas and removes
   *  the session's spill directory. Idempotent. Also done on garbage collection and at exit. */
  close(): void;
}

/** A ring of P ranks as threads of this process (createRingGroup). Opaque. */
export interface NativeRingGroup { readonly ranks: number; readonly timeoutMs: number; readonly handle: unknown }

export type OpInput = { shape: readonly number[]; data: Float32Array | Float64Array | Int32Array };

export interface NativeAddon {
  /** Sync. Parses and validates the program, allocates the arenas (creating
   *  <spillDir>/tiercut-<pid>-<n>/nvme.bin when tiers[2].arenaBytes > 0) and starts one thread
   *  per stream that has instructions. Throws an Error naming the field, e.g.
   *  "program.tiers[0]: arena 20000 bytes exceeds capacity 16384 bytes",
   *  "program.buffers[7]: offset 4096 + size 512 exceeds the gpu arena (4352 bytes)",
   *  "program.instructions[12].waits[0]: 99 is not an earlier instruction". */
  createSession(program: NativeProgram, ring?: { group: NativeRingGroup; rank: number }): NativeSession;
  /** Sync. The ThreadGroup the P ranks of one ring share (native/ring/comm_threads.h); every wait on a
   *  neighbour times out after timeoutMs (default 120000) with a message naming the peer. Pass it with a
   *  rank to createSession: that session's collective ops (ring attention, all-reduce) talk to the other
   *  ranks' sessions. Throws RangeError for ranks outside 1..1024. */
  createRingGroup(ranks: number, timeoutMs?: number): NativeRingGroup;
  /** Async. One step of every rank of a ring together: sessions[r] must be rank r of one group (all P of
   *  them, each open and idle). One AsyncWorker runs the P executors' steps on P threads of its own (never
   *  P slots of the libuv pool, which would deadlock with P >= the pool size). Resolves with each rank's
   *  stats; rejects with one message: the first rank that failed ("rank 1: instruction 40 (gpu, run
   *  ringAttention …): …"), the others having been stopped through the group (no hang). A group that
   *  failed stays failed: later steps reject at once. Throws synchronously on bad arguments. */
  stepGroup(sessions: readonly NativeSession[], step: number, opts?: { trace?: boolean }): Promise<StepStats[]>;
  /** Sync; for tests. One collective op (ringAttention = 55, ringAttentionBackward = 56, allReduce = 57;
   *  native/exec/collective.h) run by inputs.length rank threads, inputs[r] being rank r's operands.
   *  Returns each rank's outputs, the bytes it sent and its memory outside any arena. Throws the first
   *  failing rank's message. */
  runCollective(args: {
    kind: number; iattr: readonly number[]; timeoutMs?: number;
    inputs: readonly (readonly { shape: readonly number[]; data: Float32Array }[])[];
    outputs: readonly { shape: readonly number[] }[];
  }): { outputs: Float32Array[][]; sentBytes: number[]; workspaceBytes: number[] };
  /** Sync; for tests. Runs one kernel via run_op<float|double> on copies of the inputs (ids and
   *  targets as Int32Array); outputs start zeroed. Returns one array per output, of the dtype.
   *  Throws the kernel's message ("cross_entropy: target 99 at position 3 is outside [0, 96)")
   *  or an argument error. */
  runOp(kind: number, dtype: 'f32' | 'f64', iattr: readonly number[], fattr: readonly number[],
    inputs: readonly OpInput[], outputs: readonly { shape: readonly number[] }[]): (Float32Array | Float64Array)[];
  /** Sync; for tests. The executor's float -> fp16 / bf16 rounding (nearest, ties to even). Throws on bad arguments. */
  halfRound(values: Float32Array, type: 'fp16' | 'bf16'): Uint16Array;
  /** Sync; for tests. The executor's fp16 / bf16 -> float widening (exact). Throws on bad arguments. */
  halfWiden(bits: Uint16Array, type: 'fp16' | 'bf16'): Float32Array;
  /** Sync (blocks the caller; the work runs on the shared native thread pool). The fused CPU Adam
   *  (native/adam/cpu_adam.h) on the arrays, in place. runtime/adam.ts validates first; the checks
   *  here ("adamStep: grads: expected 4099 elements to match params, got 4098") only keep memory safe.
   *  finite = false: some grads[i] * gradScale is inf/NaN and nothing was written. isa: the path used
   *  (`isa` option, else TIERCUT_ADAM_ISA, else the best this CPU has; throws if the CPU lacks it). */
  adamStep(args: NativeAdamArgs): { finite: boolean; isa: AdamIsa };
  /** Sync; for the benchmark. Streams the bytes of an fp32 Adam step (p += g, m += g, v += g). */
  adamRoofline(args: {
    params: Float32Array; grads: Float32Array; expAvg: Float32Array; expAvgSq: Float32Array;
    threads?: number; tileElems?: number; isa?: AdamIsa;
  }): void;
  /** Sync. The Adam paths this CPU runs, the best one, the shared pool's threads, the default tile. */
  adamInfo(): { best: AdamIsa; supported: AdamIsa[]; maxThreads: number; tileElems: number };
  /** Sync; for tests. A bf16-grad AdamW step with an fp16 copy on n made-up parameters that records
   *  the in-order tile completion events (claimed = tiles handed out at that moment) and, inside each
   *  event, copies that tile of the fp16 output into `shadow`. */
  adamTileTrace(args: { n: number; tileElems: number; threads?: number; isa?: AdamIsa }): {
    tile: Float64Array; begin: Float64Array; end: Float64Array; claimed: Float64Array; tiles: number;
    half: Uint16Array; shadow: Uint16Array;
  };
  /** Sync; for tests. float -> fp16 / bf16 with one Adam path's conversion (compare with halfRound). */
  adamHalfRound(values: Float32Array, type: 'fp16' | 'bf16', isa: AdamIsa): Uint16Array;
  /** Sync; for tests. fp16 / bf16 -> float with one path's conversion, as the executor widens half operands (compare with halfWiden). */
  adamHalfWiden(bits: Uint16Array, type: 'fp16' | 'bf16', isa: AdamIsa): Float32Array;
  /** Sync; for tests and bench:adam. The runtime's copy of an adam's gradient with the inf/NaN check
   *  riding on it (true: every value finite); `check: false` is a plain memcpy (returns true). */
  adamCopyGrads(args: { dst: Float32Array | Uint16Array; src: Float32Array | Uint16Array; type: 'fp32' | 'fp16' | 'bf16';
    check?: boolean; isa?: AdamIsa }): boolean;
  /** Sync; for `hw calibrate`. One thread: memcpy between two host blocks of `bytes` (default 64 MiB;
   *  bytes copied per second) and a triad a = b + s*c (bytes touched per second); best of `repeats` (5). */
  hostBandwidth(args: { bytes?: number; repeats?: number }): { copyBytesPerSec: number; triadBytesPerSec: number };
  /** Sync; for `hw calibrate` and bench/runtime. The nvme store writes then reads `bytes` (default 256 MiB)
   *  in a file in `dir` (removed after) in requests of requestBytes (64 MiB) from a host block that is
   *  4096-aligned plus offsetBytes (0). verify: each request is filled with a pattern of its file offset
   *  before it is written and checked after it is read (mismatches = wrong bytes). The backend is chosen
   *  as for a session (TIERCUT_NVME_IO). Throws "nvmeBench: nvme tier: …". */
  nvmeBench(args: {
    dir: string; bytes?: number; queueDepth?: number; blockBytes?: number; requestBytes?: number; direct?: boolean;
    verify?: boolean; offsetBytes?: number;
  }): { writeBytesPerSec: number; readBytesPerSec: number; direct: boolean; backend: NvmeBackendName; note: string; file: string; mismatches: number;
    /** Blocks read before writes to keep their other bytes (read-modify-write). */
    edgeReads: number };
  /** Sync. The nvme I/O backends: uring = built with liburing and io_uring_queue_init works here
   *  (uringWhy says why not); default = what a store opened now uses (TIERCUT_NVME_IO applied). */
  nvmeBackends(): { threads: true; uring: boolean; uringWhy: string; default: NvmeBackendName };
  /** Sync; for `hw calibrate`. Mean seconds per request of requestBytes (4096; `requests` of them, 256):
   *  reads alone, writes alone, and reads and writes at once from two threads (a plan's nvmeRead and
   *  nvmeWrite streams share the disk). A file in `dir`, removed after. Throws "nvmeLatency: nvme tier: …". */
  nvmeLatency(args: { dir: string; requests?: number; requestBytes?: number; queueDepth?: number; blockBytes?: number }): {
    readSeconds: number; writeSeconds: number; mixedReadSeconds: number; mixedWriteSeconds: number; backend: NvmeBackendName; direct: boolean;
  };
  /** Sync; for `hw calibrate`. Mean seconds per batch of k requests of requestBytes (4096) handed to the
   *  store in one transfer (as the executor hands over ready nvme copies), for each k in sizes
   *  ([1, 2, 4, 8, 16, 32]; 1..64), about `requests` (256) requests per k and direction, reads and writes
   *  in flight at once from two threads. A file in `dir`, removed after. Throws "nvmeBatch: …". */
  nvmeBatch(args: { dir: string; sizes?: number[]; requests?: number; requestBytes?: number; queueDepth?: number; blockBytes?: number }): {
    sizes: number[]; readSeconds: number[]; writeSeconds: number[]; backend: NvmeBackendName; direct: boolean;
  };
}

export type AdamIsa = 'scalar' | 'avx2' | 'avx512';
/** The nvme store's I/O backend (native/tiers/nvme_store.h). */
export type NvmeBackendName = 'io_uring' | 'threads';

/** adamStep's argument. gradType / halfType: 0 = fp32 / none, 1 = fp16, 2 = bf16. */
export interface NativeAdamArgs {
  params: Float32Array; grads: Float32Array | Uint16Array; gradType: 0 | 1 | 2;
  expAvg: Float32Array; expAvgSq: Float32Array; half?: Uint16Array; halfType: 0 | 1 | 2;
  step: number; lr: number; beta1: number; beta2: number; eps: number; weightDecay: number; adamw: boolean;
  gradScale: number; threads?: number; tileElems?: number; checkFinite: boolean; isa?: AdamIsa;
}

/** The package root: the first directory above this file whose package.json is named "tiercut"
 *  (this file runs as runtime/binding.ts under vitest and as dist/runtime/binding.js when built). */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg)) {
      try {
        if ((JSON.parse(readFileSync(pkg, 'utf8')) as { name?: unknown }).name === 'tiercut') return dir;
      } catch {
        // an unreadable package.json is not ours; keep walking up
      }
    }
    const up = dirname(dir);
    if (up === dir) throw new Error(`tiercut: no package.json named "tiercut" above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
}

let loaded: NativeAddon | undefined;

/** Sync. Loads the addon once. Throws when build/Release/tiercut_native.node is missing or does
 *  not load (with the command that builds it). */
export function nativeAddon(): NativeAddon {
  if (loaded) return loaded;
  const path = join(packageRoot(), 'build', 'Release', 'tiercut_native.node');
  // (a UserError line wherever it is first needed: a sequence-parallel run had printed a stack trace)
  if (!existsSync(path)) throw diag.runtime(`the native addon is not built (${path} is missing); run: npx node-gyp rebuild`);
  const require = createRequire(import.meta.url);
  loaded = require(path) as NativeAddon;
  return loaded;
}

// ---------------------------------------------------------------------------
// Ring attention (native/ring/README.md). Declared as a second NativeAddon
// block (interface merging) so the ring contract reads in one place.

/** Per-rank measurements of one ring call (native RankStats). */
export interface RingRankStats {
  rank: number;
  /** The rank's local rows (its two zigzag chunks). */
  rows: number;
  seconds: number;
  /** In the tile kernels. */
  computeSeconds: number;
  /** Blocked waiting for a neighbour (communication not hidden behind compute). */
  waitSeconds: number;
  /** Every buffer the rank allocated: its shards, both ring buffers, scratch (not the caller's arrays). */
  peakBytes: number;
  sentBytes: number;
}

/** Shape of a ring call: q, k, v [batch, heads, rows, dim] row-major (rows = seq, or a shard's rows). */
export interface NativeRingArgs {
  q: Float32Array; k: Float32Array; v: Float32Array;
  batch: number; heads: number; seq: number; dim: number;
  /** Default false. */
  causal?: boolean;
  /** Tile rows for queries and keys; default 64. */
  block?: number;
  /** Every wait on a neighbour; default 120000. */
  timeoutMs?: number;
}
export interface NativeRingBackwardArgs extends NativeRingArgs {
  out: Float32Array; lse: Float32Array; dout: Float32Array;
}
export interface NativeRingForward { out: Float32Array; lse: Float32Array; stats: { ranks: RingRankStats[] } }
export interface NativeRingBackward { dq: Float32Array; dk: Float32Array; dv: Float32Array; stats: { ranks: RingRankStats[] } }

export interface NativeAddon {
  /** Sync (the caller's thread waits while `ranks` native threads run the ring over whole-sequence
   *  arrays; inputs are read in place, outputs are new arrays). Throws RangeError / TypeError naming
   *  the argument ("ringAttention: ranks: 8 ranks need 16 zigzag chunks of at least one token each,
   *  but seq is 10", "ringAttention: k: expected 1184 elements (batch*heads*seq*dim), got 1000"),
   *  or Error with the first failing rank's message. */
  ringAttention(args: NativeRingArgs & { ranks: number }): NativeRingForward;
  /** Sync, like ringAttention. */
  ringAttentionBackward(args: NativeRingBackwardArgs & { ranks: number }): NativeRingBackward;
}

/** build/Release/tiercut_ring_mpi.node: the same kernels with each rank a process under mpirun.
 *  Arrays are this rank's shard ([batch, heads, shardRows, dim]); P and the rank come from MPI. */
export interface NativeRingMpiAddon {
  /** False when the addon was built without MPI (then every function but stop throws saying so). */
  readonly haveMpi: boolean;
  /** Sync. MPI_Init_thread (once) and this process's place in MPI_COMM_WORLD. */
  start(): { rank: number; size: number };
  /** Sync. MPI_Finalize; call once at the end of a run. */
  stop(): void;
  /** Prints message to stderr and calls MPI_Abort: mpirun ends every rank. Does not return. */
  abort(message: string): never;
  /** Sync, collective (every rank calls it with the same shape). Throws like the threaded version;
   *  a neighbour that does not answer within timeoutMs gives "rank 3: timed out after 2000 ms
   *  waiting to receive K/V block of rank 2 (step 1) from rank 2". */
  ringAttention(args: NativeRingArgs): NativeRingForward;
  ringAttentionBackward(args: NativeRingBackwardArgs): NativeRingBackward;
}

let loadedMpi: NativeRingMpiAddon | undefined;

/** Sync. Loads tiercut_ring_mpi.node once (RTLD_GLOBAL, which Open MPI's plugins need). Loading
 *  does not initialise MPI; start() does. Throws when the addon is missing. */
export function nativeRingMpiAddon(): NativeRingMpiAddon {
  if (loadedMpi) return loadedMpi;
  const path = join(packageRoot(), 'build', 'Release', 'tiercut_ring_mpi.node');
  if (!existsSync(path)) throw diag.runtime(`the ring MPI addon is not built (${path} is missing); run: npx node-gyp rebuild`);
  const module = { exports: {} as NativeRingMpiAddon };
  process.dlopen(module, path, osConstants.dlopen.RTLD_NOW | osConstants.dlopen.RTLD_GLOBAL);
  loadedMpi = module.exports;
  return loadedMpi;
}
