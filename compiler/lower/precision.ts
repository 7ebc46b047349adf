// Precision lowering: fp32 training graph -> the same graph in the compute
// precision (fp16 or bf16).
//
// Takes a Graph in fp32 and a Precision. Gives a Graph whose parameters, float
// inputs, activations and gradients are stored in the compute precision, while
// what the op catalog fixes to fp32 stays fp32 (layer-norm statistics, the loss,
// the loss-gradient seed). Kernels still compute in fp32; only storage narrows.
// Keeps true: ids, ops and shapes unchanged; sizes and bytes touched recomputed.
// Cost: O(ops + tensors).

import { inferOutputs } from '../ir/ops.js';
import type { DType, Graph, Op, Precision, Tensor } from '../ir/types.js';
import { dtypeBytes, numel } from '../ir/types.js';

export function lowerPrecision(g: Graph, precision: Precision): Graph {
  if (precision === 'fp32') return { ...g, precision };
  const half: DType = precision === 'fp16' ? 'f16' : 'bf16';
  const dtype: DType[] = g.tensors.map((t) => ((t.role === 'param16' || t.role === 'input') && t.dtype === 'f32' ? half : t.dtype));
  for (const op of g.ops) {
    if (op.kind === 'adam') continue;
    const specs = inferOutputs(op.kind, op.inputs.map((t) => ({ shape: g.tensors[t].shape, dtype: dtype[t] })), op.attrs);
    op.outputs.forEach((t, k) => { dtype[t] = specs[k].dtype; });
  }
  const tensors: Tensor[] = g.tensors.map((t) => ({ ...t, dtype: dtype[t.id], sizeBytes: numel(t.shape) * dtypeBytes(dtype[t.id]) }));
  const ops: Op[] = g.ops.map((op) => {
    let bytes = 0;
    for (const t of op.inputs) bytes += tensors[t].sizeBytes;
    for (const t of op.outputs) bytes += tensors[t].sizeBytes;
    return { ...op, bytesTouched: bytes };
  });
  return { ...g, tensors, ops, precision };
}
