// IR verifier: the invariants every pass keeps, checked as data.
//
// Takes a Graph; gives the list of violations (empty = valid). Invariants:
//  1. ids are indices and every operand exists;
//  2. one producer per tensor; a persistent (state) tensor may be written once,
//     in place, after every other read of it in the step;
//  3. program order is an execution order: a non-persistent tensor is written
//     before it is read (this also makes the graph acyclic);
//  4. shapes agree with the op catalog (dtypes may differ after precision lowering);
//  5. the loss is a one-element tensor.
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
    const where = `op ${i} (${op.kind}, ${formatLoc(op.loc)})`;
    if (op.id !== i) errors.push(`${where}: id ${op.id} at index ${i}`);
    const bad = [...op.inputs, ...op.outputs].filter((t) => !(t >= 0 && t < T));
    if (bad.length) { errors.push(`${where}: operand ${bad[0]} does not exist`); continue; }
    for (const t of op.inputs) {
      const tensor = g.tensors[t];
      if (!tensor.persistent && writer[t] < 0 && tensor.role !== 'input')
        errors.push(`${where}: reads ${tensor.name} before any op writes it`);
      if (tensor.persistent && writer[t] >= 0 && writer[t] !== i)
        errors.push(`${where}: reads state ${tensor.name} after op ${writer[t]} overwrote it in place`);
      lastRead[t] = i;
    }
    for (const t of op.outputs) {
      const tensor = g.tensors[t];
      if (writer[t] >= 0) errors.push(`${where}: ${tensor.name} already has producer op ${writer[t]}`);
      if (tensor.role === 'input') errors.push(`${where}: writes the data input ${tensor.name}`);
      writer[t] = i;
    }
    if (op.kind === 'adam') {
      const [p, , m, v] = op.inputs;
      const sizes = op.inputs.map((t) => numel(g.tensors[t].shape));
      if (op.inputs.length !== 4 || sizes.some((s) => s !== sizes[0])) errors.push(`${where}: adam needs p, g, m, v of one size`);
      if (op.outputs[0] !== p || op.outputs[1] !== m || op.outputs[2] !== v) errors.push(`${where}: adam must update p, m, v in place`);
      if (op.outputs.length === 4 && numel(g.tensors[op.outputs[3]].shape) !== sizes[0]) errors.push(`${where}: adam's half copy has the wrong size`);
      if (![p, m, v].every((t) => g.tensors[t].persistent)) errors.push(`${where}: adam state must be persistent`);
      continue;
    }
    try {
      const specs = inferOutputs(op.kind, op.inputs.map((t) => g.tensors[t]), op.attrs);
      if (specs.length !== op.outputs.length) errors.push(`${where}: ${op.outputs.length} outputs, the catalog says ${specs.length}`);
      specs.forEach((s, k) => {
        const out = g.tensors[op.outputs[k]];
        if (out && shapeStr(out.shape) !== shapeStr(s.shape)) errors.push(`${where}: output ${out.name} is ${shapeStr(out.shape)}, the catalog says ${shapeStr(s.shape)}`);
      });
    } catch (e) {
      if (e instanceof ShapeError) errors.push(`${where}: ${e.message}`); else throw e;
    }
  }
  // in-place state writes come after every read of the old value
  for (let i = 0; i < g.ops.length; i++) {
    for (const t of g.ops[i].outputs) {
      if (g.tensors[t].persistent && lastRead[t] > i) errors.push(`op ${i} (${g.ops[i].kind}): overwrites state ${g.tensors[t].name} before its last read by op ${lastRead[t]}`);
    }
  }
  const loss = g.tensors[g.loss];
  if (!loss || numel(loss.shape) !== 1) errors.push(`loss tensor ${g.loss} must hold one element`);
  return errors;
}

export function assertGraph(g: Graph, after: string): void {
  const errors = verifyGraph(g);
  if (errors.length) throw new Error(`IR invalid after ${after}:\n  ${errors.slice(0, 10).join('\n  ')}${errors.length > 10 ? `\n  … ${errors.length - 10} more` : ''}`);
}
