// ONNX import: a training-mode export (torch.onnx.export(...,
// training=TrainingMode.TRAINING), the loss inside the graph) -> forward IR graph.
//
// Takes the .onnx path and --batch/--seq (for symbolic dims) and --freeze.
// Gives a forward Graph in fp32: float initializers are trainable parameters
// (param16, init read from the .onnx at run time; frozen when --freeze matches
// the name); graph inputs are data inputs (int64/int32 -> i32); the single
// scalar output is the loss. Every op carries the ONNX node that made it.
// Keeps true: everything computable from constants and shapes is folded here
// (onnx-fold.ts) and never reaches the IR; each ONNX op maps onto IR ops whose
// numerics match it (no approximations besides x / c computed as x * (1/c));
// any op, attribute or dtype outside that set is one UserError line naming the
// node, op_type, domain and opset. Constants that must exist at run time (a
// causal mask) become frozen tensors whose values the plan carries.
// BatchNormalization (training mode) normalizes with batch statistics; its
// running mean and variance become frozen persistent tensors (read from the
// .onnx, never trained) that a forward batchNormRunning op updates in place
// once per step, as PyTorch's module does.
// Cost: O(nodes) plus the size of folded constants; weights are not read.

import { createHash } from 'node:crypto';
import { relative, resolve } from 'node:path';
import { diag, oneLine, UserError } from '../../src/diagnostics.js';
import { GraphBuilder, GraphError } from '../ir/graph.js';
import type { OpAttrs, OpKind, SourceLoc } from '../ir/types.js';
import type { ImportedModel } from './dsl.js';
import { shapeStr } from '../ir/types.js';
import {
  type AttributeProto, checkTensorData, DT, dtypeName, isFloatType, loadOnnx, type LoadedModel, type NodeProto, type TensorProto, tensorValues, toNum,
} from './onnx-decode.js';
import {
  binaryFold, broadcastShapes, castFold, checkSize, clampSlice, concatFold, type Const, constOf, type ConstType, expandTo, FoldError, gatherFold, ints, intVector,
  normAxis, numelOf, rangeFold, reduceFold, reshapeFold, scalar, sliceAxisFold, transposeFold, triluFold, unaryFold, whereFold,
} from './onnx-fold.js';

export interface OnnxOptions {
  batch?: number;
  seq?: number;
  /** Initializers whose name matches stay fixed (no gradient, no update). */
  freeze?: RegExp;
}


/** A value of the ONNX graph during import. */
type Value =
  | { readonly kind: 'const'; readonly c: Const; id?: number }
  | { readonly kind: 'dyn'; readonly id: number }
  /** a 2-D tensor transposed ([1,0]) but not yet materialized: MatMul uses it as transB */
  | { readonly kind: 'lazyT'; readonly src: number; id?: number }
  /** an i32 tensor seen with another shape (a reshape the runtime never runs: its consumers adapt) */
  | { readonly kind: 'intView'; readonly src: number; readonly shape: readonly number[] }
  | { readonly kind: 'unsupported'; readonly why: string };

/** The elements of every constant a plan carries together (f32 in base64: ~180 MB of the plan's JSON at most). */
const MAX_PLAN_CONST_ELEMENTS = 2 ** 25;
const BATCH_NAMES = /^(batch|batch_?size|n|b|bs)$/i;
const SEQ_NAMES = /^(seq|seq_?len|sequence|sequence_?length|t|s|len|length|tokens?|num_?tokens)$/i;
/** AttributeProto.AttributeType's values that tiercut reads, and every type's name. */
const ATTR = { FLOAT: 1, INT: 2, STRING: 3, TENSOR: 4, FLOATS: 6, INTS: 7 } as const;
const ATTR_TYPES: Record<number, string> = { 1: 'FLOAT', 2: 'INT', 3: 'STRING', 4: 'TENSOR', 5: 'GRAPH', 6: 'FLOATS', 7: 'INTS', 8: 'STRINGS', 9: 'TENSORS', 10: 'GRAPHS', 11: 'SPARSE_TENSOR', 12: 'SPARSE_TENSORS', 13: 'TYPE_PROTO', 14: 'TYPE_PROTOS' };

function onnxConstType(dt: number): ConstType {
  if (isFloatType(dt)) return 'float';
  if (dt === DT.BOOL) return 'bool';
  return 'int';
}

export function importOnnx(modelPath: string, opts: OnnxOptions = {}): ImportedModel {
  const abs = resolve(modelPath);
  const display = relative(process.cwd(), abs) || abs;
  const m = loadOnnx(abs, display);
  return new OnnxImporter(m, opts).run();
}

class OnnxImporter {
  private readonly b: GraphBuilder;
  private readonly values = new Map<string, Value>();
  private readonly inits = new Map<string, TensorProto>();
  /** Running statistics of BatchNormalization nodes (each updated by one node). */
  private readonly runningStats = new Set<number>();
  /**
   * The constants the plan carries, by their content: one tensor for each
   * (every Where of a causal mask had stored its own copy of the [T,T] mask:
   * 22 MB of base64 each at T = 2048, past what one JSON string holds at 24
   * layers), and the elements they hold together, at most MAX_PLAN_CONST_ELEMENTS.
   */
  private readonly constTensors = new Map<string, number>();
  private constElements = 0;
  /** The flags a symbolic dim took (one that took none had been ignored: --batch 3 on a model of fixed shapes trained on its own 2). */
  private readonly bound = new Set<'--batch' | '--seq'>();
  private node: NodeProto | undefined;
  private nodeIndex = 0;
  private loc: SourceLoc;
  private readonly file: string;

  constructor(private readonly m: LoadedModel, private readonly opts: OnnxOptions) {
    this.file = m.file;
    this.b = new GraphBuilder(m.file.replace(/^.*[\\/]/, '').replace(/\.onnx$/i, ''));
    this.loc = { file: m.file, node: '(graph)' };
  }

  // ---- errors --------------------------------------------------------------------

  private where(): string {
    const n = this.node;
    if (!n) return 'graph';
    return `node '${n.name || `#${this.nodeIndex}`}' (op_type ${n.opType}, domain '${n.domain || 'ai.onnx'}', opset ${this.m.opset})`;
  }

  private unsupported(msg: string): UserError { return diag.onnxOp(this.file, `${this.where()}: ${msg}`); }

  // ---- values --------------------------------------------------------------------

  private get(name: string | undefined | null): Value | undefined {
    if (!name) return undefined;
    let v = this.values.get(name);
    if (v) {
      if (v.kind === 'unsupported') throw this.unsupported(`reads '${name}': ${v.why}`);
      return v;
    }
    const init = this.inits.get(name);
    if (!init) throw diag.onnxGraph(this.file, `${this.where()} reads '${name}', which no earlier node, input or initializer produces`);
    v = this.initializerValue(init);
    this.values.set(name, v);
    return v;
  }

  private need(i: number): Value {
    const v = this.get((this.node!.input ?? [])[i]);
    if (!v) throw this.unsupported(`input ${i} is required`);
    return v;
  }

  private needConst(i: number, what: string): Const {
    const v = this.need(i);
    if (v.kind === 'const') return v.c;
    // a float initializer: its values, where --freeze keeps it fixed (a
    // float causal-mask buffer, nanoGPT's `bias`); else it trains, and a
    // value that must stay constant cannot be one
    const frozen = this.frozenConst(v);
    if (frozen) return frozen;
    const t = v.kind === 'dyn' ? this.b.tensors[v.id] : undefined;
    if (t?.init?.kind === 'onnx') throw this.unsupported(`${what} (input ${i}) is the float initializer '${t.name}', which tiercut trains as a parameter, but it must be a constant here: keep it fixed with --freeze (e.g. '^${regexQuote(t.name)}$', or a pattern that matches every such buffer; a registered buffer exports as an initializer)`);
    throw this.unsupported(`${what} (input ${i}) must be a constant (computable from initializers, Constant nodes and shapes), it is computed at run time`);
  }

