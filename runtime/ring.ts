// ring.ts — ring attention (sequence parallelism) from TypeScript: the public
// ringAttention / ringAttentionBackward (ranks run as threads of this process),
// the zigzag sharding they use, and the seeded input generator the tests,
// fixtures and benchmark share. The kernels and the communicator are native
// (native/ring/README.md); the MPI variant runs through runtime/ring-mpi-worker.ts.
//
// Layout: q, k, v, out, dout, dq, dk, dv are Float32Array [batch, heads, seq, dim]
// row-major; lse is [batch, heads, seq], the natural-log log-sum-exp of the
// scaled scores q.k / sqrt(dim) over the keys each query sees.
import {
  nativeAddon, type NativeRingBackward, type NativeRingForward,
} from './binding.js';

export type { RingRankStats } from './binding.js';

export interface RingAttentionOptions {
  readonly q: Float32Array;
  readonly k: Float32Array;
  readonly v: Float32Array;
  readonly batch: number;
  readonly heads: number;
  readonly seq: number;
  readonly dim: number;
  /** Mask keys after the query (default false). */
  readonly causal?: boolean;
  /** Ring ranks, run as threads; 1 <= ranks <= 256 and 2 * ranks <= seq. */
  readonly ranks: number;
  /** Tile rows (default 64). Results do not depend on it beyond float rounding. */
  readonly block?: number;
  /** Limit on every wait for a neighbour, in ms (default 120000). */
  readonly timeoutMs?: number;
}

export interface RingAttentionBackwardOptions extends RingAttentionOptions {
  readonly out: Float32Array;
  readonly lse: Float32Array;
  readonly dout: Float32Array;
}

export type RingAttentionResult = NativeRingForward;
export type RingAttentionGradients = NativeRingBackward;

export const MAX_THREAD_RANKS = 256;

function checkInt(fn: string, name: string, v: unknown, lo: number, hi: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < lo || v > hi) {
    const got = typeof v === 'number' ? String(v) : v === undefined ? 'undefined' : `a ${typeof v}`;
    throw new RangeError(`${fn}: ${name}: expected an integer in [${lo}, ${hi}], got ${got}`);
  }
  return v;
}

function checkArray(fn: string, name: string, v: unknown, n: number, what: string): void {
  if (!(v instanceof Float32Array)) {
    const got = v === undefined ? 'undefined' : ArrayBuffer.isView(v) ? v.constructor.name : `a ${typeof v}`;
    throw new TypeError(`${fn}: ${name}: expected a Float32Array, got ${got}`);
  }
  if (v.length !== n) {
    throw new RangeError(`${fn}: ${name}: expected ${n} elements (${what}), got ${v.length}`);
  }
}

/** Validates the shared options; returns nothing, throws RangeError / TypeError naming the argument. */
function checkOptions(fn: string, o: RingAttentionOptions): void {
  if (typeof o !== 'object' || o === null) throw new TypeError(`${fn}: expected an options object, got ${o === null ? 'null' : typeof o}`);
  const big = 2 ** 40;
  const batch = checkInt(fn, 'batch', o.batch, 1, big);
  const heads = checkInt(fn, 'heads', o.heads, 1, big);
  const seq = checkInt(fn, 'seq', o.seq, 1, big);
  const dim = checkInt(fn, 'dim', o.dim, 1, big);
  const ranks = checkInt(fn, 'ranks', o.ranks, 1, MAX_THREAD_RANKS);
  if (o.block !== undefined) checkInt(fn, 'block', o.block, 1, 65536);
  if (o.timeoutMs !== undefined) checkInt(fn, 'timeoutMs', o.timeoutMs, 1, 2 ** 30);
  if (o.causal !== undefined && typeof o.causal !== 'boolean') throw new TypeError(`${fn}: causal: expected a boolean, got ${typeof o.causal}`);
  if (2 * ranks > seq) {
    throw new RangeError(`${fn}: ranks: ${ranks} ranks need ${2 * ranks} zigzag chunks of at least one token each, but seq is ${seq}`);
  }
  const n = batch * heads * seq * dim;
  const what = `batch ${batch} x heads ${heads} x seq ${seq} x dim ${dim}`;
  checkArray(fn, 'q', o.q, n, what);
  checkArray(fn, 'k', o.k, n, what);
  checkArray(fn, 'v', o.v, n, what);
}

/** Sync. Exact attention computed by `ranks` ring ranks (threads); see RingAttentionOptions.
 *  Throws RangeError / TypeError naming the argument; Error with the failing rank's message. */
export function ringAttention(options: RingAttentionOptions): RingAttentionResult {
  checkOptions('ringAttention', options);
  return nativeAddon().ringAttention({ ...options, causal: options.causal ?? false });
}

