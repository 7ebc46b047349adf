// Small ONNX graphs built here, op by op, checked against onnxruntime-node
// (the loss of one forward pass within 1e-5), or refused with a line naming
// the op: each case was once accepted and computed wrong (a review's finds:
// Flatten's negative axis, Max/Min past two inputs, Mod's fmod, a constant
// cast to 16 bits not rounded) or failed only when the plan was run.
import { describe, it, expect } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import ort from 'onnxruntime-node';
import { compile } from '../../src/compile.js';
import { TrainingSession } from '../../runtime/session.js';
import { UserError } from '../../src/diagnostics.js';
import { scratchDir } from '../scratch-dir.js';

const { onnx } = createRequire(import.meta.url)('onnx-proto');
const AT = onnx.AttributeProto.AttributeType;
const dir = scratchDir('tiercut-onnx-ops-');

type Attr = number | number[] | { tensor: object };
const attr = (name: string, v: Attr) => (typeof v === 'number' ? { name, type: AT.INT, i: v } : Array.isArray(v) ? { name, type: AT.INTS, ints: v } : { name, type: AT.TENSOR, t: v.tensor });
const node = (op: string, input: string[], output: string[], attrs: Record<string, Attr> = {}) => ({ opType: op, input, output, name: `${op}_${output[0]}`, attribute: Object.entries(attrs).map(([k, v]) => attr(k, v)) });
const floats = (name: string, dims: number[], values: number[]) => ({ name, dims, dataType: 1, rawData: new Uint8Array(Float32Array.from(values).buffer) });
const constant = (out: string, dims: number[], values: number[], int = false) =>
  node('Constant', [], [out], { value: { tensor: int ? { dims, dataType: 7, int64Data: values } : { dims, dataType: 1, floatData: values } } });
const valueInfo = (name: string, elemType: number, shape: number[]) => ({ name, type: { tensorType: { elemType, shape: { dim: shape.map((d) => ({ dimValue: d })) } } } });
// (fixed numbers, not a generator: the cases stay the same on every run)
const ramp = (n: number, k: number) => Array.from({ length: n }, (_, i) => Math.sin(1.3 * i + k));

interface Input { name: string; shape: number[]; values: number[]; int?: boolean }

/** The model (nodes ending in a scalar 'loss', one float initializer W at least) written to a file. */
function model(name: string, inputs: Input[], inits: object[], nodes: object[]): string {
  const file = join(dir, `${name}.onnx`);
  const m = onnx.ModelProto.fromObject({
    irVersion: 8, producerName: 'tiercut-test', opsetImport: [{ domain: '', version: 17 }],
    graph: { name, node: nodes, initializer: inits, input: inputs.map((i) => valueInfo(i.name, i.int ? 7 : 1, i.shape)), output: [valueInfo('loss', 1, [])] },
  });
  writeFileSync(file, onnx.ModelProto.encode(m).finish());
  return file;
}

/** The loss of one forward pass by onnxruntime and by tiercut (the first step's loss, before any update). */
async function losses(file: string, inputs: Input[]): Promise<{ ort: number; tiercut: number }> {
  const s = await ort.InferenceSession.create(file);
  const feeds: Record<string, ort.Tensor> = {};
  for (const i of inputs) feeds[i.name] = i.int ? new ort.Tensor('int64', BigInt64Array.from(i.values, (v) => BigInt(v)), i.shape) : new ort.Tensor('float32', Float32Array.from(i.values), i.shape);
  const ref = Number((await s.run(feeds)).loss.data[0]);
  const plan = await compile({ model: file });
  const session = new TrainingSession(plan, {});
  try {
    const data = new Map<number, Float64Array>();
    for (const t of plan.graph.tensors) if (t.role === 'input') data.set(t.id, Float64Array.from(inputs.find((i) => i.name === t.name)!.values));
    return { ort: ref, tiercut: (await session.step(1, data)).loss };
  } finally {
    session.close();
  }
}

/** x * W, then `nodes` on 'xw' making 'y' of shape `outShape`, then loss = sum(y * V). */
async function check(name: string, shape: number[], nodes: object[], outShape: number[]): Promise<void> {
  const n = shape.reduce((a, b) => a * b, 1), m = outShape.reduce((a, b) => a * b, 1);
  const inputs = [{ name: 'x', shape, values: ramp(n, 1) }];
  const file = model(name, inputs, [floats('W', shape, ramp(n, 2)), floats('V', outShape, ramp(m, 3))],
    [node('Mul', ['x', 'W'], ['xw']), ...nodes, node('Mul', ['y', 'V'], ['yv']), node('ReduceSum', ['yv'], ['loss'], { keepdims: 0 })]);
  const r = await losses(file, inputs);
  expect(Math.abs(r.tiercut - r.ort), `${name}: onnxruntime ${r.ort}, tiercut ${r.tiercut}`).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(r.ort)));
}