  /**
   * The values of a float initializer --freeze keeps fixed, where `v` is one
   * of at most FROZEN_FOLD_ELEMENTS values: read whole where a constant is
   * needed, and sliced as one (nanoGPT's mask, `bias[:, :, :T, :T] == 0`), so
   * that what is made of it folds too. (A larger one stays a tensor: its
   * values would be carried in the plan.)
   */
  private frozenConst(v: Value): Const | undefined {
    const t = v.kind === 'dyn' ? this.b.tensors[v.id] : undefined;
    if (!t?.frozen || t.init?.kind !== 'onnx' || numelOf(t.shape) > FROZEN_FOLD_ELEMENTS) return undefined;
    const init = this.inits.get(t.init.initializer);
    if (!init) return undefined;
    const { dims, values } = tensorValues(init, this.m.dir, this.file);
    return constOf('float', dims, values);
  }

  private initializerValue(t: TensorProto): Value {
    const name = t.name ?? '';
    const dt = t.dataType ?? 0;
    if (isFloatType(dt)) {
      checkTensorData(t, this.m.dir, this.file);
      const dims = (t.dims ?? []).map((d: unknown, i: number) => toNum(d, `initializer '${name}' dims[${i}]`, this.file));
      if (dims.some((d: number) => d <= 0)) throw diag.onnxTensor(this.file, `initializer '${name}' has an empty dimension [${dims.join(',')}]`);
      const frozen = this.opts.freeze?.test(name) ?? false;
      // torch.onnx.export's dynamo exporter (its default since torch 2.9)
      // stores the graph's constants as initializers named val_N (GELU's 0.5,
      // an attention scale, a mask, a folded transpose of a tied weight):
      // trained as parameters, the losses leave torch's from the second step
      if (!frozen && /^_?val_\d+$/.test(name))
        throw diag.onnxTensor(this.file, oneLine(`${this.where()} reads the float initializer '${name}' [${dims.join(',')}], named as torch.onnx's dynamo exporter (dynamo=True, torch's default since 2.9) names the constants it stores as initializers; tiercut trains every float initializer as a parameter, so it would train these: export with dynamo=False (the TorchScript exporter keeps constants as Constant nodes and a weight used twice as one initializer), or, where every val_N initializer is a constant, keep them fixed with --freeze '^val_\\d+$'`));
      const p = this.b.tensor({ name, shape: dims, dtype: 'f32', role: 'param16', persistent: true, param: name, init: { kind: 'onnx', initializer: name }, ...(frozen ? { frozen: true } : {}) });
      return { kind: 'dyn', id: p.id };
    }
    const { dims, values } = tensorValues(t, this.m.dir, this.file);
    return { kind: 'const', c: constOf(onnxConstType(dt), dims, values) };
  }

  private shapeOf(v: Value): readonly number[] {
    switch (v.kind) {
      case 'const': return v.c.shape;
      case 'dyn': return this.b.tensors[v.id].shape;
      case 'lazyT': { const s = this.b.tensors[v.src].shape; return [s[1], s[0]]; }
      case 'intView': return v.shape;
      case 'unsupported': throw this.unsupported(v.why);
    }
  }

  private isIntValue(v: Value): boolean {
    // (a transpose not yet made is its source's kind: ids.t() as Gather indices had been called "not integers")
    return v.kind === 'const' ? v.c.type !== 'float' : v.kind === 'intView' || (v.kind === 'dyn' && this.b.tensors[v.id].dtype === 'i32')
      || (v.kind === 'lazyT' && this.b.tensors[v.src].dtype === 'i32');
  }

  /** The IR tensor of a value: constants become frozen tensors whose values the plan carries. */
  private dyn(v: Value, asInt = false): number {
    if (v.kind === 'dyn') return v.id;
    if (v.kind === 'unsupported') throw this.unsupported(v.why);
    if (v.kind === 'intView') throw this.unsupported(`an integer tensor reshaped to ${shapeStr(v.shape)} at run time is only supported as Gather indices, Cast input or loss labels`);
    if (v.id !== undefined) return v.id;
    if (v.kind === 'lazyT') {
      v.id = this.emit('transpose', [v.src], { perm: [1, 0] }, `${this.b.tensors[v.src].name}^T`);
      return v.id;
    }
    const c = v.c;
    const shape = c.shape.length === 0 ? [] : c.shape;
    if (shape.some((d) => d === 0)) throw this.unsupported(`an empty constant [${shape.join(',')}] cannot be used at run time`);
    const f32 = Buffer.alloc(c.data.length * 4);
    c.data.forEach((x, i) => f32.writeFloatLE(x, i * 4));
    const int = asInt || c.type !== 'float';
    const key = `${int ? 'i32' : 'f32'} ${shapeStr(shape)} ${createHash('sha256').update(f32).digest('hex')}`;
    const same = this.constTensors.get(key);
    if (same !== undefined) { v.id = same; return same; }
    this.constElements += c.data.length;
    if (this.constElements > MAX_PLAN_CONST_ELEMENTS) throw this.unsupported(`the constants the plan would carry come to ${this.constElements} elements with this one ${shapeStr(shape)} (at most ${MAX_PLAN_CONST_ELEMENTS}); make large masks and tables inputs or initializers`);
    const t = this.b.tensor({
      name: `const.${this.node?.output?.[0] || 'c'}`, shape, dtype: int ? 'i32' : 'f32', role: 'param16', persistent: true, frozen: true,
      param: `const.${this.node?.output?.[0] || 'c'}`, init: { kind: 'data', f32Base64: f32.toString('base64') },
    });
    this.b.tensors[t.id] = { ...t, param: t.name }; // the builder made the name unique
    this.constTensors.set(key, t.id);
    v.id = t.id;
    return t.id;
  }

  private emit(kind: OpKind, inputs: number[], attrs: OpAttrs, name: string): number {
    return this.emitAll(kind, inputs, attrs, [name])[0];
  }

  /** An op and all its outputs (named names[k], or `${names[0]}.k`). */
  private emitAll(kind: OpKind, inputs: number[], attrs: OpAttrs, names: string[]): number[] {
    try {
      return this.b.op(kind, inputs, attrs, { names, role: 'activation' }, 'forward', this.loc).map((t) => t.id);
    } catch (e) {
      if (e instanceof GraphError) throw diag.onnxGraph(this.file, `${this.where()}: ${e.message.replace(/^.*\(node [^)]*\): /, '')}`);
      throw e;
    }
  }

  private outName(k = 0): string { return this.node?.output?.[k] || `${this.node?.opType}#${this.nodeIndex}`; }

  private reshape(id: number, shape: readonly number[], name: string): number {
    if (shapeStr(this.b.tensors[id].shape) === shapeStr(shape)) return id;
    return this.emit('reshape', [id], { shape: [...shape] }, name);
  }

  private expand(id: number, shape: readonly number[], name: string): number {
    if (shapeStr(this.b.tensors[id].shape) === shapeStr(shape)) return id;
    return this.emit('expand', [id], { shape: [...shape] }, name);
  }

  // ---- attributes ----------------------------------------------------------------------

