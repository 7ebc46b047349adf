// ONNX decoding: a .onnx file -> the decoded ModelProto, checked, and the
// values of its tensors.
//
// Takes a model path. Gives the ModelProto (onnx-proto, protobufjs) after
// checking what the importer relies on: IR version 7..10, the default-domain
// opset 13..18, a graph. Tensor data: raw_data may start at any byte offset of
// the decoded buffer (a typed-array view on it can throw), so bytes are always
// copied before they are read; external data is read relative to the model's
// directory, and a location that is absolute, contains `..`, or resolves
// (through symlinks) outside that directory is rejected (the CVE-2022-25882
// class). Every problem is one UserError line naming the file and the tensor.
// Cost: one read and one protobuf decode of the file; tensor data is read only
// when asked for (planning needs shapes, not weights).

import { closeSync, fstatSync, openSync, readSync, realpathSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import onnxProto from 'onnx-proto';
import { diag } from '../../src/diagnostics.js';

export const onnx = onnxProto.onnx;
export type ModelProto = onnxProto.onnx.ModelProto;
export type GraphProto = onnxProto.onnx.IGraphProto;
export type NodeProto = onnxProto.onnx.INodeProto;
export type TensorProto = onnxProto.onnx.ITensorProto;
export type AttributeProto = onnxProto.onnx.IAttributeProto;
export type ValueInfoProto = onnxProto.onnx.IValueInfoProto;

export const IR_VERSIONS = { min: 7, max: 10 } as const;
export const OPSETS = { min: 13, max: 18 } as const;
/** protobuf (and readFileSync) stop at 2 GiB. */
const MAX_PROTO_BYTES = 2 ** 31 - 1;

export const DT = { FLOAT: 1, UINT8: 2, INT8: 3, UINT16: 4, INT16: 5, INT32: 6, INT64: 7, STRING: 8, BOOL: 9, FLOAT16: 10, DOUBLE: 11, UINT32: 12, UINT64: 13, BFLOAT16: 16 } as const;
const DT_NAMES: Record<number, string> = Object.fromEntries(Object.entries(DT).map(([k, v]) => [v, k]));
const DT_BYTES: Record<number, number> = { 1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2 };

export function dtypeName(dt: number): string { return DT_NAMES[dt] ?? `data type ${dt}`; }
export function isFloatType(dt: number): boolean { return dt === DT.FLOAT || dt === DT.DOUBLE || dt === DT.FLOAT16 || dt === DT.BFLOAT16; }

/** A protobuf int64 (number or Long) as a JS number; throws when it is not a safe integer. */
export function toNum(v: unknown, what: string, file: string): number {
  const n = typeof v === 'number' ? v : v && typeof (v as { toNumber?: unknown }).toNumber === 'function' ? (v as { toNumber(): number }).toNumber() : NaN;
  if (!Number.isSafeInteger(n)) throw diag.onnxFormat(file, `${what}: ${String(v)} is not an integer that fits in 2^53`);
  return n;
}

export interface LoadedModel {
  readonly model: ModelProto;
  readonly graph: GraphProto;
  /** The display name used in messages (as given by the user). */
  readonly file: string;
  /** Absolute directory holding the model (external data is resolved inside it). */
  readonly dir: string;
  readonly irVersion: number;
  readonly opset: number;
}

export function loadOnnx(path: string, display = path): LoadedModel {
  const abs = resolve(path);
  let st: ReturnType<typeof statSync>;
  try { st = statSync(abs); } catch { throw diag.fileNotFound(display, 'ONNX model'); }
  // (a directory had failed with EISDIR and a stack trace; a FIFO would wait for a writer)
  if (!st.isFile()) throw diag.onnxFormat(display, `not a regular file (${st.isDirectory() ? 'a directory' : 'a device, FIFO or socket'})`);
  const size = st.size;
  if (size > MAX_PROTO_BYTES)
    throw diag.onnxFormat(display, `the file is ${(size / 2 ** 30).toFixed(2)} GiB; models over 2 GiB must keep their weights in external data files (protobuf cannot hold more than 2 GiB; save with onnx.save_model(..., save_as_external_data=True))`);
  let bytes: Uint8Array;
  try { bytes = readWhole(abs, size); } catch (e) { throw diag.onnxFormat(display, `cannot be read: ${(e as Error).message}`); }
  let model: ModelProto;
  try {
    model = onnx.ModelProto.decode(bytes);
  } catch (e) {
    throw diag.onnxFormat(display, `not a valid ONNX model (protobuf decoding failed: ${(e as Error).message}); is the file truncated?`);
  }
  const irVersion = toNum(model.irVersion, 'ir_version', display);
  if (!model.graph || irVersion === 0) throw diag.onnxFormat(display, 'not an ONNX model: no graph or no ir_version');
  if (irVersion < IR_VERSIONS.min || irVersion > IR_VERSIONS.max)
    throw diag.onnxVersion(display, `IR version ${irVersion} is not supported (tiercut reads IR versions ${IR_VERSIONS.min}..${IR_VERSIONS.max})`);
  let opset = -1;
  for (const o of model.opsetImport) {
    const domain = o.domain ?? '';
    if (domain === '' || domain === 'ai.onnx') opset = toNum(o.version, 'opset_import.version', display);
  }
  if (opset < 0) throw diag.onnxVersion(display, 'the model imports no default-domain (ai.onnx) opset');
  if (opset < OPSETS.min || opset > OPSETS.max)
    throw diag.onnxVersion(display, `opset ${opset} is not supported (tiercut reads opsets ${OPSETS.min}..${OPSETS.max}; re-export with torch.onnx.export(..., opset_version=17))`);
  return { model, graph: model.graph as GraphProto, file: display, dir: dirname(abs), irVersion, opset };
}

function readWhole(abs: string, size: number): Uint8Array {
  const buf = Buffer.allocUnsafe(size);
  const fd = openSync(abs, 'r');
  try {
    let at = 0;
    while (at < size) {
      const n = readSync(fd, buf, at, size - at, at);
      if (n <= 0) break;
      at += n;
    }
    return buf.subarray(0, at);
  } finally {
    closeSync(fd);
  }
}

export function tensorDims(t: TensorProto, file: string): number[] {
  return (t.dims ?? []).map((d: unknown, i: number) => {
    const n = toNum(d, `tensor '${t.name}' dims[${i}]`, file);
    if (n < 0) throw diag.onnxTensor(file, `tensor '${t.name}' has a negative dimension ${n}`);
    return n;
  });
}

interface ExternalRef { location: string; offset: number; length: number | undefined }

function externalRef(t: TensorProto, file: string): ExternalRef {
  const kv = new Map<string, string>((t.externalData ?? []).map((e: onnxProto.onnx.IStringStringEntryProto) => [e.key ?? '', e.value ?? '']));
  const location = kv.get('location');
  if (!location) throw diag.onnxExternal(file, `tensor '${t.name}': external data without a location`);
  const num = (k: string): number | undefined => {
    const v = kv.get(k);
    if (v === undefined) return undefined;
    if (!/^\d+$/.test(v) || !Number.isSafeInteger(Number(v))) throw diag.onnxExternal(file, `tensor '${t.name}': external data ${k} '${v}' is not a byte count`);
    return Number(v);
  };
  return { location, offset: num('offset') ?? 0, length: num('length') };
}

/**
 * The absolute path of an external-data location, or UserError when it could
 * escape the model's directory: absolute paths (POSIX or Windows), any `..`
 * segment, NUL bytes, or a path that resolves through symlinks outside it.
 */
export function safeExternalPath(location: string, dir: string, file: string, tensor: string): string {
  const reject = (why: string) => diag.onnxExternal(file, `tensor '${tensor}': external data location '${location}' is rejected: ${why}`);
  if (location.includes('\0')) throw reject('it contains a NUL byte');
  if (isAbsolute(location) || /^[a-zA-Z]:/.test(location) || location.startsWith('\\') || location.startsWith('/')) throw reject('it is an absolute path (locations must be relative to the model file)');
  if (location.split(/[\\/]/).includes('..')) throw reject("it contains '..' (locations must stay inside the model's directory)");
  const joined = join(dir, location);
  let real: string, realDir: string;
  try { realDir = realpathSync(dir); } catch { throw reject('the model directory cannot be resolved'); }
  try { real = realpathSync(joined); } catch { throw diag.onnxExternal(file, `tensor '${tensor}': external data file '${location}' not found next to the model`); }
  const rel = relative(realDir, real);
  if (rel === '' || rel.startsWith('..' + sep) || rel === '..' || isAbsolute(rel)) throw reject("it resolves (through a symlink) outside the model's directory");
  // (a directory had passed the length check by its own size and failed to read
  // with a stack trace; opening a FIFO waits for a writer)
  if (!statSync(real).isFile()) throw reject('it is not a regular file');
  return real;
}

/** Bytes per element and element count of a tensor with numeric data. */
function layout(t: TensorProto, file: string): { dims: number[]; count: number; elemBytes: number } {
  const dt = t.dataType ?? 0;
  const elemBytes = DT_BYTES[dt];
  if (!elemBytes) throw diag.onnxTensor(file, `tensor '${t.name}' has unsupported ${dtypeName(dt)}`);
  const dims = tensorDims(t, file);
  let count = 1;
  for (const d of dims) count *= d;
  if (!Number.isSafeInteger(count * elemBytes)) throw diag.onnxTensor(file, `tensor '${t.name}' dims [${dims.join(',')}] are too large`);
  return { dims, count, elemBytes };
}

/**
 * Checks that a tensor's data agrees with its shape (and, for external data,
 * that the location is safe and the file long enough), without converting it.
 */
export function checkTensorData(t: TensorProto, dir: string, file: string): void {
  const { dims, count, elemBytes } = layout(t, file);
  const want = count * elemBytes;
  const shape = `[${dims.join(',')}] of ${dtypeName(t.dataType ?? 0)}`;
  if (t.dataLocation === onnx.TensorProto.DataLocation.EXTERNAL) {
    const ref = externalRef(t, file);
    const path = safeExternalPath(ref.location, dir, file, t.name ?? '');
    if (ref.length !== undefined && ref.length !== want) throw diag.onnxTensor(file, `tensor '${t.name}': external data length ${ref.length} bytes disagrees with its shape ${shape} (${want} bytes)`);
    const size = statSync(path).size;
    if (ref.offset + want > size) throw diag.onnxTensor(file, `tensor '${t.name}': external data [${ref.offset}, ${ref.offset + want}) is past the end of '${ref.location}' (${size} bytes)`);
    return;
  }
  const raw = t.rawData;
  if (raw && raw.length > 0) {
    if (raw.length !== want) throw diag.onnxTensor(file, `tensor '${t.name}': raw_data holds ${raw.length} bytes, its shape ${shape} needs ${want}`);
    return;
  }
  const typed = typedLength(t);
  if (typed !== count) throw diag.onnxTensor(file, `tensor '${t.name}': holds ${typed} values, its shape ${shape} needs ${count}`);
}

function typedLength(t: TensorProto): number {
  switch (t.dataType) {
    case DT.FLOAT: return t.floatData?.length ?? 0;
    case DT.DOUBLE: return t.doubleData?.length ?? 0;
    case DT.INT64: return t.int64Data?.length ?? 0;
    case DT.UINT32: case DT.UINT64: return t.uint64Data?.length ?? 0;
    default: return t.int32Data?.length ?? 0; // int8/16/32, uint8/16, bool, float16, bfloat16
  }
}

/** The tensor's bytes in little-endian raw layout (a fresh, aligned copy), from raw_data or external data. */
function rawBytes(t: TensorProto, dir: string, file: string, want: number): Uint8Array | undefined {
  if (t.dataLocation === onnx.TensorProto.DataLocation.EXTERNAL) {
    const ref = externalRef(t, file);
    const path = safeExternalPath(ref.location, dir, file, t.name ?? '');
    const out = new Uint8Array(want);
    if (want === 0) return out;
    let fd: number;
    try { fd = openSync(path, 'r'); } catch (e) { throw diag.onnxExternal(file, `tensor '${t.name}': external data file '${ref.location}' cannot be opened: ${(e as Error).message}`); }
    try {
      const size = fstatSync(fd).size;
      if (ref.offset + want > size) throw diag.onnxTensor(file, `tensor '${t.name}': external data [${ref.offset}, ${ref.offset + want}) is past the end of '${ref.location}' (${size} bytes)`);
      let at = 0;
      while (at < want) {
        let n: number;
        try { n = readSync(fd, out, at, want - at, ref.offset + at); } catch (e) { throw diag.onnxExternal(file, `tensor '${t.name}': reading external data file '${ref.location}': ${(e as Error).message}`); }
        // (a file cut short since it was checked: zeros had been read for its end)
        if (n <= 0) throw diag.onnxTensor(file, `tensor '${t.name}': external data file '${ref.location}' ends at byte ${ref.offset + at}, before the tensor's end at ${ref.offset + want}`);
        at += n;
      }
    } finally {
      closeSync(fd);
    }
    return out;
  }
  const raw = t.rawData;
  if (!raw || raw.length === 0) return undefined;
  return Uint8Array.prototype.slice.call(raw); // copy: raw may sit at an unaligned offset of the file buffer
}

function halfToFloat(h: number): number {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/** Every value of a numeric tensor as float64 (int64 beyond 2^53 loses precision; shapes never do). */
export function tensorValues(t: TensorProto, dir: string, file: string): { dims: number[]; values: Float64Array } {
  checkTensorData(t, dir, file);
  const { dims, count, elemBytes } = layout(t, file);
  const dt = t.dataType ?? 0;
  const out = new Float64Array(count);
  const raw = rawBytes(t, dir, file, count * elemBytes);
  if (raw) {
    const dv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    for (let i = 0; i < count; i++) {
      switch (dt) {
        case DT.FLOAT: out[i] = dv.getFloat32(i * 4, true); break;
        case DT.DOUBLE: out[i] = dv.getFloat64(i * 8, true); break;
        case DT.INT64: out[i] = Number(dv.getBigInt64(i * 8, true)); break;
        case DT.UINT64: out[i] = Number(dv.getBigUint64(i * 8, true)); break;
        case DT.INT32: out[i] = dv.getInt32(i * 4, true); break;
        case DT.UINT32: out[i] = dv.getUint32(i * 4, true); break;
        case DT.INT16: out[i] = dv.getInt16(i * 2, true); break;
        case DT.UINT16: out[i] = dv.getUint16(i * 2, true); break;
        case DT.INT8: out[i] = dv.getInt8(i); break;
        case DT.UINT8: case DT.BOOL: out[i] = dv.getUint8(i); break;
        case DT.FLOAT16: out[i] = halfToFloat(dv.getUint16(i * 2, true)); break;
        case DT.BFLOAT16: { const f = new DataView(new ArrayBuffer(4)); f.setUint32(0, dv.getUint16(i * 2, true) << 16); out[i] = f.getFloat32(0); break; }
      }
    }
    return { dims, values: out };
  }
  switch (dt) {
    case DT.FLOAT: t.floatData!.forEach((v, i) => { out[i] = Math.fround(v); }); break;
    case DT.DOUBLE: t.doubleData!.forEach((v, i) => { out[i] = v; }); break;
    case DT.INT64: t.int64Data!.forEach((v: unknown, i: number) => { out[i] = toNum(v, `tensor '${t.name}' int64_data[${i}]`, file); }); break;
    case DT.UINT32: case DT.UINT64: t.uint64Data!.forEach((v: unknown, i: number) => { out[i] = toNum(v, `tensor '${t.name}' uint64_data[${i}]`, file); }); break;
    case DT.FLOAT16: t.int32Data!.forEach((v, i) => { out[i] = halfToFloat(v & 0xffff); }); break;
    case DT.BFLOAT16: t.int32Data!.forEach((v, i) => { const f = new DataView(new ArrayBuffer(4)); f.setUint32(0, (v & 0xffff) << 16); out[i] = f.getFloat32(0); }); break;
    default: t.int32Data!.forEach((v, i) => { out[i] = v; }); break;
  }
  return { dims, values: out };
}

/**
 * The float32 values of the named initializers of an ONNX file (the runtime's
 * initial weights). Unknown names are absent from the result.
 */
export function readOnnxInitializers(path: string, names: ReadonlySet<string>): Map<string, { dims: number[]; values: Float32Array }> {
  const m = loadOnnx(path);
  const out = new Map<string, { dims: number[]; values: Float32Array }>();
  for (const t of m.graph.initializer ?? []) {
    if (!names.has(t.name ?? '')) continue;
    const { dims, values } = tensorValues(t, m.dir, m.file);
    out.set(t.name!, { dims, values: Float32Array.from(values) });
  }
  return out;
}
