// safetensors files (the format PyTorch and Hugging Face tools read): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape,
// data_offsets}}, then the raw little-endian bytes. Reading checks every field
// against the file (hostile headers get an error naming the tensor, never an
// out-of-range read); writing is atomic (temp file, fsync, rename).

import { readFileSync, statSync } from 'node:fs';
import { osReason, writeOutput } from '../src/atomic-write.js';
import { diag, UserError } from '../src/diagnostics.js';

export type SafeDType = 'F32' | 'F16' | 'BF16' | 'I32' | 'I64' | 'F64' | 'U8';
const SIZE: Record<SafeDType, number> = { F32: 4, F16: 2, BF16: 2, I32: 4, I64: 8, F64: 8, U8: 1 };

export interface SafeTensor {
  readonly dtype: SafeDType;
  readonly shape: readonly number[];
  /** The tensor's bytes (a copy, aligned for typed-array views). */
  readonly bytes: Uint8Array;
}

const MAX_HEADER_BYTES = 100 * 2 ** 20;

export function readSafetensors(file: string): Map<string, SafeTensor> {
  const bad = (msg: string) => diag.data(file, msg);
  let buf: Buffer;
  try {
    // a regular file only: /dev/zero or a pipe had been read without end
    if (!statSync(file).isFile()) throw bad('not a safetensors file: not a regular file');
    buf = readFileSync(file);
  } catch (e) {
    if (e instanceof UserError) throw e;
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw diag.fileNotFound(file, 'safetensors file');
    throw bad(`cannot read it: ${osReason(e)}`); // (EACCES, EISDIR, a file past Node's 2 GiB read: each had been "not found")
  }
  if (buf.length < 8) throw bad('not a safetensors file: shorter than its 8-byte header length');
  const headerLen = buf.readBigUInt64LE(0);
  if (headerLen > BigInt(MAX_HEADER_BYTES)) throw bad(`not a safetensors file: header length ${headerLen} is over ${MAX_HEADER_BYTES} bytes`);
  if (8 + Number(headerLen) > buf.length) throw bad(`not a safetensors file: header length ${headerLen} exceeds the file (${buf.length} bytes)`);
  let header: Record<string, unknown>;
  try { header = JSON.parse(buf.subarray(8, 8 + Number(headerLen)).toString('utf8')); } catch { throw bad('not a safetensors file: the header is not JSON'); }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) throw bad('not a safetensors file: the header is not a JSON object');
  const dataStart = 8 + Number(headerLen);
  const out = new Map<string, SafeTensor>();
  for (const [name, v] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const e = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (typeof e !== 'object' || e === null) throw bad(`tensor '${name}': entry is not an object`);
    if (typeof e.dtype !== 'string' || !(e.dtype in SIZE)) throw bad(`tensor '${name}': unsupported dtype ${JSON.stringify(e.dtype)}`);
    if (!Array.isArray(e.shape) || e.shape.some((d) => !Number.isInteger(d) || d < 0)) throw bad(`tensor '${name}': shape must be a list of non-negative integers`);
    if (!Array.isArray(e.data_offsets) || e.data_offsets.length !== 2 || e.data_offsets.some((d) => !Number.isInteger(d) || d < 0)) throw bad(`tensor '${name}': data_offsets must be [begin, end]`);
    const dtype = e.dtype as SafeDType;
    const [begin, end] = e.data_offsets as number[];
    const count = (e.shape as number[]).reduce((a, b) => a * b, 1);
    if (end < begin || end - begin !== count * SIZE[dtype]) throw bad(`tensor '${name}': data_offsets [${begin}, ${end}] hold ${end - begin} bytes, shape [${(e.shape as number[]).join(',')}] of ${dtype} needs ${count * SIZE[dtype]}`);
    if (dataStart + end > buf.length) throw bad(`tensor '${name}': data_offsets end ${end} is past the end of the file`);
    out.set(name, { dtype, shape: e.shape as number[], bytes: new Uint8Array(buf.subarray(dataStart + begin, dataStart + end)) });
  }
  return out;
}

export function writeSafetensors(file: string, tensors: Map<string, SafeTensor>, metadata: Record<string, string> = {}): void {
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