  /**
   * The attribute `name`, refused unless it is of type `want` (an AttributeType;
   * one without a type, from an old exporter, is read as that type). The
   * readers had taken a.i, a.f or a.ints whatever the type said: Gemm's alpha
   * written as the INT 2 was read as the float 0.
   */
  private attr(name: string, want?: number): AttributeProto | undefined {
    const a = this.node!.attribute?.find((x: AttributeProto) => x.name === name);
    if (a && want !== undefined && a.type && a.type !== want)
      throw this.unsupported(`attribute ${name} is of type ${ATTR_TYPES[a.type] ?? a.type}; ${this.node!.opType} takes ${ATTR_TYPES[want]}`);
    return a;
  }
  private attrInt(name: string, dflt: number): number {
    const a = this.attr(name, ATTR.INT);
    return a ? toNum(a.i ?? 0, `${this.where()} attribute ${name}`, this.file) : dflt;
  }
  private attrIntOrUndefined(name: string): number | undefined {
    return this.attr(name) ? this.attrInt(name, 0) : undefined;
  }
  private attrFloat(name: string, dflt: number): number {
    const a = this.attr(name, ATTR.FLOAT);
    const v = a ? (a.f ?? 0) : dflt;
    // (a plan is JSON, where NaN and infinities become null)
    if (!Number.isFinite(v)) throw this.unsupported(`attribute ${name} is ${v}; a finite number is needed`);
    return v;
  }
  private attrInts(name: string): number[] | undefined {
    const a = this.attr(name, ATTR.INTS);
    return a ? (a.ints ?? []).map((v: unknown) => toNum(v, `${this.where()} attribute ${name}`, this.file)) : undefined;
  }
  private attrString(name: string, dflt: string): string { const a = this.attr(name, ATTR.STRING); return a?.s ? Buffer.from(a.s).toString('utf8') : dflt; }

  // ---- the graph ----------------------------------------------------------------------

  run(): ImportedModel {
    const g = this.m.graph;
    for (const t of g.initializer ?? []) {
      if (!t.name) throw diag.onnxGraph(this.file, 'an initializer has no name');
      // (a name defined twice had been taken as its last definition, silently)
      if (this.inits.has(t.name)) throw diag.onnxGraph(this.file, `two initializers are named '${t.name}'`);
      if (t.name === SAFETENSORS_KEY && isFloatType(t.dataType ?? 0)) throw diag.onnxGraph(this.file, `initializer '${t.name}': the name is the safetensors format's own key (--weights and --save files), so no parameter can be named so`);
      this.inits.set(t.name, t);
    }
    if ((g.sparseInitializer ?? []).length) throw diag.onnxGraph(this.file, 'sparse initializers are not supported');
    const inputShapes: Record<string, number[]> = {};
    for (const inp of g.input ?? []) {
      const name = inp.name ?? '';
      if (this.inits.has(name)) continue; // IR < 4 lists initializers as inputs too
      if (this.values.has(name)) throw diag.onnxGraph(this.file, `two graph inputs are named '${name}'`);
      if (name === SAFETENSORS_KEY) throw diag.onnxGraph(this.file, `input '${name}': the name is the safetensors format's own key, so --data cannot give it`);
      const tt = inp.type?.tensorType;
      if (!tt) throw diag.onnxGraph(this.file, `input '${name}' is not a tensor`);
      // (an input without a shape had been taken as a scalar)
      if (!tt.shape) throw diag.onnxDim(this.file, `input '${name}' has no shape (its rank is unknown); export with fixed input shapes`);
      const et = tt.elemType ?? 0;
      const dtype = et === DT.FLOAT ? 'f32' : et === DT.INT64 || et === DT.INT32 ? 'i32' : undefined;
      if (!dtype) throw diag.onnxGraph(this.file, `input '${name}' has element type ${dtypeName(et)}; tiercut binds FLOAT, INT64 and INT32 inputs`);
      const shape = (tt.shape?.dim ?? []).map((d: { dimValue?: unknown; dimParam?: string | null }, i: number) => this.bindDim(name, i, d));
      const t = this.b.tensor({ name, shape, dtype, role: 'input' });
      inputShapes[name] = shape;
      this.values.set(name, { kind: 'dyn', id: t.id });
    }
    for (const [flag, v] of [['--batch', this.opts.batch], ['--seq', this.opts.seq]] as const) {
      if (v !== undefined && !this.bound.has(flag))
        throw diag.usage(oneLine(`${flag} ${v}: no input of ${this.file} has a dim it sets (${flag === '--batch' ? 'symbolic dims named batch/batch_size/N, or an unnamed dim 0' : 'symbolic dims named seq/sequence/seq_len/T'}); its inputs are ${Object.entries(inputShapes).map(([k, sh]) => `${k} ${shapeStr(sh)}`).join(', ')}: drop ${flag}, or export with dynamic_axes`));
    }
    (g.node ?? []).forEach((n: NodeProto, i: number) => {
      this.node = n;
      this.nodeIndex = i;
      this.loc = { file: this.file, node: n.name || `${n.opType}#${i}` };
      if (n.domain && n.domain !== 'ai.onnx') throw this.unsupported(`op ${n.opType} of domain '${n.domain}' is not supported (only the default ONNX domain)`);
      let outs: (Value | undefined)[];
      try {
        outs = this.lower(n.opType ?? '');
      } catch (e) {
        if (e instanceof FoldError) throw this.unsupported(e.message);
        throw e;
      }
      (n.output ?? []).forEach((name: string, k: number) => {
        if (!name) return;
        if (this.values.has(name) || this.inits.has(name)) throw diag.onnxGraph(this.file, `${this.where()}: output '${name}' is already defined (${this.inits.has(name) ? 'an initializer' : 'a graph input or an earlier node\'s output'}); a name is defined once`);
        const v = outs[k] ?? { kind: 'unsupported', why: `output ${k} of ${n.opType} is not supported` };
        this.values.set(name, v);
      });
    });
    this.node = undefined;
    const outputs = (g.output ?? []).map((o: { name?: string | null }) => o.name ?? '');
    const scalars = outputs.filter((o: string) => { const v = this.values.get(o); return v && v.kind !== 'unsupported' && numelOf(this.shapeOf(v)) === 1; });
    if (scalars.length !== 1) throw diag.onnxGraph(this.file, `the graph must have one scalar output (the loss), it has ${outputs.length} output(s) of which ${scalars.length} scalar: ${outputs.join(', ')}; export the model with its loss inside forward()`);
    const lossValue = this.values.get(scalars[0])!;
    if (lossValue.kind !== 'dyn' || this.b.tensors[lossValue.id].role !== 'activation' || this.b.tensors[lossValue.id].dtype !== 'f32')
      throw diag.onnxGraph(this.file, `output '${scalars[0]}' is not a float computed from the inputs and parameters, so it cannot be the loss`);
    const lt = this.b.tensors[lossValue.id];
    this.b.tensors[lossValue.id] = { ...lt, role: 'loss' };
    const freeze = this.opts.freeze;
    if (freeze) {
      // (a pattern that matched nothing, a typo, had been accepted without a word)
      const floats = (g.initializer ?? []).filter((t: TensorProto) => isFloatType(t.dataType ?? 0)).map((t: TensorProto) => t.name ?? '');
      if (floats.length > 0 && !floats.some((name: string) => freeze.test(name)))
        throw diag.usage(oneLine(`--freeze ${freeze.source}: matches none of the ${floats.length} float initializers of ${this.file} (${floats.slice(0, 5).join(', ')}${floats.length > 5 ? ', ...' : ''})`));
    }
    const params = this.b.tensors.filter((t) => t.role === 'param16' && !t.frozen).length;
    if (params === 0 && freeze && this.b.tensors.some((t) => t.role === 'param16' && t.frozen && t.init?.kind === 'onnx'))
      throw diag.usage(oneLine(`--freeze ${freeze.source}: freezes every float initializer the loss reads in ${this.file}; nothing is left to train`));
    if (params === 0) throw diag.onnxGraph(this.file, 'the model has no trainable parameters (float initializers); export with export_params=True');
    return {
      graph: this.b.build(lossValue.id, 'fp32'), preset: 'onnx',
      config: { irVersion: this.m.irVersion, opset: this.m.opset, inputs: inputShapes, loss: scalars[0] },
    };
  }

