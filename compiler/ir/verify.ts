// IR verifier: the invariants every pass keeps, checked as data.
//
// Takes a Graph; gives the list of violations (empty = valid). Invariants:
//  1. ids are indices and every operand exists;
//  2. one producer per tensor; a persistent (state) tensor may be written once,
//     in place, after every other read of it in the step;
//  3. program order is an execution order: a non-persistent tensor is written
//     before it is read (this also makes the graph acyclic);
//  4. shapes agree with the op catalog (dtypes may differ after precision lowering);
//  5. the loss is a one-element tensor;
//  6. every numeric attribute is finite (a plan is JSON: NaN would be null).
// Cost: O(ops + tensors).

import { inferOutputs, ShapeError } from './ops.js';
import type { Graph } from './types.js';
import { formatLoc, numel, shapeStr } from './types.js';

export function verifyGraph(g: Graph): string[] {
  const errors: string[] = [];
  const T = g.tensors.length;
  g.tensors.forEach((t, i) => { if (t.id !== i) errors.push(`tensor ${t.name}: id ${t.id} at index ${i}`); });
  const writer = new Int32Array(T).fill(-1);
  const lastRead = new Int32Array(T).fill(-1);
  for (let i = 0; i < g.ops.length; i++) {
    const op = g.ops[i];
    // the op's name in messages, made only when there is one (this loop runs after every pass)
    let whereText: string | undefined;
    const whereOf = () => (whereText ??= `op ${i} (${op.kind}, ${formatLoc(op.loc)})`);
    if (op.id !== i) errors.push(`${whereOf()}: id ${op.id} at index ${i}`);
    for (const [k, v] of Object.entries(op.attrs)) if (v === null || (typeof v === 'number' && !Number.isFinite(v))) errors.push(`${whereOf()}: attribute ${k} is ${v} (a finite number or absent)`);
    const bad = op.inputs.find((t) => !(t >= 0 && t < T)) ?? op.outputs.find((t) => !(t >= 0 && t < T));
    if (bad !== undefined) { errors.push(`${whereOf()}: operand ${bad} does not exist`); continue; }
    for (const t of op.inputs) {
      const tensor = g.tensors[t];
      if (!tensor.persistent && writer[t] < 0 && tensor.role !== 'input')
        errors.push(`${whereOf()}: reads ${tensor.name} before any op writes it`);
      if (tensor.persistent && writer[t] >= 0 && writer[t] !== i)
        errors.push(`${whereOf()}: reads state ${tensor.name} after op ${writer[t]} overwrote it in place`);
      lastRead[t] = i;
    }
    for (const t of op.outputs) {
      const tensor = g.tensors[t];
      if (writer[t] >= 0) errors.push(`${whereOf()}: ${tensor.name} already has producer op ${writer[t]}`);
      if (tensor.role === 'input') errors.push(`${whereOf()}: writes the data input ${tensor.name}`);
      writer[t] = i;
    }
    if (op.kind === 'adam') {
      const [p, , m, v] = op.inputs;
      const sizes = op.inputs.map((t) => numel(g.tensors[t].shape));
      if (op.inputs.length !== 4 || sizes.some((s) => s !== sizes[0])) errors.push(`${whereOf()}: adam needs p, g, m, v of one size`);
      if (op.outputs[0] !== p || op.outputs[1] !== m || op.outputs[2] !== v) errors.push(`${whereOf()}: adam must update p, m, v in place`);
      if (op.outputs.length === 4 && numel(g.tensors[op.outputs[3]].shape) !== sizes[0]) errors.push(`${whereOf()}: adam's half copy has the wrong size`);
      if (![p, m, v].every((t) => g.tensors[t].persistent)) errors.push(`${whereOf()}: adam state must be persistent`);
      continue;
    }
    try {
      const specs = inferOutputs(op.kind, op.inputs.map((t) => g.tensors[t]), op.attrs);
      if (specs.length !== op.outputs.length) errors.push(`${whereOf()}: ${op.outputs.length} outputs, the catalog says ${specs.length}`);
      specs.forEach((s, k) => {
        const out = g.tensors[op.outputs[k]];
        if (out && !sameShape(out.shape, s.shape)) errors.push(`${whereOf()}: output ${out.name} is ${shapeStr(out.shape)}, the catalog says ${shapeStr(s.shape)}`);
      });
    } catch (e) {
      if (e instanceof ShapeError) errors.push(`${whereOf()}: ${e.message}`); else throw e;
    }
  }
  // in-place state writes come after every read of the old value
  for (let i = 0; i < g.ops.length; i++) {
    for (const t of g.ops[i].outputs) {
      // (an operand out of range, already named above, had thrown here and hidden that message)
      if (g.tensors[t]?.persistent && lastRead[t] > i) errors.push(`op ${i} (${g.ops[i].kind}): overwrites state ${g.tensors[t].name} before its last read by op ${lastRead[t]}`);
    }
  }
  const loss = g.tensors[g.loss];
  if (!loss || numel(loss.shape) !== 1) errors.push(`loss tensor ${g.loss} must hold one element`);
  return errors;
}

const sameShape = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((d, k) => d === b[k]);

export function assertGraph(g: Graph, after: string): void {
  const errors = verifyGraph(g);
  if (errors.length) throw new Error(`IR invalid after ${after}:\n  ${errors.slice(0, 10).join('\n  ')}${errors.length > 10 ? `\n  … ${errors.length - 10} more` : ''}`);
}
