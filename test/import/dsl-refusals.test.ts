// DSL calls that compiled and then failed in `run` (or crashed the compile):
// each refused by compile with one line at the model's call, file:line:col,
// exit 2. A review's finds: integer tensors where an op computes in floats,
// fractional head counts, softmax of a scalar, an init past fp32, a negative
// eps, a dimension of 2.5 with no line, a second input of one name renamed,
// a build() returning no tensor ("line 0:0"), a batch too large for HiGHS.
import { describe, it, expect } from 'vitest';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, expectUserError } from '../cli-helpers.js';
import { scratchDir } from '../scratch-dir.js';

const dir = scratchDir('tiercut-dsl-');
let n = 0;

/** A model whose build() runs `body` (its line 6 on), with x [4,8] f32, ids [4,8] i32, y [4] i32 declared on line 5. */
function model(body: string[]): string {
  const file = join(dir, `m${n++}.ts`);
  writeFileSync(file, [
    "import type { Model, PresetBase } from 'tiercut/dsl';",
    'const m: Model<PresetBase> = {',
    '  presets: { p: { batch: 4, seq: 1 } },',
    '  build(nn, cfg) {',
    "    const x = nn.input('x', [4, 8]); const ids = nn.input('ids', [4, 8], 'i32'); const y = nn.input('y', [4], 'i32');",
    ...body.map((l) => `    ${l}`),
    '  },',
    '};',
    'export default m;',
  ].join('\n'));
  return file;
}
const refused = (body: string[], why: RegExp) => expectUserError(cli('compile', model(body), '-o', join(dir, 'x.json')), why);