  private bindDim(input: string, axis: number, d: { dimValue?: unknown; dimParam?: string | null }): number {
    const v = d.dimValue !== undefined && d.dimValue !== null ? toNum(d.dimValue, `input '${input}' dim ${axis}`, this.file) : undefined;
    // (a dim written as a number at or below 0 had been taken as symbolic, and bound by --batch)
    if (v !== undefined && v <= 0) throw diag.onnxDim(this.file, `input '${input}' dim ${axis} is ${v}; a dim is a size of at least 1 or a name (dim_param)`);
    if (v !== undefined) return v;
    const p = d.dimParam ?? '';
    const bind = (flag: '--batch' | '--seq', value: number | undefined) => {
      if (value === undefined) throw diag.onnxDim(this.file, `input '${input}' dim ${axis} is symbolic ('${p}'); give its size with ${flag} N`);
      this.bound.add(flag);
      return value;
    };
    if (BATCH_NAMES.test(p)) return bind('--batch', this.opts.batch);
    if (SEQ_NAMES.test(p)) return bind('--seq', this.opts.seq);
    if (!p && axis === 0 && this.opts.batch !== undefined) return bind('--batch', this.opts.batch);
    throw diag.onnxDim(this.file, `input '${input}' dim ${axis} is symbolic ('${p || '?'}') and neither --batch nor --seq binds it (they bind dims named batch/batch_size/N or seq/sequence/seq_len/T); re-export with fixed shapes or rename the dim`);
  }

  // ---- ops --------------------------------------------------------------------------------

