// Bad ONNX input: one clear line (naming the file and what is wrong), exit
// code 2, no stack trace, never a crash. Covers truncated and random files,
// an unsupported op (node, op_type, domain, opset named), an unsupported
// opset, raw_data that disagrees with its shape, a symbolic dim nothing binds,
// a file over 2 GiB, and external data: accepted next to the model, rejected
// when its location is absolute, contains '..', or escapes through a symlink
// (CVE-2022-25882 class); CNN nodes outside what tiercut trains (BatchNorm in
// inference mode, auto_pad, a BatchNorm module applied twice); weight
// values that are not finite in the plan's precision, refused by run. A fuzz test
// feeds 1,200 mutated copies of the fixtures through the importer: each
// imports or fails with a UserError line.
import { describe, it, expect, beforeAll } from 'vitest';
import { closeSync, mkdirSync, openSync, readFileSync, symlinkSync, writeFileSync, ftruncateSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { cli, expectUserError } from '../cli-helpers.js';
import { onnx, type ModelProto } from '../../compiler/import/onnx-decode.js';
import { importOnnx } from '../../compiler/import/onnx.js';
import { UserError } from '../../src/diagnostics.js';
import { compile } from '../../src/compile.js';
import { TrainingSession } from '../../runtime/session.js';
import { fileData } from '../../runtime/data.js';
import { scratchDir } from '../scratch-dir.js';

const GPT = 'fixtures/onnx/gpt-tiny.onnx';
const dir = scratchDir('tiercut-onnx-bad-');

function expectCliError(file: string, pattern: RegExp, code: string) {
  const r = cli('compile', file, '-o', join(dir, 'out.plan.json'));
  expectUserError(r, pattern);
  expect(r.stderr).toContain(`[${code}]`);
}

function expectImportError(file: string, pattern: RegExp, code: string) {
  let err: unknown;
  try { importOnnx(file); } catch (e) { err = e; }
  expect(err, 'import should fail').toBeInstanceOf(UserError);
  expect((err as UserError).code).toBe(code);
  expect((err as UserError).message).toMatch(pattern);
  expect((err as UserError).message).not.toContain('\n');
}

const decode = (): ModelProto => onnx.ModelProto.decode(readFileSync(GPT));
function save(name: string, m: ModelProto, where = dir): string {
  const file = join(where, name);
  writeFileSync(file, onnx.ModelProto.encode(m).finish());
  return file;
}

/** gpt-tiny with every float initializer moved to `weights.bin` (or the given location for the first one). */
function externalCopy(sub: string, firstLocation?: string): string {
  const d = join(dir, sub);
  mkdirSync(d, { recursive: true });
  const m = decode();
  const blobs: Buffer[] = [];
  let at = 0;
  m.graph!.initializer!.forEach((t, i) => {
    const raw = Buffer.from(t.rawData!);
    blobs.push(raw);
    t.rawData = new Uint8Array(0);
    t.dataLocation = onnx.TensorProto.DataLocation.EXTERNAL;
    t.externalData = [{ key: 'location', value: i === 0 && firstLocation ? firstLocation : 'weights.bin' }, { key: 'offset', value: String(at) }, { key: 'length', value: String(raw.length) }];
    at += raw.length;
  });
  writeFileSync(join(d, 'weights.bin'), Buffer.concat(blobs));
  return save('model.onnx', m, d);
}

describe('bad ONNX input: one line, exit 2', () => {
  beforeAll(() => {
    const bytes = readFileSync(GPT);
    writeFileSync(join(dir, 'truncated.onnx'), bytes.subarray(0, Math.floor(bytes.length / 2)));
    let s = 12345;
    writeFileSync(join(dir, 'random.onnx'), Buffer.from(Array.from({ length: 4096 }, () => { s = (s * 1103515245 + 12345) >>> 0; return s >>> 24; })));
  });

  it('a truncated file', () => expectCliError(join(dir, 'truncated.onnx'), /truncated\.onnx: not a valid ONNX model/, 'TC110'));
  it('random bytes', () => expectCliError(join(dir, 'random.onnx'), /random\.onnx: /, 'TC110'));

  it('an unsupported op names the node, op_type, domain and opset', () => {
    const m = decode();
    const node = m.graph!.node!.find((n) => n.opType === 'Tanh')!;
    node.opType = 'HardSwishy';
    expectCliError(save('unknown-op.onnx', m), /unknown-op\.onnx: node '\/h\.0\/Tanh' \(op_type HardSwishy, domain 'ai\.onnx', opset 17\): op HardSwishy is not supported/, 'TC112');
  });

  it('an op from another domain', () => {
    const m = decode();
    m.graph!.node!.find((n) => n.opType === 'Tanh')!.domain = 'com.microsoft';
    expectImportError(save('domain.onnx', m), /domain 'com\.microsoft'/, 'TC112');
  });

  it('an unsupported opset names the file and the opset', () => {
    const m = decode();
    m.opsetImport![0].version = 11;
    expectCliError(save('opset11.onnx', m), /opset11\.onnx: opset 11 is not supported \(tiercut reads opsets 13\.\.18/, 'TC111');
  });

  it('an unsupported IR version', () => {
    const m = decode();
    m.irVersion = 3;
    expectImportError(save('ir3.onnx', m), /IR version 3 is not supported/, 'TC111');
  });

  it('raw_data that disagrees with the shape', () => {
    const m = decode();
    const t = m.graph!.initializer![2];
    t.rawData = t.rawData!.subarray(0, t.rawData!.length - 4);
    expectCliError(save('short-raw.onnx', m), /short-raw\.onnx: tensor 'h\.0\.ln1\.weight': raw_data holds 124 bytes, its shape \[32\] of FLOAT needs 128/, 'TC115');
  });

  it('a symbolic dim that nothing binds names the input and the dim', () => {
    const m = decode();
    const dim = m.graph!.input![0].type!.tensorType!.shape!.dim![1];
    dim.dimValue = null; dim.dimParam = 'width';
    expectCliError(save('symbolic.onnx', m), /symbolic\.onnx: input 'tokens' dim 1 is symbolic \('width'\)/, 'TC114');
  });

  it('symbolic batch and sequence dims are bound by --batch and --seq', () => {
    const m = decode();
    for (const inp of m.graph!.input!) {
      const [b, t] = inp.type!.tensorType!.shape!.dim!;
      b.dimValue = null; b.dimParam = 'batch';
      t.dimValue = null; t.dimParam = 'seq';
    }
    const file = save('symbolic-ok.onnx', m);
    expectImportError(file, /input 'tokens' dim 0 is symbolic \('batch'\); give its size with --batch N/, 'TC114');
    const g = importOnnx(file, { batch: 2, seq: 16 }).graph;
    expect(g.tensors.find((t) => t.name === 'tokens')!.shape).toEqual([2, 16]);
    // (on a model of fixed shapes they had been ignored without a word: --batch 3 trained on its own 2)
    expectUserError(cli('compile', GPT, '--batch', '3', '-o', join(dir, 'out.plan.json')), /--batch 3: no input of .*gpt-tiny\.onnx has a dim it sets .*; its inputs are tokens \[2,16\], targets \[2,16\]: drop --batch, or export with dynamic_axes \[TC100\]$/);
  });

  it('a file over 2 GiB must use external data', () => {
    const file = join(dir, 'huge.onnx');
    const fd = openSync(file, 'w');
    ftruncateSync(fd, 2 ** 31 + 10); // sparse: no disk is used
    closeSync(fd);
    expectCliError(file, /huge\.onnx: the file is 2\.00 GiB; models over 2 GiB must keep their weights in external data files/, 'TC110');
  });

  it('a graph without a scalar output', () => {
    const m = decode();
    m.graph!.output![0].name = '/h.0/Tanh_output_0';
    expectImportError(save('no-loss.onnx', m), /one scalar output \(the loss\)/, 'TC116');
  });
});

describe('external data', () => {
  it('next to the model: imports and trains exactly like the embedded weights', async () => {
    const file = externalCopy('ext-ok');
    const plan = await compile({ model: file });
    const session = new TrainingSession(plan, {});
    try {
      const r = await session.step(1, fileData(plan.graph, 'fixtures/onnx/gpt-tiny.data.safetensors')(1));
      const expected = JSON.parse(readFileSync('fixtures/onnx/gpt-tiny.expected.json', 'utf8')) as { losses: number[] };
      expect(Math.abs(r.loss - expected.losses[0])).toBeLessThanOrEqual(1e-6);
    } finally {
      session.close();
    }
  });

  it('an absolute location is rejected', () => expectCliError(externalCopy('ext-abs', '/etc/passwd'), /tensor 'wte\.weight': external data location '\/etc\/passwd' is rejected: it is an absolute path/, 'TC113'));
  it("a location with '..' is rejected", () => expectCliError(externalCopy('ext-dotdot', '../ext-ok/weights.bin'), /external data location '\.\.\/ext-ok\/weights\.bin' is rejected: it contains '\.\.'/, 'TC113'));
  it('a Windows drive path is rejected', () => expectImportError(externalCopy('ext-win', 'C:\\weights.bin'), /is rejected: it is an absolute path/, 'TC113'));
  it('a symlink that escapes the model directory is rejected', () => {
    const outside = join(dir, 'outside.bin');
    writeFileSync(outside, Buffer.alloc(1 << 16));
    const file = externalCopy('ext-link', 'link.bin');
    symlinkSync(outside, join(dir, 'ext-link', 'link.bin'));
    expectCliError(file, /external data location 'link\.bin' is rejected: it resolves \(through a symlink\) outside the model's directory/, 'TC113');
  });
  it('a missing external file', () => expectImportError(externalCopy('ext-missing', 'nothere.bin'), /external data file 'nothere\.bin' not found next to the model/, 'TC113'));
  // (a directory had passed the length check by its own size and failed with
  // EISDIR and a stack trace; opening a FIFO had waited forever for a writer)
  it('a directory or a FIFO as the external file, a directory as the model', () => {
    const inDir = externalCopy('ext-dir', 'sub');
    mkdirSync(join(dir, 'ext-dir', 'sub'));
    expectCliError(inDir, /tensor 'wte\.weight': external data location 'sub' is rejected: it is not a regular file/, 'TC113');
    const fifo = externalCopy('ext-fifo', 'pipe');
    execFileSync('mkfifo', [join(dir, 'ext-fifo', 'pipe')]);
    expectCliError(fifo, /external data location 'pipe' is rejected: it is not a regular file/, 'TC113');
    mkdirSync(join(dir, 'dir.onnx'));
    // (compile refuses it first; run reads the plan's model here)
    expectImportError(join(dir, 'dir.onnx'), /dir\.onnx: not a regular file \(a directory\)/, 'TC110');
  });
});

describe('CNN nodes tiercut does not train: one line', () => {
  const CNN = 'fixtures/onnx/resnet-tiny.onnx';
  const edit = (name: string, f: (m: ModelProto) => void) => {
    const m = onnx.ModelProto.decode(readFileSync(CNN));
    f(m);
    return save(name, m);
  };
  const node = (m: ModelProto, op: string) => m.graph!.node!.find((n) => n.opType === op)!;
  const setAttr = (n: onnx.INodeProto, name: string, a: onnx.IAttributeProto) => { n.attribute = [...(n.attribute ?? []).filter((x) => x.name !== name), { name, ...a }]; };

  it('BatchNormalization in inference mode', () => expectCliError(edit('bn-eval.onnx', (m) => setAttr(node(m, 'BatchNormalization'), 'training_mode', { type: onnx.AttributeProto.AttributeType.INT, i: 0 })),
    /node '\/stem\/bn\/BatchNormalization' \(op_type BatchNormalization, domain 'ai\.onnx', opset 17\): BatchNormalization in inference mode/, 'TC112'));
  it('auto_pad SAME_UPPER', () => expectCliError(edit('conv-same.onnx', (m) => setAttr(node(m, 'Conv'), 'auto_pad', { type: onnx.AttributeProto.AttributeType.STRING, s: Buffer.from('SAME_UPPER') })),
    /op_type Conv.*auto_pad SAME_UPPER \(export with explicit pads\)/, 'TC112'));
  it('one BatchNorm module applied twice', () => expectCliError(edit('bn-twice.onnx', (m) => {
    const bns = m.graph!.node!.filter((n) => n.opType === 'BatchNormalization');
    bns[2].input = [bns[2].input![0], ...bns[1].input!.slice(1)]; // res.b's norm reuses res.a's module
  }), /the running mean 'res\.a\.bn\.running_mean' is also updated by an earlier BatchNormalization node/, 'TC112'));
  it('a NaN float attribute (a plan is JSON: it would be written as null)', () => expectCliError(edit('bn-nan.onnx', (m) => setAttr(node(m, 'BatchNormalization'), 'epsilon', { type: onnx.AttributeProto.AttributeType.FLOAT, f: NaN })),
    /op_type BatchNormalization.*attribute epsilon is NaN; a finite number is needed/, 'TC112'));
  it('a pooling window that does not fit', () => expectCliError(edit('pool-big.onnx', (m) => setAttr(node(m, 'MaxPool'), 'kernel_shape', { type: onnx.AttributeProto.AttributeType.INTS, ints: [20, 20] })),
    /maxPool2d: a 20x20 window .* does not fit in x\[4,8,12,12\]/, 'TC116'));
});

describe('weight values', () => {
  /** gpt-tiny with wte.weight's element `at` set to `value` (its raw_data, little-endian fp32). */
  function withWeight(name: string, at: number, value: number): string {
    const m = decode();
    const t = m.graph!.initializer!.find((x) => x.name === 'wte.weight')!;
    const raw = Buffer.from(t.rawData!);
    raw.writeFloatLE(value, 4 * at);
    t.rawData = raw;
    return save(name, m);
  }
  // (they had compiled and trained one step, then failed on a NaN gradient naming an update, not the weight)
  it('a NaN in an initializer: run names the model file, the initializer and the index', () => {
    const plan = join(dir, 'nan-weight.plan.json');
    expect(cli('compile', withWeight('nan-weight.onnx', 5, NaN), '-o', plan).status).toBe(0);
    const r = cli('run', plan, '--steps', '1');
    expectUserError(r, /nan-weight\.onnx: initializer 'wte\.weight' value NaN at index 5 is not finite in fp32/);
    expect(r.stderr).toContain('[TC502]');
  });
  it('a value past fp16 in an fp16 plan is refused; the same file trains in fp32', () => {
    const file = withWeight('big-weight.onnx', 7, 1e6);
    const plan16 = join(dir, 'big-weight-16.plan.json'), plan32 = join(dir, 'big-weight-32.plan.json');
    expect(cli('compile', file, '--precision', 'fp16', '-o', plan16).status).toBe(0);
    expectUserError(cli('run', plan16, '--steps', '1'), /big-weight\.onnx: initializer 'wte\.weight' value 1000000 at index 7 is not finite in fp16/);
    expect(cli('compile', file, '-o', plan32).status).toBe(0);
    expect(cli('run', plan32, '--steps', '1').status).toBe(0);
  });
});

describe('fuzz: mutated fixtures import or fail with one UserError line', () => {
  it('1,200 mutations of the GPT, BERT and CNN fixtures', () => {
    const sources = ['fixtures/onnx/gpt-tiny.onnx', 'fixtures/onnx/bert-tiny.onnx', 'fixtures/onnx/resnet-tiny.onnx'].map((f) => readFileSync(f));
    let seed = 0x9e3779b9;
    const rnd = (n: number) => { seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0; return seed % n; };
    const file = join(dir, 'fuzz.onnx');
    const outcomes = { imported: 0, userError: 0 };
    for (let i = 0; i < 1200; i++) {
      const src = sources[i % sources.length];
      let bytes = Buffer.from(src);
      const kind = rnd(4);
      if (kind === 0) bytes = bytes.subarray(0, rnd(bytes.length)); // truncate
      else if (kind === 1) for (let k = 0, n = 1 + rnd(8); k < n; k++) bytes[rnd(bytes.length)] = rnd(256); // flip bytes
      else if (kind === 2) { const at = rnd(bytes.length); bytes = Buffer.concat([bytes.subarray(0, at), Buffer.from([rnd(256), rnd(256)]), bytes.subarray(at)]); } // insert
      else { const at = rnd(bytes.length - 64); bytes.fill(rnd(256), at, at + 1 + rnd(64)); } // smear
      writeFileSync(file, bytes);
      try {
        importOnnx(file);
        outcomes.imported++;
      } catch (e) {
        if (!(e instanceof UserError)) throw new Error(`mutation ${i} (kind ${kind}) threw a non-UserError: ${(e as Error).stack}`);
        expect(e.message).not.toContain('\n');
        expect(e.message.startsWith(file.replace(/^.*[\\/]/, '')) || e.message.includes('fuzz.onnx'), e.message).toBe(true);
        outcomes.userError++;
      }
    }
    console.log(`fuzz: ${outcomes.imported} imported, ${outcomes.userError} rejected with a UserError`);
    expect(outcomes.imported + outcomes.userError).toBe(1200);
  });
});
