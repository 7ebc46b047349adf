// safetensors files (the format PyTorch and Hugging Face tools read): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape,
// data_offsets}}, then the raw little-endian bytes. Reading checks every field
// against the file (hostile headers get an error naming the tensor, never an
// out-of-range read); writing is atomic (temp file, fsync, rename).

import { closeSync, fstatSync, openSync, readSync, statSync } from 'node:fs';
import { osReason, writeOutput } from '../src/atomic-write.js';
import { diag, UserError } from '../src/diagnostics.js';

export type SafeDType = 'F32' | 'F16' | 'BF16' | 'I32' | 'I64' | 'F64' | 'U8';
const SIZE: Record<SafeDType, number> = { F32: 4, F16: 2, BF16: 2, I32: 4, I64: 8, F64: 8, U8: 1 };
/** The dtypes a float tensor (a float input, a parameter) may be stored as. */
export const FLOAT_DTYPES: readonly SafeDType[] = ['F32', 'F16', 'BF16', 'F64'];

export interface SafeTensor {
  readonly dtype: SafeDType;
  readonly shape: readonly number[];
  /** The tensor's bytes (a copy, aligned for typed-array views). */
  readonly bytes: Uint8Array;
}

const MAX_HEADER_BYTES = 100 * 2 ** 20;
/** One read call's bytes at most (a read over 2 GiB fails in Node; a file over 2 GiB is read in parts). */
const READ_CHUNK = 2 ** 30;

/** `length` bytes of `fd` from `position` into a new array; false where the file ends first. */
function readAt(fd: number, position: number, length: number): Uint8Array | false {
  const out = new Uint8Array(length);
  for (let at = 0; at < length;) {
    const n = readSync(fd, out, at, Math.min(READ_CHUNK, length - at), position + at);
    if (n === 0) return false;
    at += n;
  }
  return out;
}

/** Reads the header, then each tensor's bytes apart (a checkpoint over Node's 2 GiB file read, as `--save` writes for a large model, had been unreadable). */
export function readSafetensors(file: string): Map<string, SafeTensor> {
  const bad = (msg: string) => diag.data(file, msg);
  let fd: number;
  let fileBytes: number;
  try {
    // a regular file only: /dev/zero or a pipe had been read without end
    if (!statSync(file).isFile()) throw bad('not a safetensors file: not a regular file');
    fd = openSync(file, 'r');
    fileBytes = fstatSync(fd).size;
  } catch (e) {
    if (e instanceof UserError) throw e;
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw diag.fileNotFound(file, 'safetensors file');
    throw bad(`cannot read it: ${osReason(e)}`); // (EACCES, EISDIR: each had been "not found")
  }
  try {
    return readTensors(fd, fileBytes, bad);
  } catch (e) {
    if (e instanceof UserError) throw e;
    throw bad(`cannot read it: ${osReason(e)}`);
  } finally {
    closeSync(fd);
  }
}

function readTensors(fd: number, fileBytes: number, bad: (msg: string) => UserError): Map<string, SafeTensor> {
  if (fileBytes < 8) throw bad('not a safetensors file: shorter than its 8-byte header length');
  const lenBytes = readAt(fd, 0, 8);
  if (!lenBytes) throw bad('not a safetensors file: shorter than its 8-byte header length');
  const headerLen = Buffer.from(lenBytes.buffer).readBigUInt64LE(0);
  if (headerLen > BigInt(MAX_HEADER_BYTES)) throw bad(`not a safetensors file: header length ${headerLen} is over ${MAX_HEADER_BYTES} bytes`);
  if (8 + Number(headerLen) > fileBytes) throw bad(`not a safetensors file: header length ${headerLen} exceeds the file (${fileBytes} bytes)`);
  const headerBytes = readAt(fd, 8, Number(headerLen));
  if (!headerBytes) throw bad(`not a safetensors file: header length ${headerLen} exceeds the file`);
  let header: Record<string, unknown>;
  try { header = JSON.parse(Buffer.from(headerBytes.buffer).toString('utf8')); } catch { throw bad('not a safetensors file: the header is not JSON'); }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) throw bad('not a safetensors file: the header is not a JSON object');
  const dataStart = 8 + Number(headerLen);
  const entries: { name: string; dtype: SafeDType; shape: number[]; begin: number; end: number }[] = [];
  for (const [name, v] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const e = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (typeof e !== 'object' || e === null) throw bad(`tensor '${name}': entry is not an object`);
    // (own keys only: "toString" had passed `in` and read as a size of undefined)
    if (typeof e.dtype !== 'string' || !Object.hasOwn(SIZE, e.dtype)) throw bad(`tensor '${name}': unsupported dtype ${JSON.stringify(e.dtype)}`);
    if (!Array.isArray(e.shape) || e.shape.some((d) => !Number.isInteger(d) || d < 0)) throw bad(`tensor '${name}': shape must be a list of non-negative integers`);
    if (!Array.isArray(e.data_offsets) || e.data_offsets.length !== 2 || e.data_offsets.some((d) => !Number.isInteger(d) || d < 0)) throw bad(`tensor '${name}': data_offsets must be [begin, end]`);
    const dtype = e.dtype as SafeDType;
    const [begin, end] = e.data_offsets as number[];
    const count = (e.shape as number[]).reduce((a, b) => a * b, 1);
    if (end < begin || end - begin !== count * SIZE[dtype]) throw bad(`tensor '${name}': data_offsets [${begin}, ${end}] hold ${end - begin} bytes, shape [${(e.shape as number[]).join(',')}] of ${dtype} needs ${count * SIZE[dtype]}`);
    if (dataStart + end > fileBytes) throw bad(`tensor '${name}': data_offsets end ${end} is past the end of the file`);
    entries.push({ name, dtype, shape: e.shape as number[], begin, end });
  }
  // tensors hold disjoint byte ranges (as the format's reference reader requires): two names over the same bytes are a damaged or forged file
  const byBegin = [...entries].filter((x) => x.end > x.begin).sort((a, b) => a.begin - b.begin || a.end - b.end);
  for (let i = 1; i < byBegin.length; i++) {
    if (byBegin[i].begin < byBegin[i - 1].end) throw bad(`tensors '${byBegin[i - 1].name}' and '${byBegin[i].name}': data_offsets [${byBegin[i - 1].begin}, ${byBegin[i - 1].end}] and [${byBegin[i].begin}, ${byBegin[i].end}] overlap`);
  }
  const out = new Map<string, SafeTensor>();
  for (const x of entries) {
    const bytes = readAt(fd, dataStart + x.begin, x.end - x.begin);
    if (!bytes) throw bad(`tensor '${x.name}': data_offsets end ${x.end} is past the end of the file`);
    out.set(x.name, { dtype: x.dtype, shape: x.shape, bytes });
  }
  return out;
}