  private lower(op: string): (Value | undefined)[] {
    const n = this.node!;
    const input = n.input ?? [];
    const cst = (c: Const): Value => ({ kind: 'const', c });
    const allConst = () => (n.input ?? []).every((name: string) => !name || this.get(name)!.kind === 'const');
    switch (op) {
      case 'Constant': {
        const a = n.attribute?.[0];
        if (!a) throw this.unsupported('Constant without a value');
        if ((n.attribute ?? []).length > 1) throw this.unsupported(`Constant with ${(n.attribute ?? []).length} attributes (exactly one value)`);
        const want: Record<string, number> = { value: ATTR.TENSOR, value_float: ATTR.FLOAT, value_floats: ATTR.FLOATS, value_int: ATTR.INT, value_ints: ATTR.INTS };
        if (want[a.name ?? ''] !== undefined) this.attr(a.name!, want[a.name!]);
        switch (a.name) {
          case 'value': {
            if (!a.t) throw this.unsupported('Constant value attribute holds no tensor');
            const { dims, values } = tensorValues(a.t, this.m.dir, this.file);
            return [cst(constOf(onnxConstType(a.t.dataType ?? 0), dims, values))];
          }
          case 'value_float': return [cst(scalar('float', a.f ?? 0))];
          case 'value_floats': return [cst(constOf('float', [(a.floats ?? []).length], a.floats ?? []))];
          case 'value_int': return [cst(scalar('int', toNum(a.i ?? 0, 'value_int', this.file)))];
          case 'value_ints': return [cst(intVector((a.ints ?? []).map((v: unknown) => toNum(v, 'value_ints', this.file))))];
          default: throw this.unsupported(`Constant attribute ${a.name} is not supported`);
        }
      }
      case 'Identity': return [this.need(0)];
      case 'Dropout': {
        const ratio = input[1] ? this.needConst(1, 'ratio').data[0] : 0.5;
        const training = input[2] ? this.needConst(2, 'training_mode').data[0] !== 0 : false;
        if (training && ratio !== 0) throw this.unsupported(`Dropout with ratio ${ratio} in training mode draws random numbers, which tiercut does not; export with dropout p=0`);
        return [this.need(0), { kind: 'unsupported', why: 'the Dropout mask output is not supported' }];
      }
      case 'Shape': {
        const s = this.shapeOf(this.need(0));
        const r = s.length;
        const start = this.attrInt('start', 0), end = this.attrInt('end', r);
        const [a, e] = clampSlice(start, end, 1, r);
        return [cst(intVector(s.slice(a, Math.max(a, e))))];
      }
      case 'Size': return [cst(scalar('int', numelOf(this.shapeOf(this.need(0)))))];
      case 'ConstantOfShape': {
        const shape = ints(this.needConst(0, 'shape'), 'shape');
        if (shape.some((d) => d < 0)) throw this.unsupported(`ConstantOfShape with a negative dim [${shape.join(',')}]`);
        checkSize(shape, 'ConstantOfShape');
        const a = this.attr('value', ATTR.TENSOR);
        const v = a?.t ? tensorValues(a.t, this.m.dir, this.file) : undefined;
        if (v && v.values.length !== 1) throw this.unsupported(`ConstantOfShape's value holds ${v.values.length} elements (one)`);
        const type = a?.t ? onnxConstType(a.t.dataType ?? 0) : 'float';
        return [cst(constOf(type, shape, new Float64Array(numelOf(shape)).fill(v ? v.values[0] : 0)))];
      }
      case 'Range': return [cst(rangeFold(this.needConst(0, 'start'), this.needConst(1, 'limit'), this.needConst(2, 'delta')))];
      case 'Trilu': {
        const k = input[1] ? this.needConst(1, 'k').data[0] : 0;
        return [cst(triluFold(this.needConst(0, 'input'), k, this.attrInt('upper', 1) === 1))];
      }
      case 'Equal': case 'Less': case 'Greater': case 'LessOrEqual': case 'GreaterOrEqual': case 'And': case 'Or': case 'Xor':
        return [cst(binaryFold(op, this.needConst(0, 'a'), this.needConst(1, 'b')))];
      // (Mod's fmod = 1, required for floats: C's fmod, the sign of the dividend; it had always floored)
      case 'Mod': return [cst(binaryFold(this.attrInt('fmod', 0) === 1 ? 'Fmod' : 'Mod', this.needConst(0, 'a'), this.needConst(1, 'b')))];
      // (any number of inputs: a third had been dropped)
      case 'Max': case 'Min': {
        let acc = this.needConst(0, 'data_0');
        for (let k = 1; k < input.length; k++) acc = binaryFold(op, acc, this.needConst(k, `data_${k}`));
        return [cst(acc)];
      }
      case 'Not': case 'Abs': case 'Floor': case 'Ceil':
        return [cst(unaryFold(op, this.needConst(0, 'x')))];
      case 'Cast': return [this.cast()];
      case 'Reshape': {
        const x = this.need(0);
        const want = ints(this.needConst(1, 'shape'), 'shape');
        const s = this.shapeOf(x);
        const allowZero = this.attrInt('allowzero', 0) === 1;
        const shape = want.map((d, i) => (d === 0 && !allowZero ? s[i] : d));
        const neg = shape.indexOf(-1);
        if (neg >= 0) {
          const rest = numelOf(shape.filter((_, i) => i !== neg));
          shape[neg] = rest === 0 ? 0 : numelOf(s) / rest;
        }
        if (shape.some((d) => !Number.isInteger(d) || d < 0) || numelOf(shape) !== numelOf(s)) throw this.unsupported(`cannot reshape ${shapeStr(s)} to [${want.join(',')}]`);
        return [this.reshaped(x, shape)];
      }
      case 'Squeeze': case 'Unsqueeze': {
        const x = this.need(0);
        const s = [...this.shapeOf(x)];
        const axesIn = input[1] ? ints(this.needConst(1, 'axes'), 'axes') : this.attrInts('axes');
        if (op === 'Squeeze') {
          const axes = axesIn ? axesIn.map((a) => normAxis(a, s.length)) : s.map((d, i) => (d === 1 ? i : -1)).filter((i) => i >= 0);
          for (const a of axes) if (s[a] !== 1) throw this.unsupported(`cannot squeeze axis ${a} of ${shapeStr(s)}`);
          return [this.reshaped(x, s.filter((_, i) => !axes.includes(i)))];
        }
        if (!axesIn) throw this.unsupported('Unsqueeze needs axes');
        const r = s.length + axesIn.length;
        const axes = axesIn.map((a) => normAxis(a, r)).sort((p, q) => p - q);
        const out: number[] = [];
        let k = 0;
        for (let i = 0; i < r; i++) out.push(axes.includes(i) ? 1 : s[k++]);
        return [this.reshaped(x, out)];
      }
      case 'Transpose': {
        const x = this.need(0);
        const r = this.shapeOf(x).length;
        const perm = this.attrInts('perm') ?? Array.from({ length: r }, (_, i) => r - 1 - i);
        // (any perm on a rank-2 tensor other than the identity had been taken as [1,0]: [0,0] among them)
        if (perm.length !== r || [...perm].sort((p, q) => p - q).some((p, i) => p !== i)) throw this.unsupported(`perm [${perm.join(',')}] is not a permutation of the ${r} axes of ${shapeStr(this.shapeOf(x))}`);
        if (x.kind === 'const') return [cst(transposeFold(x.c, perm))];
        if (perm.every((p, i) => p === i)) return [x];
        // (a 2-D one had been left to its reader, which was then named for it)
        if (this.isIntValue(x)) throw this.unsupported(`a transpose of run-time integers ${shapeStr(this.shapeOf(x))} (the runtime moves integers only as ids, targets or a cast's source)`);
        if (x.kind === 'lazyT' && r === 2) return [{ kind: 'dyn', id: x.src }];
        const id = this.dyn(x);
        if (r === 2) return [{ kind: 'lazyT', src: id }];
        return [{ kind: 'dyn', id: this.emit('transpose', [id], { perm }, this.outName()) }];
      }
      case 'Concat': {
        const parts = (n.input ?? []).map((_: string, i: number) => this.need(i));
        if (parts.length === 0) throw this.unsupported('Concat without inputs');
        const axis = normAxis(this.attrInt('axis', 0), this.shapeOf(parts[0]).length);
        if (parts.every((p: Value) => p.kind === 'const')) return [cst(concatFold(parts.map((p: Value) => (p as { c: Const }).c), axis))];
        if (parts.length > 8) throw this.unsupported(`Concat of ${parts.length} run-time tensors (at most 8)`);
        const ids = parts.filter((p: Value) => this.shapeOf(p)[axis] > 0).map((p: Value) => this.dyn(p));
        return [{ kind: 'dyn', id: ids.length === 1 ? ids[0] : this.emit('concat', ids, { axis }, this.outName()) }];
      }
      case 'Split': {
        const x = this.need(0);
        const s = this.shapeOf(x);
        const axis = normAxis(this.attrInt('axis', 0), s.length);
        const count = (n.output ?? []).length;
        let sizes = input[1] ? ints(this.needConst(1, 'split'), 'split') : this.attrInts('split');
        if (!sizes) {
          const per = Math.ceil(s[axis] / count);
          sizes = Array.from({ length: count }, (_, i) => Math.min(per, s[axis] - per * i));
        }
        if (sizes.length !== count || sizes.reduce((a, c) => a + c, 0) !== s[axis]) throw this.unsupported(`split sizes [${sizes.join(',')}] do not add up to ${s[axis]} over ${count} outputs`);
        let at = 0;
        return sizes.map((len, k) => {
          const v = this.sliced(x, axis, at, at + len, this.outName(k));
          at += len;
          return v;
        });
      }
      case 'Slice': {
        let x = this.need(0);
        const frozen = this.frozenConst(x);
        if (frozen) x = cst(frozen);
        const s = this.shapeOf(x);
        const starts = ints(this.needConst(1, 'starts'), 'starts'), ends = ints(this.needConst(2, 'ends'), 'ends');
        const axes = input[3] ? ints(this.needConst(3, 'axes'), 'axes').map((a) => normAxis(a, s.length)) : starts.map((_, i) => i);
        const steps = input[4] ? ints(this.needConst(4, 'steps'), 'steps') : starts.map(() => 1);
        axes.forEach((axis, i) => {
          const dim = this.shapeOf(x)[axis];
          const [st, en] = clampSlice(starts[i], ends[i], steps[i], dim);
          if (x.kind === 'const') { x = cst(sliceAxisFold(x.c, axis, st, en, steps[i])); return; }
          if (steps[i] !== 1) throw this.unsupported(`Slice with step ${steps[i]} on a run-time tensor (only step 1)`);
          x = this.sliced(x, axis, st, Math.max(st, en), this.outName());
        });
        return [x];
      }
      case 'Gather': return [this.gather()];
      case 'Expand': {
        const x = this.need(0);
        const shape = broadcastShapes(this.shapeOf(x), ints(this.needConst(1, 'shape'), 'shape'));
        if (x.kind === 'const') return [cst(expandTo(x.c, shape))];
        return [{ kind: 'dyn', id: this.expand(this.dyn(x), shape, this.outName()) }];
      }
      case 'Where': {
        if (allConst()) return [cst(whereFold(this.needConst(0, 'c'), this.needConst(1, 'a'), this.needConst(2, 'b')))];
        const [c, a, bv] = [this.need(0), this.need(1), this.need(2)];
        const shape = broadcastShapes(this.shapeOf(c), this.shapeOf(a), this.shapeOf(bv));
        const cf: Value = c.kind === 'const' ? cst(castFold(c.c, 'float')) : c;
        if (c.kind !== 'const' && this.isIntValue(c)) throw this.unsupported('Where with a condition computed at run time from integers');
        const ids = [cf, a, bv].map((v, k) => this.expand(this.dyn(v), shape, `${this.outName()}.${['cond', 'a', 'b'][k]}`));
        return [{ kind: 'dyn', id: this.emit('where', ids, {}, this.outName()) }];
      }
      case 'Add': case 'Sub': case 'Mul': case 'Div': {
        const [a, bv] = [this.need(0), this.need(1)];
        if (a.kind === 'const' && bv.kind === 'const') return [cst(binaryFold(op, a.c, bv.c))];
        return [{ kind: 'dyn', id: this.binary(op.toLowerCase() as 'add' | 'sub' | 'mul' | 'div', a, bv) }];
      }
      case 'Pow': {
        const a = this.need(0), e = this.needConst(1, 'the exponent');
        if (a.kind === 'const') return [cst(binaryFold(op, a.c, e))];
        if (e.data.length !== 1) throw this.unsupported(`Pow with an exponent of shape ${shapeStr(e.shape)} (only x ** a scalar constant)`);
        if (!Number.isFinite(e.data[0])) throw this.unsupported(`Pow with the exponent ${e.data[0]} (a finite number is needed)`);
        return [{ kind: 'dyn', id: this.emit('powScalar', [this.dyn(a)], { exponent: e.data[0] }, this.outName()) }];
      }
      case 'Neg': case 'Sqrt': case 'Tanh': case 'Erf': case 'Relu': case 'Exp': case 'Log': case 'Sigmoid': case 'Reciprocal': {
        const x = this.need(0);
        if (x.kind === 'const') return [cst(unaryFold(op, x.c))];
        const id = this.dyn(x);
        if (op === 'Neg') return [{ kind: 'dyn', id: this.emit('affine', [id], { scale: -1, offset: 0 }, this.outName()) }];
        if (op === 'Reciprocal') return [{ kind: 'dyn', id: this.emit('powScalar', [id], { exponent: -1 }, this.outName()) }];
        return [{ kind: 'dyn', id: this.emit('unary', [id], { fn: op.toLowerCase() as 'tanh' }, this.outName()) }];
      }
      case 'MatMul': return [{ kind: 'dyn', id: this.matmul(this.need(0), this.need(1), this.outName()) }];
      case 'Gemm': {
        let a = this.need(0), bv = this.need(1);
        if (this.attrInt('transA', 0)) a = this.transposed2d(a);
        if (this.attrInt('transB', 0)) bv = this.transposed2d(bv);
        let y = this.matmul(a, bv, `${this.outName()}.ab`);
        const alpha = this.attrFloat('alpha', 1), beta = this.attrFloat('beta', 1);
        if (alpha !== 1) y = this.emit('affine', [y], { scale: alpha, offset: 0 }, `${this.outName()}.alpha`);
        const c = this.get(input[2]);
        if (c && beta !== 0) {
          let cv = c;
          if (beta !== 1) cv = cv.kind === 'const' ? cst(binaryFold('Mul', cv.c, scalar('float', beta))) : { kind: 'dyn', id: this.emit('affine', [this.dyn(cv)], { scale: beta, offset: 0 }, `${this.outName()}.beta`) };
          y = this.binary('add', { kind: 'dyn', id: y }, cv);
        }
        return [{ kind: 'dyn', id: y }];
      }
      case 'Softmax': case 'LogSoftmax': {
        const x = this.need(0);
        const r = this.shapeOf(x).length;
        const axis = normAxis(this.attrInt('axis', -1), r);
        if (axis !== r - 1) throw this.unsupported(`${op} over axis ${axis} of a rank-${r} tensor (only the last axis)`);
        return [{ kind: 'dyn', id: this.emit(op === 'Softmax' ? 'softmax' : 'logSoftmax', [this.dyn(x)], {}, this.outName()) }];
      }
      case 'LayerNormalization': {
        const x = this.need(0);
        const s = this.shapeOf(x);
        const axis = normAxis(this.attrInt('axis', -1), s.length);
        if (axis !== s.length - 1) throw this.unsupported(`LayerNormalization over axes ${axis}.. of a rank-${s.length} tensor (only the last axis)`);
        const C = s[s.length - 1];
        const w = this.dyn(this.need(1));
        const bias = this.get(input[2]) ?? cst(constOf('float', [C], new Float64Array(C)));
        const id = this.emit('layerNorm', [this.dyn(x), w, this.dyn(bias)], { eps: this.attrFloat('epsilon', 1e-5) }, this.outName());
        return [{ kind: 'dyn', id }, { kind: 'unsupported', why: 'the Mean output of LayerNormalization is not supported' }, { kind: 'unsupported', why: 'the InvStdDev output of LayerNormalization is not supported' }];
      }
      case 'ReduceMean': case 'ReduceSum': {
        const x = this.need(0);
        const s = this.shapeOf(x);
        const fromInput = op === 'ReduceSum' || this.m.opset >= 18;
        // (axes where this opset does not take them had been ignored: a sum over every axis)
        if (fromInput && this.attr('axes')) throw this.unsupported(`axes given as an attribute; ${op} at opset ${this.m.opset} takes them as input 1`);
        if (!fromInput && input[1]) throw this.unsupported(`axes given as input 1; ${op} at opset ${this.m.opset} takes them as an attribute`);
        let axes = fromInput ? (input[1] ? ints(this.needConst(1, 'axes'), 'axes') : undefined) : this.attrInts('axes');
        const keep = this.attrInt('keepdims', 1) === 1;
        if (!axes || axes.length === 0) {
          if (this.attrInt('noop_with_empty_axes', 0) === 1) return [x];
          axes = s.map((_, i) => i);
        }
        axes = [...new Set(axes.map((a) => normAxis(a, s.length)))];
        if (x.kind === 'const') return [cst(reduceFold(op, x.c, axes, keep))];
        const kept = s.map((d, i) => (axes!.includes(i) ? 1 : d));
        let id = this.emit('unbroadcast', [this.dyn(x)], { shape: kept }, `${this.outName()}.sum`);
        if (op === 'ReduceMean') id = this.emit('affine', [id], { scale: 1 / numelOf(axes.map((a) => s[a])), offset: 0 }, `${this.outName()}.mean`);
        return [{ kind: 'dyn', id: keep ? id : this.reshape(id, s.filter((_, i) => !axes!.includes(i)), this.outName()) }];
      }
      case 'SoftmaxCrossEntropyLoss': {
        const reduction = this.attrString('reduction', 'mean');
        if (input[2]) throw this.unsupported('class weights (only unweighted SoftmaxCrossEntropyLoss)');
        if (reduction !== 'mean' && reduction !== 'sum') throw this.unsupported(`reduction '${reduction}' (only mean or sum: the loss must be a scalar)`);
        const scores = this.need(0), labels = this.need(1);
        const s = this.shapeOf(scores);
        // (ignore_index was not read: a class id given there had been counted
        // like any other; one outside [0, C), torch's -100, is no class: a
        // label equal to it stops the step as a label out of range)
        const ignore = this.attrIntOrUndefined('ignore_index');
        if (ignore !== undefined && s.length >= 2 && ignore >= 0 && ignore < s[1]) throw this.unsupported(`ignore_index ${ignore}, a class id (rows with that label would be left out of the loss: not supported; labels must all be classes in [0, ${s[1]}))`);
        if (s.length < 2) throw this.unsupported(`scores ${shapeStr(s)} need rank >= 2 ([N,C,...])`);
        let logits = this.dyn(scores);
        if (s.length > 2) logits = this.emit('transpose', [logits], { perm: [0, ...s.slice(2).map((_, i) => i + 2), 1] }, `${this.outName()}.classLast`);
        if (!this.isIntValue(labels)) throw this.unsupported('labels must be integers');
        let labelId: number;
        if (labels.kind === 'intView') {
          // the labels' own shape; the logits follow it (the same elements, so the same mean)
          labelId = labels.src;
          const C = s[1];
          logits = this.reshape(logits, [...this.b.tensors[labelId].shape, C], `${this.outName()}.logits`);
        } else {
          labelId = this.dyn(labels, true);
        }
        let id = this.emit('crossEntropy', [logits, labelId], {}, this.outName());
        if (reduction === 'sum') id = this.emit('affine', [id], { scale: numelOf(this.shapeOf(labels)), offset: 0 }, `${this.outName()}.sum`);
        return [{ kind: 'dyn', id }, { kind: 'unsupported', why: 'the log_prob output of SoftmaxCrossEntropyLoss is not supported' }];
      }
      case 'Conv': return [{ kind: 'dyn', id: this.conv() }];
      case 'BatchNormalization': return this.batchNorm();
      case 'MaxPool': case 'AveragePool': return this.pool(op);
      case 'GlobalAveragePool': {
        const x = this.need(0);
        const s = this.shapeOf(x);
        if (s.length < 3) throw this.unsupported(`GlobalAveragePool of a rank-${s.length} tensor (needs [N,C,spatial...])`);
        const kept = s.map((d, i) => (i < 2 ? d : 1));
        const sum = this.emit('unbroadcast', [this.dyn(x)], { shape: kept }, `${this.outName()}.sum`);
        return [{ kind: 'dyn', id: this.emit('affine', [sum], { scale: 1 / numelOf(s.slice(2)), offset: 0 }, this.outName()) }];
      }
      case 'Flatten': {
        const x = this.need(0);
        const s = this.shapeOf(x);
        const a0 = this.attrInt('axis', 1);
        const a = a0 < 0 ? a0 + s.length : a0;
        if (a < 0 || a > s.length) throw this.unsupported(`Flatten axis ${a0} outside [-${s.length}, ${s.length}]`);
        return [this.reshaped(x, [numelOf(s.slice(0, a)), numelOf(s.slice(a))])];
      }
      default:
        throw this.unsupported(`op ${op} is not supported by tiercut's ONNX importer`);
    }
  }