/** Sync. Gradients of sum(out * dout) with respect to q, k, v, given the forward pass's out and lse. */
export function ringAttentionBackward(options: RingAttentionBackwardOptions): RingAttentionGradients {
  const fn = 'ringAttentionBackward';
  checkOptions(fn, options);
  const { batch, heads, seq, dim } = options;
  const what = `batch ${batch} x heads ${heads} x seq ${seq} x dim ${dim}`;
  checkArray(fn, 'out', options.out, batch * heads * seq * dim, what);
  checkArray(fn, 'lse', options.lse, batch * heads * seq, `batch ${batch} x heads ${heads} x seq ${seq}`);
  checkArray(fn, 'dout', options.dout, batch * heads * seq * dim, what);
  return nativeAddon().ringAttentionBackward({ ...options, causal: options.causal ?? false });
}

// ---------------------------------------------------------------------------
// zigzag sharding (the same formulas as native/ring/ring_attention.cc)

export interface Chunk { readonly start: number; readonly length: number }

/** Chunk c of the 2P chunks: positions [floor(c*S/2P), floor((c+1)*S/2P)). */
export function zigzagChunk(seq: number, ranks: number, chunk: number): Chunk {
  const n = 2 * ranks;
  const a = Math.floor((chunk * seq) / n), b = Math.floor(((chunk + 1) * seq) / n);
  return { start: a, length: b - a };
}

/** Rank r's chunks in local order: chunk r, then chunk 2P-1-r. */
export function rankChunks(seq: number, ranks: number, rank: number): [Chunk, Chunk] {
  return [zigzagChunk(seq, ranks, rank), zigzagChunk(seq, ranks, 2 * ranks - 1 - rank)];
}

export function shardRows(seq: number, ranks: number, rank: number): number {
  const [a, b] = rankChunks(seq, ranks, rank);
  return a.length + b.length;
}

/** Rank r's rows of a [bh, seq, width] tensor (bh = batch * heads). */
export function gatherShard(whole: Float32Array, bh: number, seq: number, width: number, ranks: number, rank: number): Float32Array {
  const chunks = rankChunks(seq, ranks, rank);
  const rows = chunks[0].length + chunks[1].length;
  const out = new Float32Array(bh * rows * width);
  for (let i = 0; i < bh; i++) {
    let o = i * rows * width;
    for (const c of chunks) {
      out.set(whole.subarray((i * seq + c.start) * width, (i * seq + c.start + c.length) * width), o);
      o += c.length * width;
    }
  }
  return out;
}

/** Writes rank r's shard back into the whole [bh, seq, width] tensor. */
export function scatterShard(shard: Float32Array, whole: Float32Array, bh: number, seq: number, width: number, ranks: number, rank: number): void {
  const chunks = rankChunks(seq, ranks, rank);
  const rows = chunks[0].length + chunks[1].length;
  for (let i = 0; i < bh; i++) {
    let o = i * rows * width;
    for (const c of chunks) {
      whole.set(shard.subarray(o, o + c.length * width), (i * seq + c.start) * width);
      o += c.length * width;
    }
  }
}

// ---------------------------------------------------------------------------
// seeded inputs (scripts/fixtures/gen_ring.py hash_uniform is the same function)

/** value i = lowbias32(i + seed * 0x9E3779B9 mod 2^32), top 24 bits mapped to [-1, 1):
 *  a multiple of 2^-23, exact in float32. Random access, so a rank can make just its rows. */
export function hashUniformAt(seed: number, i: number): number {
  let h = (i + Math.imul(seed, 0x9e3779b9)) >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x7feb352d) >>> 0;
  h ^= h >>> 15;
  h = Math.imul(h, 0x846ca68b) >>> 0;
  h ^= h >>> 16;
  return ((h >>> 8) / 16777216) * 2 - 1;
}

/** n values of hashUniformAt(seed, offset + i). */
export function hashUniform(seed: number, n: number, offset = 0): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = hashUniformAt(seed, offset + i);
  return out;
}

/** Rank r's shard of hashUniform(seed) over a [bh, seq, width] tensor, without making the whole. */
export function hashUniformShard(seed: number, bh: number, seq: number, width: number, ranks: number, rank: number): Float32Array {
  const chunks = rankChunks(seq, ranks, rank);
  const rows = chunks[0].length + chunks[1].length;
  const out = new Float32Array(bh * rows * width);
  let o = 0;
  for (let i = 0; i < bh; i++) {
    for (const c of chunks) {
      const base = (i * seq + c.start) * width;
      for (let e = 0; e < c.length * width; e++) out[o++] = hashUniformAt(seed, base + e);
    }
  }
  return out;
}