/**
 * Writes `tensors` as a safetensors file, atomically (the old file kept when
 * the disk will not take it). Each tensor's bytes must be its shape's in its
 * dtype, and metadata values strings (the format's): a file this reader would
 * refuse had been written over a good one. Throws UserError TC502 naming the
 * tensor, or TC108 for the disk.
 */
export function writeSafetensors(file: string, tensors: Map<string, SafeTensor>, metadata: Record<string, string> = {}): void {
  const bad = (msg: string) => diag.data(file, `not written: ${msg}`);
  for (const [name, t] of tensors) {
    if (name === '__metadata__') throw bad("a tensor may not be named '__metadata__' (the format's metadata key)");
    if (!Object.hasOwn(SIZE, t.dtype)) throw bad(`tensor '${name}': unsupported dtype ${JSON.stringify(t.dtype)}`);
    if (!Array.isArray(t.shape) || t.shape.some((d) => !Number.isSafeInteger(d) || d < 0)) throw bad(`tensor '${name}': shape must be a list of non-negative integers`);
    const want = t.shape.reduce((a, b) => a * b, 1) * SIZE[t.dtype];
    if (!(t.bytes instanceof Uint8Array)) throw bad(`tensor '${name}': bytes must be a Uint8Array (a view of the values' bytes), got ${Object.prototype.toString.call(t.bytes)}`);
    if (t.bytes.byteLength !== want) throw bad(`tensor '${name}': shape [${t.shape.join(',')}] of ${t.dtype} needs ${want} bytes, got ${t.bytes?.byteLength}`);
  }
  for (const [k, v] of Object.entries(metadata)) if (typeof v !== 'string') throw bad(`metadata '${k}': expected a string, got ${typeof v}`);
  const names = [...tensors.keys()].sort();
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length) header.__metadata__ = metadata;
  let at = 0;
  for (const n of names) {
    const t = tensors.get(n)!;
    header[n] = { dtype: t.dtype, shape: t.shape, data_offsets: [at, at + t.bytes.byteLength] };
    at += t.bytes.byteLength;
  }
  let json = JSON.stringify(header);
  while ((8 + Buffer.byteLength(json)) % 8 !== 0) json += ' ';
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  // whole or not at all: a disk that will not take it leaves the old file as it was
  writeOutput(file, [len, Buffer.from(json), ...names.map((n) => tensors.get(n)!.bytes)], 'the checkpoint');
}

/** The values of a float or int tensor as float64 (for binding and comparison). */
export function toFloat64(t: SafeTensor): Float64Array {
  const b = t.bytes;
  const n = b.byteLength / SIZE[t.dtype];
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    switch (t.dtype) {
      case 'F32': out[i] = dv.getFloat32(i * 4, true); break;
      case 'F64': out[i] = dv.getFloat64(i * 8, true); break;
      case 'I32': out[i] = dv.getInt32(i * 4, true); break;
      case 'I64': out[i] = Number(dv.getBigInt64(i * 8, true)); break;
      case 'U8': out[i] = b[i]; break;
      case 'F16': out[i] = halfToFloat(dv.getUint16(i * 2, true)); break;
      case 'BF16': { const f = new DataView(new ArrayBuffer(4)); f.setUint32(0, dv.getUint16(i * 2, true) << 16); out[i] = f.getFloat32(0); break; }
    }
  }
  return out;
}

function halfToFloat(h: number): number {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}