  // ---- CNN ops ------------------------------------------------------------------------

  /** strides, pads ([top, left, bottom, right], ONNX's order) and dilations of a 2-D window op. */
  private window2d(): { strides: number[]; pads: number[]; dilations: number[] } {
    const autoPad = this.attrString('auto_pad', 'NOTSET');
    const pads = this.attrInts('pads') ?? [0, 0, 0, 0];
    if (autoPad !== 'NOTSET' && !(autoPad === 'VALID' && pads.every((p) => p === 0))) throw this.unsupported(`auto_pad ${autoPad} (export with explicit pads)`);
    const strides = this.attrInts('strides') ?? [1, 1];
    const dilations = this.attrInts('dilations') ?? [1, 1];
    if (strides.length !== 2 || pads.length !== 4 || dilations.length !== 2)
      throw this.unsupported(`strides [${strides.join(',')}], pads [${pads.join(',')}], dilations [${dilations.join(',')}] (only 2-D windows: 2 strides, 4 pads, 2 dilations)`);
    return { strides, pads, dilations };
  }

  private conv(): number {
    const input = this.node!.input ?? [];
    const x = this.need(0), w = this.need(1);
    const xs = this.shapeOf(x), ws = this.shapeOf(w);
    if (xs.length !== 4 || ws.length !== 4) throw this.unsupported(`Conv of x${shapeStr(xs)} with w${shapeStr(ws)} (only 2-D convolutions: x [N,C,H,W], w [M,C/group,kH,kW])`);
    const group = this.attrInt('group', 1);
    if (!(group >= 1) || xs[1] !== group * ws[1] || ws[0] % group !== 0)
      throw this.unsupported(`group ${group} with x${shapeStr(xs)} and w${shapeStr(ws)} (x's channels must be group * w[1], and group must divide w[0])`);
    const k = this.attrInts('kernel_shape');
    if (k && (k.length !== 2 || k[0] !== ws[2] || k[1] !== ws[3])) throw this.unsupported(`kernel_shape [${k.join(',')}] disagrees with w${shapeStr(ws)}`);
    const M = ws[0];
    const bias = this.get(input[2]) ?? { kind: 'const', c: constOf('float', [M], new Float64Array(M)) };
    if (shapeStr(this.shapeOf(bias)) !== shapeStr([M])) throw this.unsupported(`bias ${shapeStr(this.shapeOf(bias))} must be [${M}]`);
    return this.emit('conv2d', [this.dyn(x), this.dyn(w), this.dyn(bias)], this.window2d(), this.outName());
  }