describe('DSL calls refused at compile', () => {
  it('an integer tensor where the op computes in floats: layerNorm, rmsNorm, embedding\'s table, crossEntropy\'s logits', () => {
    refused(["const w = nn.param('w', [8]), b = nn.param('b', [8]);", 'return nn.crossEntropy(nn.matmul(nn.layerNorm(ids, w, b), nn.param(\'h\', [8, 3])), y);'],
      /m\d+\.ts:7:\d+: layerNorm: x must be a float tensor, got i32 \[TC103\]$/);
    refused(["const w = nn.input('w', [8], 'i32');", "return nn.crossEntropy(nn.matmul(nn.rmsNorm(x, w), nn.param('h', [8, 3])), y);"], /:7:\d+: rmsNorm: weight must be a float tensor, got i32/);
    refused(["const t = nn.input('t', [16, 8], 'i32');", "return nn.crossEntropy(nn.matmul(nn.embedding(y, t), nn.param('h', [8, 3])), y);"], /:7:\d+: embedding: table must be a float tensor, got i32/);
    refused(['return nn.crossEntropy(ids, y);'], /:6:\d+: crossEntropy: logits must be a float tensor, got i32/);
    // (any op the runtime takes only floats in: a transpose of ids had compiled, and run then refused the plan naming a buffer)
    refused(["const t = nn.transpose(ids, [1, 0]);", "return nn.crossEntropy(nn.matmul(nn.embedding(nn.reshape(t, [32]), nn.param('e', [16, 8])), nn.param('h', [8, 3])), nn.input('l', [32], 'i32'));"],
      /:6:\d+: transpose: input 0 is i32: the runtime's transpose takes float tensors there \(integers only as ids, targets or a cast's source\) \[TC103\]$/);
  });

  it('fractional heads; softmax of a scalar; an init past fp32; a negative eps', () => {
    refused(["const q = nn.input('q', [2, 4, 12]);", "return nn.crossEntropy(nn.reshape(nn.rope(q, 1.5), [8, 12]), nn.input('l', [8], 'i32'));"], /:7:\d+: rope: 1\.5 heads must split 12 channels/);
    refused(["const l = nn.crossEntropy(nn.matmul(x, nn.param('h', [8, 3])), y);", 'return nn.softmax(l);'], /:7:\d+: softmax: x must have rank >= 1/);
    refused(["return nn.crossEntropy(nn.matmul(x, nn.param('h', [8, 3], { constant: 1e40 })), y);"], /:6:\d+: parameter 'h': its init needs finite numbers, got \{"constant":1e\+40\}/);
    refused(["const w = nn.param('w', [8]), b = nn.param('b', [8]);", "return nn.crossEntropy(nn.matmul(nn.layerNorm(x, w, b, -1), nn.param('h', [8, 3])), y);"], /:7:\d+: layerNorm: eps must be >= 0, got -1/);
  });

  it('a dimension of 2.5 or a transpose by 0.5 named at its call; a second input of one name; build() returning no tensor', () => {
    refused(["return nn.crossEntropy(nn.matmul(x, nn.param('h', [8, 2.5])), y);"], /m\d+\.ts:6:\d+: .*dimensions must be positive integers, got \[8,2\.5\]/);
    refused(["return nn.crossEntropy(nn.transpose(nn.matmul(x, nn.param('h', [8, 3])), [0.5, 1]), y);"], /m\d+\.ts:6:\d+: transpose: perm \[0\.5,1\] is not a permutation of 2 axes/);
    refused(["const x2 = nn.input('x', [4, 8]);", "return nn.crossEntropy(nn.matmul(x2, nn.param('h', [8, 3])), y);"], /:6:\d+: input 'x': the name is already taken/);
    refused(['return undefined as never;'], /m\d+\.ts: build\(\) must return the loss, a tensor made by the model's nn calls; got undefined \[TC103\]$/);
    refused(["nn.matmul(x, nn.param('h', [8, 3]));", 'return undefined as never;'], /m\d+\.ts:6:\d+: build\(\) must return the loss, a tensor made by the model's nn calls; got undefined \(the line is its last nn call\) \[TC103\]$/);
  });

  // an authoring review's finds (forty-sixth session): a run that trained and
  // then lost its checkpoint, a V8 abort after minutes, a loss that trained
  // nothing, messages without a line or naming the wrong holder
  it('a tensor named __metadata__; a loop of a million ops; a loss no parameter reaches; build() returning a matrix, at its line; a name an op output holds; an undefined dimension', () => {
    refused(["const w = nn.param('__metadata__', [8, 3]);", 'return nn.crossEntropy(nn.matmul(x, w), y);'],
      /:6:\d+: parameter '__metadata__': the name is the safetensors format's own key \(--data, --weights and --save files\), so no tensor can be named so \[TC103\]$/);
    refused(["const m = nn.input('__metadata__', [4, 8]);", "return nn.crossEntropy(nn.matmul(nn.add(x, m), nn.param('h', [8, 3])), y);"], /:6:\d+: input '__metadata__': the name is the safetensors/);
    refused(["const w = nn.param('w', [8, 8], { normal: 0.001 });", 'let h = x;', 'for (let l = 0; l < 1000000; l++) h = nn.add(h, nn.matmul(h, w));', "return nn.crossEntropy(nn.matmul(h, nn.param('h', [8, 3])), y);"],
      /:8:\d+: the model makes more than 200000 ops in its forward pass; tiercut compiles models up to that \(gpt-1t's makes \d+\); fewer layers\? \[TC103\]$/);
    refused(["nn.param('unused', [8, 3]);", 'return nn.crossEntropy(nn.softmax(x), nn.input(\'z\', [4], \'i32\'));'],
      /:7:\d+: the loss build\(\) returns depends on no parameter of the model \(1 made\), so nothing would train \[TC103\]$/);
    refused(["const logits = nn.matmul(x, nn.param('h', [8, 3]));", 'return logits;'], /:6:\d+: build\(\) must return the scalar loss, got a tensor of shape \[4,3\]/);
    refused(["const h = nn.matmul(x, nn.param('h', [8, 8]));", "const w = nn.param('matmul#0', [8, 3]);", 'return nn.crossEntropy(nn.matmul(h, w), y);'],
      /:7:\d+: parameter 'matmul#0': the name is already taken by an op's output \(the DSL names those KIND#N\)/);
    refused(["const w = nn.param('w', [8, (cfg as unknown as { width: number }).width]);", 'return nn.crossEntropy(nn.matmul(x, w), y);'], /:6:\d+: .*dimensions must be positive integers, got \[8,undefined\]/);
  });

  it('a parameter the loss does not reach compiles, with a note at its line', () => {
    const r = cli('compile', model(["const h = nn.matmul(x, nn.param('h', [8, 3]));", "const unused = nn.param('unused', [8, 8]);", 'nn.matmul(x, unused);', 'return nn.crossEntropy(h, y);']), '-o', join(dir, 'x.json'));
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^tiercut: note: .*m\d+\.ts:7:\d+: parameter 'unused' does not reach the loss: it gets no gradient from it\n$/);
  });

  it('a model path that is no .ts or .onnx file; a tensor kept from an earlier build() call (fit calls it more than once)', () => {
    const txt = join(dir, 'model.txt');
    writeFileSync(txt, 'export default {};');
    expectUserError(cli('compile', txt, '-o', join(dir, 'x.json')), /model\.txt: not a model file: a model is a TypeScript file \(\.ts, \.mts or \.tsx\) written with the DSL, or an ONNX file \(\.onnx\) \[TC105\]$/);
    const kept = join(dir, 'kept.ts');
    writeFileSync(kept, [
      "import type { Model, PresetBase, Tensor } from 'tiercut/dsl';",
      'let w: Tensor | undefined;',
      'const m: Model<PresetBase> = {',
      '  presets: { p: { batch: 4, seq: 1 } },',
      '  build(nn) {',
      "    const x = nn.input('x', [4, 8]); const y = nn.input('y', [4], 'i32');",
      "    w ??= nn.param('w', [8, 3]);",
      '    return nn.crossEntropy(nn.matmul(x, w), y);',
      '  },',
      '};',
      'export default m;',
    ].join('\n'));
    expect(cli('compile', kept, '-o', join(dir, 'x.json')).status).toBe(0);
    expectUserError(cli('fit', kept, '--hw', 'local'), /kept\.ts:8:\d+: not a tensor made by this build\(\) call \(a tensor kept from an earlier call, e\.g\. in module-level state, is not one: compile and fit call build\(\) more than once\) \[TC103\]$/);
  });

  // a review's finds: each had ended in a stack trace, a wrong loss, or said its line twice or not at all
  it('the model file\'s own mistakes: a top-level throw, a re-export or import(), a parameter or input returned as the loss, presets of null or a throwing getter, a thrown string, a path with a space, a parameter named as an input', () => {
    const HEAD = "import type { Model, PresetBase } from 'tiercut/dsl';";
    const BODY = "const x = nn.input('x', [2, 4]); const l = nn.input('l', [2], 'i32'); return nn.crossEntropy(nn.matmul(x, nn.param('w', [4, 3])), l);";
    const file = (name: string, lines: string[]) => { const f = join(dir, name); writeFileSync(f, [HEAD, ...lines].join('\n')); return f; };
    const compileOf = (f: string) => cli('compile', f, '-o', join(dir, 'x.json'));
    const plain = (build: string, presets = '{ p: { batch: 2, seq: 1 } }') => [`const m: Model<PresetBase> = { presets: ${presets}, build(nn, cfg) { ${build} } };`, 'export default m;'];
    expectUserError(compileOf(file('top.ts', ['const widths: number[] = [];', "if (widths.length === 0) throw new Error('no widths');", ...plain(BODY)])), /top\.ts:3:32: while loading the model: no widths \[TC103\]$/);
    writeFileSync(join(dir, 'helper.ts'), 'export const W = 3;\n');
    expectUserError(compileOf(file('reexport.ts', ["export { W } from './helper';", ...plain(BODY)])), /reexport\.ts:2:1: a model may only import types from 'tiercut\/dsl' .*not re-export other modules \[TC102\]$/);
    expectUserError(compileOf(file('dynimport.ts', ["void import('./helper');", ...plain(BODY)])), /dynimport\.ts:2:6: a model may only import types .*not load other modules/);
    expectUserError(compileOf(file('lossparam.ts', plain("return nn.param('s', [], { constant: 3 });"))), /lossparam\.ts: build\(\) must return a loss computed by the model's nn ops, got the parameter 's' itself \[TC103\]$/);
    expectUserError(compileOf(file('lossinput.ts', plain("return nn.input('s', []);"))), /got the input 's' itself/);
    expectUserError(compileOf(file('nullpresets.ts', plain(BODY, 'null as unknown as Record<string, PresetBase>'))), /nullpresets\.ts: the default export must be a Model/);
    expectUserError(compileOf(file('getter.ts', ["const m: Model<PresetBase> = { presets: { get p(): PresetBase { throw new Error('not ready'); } }, build(nn, cfg) { " + BODY + ' } };', 'export default m;'])), /getter\.ts: reading preset 'p': not ready \[TC105\]$/);
    expectUserError(compileOf(file('str.ts', plain("const h = nn.matmul(nn.input('x', [2, 4]), nn.param('w', [4, 3]));\n  if (cfg.batch < 4) throw 'batch must be at least 4';\n  return h;"))), /str\.ts:2:\d+: build\(\) threw 'batch must be at least 4', not an Error \(the line is its last nn call before\) \[TC103\]$/);
    mkdirSync(join(dir, 'my models'), { recursive: true });
    const spaced = join(dir, 'my models', 'sp.ts');
    writeFileSync(spaced, [HEAD, ...plain("const x = nn.input('x', [2, 4]); const l = nn.input('l', [2], 'i32');\n  return nn.crossEntropy(nn.matmul(x, nn.param('w', [5, 3])), l);")].join('\n'));
    const r = compileOf(spaced);
    expectUserError(r, /my models\/sp\.ts:3:\d+: matmul: a\[2,4\] and b\[5,3\] disagree/);
    expect(r.stderr.match(/sp\.ts:3:/g)).toHaveLength(1);
    expectUserError(compileOf(file('clash.ts', plain("const x = nn.input('x', [2, 4]); const w = nn.param('x', [4, 3]); return nn.crossEntropy(nn.matmul(x, w), nn.input('l', [2], 'i32'));"))), /clash\.ts:2:\d+: parameter 'x': the name is already taken by an input or parameter of the model/);
  });

  it('a batch past every tier names the tensor that cannot be held whole (it had crashed in HiGHS with a stack trace)', () => {
    expectUserError(cli('compile', 'models/mlp.ts', '--batch', '10000000000000', '-o', join(dir, 'x.json')),
      /does not fit: tensor 'x' \[10000000000000,16\] takes [\d.]+ TiB, and the op that makes or reads it holds it whole on the GPU .* or the CPU .*; lower --batch/);
  });
});