async function refused(name: string, inputs: Input[], nodes: object[], why: RegExp): Promise<void> {
  const file = model(name, inputs, [floats('W', [1], [0.5])], nodes);
  const e = await compile({ model: file }).then(() => undefined, (err: unknown) => err);
  expect(e).toBeInstanceOf(UserError);
  expect((e as UserError).message).toMatch(why);
}

describe('small ONNX graphs against onnxruntime', () => {
  it('Flatten with a negative axis (-1 had made [2,3,4] into [24,1])', async () => {
    for (const axis of [-1, -2, 1]) {
      await check(`flatten${axis}`, [2, 3, 4], [node('Flatten', ['xw'], ['f'], { axis }), node('LogSoftmax', ['f'], ['y'])], axis === -2 || axis === 1 ? [2, 12] : [6, 4]);
    }
  });

  it('Max and Min over three inputs (the third had been dropped), Mod with fmod = 1 (C fmod: the sign of the dividend)', async () => {
    const m3 = (op: string, a: number[], b: number[], c: number[]) => [constant('k1', [4], a), constant('k2', [4], b), constant('k3', [4], c), node(op, ['k1', 'k2', 'k3'], ['m']), node('Mul', ['xw', 'm'], ['y'])];
    await check('max3', [4], m3('Max', [1, 0, 0, 0], [0, 2, 0, 0], [5, 5, -5, 0.5]), [4]);
    await check('min3', [4], m3('Min', [1, 3, 3, 3], [3, 2, 3, 3], [-5, 5, -1, 2.5]), [4]);
    await check('fmod', [4], [constant('k1', [4], [-5, 5, -7, 7.5]), constant('k2', [4], [3, -3, 2, 2]), node('Mod', ['k1', 'k2'], ['m'], { fmod: 1 }), node('Mul', ['xw', 'm'], ['y'])], [4]);
    await check('mod-int', [4], [constant('k1', [4], [-5, 5, -7, 7], true), constant('k2', [4], [3, -3, 2, 2], true), node('Mod', ['k1', 'k2'], ['mi']), node('Cast', ['mi'], ['m'], { to: 1 }), node('Mul', ['xw', 'm'], ['y'])], [4]);
  });

  it('a constant cast to FLOAT16 and BFLOAT16 is rounded there (to nearest, ties to even; past 65504 to infinity in f16, under 2^-25 to 0)', async () => {
    const values = [0.1, -1 / 3, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 65519, 3 * 2 ** -26, 2 ** -25, 1000.7];
    for (const [to, name] of [[10, 'f16'], [16, 'bf16']] as const) {
      await check(`cast-${name}`, [8], [constant('k', [8], values), node('Cast', ['k'], ['h'], { to }), node('Cast', ['h'], ['m'], { to: 1 }), node('Mul', ['xw', 'm'], ['y'])], [8]);
    }
  });

  it('refused, naming what: a run-time float cast to 16 bits, a slice of a run-time integer tensor, ignore_index naming a class', async () => {
    const x = { name: 'x', shape: [6, 5], values: ramp(30, 1) };
    await refused('cast-run-f16', [x], [node('Mul', ['x', 'W'], ['xw']), node('Cast', ['xw'], ['h'], { to: 10 }), node('Cast', ['h'], ['f'], { to: 1 }), node('ReduceSum', ['f'], ['loss'], { keepdims: 0 })],
      /Cast of a run-time float tensor to FLOAT16 .*compile --precision fp16 or bf16/);
    const ids = { name: 'ids', shape: [2, 4], values: [1, 2, 3, 4, 0, 1, 2, 3], int: true };
    await refused('slice-int', [x, ids], [constant('s', [1], [1], true), constant('e', [1], [4], true), constant('a', [1], [1], true), node('Slice', ['ids', 's', 'e', 'a'], ['lab']),
      node('Mul', ['x', 'W'], ['xw']), node('Slice', ['xw', 's', 'e', 'a'], ['lg0']), node('SoftmaxCrossEntropyLoss', ['lg0', 'lab'], ['loss'])], /a slice of a run-time integer tensor \[2,4\]/);
    const lab = { name: 'lab', shape: [6], values: [0, 1, 0, 3, 4, 2], int: true };
    await refused('sce-ignore0', [x, lab], [node('Mul', ['x', 'W'], ['xw']), node('SoftmaxCrossEntropyLoss', ['xw', 'lab'], ['loss'], { ignore_index: 0 })], /ignore_index 0, a class id/);
    // torch's -100 names no class: the same loss as without it while no label is -100
    const file = model('sce-ignore-100', [x, { ...lab, values: [1, 1, 0, 3, 4, 2] }], [floats('W', [1], [0.5])], [node('Mul', ['x', 'W'], ['xw']), node('SoftmaxCrossEntropyLoss', ['xw', 'lab'], ['loss'], { ignore_index: -100 })]);
    const r = await losses(file, [x, { ...lab, values: [1, 1, 0, 3, 4, 2] }]);
    expect(Math.abs(r.tiercut - r.ort)).toBeLessThanOrEqual(1e-5);
  });

  // a review's finds, each once accepted and computed wrong, or a stack trace
  it('a Slice of a constant with step -1 from below -dim starts at element 0 (it had been empty); x + -inf is -inf (it had been an attribute the plan cannot hold)', async () => {
    const ints1 = (n: string, v: number) => constant(n, [1], [v], true);
    await check('slice-neg-step', [5], [constant('k', [5], [1, 2, 3, 4, 5]), ints1('s', -10), ints1('e', -1000), ints1('a', 0), ints1('p', -1),
      node('Slice', ['k', 's', 'e', 'a', 'p'], ['ks']), node('ReduceSum', ['ks'], ['kr'], { keepdims: 1 }), node('Mul', ['xw', 'kr'], ['y'])], [5]);
    const x = { name: 'x', shape: [4], values: ramp(4, 1) };
    const file = model('add-neg-inf', [x], [floats('W', [4], ramp(4, 2))], [node('Mul', ['x', 'W'], ['xw']), constant('c', [], [-Infinity]), node('Add', ['xw', 'c'], ['y']), node('ReduceSum', ['y'], ['loss'], { keepdims: 0 })]);
    const r = await losses(file, [x]);
    expect(r.ort).toBe(-Infinity);
    expect(r.tiercut).toBe(-Infinity);
  });

  it('one constant read by many nodes is carried once (a causal mask had been stored by every Where)', async () => {
    const T = 4, mask = Array.from({ length: T * T }, (_, i) => (i % T <= Math.floor(i / T) ? 1 : 0));
    const x = { name: 'x', shape: [T, T], values: ramp(T * T, 1) };
    const nodes: object[] = [node('Mul', ['x', 'W'], ['h0']), constant('m', [T, T], mask, true), node('Cast', ['m'], ['mb'], { to: 9 }), constant('ninf', [], [-1e9])];
    for (let l = 0; l < 3; l++) nodes.push(node('Where', ['mb', `h${l}`, 'ninf'], [`w${l}`]), node('Softmax', [`w${l}`], [`h${l + 1}`]));
    nodes.push(node('ReduceSum', ['h3'], ['r'], { keepdims: 0 }), node('Mul', ['r', 'W1'], ['loss']));
    const file = model('where-mask', [x], [floats('W', [T, T], ramp(T * T, 2)), floats('W1', [], [0.5])], nodes);
    const plan = await compile({ model: file });
    expect(plan.graph.tensors.filter((t) => t.init?.kind === 'data' && t.shape.join() === `${T},${T}`)).toHaveLength(1);
    // the constants are no parameters: a checkpoint holds W and W1 alone (the mask had been saved, and torch's strict load refused it)
    const session = new TrainingSession(plan, {});
    try { expect([...session.parameters().keys()].sort()).toEqual(['W', 'W1']); } finally { session.close(); }
    const r = await losses(file, [x]);
    expect(Math.abs(r.tiercut - r.ort)).toBeLessThanOrEqual(1e-5);
  });

  it('refused, naming the node: attributes of the wrong type, axes where the opset does not take them, a perm that is no permutation, a Concat of nothing, a Constant with no tensor, a name defined twice', async () => {
    const x = { name: 'x', shape: [2, 3], values: ramp(6, 1) };
    const pre = node('Mul', ['x', 'W'], ['xw']);
    const loss = (t: string) => node('ReduceSum', [t], ['loss'], { keepdims: 0 });
    const gemm = { opType: 'Gemm', input: ['xw', 'xwt'], output: ['y'], name: 'Gemm_y', attribute: [{ name: 'alpha', type: AT.INT, i: 2 }] };
    await refused('gemm-alpha-int', [x], [pre, node('Transpose', ['xw'], ['xwt']), gemm, loss('y')], /node 'Gemm_y' .*attribute alpha is of type INT; Gemm takes FLOAT/);
    const perm = { opType: 'Transpose', input: ['xw'], output: ['y'], name: 'T_s', attribute: [{ name: 'perm', type: AT.STRING, s: Buffer.from('1,0') }] };
    await refused('perm-string', [x], [pre, perm, loss('y')], /node 'T_s' .*attribute perm is of type STRING; Transpose takes INTS/);
    await refused('reducesum-axes-attr', [x], [pre, node('ReduceSum', ['xw'], ['r'], { axes: [1] }), loss('r')], /node 'ReduceSum_r' .*axes given as an attribute; ReduceSum at opset 17 takes them as input 1/);
    await refused('perm-00', [x], [pre, node('Transpose', ['xw'], ['y'], { perm: [0, 0] }), loss('y')], /node 'Transpose_y' .*perm \[0,0\] is not a permutation of the 2 axes of \[2,3\]/);
    await refused('concat-none', [x], [pre, node('Concat', [], ['c'], { axis: 0 }), node('Add', ['xw', 'c'], ['y']), loss('y')], /node 'Concat_c' .*Concat without inputs/);
    const empty = { opType: 'Constant', input: [], output: ['c'], name: 'Constant_c', attribute: [{ name: 'value', type: AT.TENSOR }] };
    await refused('constant-empty', [x], [pre, empty, node('Add', ['xw', 'c'], ['y']), loss('y')], /node 'Constant_c' .*Constant value attribute holds no tensor/);
    await refused('dup-output', [x], [pre, node('Add', ['x', 'W'], ['xw']), loss('xw')], /node 'Add_xw' .*output 'xw' is already defined/);
    await refused('dup-init-output', [x], [pre, node('Add', ['xw', 'xw'], ['W']), loss('W')], /output 'W' is already defined \(an initializer\)/);
    const ids = { name: 'ids', shape: [2, 3], values: [0, 0, 0, 0, 0, 0], int: true };
    await refused('transpose-ids', [ids], [node('Transpose', ['ids'], ['idsT']), node('Gather', ['W', 'idsT'], ['g']), loss('g')], /node 'Transpose_idsT' .*a transpose of run-time integers \[2,3\]/);
  });

  it('refused, naming the input: no shape, a dim below 1; --freeze matching nothing or everything', async () => {
    const nodes = [node('Mul', ['x', 'W'], ['xw']), node('ReduceSum', ['xw'], ['loss'], { keepdims: 0 })];
    const write = (name: string, input: object) => {
      const file = join(dir, `${name}.onnx`);
      const m = onnx.ModelProto.fromObject({ irVersion: 8, opsetImport: [{ domain: '', version: 17 }], graph: { name, node: nodes, initializer: [floats('W', [1], [0.5])], input: [input], output: [valueInfo('loss', 1, [])] } });
      writeFileSync(file, onnx.ModelProto.encode(m).finish());
      return file;
    };
    const why = async (file: string, opts: object = {}) => (await compile({ model: file, ...opts }).then(() => undefined, (e: unknown) => e)) as UserError;
    expect((await why(write('no-shape', { name: 'x', type: { tensorType: { elemType: 1 } } }))).message).toMatch(/input 'x' has no shape \(its rank is unknown\)/);
    const neg = write('neg-dim', valueInfo('x', 1, [-2, 3]));
    expect((await why(neg)).message).toMatch(/input 'x' dim 0 is -2; a dim is a size of at least 1/);
    expect((await why(neg, { batch: 2 })).message).toMatch(/input 'x' dim 0 is -2/);
    const ok = write('ok', valueInfo('x', 1, [2, 3]));
    expect((await why(ok, { freeze: /^V$/ })).message).toMatch(/--freeze \^V\$: matches none of the 1 float initializers of .*ok\.onnx \(W\)/);
    expect((await why(ok, { freeze: /W/ })).message).toMatch(/--freeze W: freezes every float initializer the loss reads/);
    // (a parameter named so had trained, then its checkpoint was refused at the run's end)
    const meta = model('metadata', [{ name: 'x', shape: [2, 3], values: ramp(6, 1) }], [floats('__metadata__', [2, 3], ramp(6, 2))],
      [node('Mul', ['x', '__metadata__'], ['xw']), node('ReduceSum', ['xw'], ['loss'], { keepdims: 0 })]);
    expect((await why(meta)).message).toMatch(/initializer '__metadata__': the name is the safetensors format's own key/);
  });

  it('a float initializer where a constant is needed is read when --freeze keeps it fixed (a float mask buffer, an exponent), and named when it trains', async () => {
    // y = where(M == 0, -3, x * W) ** p: M a float mask buffer, p a scalar, both initializers
    const inputs = [{ name: 'x', shape: [2, 3], values: ramp(6, 1) }];
    const file = model('init-consts', inputs, [floats('W', [2, 3], ramp(6, 2)), floats('M', [2, 3], [1, 0, 1, 1, 0, 0]), floats('p', [], [3])],
      [constant('zero', [], [0]), constant('neg', [], [-3]), node('Mul', ['x', 'W'], ['xw']), node('Equal', ['M', 'zero'], ['masked']),
        node('Where', ['masked', 'neg', 'xw'], ['m']), node('Pow', ['m', 'p'], ['y']), node('ReduceSum', ['y'], ['loss'], { keepdims: 0 })]);
    const why = async (opts: object) => ((await compile({ model: file, ...opts }).then(() => undefined, (e: unknown) => e)) as UserError).message;
    expect(await why({})).toMatch(/node 'Equal_masked' .*: a \(input 0\) is the float initializer 'M', which tiercut trains as a parameter, but it must be a constant here: keep it fixed with --freeze \(e\.g\. '\^M\$'/);
    expect(await why({ freeze: /^M$/ })).toMatch(/node 'Pow_y' .*: the exponent \(input 1\) is the float initializer 'p'/);
    // and the mask sliced first (nanoGPT's bias[:, :, :T, :T] at T below its block size)
    const sliced = model('init-consts-sliced', inputs, [floats('W', [2, 3], ramp(6, 2)), floats('M', [2, 5], [1, 0, 1, 9, 9, 1, 0, 0, 9, 9]), floats('p', [], [3])],
      [constant('zero', [], [0]), constant('neg', [], [-3]), constant('s0', [1], [0], true), constant('s1', [1], [3], true), constant('ax', [1], [1], true),
        node('Mul', ['x', 'W'], ['xw']), node('Slice', ['M', 's0', 's1', 'ax'], ['Ms']), node('Equal', ['Ms', 'zero'], ['masked']),
        node('Where', ['masked', 'neg', 'xw'], ['m']), node('Pow', ['m', 'p'], ['y']), node('ReduceSum', ['y'], ['loss'], { keepdims: 0 })]);
    for (const f of [file, sliced]) {
      const plan = await compile({ model: f, freeze: /^[Mp]$/ });
      const s = await ort.InferenceSession.create(f);
      const ref = Number((await s.run({ x: new ort.Tensor('float32', Float32Array.from(inputs[0].values), [2, 3]) })).loss.data[0]);
      const session = new TrainingSession(plan, {});
      try {
        const x = plan.graph.tensors.find((t) => t.role === 'input')!;
        const got = (await session.step(1, new Map([[x.id, Float64Array.from(inputs[0].values)]]))).loss;
        expect(Math.abs(got - ref), `${f}: onnxruntime ${ref}, tiercut ${got}`).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(ref)));
      } finally {
        session.close();
      }
    }
  });

  it('constants torch\'s dynamo exporter stores as initializers (val_N) are refused, saying to export with dynamo=False, or kept fixed by --freeze', async () => {
    // GELU's 0.5 as the dynamo exporter writes it: a scalar float initializer val_0
    const inputs = [{ name: 'x', shape: [2, 3], values: ramp(6, 1) }];
    const file = model('dynamo-consts', inputs, [floats('W', [2, 3], ramp(6, 2)), floats('val_0', [], [0.5])],
      [node('Mul', ['x', 'W'], ['xw']), node('Mul', ['xw', 'val_0'], ['y']), node('ReduceSum', ['y'], ['loss'], { keepdims: 0 })]);
    const e = await compile({ model: file }).then(() => undefined, (err: unknown) => err);
    expect(e).toBeInstanceOf(UserError);
    expect((e as UserError).message).toMatch(/node 'Mul_y' .* reads the float initializer 'val_0' \[\], named as torch\.onnx's dynamo exporter .*: export with dynamo=False .* --freeze '\^val_\\d\+\$'$/);
    expect((e as UserError).code).toBe('TC115');
    const plan = await compile({ model: file, freeze: /^val_\d+$/ });
    expect(plan.graph.tensors.find((t) => t.name === 'val_0')!.frozen).toBe(true);
    expect(plan.graph.paramCount).toBe(6);
  });
});
