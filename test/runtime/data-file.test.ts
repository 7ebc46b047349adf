// run --data / --weights files that are not what they seem: each refused as
// it is read, with one line naming the file and the tensor (exit 2), where
// it had been read without end, called "not found", printed over several
// lines, wrapped into range, or found only as the optimizer's error steps
// later.
import { describe, it, expect, beforeAll } from 'vitest';
import { chmodSync, closeSync, mkdirSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { cli, expectUserError } from '../cli-helpers.js';
import { readSafetensors, writeSafetensors, type SafeDType, type SafeTensor } from '../../runtime/safetensors.js';
import { scratchDir } from '../scratch-dir.js';

const dir = scratchDir('tiercut-data-');
let gpt: string, mlp: string;

beforeAll(() => {
  gpt = join(dir, 'gpt.plan.json');
  mlp = join(dir, 'mlp.plan.json');
  expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '-o', gpt).status).toBe(0);
  expect(cli('compile', 'models/mlp.ts', '--preset', 'tiny', '-o', mlp).status).toBe(0);
});

function tensor(dtype: SafeDType, shape: number[], values: number[] | bigint[]): SafeTensor {
  const bytes = dtype === 'I64' ? new Uint8Array(BigInt64Array.from(values as bigint[]).buffer)
    : dtype === 'I32' ? new Uint8Array(Int32Array.from(values as number[]).buffer)
      : dtype === 'F64' ? new Uint8Array(Float64Array.from(values as number[]).buffer) : new Uint8Array(Float32Array.from(values as number[]).buffer);
  return { dtype, shape, bytes };
}
function file(name: string, tensors: Record<string, SafeTensor>): string {
  const f = join(dir, name);
  writeSafetensors(f, new Map(Object.entries(tensors)));
  return f;
}
const ids = (n: number, v: number) => Array.from({ length: n }, (_, i) => (i * 7 + v) % 96);
const run = (plan: string, ...args: string[]) => cli('run', plan, '--steps', '2', ...args);

