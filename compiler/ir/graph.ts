// GraphBuilder: the only way passes create tensors and ops. It assigns ids,
// infers output shapes from the op catalog, computes flops and bytes touched,
// and freezes the result into a plain readonly Graph.
//
// Also the index helpers every pass shares (producer/consumers per tensor, bytes
// by kind of tensor) and
// an iterative topological order (no recursion: graphs reach 10^5 ops).

import { inferOutputs, opFlops, ShapeError } from './ops.js';
import type { DType, Graph, InitSpec, Op, OpAttrs, OpKind, ParamSlice, Phase, Precision, Role, SourceLoc, Tensor } from './types.js';
import { dtypeBytes, formatLoc, numel } from './types.js';

export class GraphError extends Error {
  constructor(message: string, readonly loc?: SourceLoc) { super(loc ? `${formatLoc(loc)}: ${message}` : message); }
}

export interface TensorInit {
  name: string;
  shape: readonly number[];
  dtype: DType;
  role: Role;
  persistent?: boolean;
  param?: string;
  init?: InitSpec;
  frozen?: boolean;
  slice?: ParamSlice;
}

export class GraphBuilder {
  readonly tensors: Tensor[] = [];
  readonly ops: Op[] = [];
  private readonly names = new Map<string, number>();
  /** The id of the tensor of this name, if there is one (names are unique). */
  idOf(name: string): number | undefined { return this.names.get(name); }

  constructor(readonly name: string) {}

  /** Start from an existing graph (passes that extend a graph). */
  static from(g: Graph): GraphBuilder {
    const b = new GraphBuilder(g.name);
    for (const t of g.tensors) { b.tensors.push(t); b.names.set(t.name, t.id); }
    for (const o of g.ops) b.ops.push(o);
    return b;
  }

  tensor(t: TensorInit): Tensor {
    if (t.shape.some((d) => !Number.isInteger(d) || d <= 0)) throw new GraphError(`tensor ${t.name}: dimensions must be positive integers, got [${t.shape.map(String).join(',')}]`);
    let name = t.name;
    for (let k = 1; this.names.has(name); k++) name = `${t.name}#${k}`;
    const tensor: Tensor = {
      id: this.tensors.length, name, shape: [...t.shape], dtype: t.dtype,
      sizeBytes: numel(t.shape) * dtypeBytes(t.dtype), role: t.role, persistent: t.persistent ?? false,
      ...(t.param !== undefined ? { param: t.param } : {}), ...(t.init ? { init: t.init } : {}), ...(t.frozen ? { frozen: true } : {}), ...(t.slice ? { slice: t.slice } : {}),
    };
    this.tensors.push(tensor);
    this.names.set(name, tensor.id);
    return tensor;
  }

  /** Adds an op whose outputs are new tensors with inferred shapes. */
  op(kind: OpKind, inputs: readonly number[], attrs: OpAttrs, out: { names: string[]; role: Role }, phase: Phase, loc: SourceLoc): Tensor[] {
    const ins = inputs.map((i) => this.tensors[i]);
    let specs;
    try {
      specs = inferOutputs(kind, ins, attrs);
    } catch (e) {
      if (e instanceof ShapeError) throw new GraphError(e.message, loc);
      throw e;
    }
    const outs = specs.map((s, i) => this.tensor({ name: out.names[i] ?? `${out.names[0]}.${i}`, shape: s.shape, dtype: s.dtype, role: out.role }));
    this.opWith(kind, inputs, outs.map((t) => t.id), attrs, phase, loc);
    return outs;
  }

  /** Adds an op over existing output tensors (in-place updates, lowering passes). */
  opWith(kind: OpKind, inputs: readonly number[], outputs: readonly number[], attrs: OpAttrs, phase: Phase, loc: SourceLoc): Op {
    const ins = inputs.map((i) => this.tensors[i]);
    const outs = outputs.map((i) => this.tensors[i]);
    let bytes = 0;
    for (const t of ins) bytes += t.sizeBytes;
    for (const t of outs) bytes += t.sizeBytes;
    const op: Op = { id: this.ops.length, kind, inputs: [...inputs], outputs: [...outputs], attrs, phase, flops: opFlops(kind, ins, outs, attrs), bytesTouched: bytes, loc };
    this.ops.push(op);
    return op;
  }

  build(loss: number, precision: Precision): Graph {
    let paramCount = 0;
    for (const t of this.tensors) if (t.role === 'param16' && !t.frozen) paramCount += numel(t.shape);
    return { name: this.name, tensors: this.tensors, ops: this.ops, loss, precision, paramCount };
  }
}

/** Bytes of the tensors that persist across steps (the model state), or of those of one role (e.g. 'param16': the half copies). */
export function tensorBytes(g: Graph, which: 'persistent' | Role): number {
  let sum = 0;
  for (const t of g.tensors) if (which === 'persistent' ? t.persistent : t.role === which) sum += t.sizeBytes;
  return sum;
}

/** producer[t] = op id writing tensor t (the last writer for in-place state), or -1. */
export function producers(g: Graph): Int32Array {
  const p = new Int32Array(g.tensors.length).fill(-1);
  for (const op of g.ops) for (const t of op.outputs) p[t] = op.id;
  return p;
}

/** consumers[t] = op ids reading tensor t, in program order. */
export function consumers(g: Graph): number[][] {
  const c: number[][] = g.tensors.map(() => []);
  for (const op of g.ops) for (const t of op.inputs) c[t].push(op.id);
  return c;
}

/**
 * Kahn's algorithm over data edges (producer -> consumer), ignoring reads of
 * persistent state by ops before its writer (those read the previous step's
 * value). Returns the order, or null when the graph has a cycle.
 */
export function topoOrder(g: Graph): number[] | null {
  const n = g.ops.length;
  const indeg = new Int32Array(n);
  const succ: number[][] = g.ops.map(() => []);
  const writer = new Int32Array(g.tensors.length).fill(-1);
  for (const op of g.ops) for (const t of op.outputs) if (!g.tensors[t].persistent || writer[t] < 0) writer[t] = op.id;
  for (const op of g.ops) {
    for (const t of op.inputs) {
      const w = writer[t];
      if (w < 0 || w === op.id) continue;
      if (g.tensors[t].persistent) { succ[op.id].push(w); indeg[w]++; continue; } // read-before-write of state
      succ[w].push(op.id); indeg[op.id]++;
    }
  }
  const order: number[] = [];
  const queue: number[] = [];
  for (let i = 0; i < n; i++) if (indeg[i] === 0) queue.push(i);
  for (let h = 0; h < queue.length; h++) {
    const v = queue[h];
    order.push(v);
    for (const s of succ[v]) if (--indeg[s] === 0) queue.push(s);
  }
  return order.length === n ? order : null;
}