  /**
   * BatchNormalization in training mode: normalizes with the batch statistics
   * (batchNorm), then updates the running mean and variance in place
   * (batchNormRunning, PyTorch's rule). The running statistics are state that
   * is not trained: frozen persistent tensors, read from the .onnx at run time,
   * written once per step by this node only.
   */
  private batchNorm(): (Value | undefined)[] {
    const n = this.node!;
    const input = n.input ?? [];
    const training = this.m.opset >= 14 ? this.attrInt('training_mode', 0) === 1 : (n.output ?? []).filter((o: string) => o).length > 1;
    if (!training) throw this.unsupported('BatchNormalization in inference mode (it would normalize with the running statistics); tiercut trains with batch statistics: export with training=torch.onnx.TrainingMode.TRAINING');
    const x = this.need(0);
    const xs = this.shapeOf(x);
    if (xs.length < 2) throw this.unsupported(`BatchNormalization of x${shapeStr(xs)} (needs [N,C,...])`);
    const C = xs[1];
    const stat = (i: number, what: string): number => {
      const name = input[i];
      const v = this.need(i);
      if (v.kind !== 'dyn' || !this.inits.has(name) || this.b.tensors[v.id].role !== 'param16')
        throw this.unsupported(`the running ${what} '${name}' must be a float initializer (state the node updates)`);
      if (shapeStr(this.b.tensors[v.id].shape) !== shapeStr([C])) throw this.unsupported(`the running ${what} '${name}' is ${shapeStr(this.b.tensors[v.id].shape)}, expected [${C}] for x${shapeStr(xs)}`);
      if (this.runningStats.has(v.id)) throw this.unsupported(`the running ${what} '${name}' is also updated by an earlier BatchNormalization node (one module applied twice); tiercut updates each running statistic once per step`);
      this.runningStats.add(v.id);
      this.b.tensors[v.id] = { ...this.b.tensors[v.id], frozen: true };
      return v.id;
    };
    const runMean = stat(3, 'mean'), runVar = stat(4, 'variance');
    const name = this.outName();
    const [y, mean, variance] = this.emitAll('batchNorm', [this.dyn(x), this.dyn(this.need(1)), this.dyn(this.need(2))], { eps: this.attrFloat('epsilon', 1e-5) }, [name, `${name}.mean`, `${name}.var`]);
    // ONNX's momentum weighs the running value; PyTorch's (1 - it) the batch's. The
    // attribute is a float32: read it as the decimal it was written from.
    const onnxMomentum = Number(Math.fround(this.attrFloat('momentum', 0.9)).toPrecision(7));
    const attrs: OpAttrs = { momentum: 1 - onnxMomentum, count: numelOf(xs) / C };
    this.b.opWith('batchNormRunning', [runMean, runVar, mean, variance], [runMean, runVar], attrs, 'forward', this.loc);
    const state: Value = { kind: 'unsupported', why: 'the updated running statistics of BatchNormalization are state, not values later nodes may read' };
    return [{ kind: 'dyn', id: y }, state, state, state, state];
  }

  private pool(op: 'MaxPool' | 'AveragePool'): (Value | undefined)[] {
    const x = this.need(0);
    const xs = this.shapeOf(x);
    const k = this.attrInts('kernel_shape');
    if (xs.length !== 4 || !k || k.length !== 2) throw this.unsupported(`${op} of x${shapeStr(xs)} with kernel_shape [${(k ?? []).join(',')}] (only 2-D pooling: x [N,C,H,W], a [kH,kW] window)`);
    const { strides, pads, dilations } = this.window2d();
    if (dilations.some((d) => d !== 1)) throw this.unsupported(`${op} with dilations [${dilations.join(',')}] (only 1)`);
    const attrs: OpAttrs = { kernel: k, strides, pads, ceilMode: this.attrInt('ceil_mode', 0) === 1 };
    if (op === 'MaxPool') {
      if (this.attrInt('storage_order', 0) !== 0) throw this.unsupported('MaxPool with storage_order 1 (column-major indices)');
      return [{ kind: 'dyn', id: this.emit('maxPool2d', [this.dyn(x)], attrs, this.outName()) }, { kind: 'unsupported', why: 'the Indices output of MaxPool is not supported' }];
    }
    const countIncludePad = this.attrInt('count_include_pad', 0) === 1;
    return [{ kind: 'dyn', id: this.emit('avgPool2d', [this.dyn(x)], { ...attrs, countIncludePad }, this.outName()) }];
  }

  private reshaped(x: Value, shape: readonly number[]): Value {
    if (x.kind === 'const') return { kind: 'const', c: reshapeFold(x.c, shape) };
    if (x.kind === 'intView' || (x.kind === 'dyn' && this.b.tensors[x.id].dtype === 'i32')) {
      const src = x.kind === 'intView' ? x.src : x.id;
      return shapeStr(this.b.tensors[src].shape) === shapeStr(shape) ? { kind: 'dyn', id: src } : { kind: 'intView', src, shape };
    }
    return { kind: 'dyn', id: this.reshape(this.dyn(x), shape, this.outName()) };
  }

  private sliced(x: Value, axis: number, start: number, end: number, name: string): Value {
    if (x.kind === 'const') return { kind: 'const', c: sliceAxisFold(x.c, axis, start, end, 1) };
    const s = this.shapeOf(x);
    if (start === 0 && end === s[axis]) return x;
    if (end <= start) throw this.unsupported(`an empty slice [${start}, ${end}) of axis ${axis} of ${shapeStr(s)}`);
    // (the runtime slices floats only: it had compiled, then failed as the plan was loaded)
    if (this.isIntValue(x)) throw this.unsupported(`a slice of a run-time integer tensor ${shapeStr(s)} (e.g. labels shifted inside the graph: shift them in the data instead)`);
    return { kind: 'dyn', id: this.emit('slice', [this.dyn(x)], { axis, start, end }, name) };
  }

  private transposed2d(v: Value): Value {
    if (v.kind === 'const') return { kind: 'const', c: transposeFold(v.c, [1, 0]) };
    if (v.kind === 'lazyT') return { kind: 'dyn', id: v.src };
    if (this.shapeOf(v).length !== 2) throw this.unsupported('Gemm operands must be 2-D');
    return { kind: 'lazyT', src: this.dyn(v) };
  }