describe('run --data / --weights: bad files refused as they are read', () => {
  it('a device, a directory, an unreadable file: not "not found", and never read without end', () => {
    // (/dev/zero had been read until memory ran out)
    expectUserError(run(gpt, '--data', '/dev/zero'), /\/dev\/zero: not a safetensors file: not a regular file \[TC502\]$/);
    expectUserError(run(gpt, '--weights', '/dev/zero'), /not a regular file/);
    const sub = join(dir, 'a-directory.safetensors');
    mkdirSync(sub);
    expectUserError(run(gpt, '--data', sub), /a-directory\.safetensors: not a safetensors file: not a regular file/);
    expectUserError(run(gpt, '--data', join(dir, 'missing.safetensors')), /missing\.safetensors: safetensors file not found \[TC101\]/);
    if (process.getuid?.() !== 0) {
      const locked = file('locked.safetensors', { tokens: tensor('I32', [4, 16], ids(64, 0)) });
      chmodSync(locked, 0);
      expectUserError(run(gpt, '--data', locked), /locked\.safetensors: cannot read it: EACCES/);
    }
  });

  it('token ids stored as I64 past 2^31 (they had wrapped into range and trained), or outside the vocabulary', () => {
    const good = ids(64, 1).map(BigInt);
    expect(run(gpt, '--data', file('good.safetensors', { tokens: tensor('I64', [4, 16], ids(64, 0).map(BigInt)), targets: tensor('I64', [4, 16], good) })).status).toBe(0);
    const wrapped = file('wrapped.safetensors', { tokens: tensor('I64', [4, 16], ids(64, 0).map((v) => BigInt(v) + 2n ** 32n)), targets: tensor('I64', [4, 16], good) });
    expectUserError(run(gpt, '--data', wrapped), /wrapped\.safetensors: tensor 'tokens' value 4294967296 at index 0 is not an integer in \[0, 96\) \[TC502\]$/);
    const minus = file('minus.safetensors', { tokens: tensor('I32', [4, 16], ids(64, 0)), targets: tensor('I32', [4, 16], [-100, ...ids(63, 1)]) });
    expectUserError(run(gpt, '--data', minus), /tensor 'targets' value -100 at index 0 is not an integer in \[0, 96\)/);
  });

  it('a float input or a weight that is NaN or past fp32: named with its index, before any step', () => {
    const x = Array.from({ length: 128 }, (_, i) => Math.sin(i));
    const labels = tensor('I32', [8], [0, 1, 2, 3, 4, 5, 6, 7]);
    expect(run(mlp, '--data', file('mlp-good.safetensors', { x: tensor('F32', [8, 16], x), labels })).status).toBe(0);
    expectUserError(run(mlp, '--data', file('mlp-nan.safetensors', { x: tensor('F32', [8, 16], [...x.slice(0, 5), NaN, ...x.slice(6)]), labels })), /tensor 'x' value NaN at index 5 is not finite in fp32/);
    expectUserError(run(mlp, '--data', file('mlp-big.safetensors', { x: tensor('F64', [8, 16], [1e300, ...x.slice(1)]), labels })), /tensor 'x' value 1e\+300 at index 0 is not finite in fp32/);
    // (a NaN weight had surfaced as "adam: the gradient has an inf or NaN" at step 1)
    const saved = join(dir, 'saved.safetensors');
    expect(run(mlp, '--save', saved).status).toBe(0);
    const weights = readSafetensors(saved);
    expect(run(mlp, '--weights', saved).status).toBe(0);
    const w0 = weights.get('fc0.w')!;
    weights.set('fc0.w', tensor('F32', [...w0.shape], Array.from({ length: 512 }, (_, i) => (i === 9 ? Infinity : 0.01))));
    const w = join(dir, 'w-inf.safetensors');
    writeSafetensors(w, weights);
    expectUserError(run(mlp, '--weights', w), /w-inf\.safetensors: tensor 'fc0\.w' value Infinity at index 9 is not finite in fp32 \[TC502\]$/);
  });

  it('batched data with no steps, or inputs with different step counts, refused; a name with control characters stays on one line', () => {
    const t = (n: number, v: number) => tensor('I32', [n, 4, 16], ids(n * 64, v));
    expectUserError(run(gpt, '--data', file('zero.safetensors', { tokens: t(0, 0), targets: t(0, 1) })), /tensor 'tokens' has shape \[0,4,16\]: no step's data/);
    expectUserError(run(gpt, '--data', file('apart.safetensors', { tokens: t(3, 0), targets: t(2, 1) })), /tensors 'tokens' and 'targets' hold 3 and 2 steps of data; every input's must be the same/);
    expect(run(gpt, '--data', file('three.safetensors', { tokens: t(3, 0), targets: t(3, 1) })).status).toBe(0);
    // (a tensor name with a newline and an escape had been printed as is, over two lines)
    expectUserError(run(gpt, '--data', file('ctrl.safetensors', { 'tok\nens\x1b[31m': t(1, 0) })), /no tensor named 'tokens' .*the file has: tok\\x0aens\\x1b\[31m/);
  });

  it('weights stored as integers, or past fp16 in an fp16 plan: refused naming the tensor (they had loaded, or failed step 1 as another tensor\'s gradient)', () => {
    const saved = join(dir, 'gpt-saved.safetensors');
    expect(run(gpt, '--save', saved).status).toBe(0);
    const weights = readSafetensors(saved);
    const w0 = weights.get('h.0.attn.proj.w')!;
    const n = w0.bytes.byteLength / 4;
    const asInt = new Map(weights);
    asInt.set('h.0.attn.proj.w', tensor('I32', [...w0.shape], Array.from({ length: n }, () => 0)));
    expectUserError(run(gpt, '--weights', file('w-i32.safetensors', Object.fromEntries(asInt))), /tensor 'h\.0\.attn\.proj\.w' is I32; a parameter needs floats/);
    const big = new Map(weights);
    big.set('h.0.attn.proj.w', tensor('F32', [...w0.shape], Array.from({ length: n }, (_, i) => (i === 3 ? 70000 : 0.01))));
    const bigFile = file('w-big16.safetensors', Object.fromEntries(big));
    const half = join(dir, 'gpt16.plan.json');
    expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--precision', 'fp16', '-o', half).status).toBe(0);
    expectUserError(run(half, '--weights', bigFile), /tensor 'h\.0\.attn\.proj\.w' value 70000 at index 3 is not finite in fp16/);
    expect(run(gpt, '--weights', bigFile).status).toBe(0); // (fp32's range holds it)
    // bf16's range ends below fp32's: 3.4e38 rounds to inf there (it had been taken, for --weights and --data alike)
    const b16 = join(dir, 'gptb16.plan.json');
    expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--precision', 'bf16', '-o', b16).status).toBe(0);
    big.set('h.0.attn.proj.w', tensor('F32', [...w0.shape], Array.from({ length: n }, (_, i) => (i === 3 ? 3.4e38 : 0.01))));
    expectUserError(run(b16, '--weights', file('w-bigb16.safetensors', Object.fromEntries(big))), /tensor 'h\.0\.attn\.proj\.w' value 3\.39\d*e\+38 at index 3 is not finite in bf16/);
    const mlp16 = join(dir, 'mlp16.plan.json');
    expect(cli('compile', 'models/mlp.ts', '--preset', 'tiny', '--precision', 'fp16', '-o', mlp16).status).toBe(0);
    const x = Array.from({ length: 8 * 16 }, (_, i) => (i === 5 ? 1e5 : 0.5));
    expectUserError(run(mlp16, '--data', file('x-big16.safetensors', { x: tensor('F32', [8, 16], x), labels: tensor('I32', [8], Array.from({ length: 8 }, () => 1)) })), /tensor 'x' value 100000 at index 5 is not finite in fp16/);
    // a tensor the model does not have: loaded all the same, and said (it had been ignored without a word)
    const extra = new Map(weights);
    extra.set('extra.w', tensor('F32', [2], [1, 2]));
    const r = run(gpt, '--weights', file('w-extra.safetensors', Object.fromEntries(extra)));
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^tiercut: note: --weights: 1 tensor of .*w-extra\.safetensors is not the model's and was not loaded \('extra\.w'\)$/m);
    expect(run(gpt, '--weights', saved).stderr).not.toMatch(/not the model's/);
  });
});

describe('safetensors files read as the format is written', () => {
  /** A file of `header` (as JSON) then `dataBytes` zero bytes. */
  function raw(name: string, header: unknown, dataBytes: number): string {
    const json = Buffer.from(JSON.stringify(header));
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(json.length));
    const f = join(dir, name);
    writeFileSync(f, Buffer.concat([len, json, Buffer.alloc(dataBytes)]));
    return f;
  }

  it('two tensors over the same bytes, or a dtype named like an object key: refused', () => {
    const overlap = raw('overlap.safetensors', { a: { dtype: 'F32', shape: [4], data_offsets: [0, 16] }, b: { dtype: 'F32', shape: [2], data_offsets: [8, 16] } }, 16);
    expect(() => readSafetensors(overlap)).toThrow(/tensors 'a' and 'b': data_offsets \[0, 16\] and \[8, 16\] overlap/);
    // ("toString" had passed as a dtype and read as a size of undefined)
    expect(() => readSafetensors(raw('proto.safetensors', { a: { dtype: 'toString', shape: [4], data_offsets: [0, 16] } }, 16))).toThrow(/tensor 'a': unsupported dtype "toString"/);
    const fine = readSafetensors(raw('fine.safetensors', { a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, b: { dtype: 'F32', shape: [0], data_offsets: [8, 8] }, c: { dtype: 'I32', shape: [2], data_offsets: [8, 16] } }, 16));
    expect([...fine.keys()]).toEqual(['a', 'b', 'c']);
  });

  it('a file over 2 GiB (a large model\'s checkpoint) is read: each tensor apart, not the file in one read', () => {
    // (readFileSync had refused it: ERR_FS_FILE_TOO_LARGE); sparse, so no disk is used for its zeros
    const f = join(dir, 'large.safetensors');
    const big = 2 ** 31 + 64;
    const header = Buffer.from(JSON.stringify({ pad: { dtype: 'U8', shape: [big], data_offsets: [0, big] }, tail: { dtype: 'F32', shape: [2], data_offsets: [big, big + 8] } }).padEnd(120));
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(header.length));
    writeFileSync(f, Buffer.concat([len, header]));
    const fd = openSync(f, 'r+');
    writeSync(fd, Buffer.from(new Float32Array([1.5, -2]).buffer), 0, 8, 8 + header.length + big);
    closeSync(fd);
    const t = readSafetensors(f);
    expect(t.get('pad')!.bytes.byteLength).toBe(big);
    expect([...new Float32Array(t.get('tail')!.bytes.buffer)]).toEqual([1.5, -2]);
  });
});