  private cast(): Value {
    const x = this.need(0);
    const to = this.attrInt('to', 0);
    const type = onnxConstType(to);
    if (x.kind === 'const') return { kind: 'const', c: castFold(x.c, type, to === DT.FLOAT16 ? 'f16' : to === DT.BFLOAT16 ? 'bf16' : undefined) };
    const isInt = this.isIntValue(x);
    if (type === 'float' && to !== DT.FLOAT && to !== DT.FLOAT16 && to !== DT.BFLOAT16 && to !== DT.DOUBLE) throw this.unsupported(`Cast to ${dtypeName(to)}`);
    if (type === 'float' && x.kind === 'intView') {
      const c = this.emit('cast', [x.src], {}, `${this.outName()}.cast`);
      return { kind: 'dyn', id: this.reshape(c, x.shape, this.outName()) };
    }
    // (a run-time float cast to 16 bits had been a no-op: the model ran unrounded in fp32)
    if (type === 'float' && !isInt && (to === DT.FLOAT16 || to === DT.BFLOAT16)) throw this.unsupported(`Cast of a run-time float tensor to ${dtypeName(to)} (an ONNX model computes in fp32 here: export it in fp32; compile --precision fp16 or bf16 makes its half copies)`);
    if (type === 'float') return isInt ? { kind: 'dyn', id: this.emit('cast', [this.dyn(x)], {}, this.outName()) } : x;
    if (type === 'int' && isInt) return x;
    throw this.unsupported(`Cast of a run-time ${isInt ? 'integer' : 'float'} tensor to ${dtypeName(to)}`);
  }

  private gather(): Value {
    const data = this.need(0), idx = this.need(1);
    const s = this.shapeOf(data);
    const axis = normAxis(this.attrInt('axis', 0), s.length);
    if (data.kind === 'const' && idx.kind === 'const') return { kind: 'const', c: gatherFold(data.c, idx.c, axis) };
    if (!this.isIntValue(idx)) throw this.unsupported('Gather indices must be integers');
    const outShape = [...s.slice(0, axis), ...this.shapeOf(idx), ...s.slice(axis + 1)];
    if (idx.kind === 'const' && data.kind !== 'const') {
      // constant indices that are a contiguous ascending range: a slice (positions 0..T-1)
      const dim = s[axis];
      const js = ints(idx.c, 'indices').map((i) => (i < 0 ? i + dim : i));
      if (js.some((j) => j < 0 || j >= dim)) throw this.unsupported(`Gather index outside [0, ${dim})`);
      if (js.length > 0 && js.every((j, k) => j === js[0] + k)) {
        const sl = this.sliced(data, axis, js[0], js[0] + js.length, `${this.outName()}.slice`);
        return { kind: 'dyn', id: this.reshape(this.dyn(sl), outShape, this.outName()) };
      }
    }
    if (axis !== 0 || s.length !== 2) throw this.unsupported(`Gather on axis ${axis} of a rank-${s.length} run-time tensor with run-time indices (only row lookup in a 2-D table)`);
    if (idx.kind === 'const') {
      const dim = s[0];
      const fixed = { kind: 'const' as const, c: constOf('int', idx.c.shape, idx.c.data.map((i) => (i < 0 ? i + dim : i))) };
      return { kind: 'dyn', id: this.emit('embedding', [this.dyn(fixed, true), this.dyn(data)], {}, this.outName()) };
    }
    if (idx.kind === 'intView') {
      const e = this.emit('embedding', [idx.src, this.dyn(data)], {}, `${this.outName()}.rows`);
      return { kind: 'dyn', id: this.reshape(e, outShape, this.outName()) };
    }
    return { kind: 'dyn', id: this.emit('embedding', [this.dyn(idx), this.dyn(data)], {}, this.outName()) };
  }

  /** a (op) b with numpy broadcasting, on the IR's trailing-broadcast add/mul/sub/div. */
  private binary(kind: 'add' | 'sub' | 'mul' | 'div', a: Value, b: Value): number {
    const name = this.outName();
    // a scalar constant operand: one affine op
    // (only a finite one whose affine form is finite too: x / 0 or x + -inf had
    // made an attribute of Infinity, which a plan cannot hold; they take the
    // general path below, the constant a tensor of the plan)
    const scalarOf = (v: Value) => (v.kind === 'const' && v.c.data.length === 1 && Number.isFinite(v.c.data[0]) && (v === b && kind === 'div' ? Number.isFinite(1 / v.c.data[0]) : true) ? v.c.data[0] : undefined);
    const sb = scalarOf(b), sa = scalarOf(a);
    const out = broadcastShapes(this.shapeOf(a), this.shapeOf(b));
    if (sb !== undefined && a.kind !== 'const' && shapeStr(this.shapeOf(a)) === shapeStr(out)) {
      const x = this.dyn(a);
      if (kind === 'add') return this.emit('affine', [x], { scale: 1, offset: sb }, name);
      if (kind === 'sub') return this.emit('affine', [x], { scale: 1, offset: -sb }, name);
      if (kind === 'mul') return this.emit('affine', [x], { scale: sb, offset: 0 }, name);
      return this.emit('affine', [x], { scale: 1 / sb, offset: 0 }, name);
    }
    if (sa !== undefined && b.kind !== 'const' && shapeStr(this.shapeOf(b)) === shapeStr(out) && kind !== 'div') {
      const x = this.dyn(b);
      if (kind === 'add') return this.emit('affine', [x], { scale: 1, offset: sa }, name);
      if (kind === 'sub') return this.emit('affine', [x], { scale: -1, offset: sa }, name);
      return this.emit('affine', [x], { scale: sa, offset: 0 }, name);
    }
    let [x, y] = [a, b];
    if ((kind === 'add' || kind === 'mul') && shapeStr(this.shapeOf(x)) !== shapeStr(out) && shapeStr(this.shapeOf(y)) === shapeStr(out)) [x, y] = [y, x];
    const xi = this.expand(this.dyn(x), out, `${name}.a`);
    const ys = this.shapeOf(y);
    let lead = 0;
    while (lead < ys.length && ys[lead] === 1) lead++;
    const stripped = ys.slice(lead);
    const suffix = stripped.every((d, i) => d === out[out.length - stripped.length + i]);
    const yi = suffix ? this.reshape(this.dyn(y), stripped, `${name}.b`) : this.expand(this.dyn(y), out, `${name}.b`);
    return this.emit(kind, [xi, yi], {}, name);
  }

  private matmul(a: Value, b: Value, name: string): number {
    const sa = this.shapeOf(a), sb = this.shapeOf(b);
    if (sa.length < 1 || sb.length < 2) throw this.unsupported(`MatMul of ${shapeStr(sa)} and ${shapeStr(sb)} (the right operand must have rank >= 2)`);
    if (sb.length === 2) {
      if (b.kind === 'lazyT') return this.emit('matmul', [this.dyn(a), b.src], { transB: true }, name);
      return this.emit('matmul', [this.dyn(a), this.dyn(b)], { transB: false }, name);
    }
    if (sa.length < 2) throw this.unsupported(`MatMul of ${shapeStr(sa)} and ${shapeStr(sb)}`);
    const batch = broadcastShapes(sa.slice(0, -2), sb.slice(0, -2));
    const ai = this.expand(this.dyn(a), [...batch, ...sa.slice(-2)], `${name}.a`);
    const bi = this.expand(this.dyn(b), [...batch, ...sb.slice(-2)], `${name}.b`);
    return this.emit('bmm', [ai, bi], { transA: false, transB: false }, name);
  }
}

/** `s` with the characters a regular expression gives a meaning escaped (an initializer's name in a suggested --freeze). */
function regexQuote(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The safetensors header's metadata key: no tensor of a --data, --weights or --save file has this name. */
const SAFETENSORS_KEY = '__metadata__';

/** The most values of a frozen initializer the importer folds as a constant (a 2048 x 2048 mask). */
const FROZEN_FOLD_ELEMENTS = 2 ** 22;
