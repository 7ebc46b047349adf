// Every grad rule against central finite differences in float64, run on the
// native kernels: L(x) = sum(y(x) * dy) for a random dy; dL/dx from the rule's
// backward ops must match (L(x + h) - L(x - h)) / 2h for every input element.
import { describe, it } from 'vitest';
import { checkGradRule, type GradCase } from '../grad-check.js';


const CASES: GradCase[] = [
  { name: 'matmul', kind: 'matmul', inputs: [{ shape: [2, 3, 5] }, { shape: [5, 4] }], attrs: { transB: false } },
  { name: 'matmul transB', kind: 'matmul', inputs: [{ shape: [3, 5] }, { shape: [4, 5] }], attrs: { transB: true } },
  { name: 'add same shape', kind: 'add', inputs: [{ shape: [3, 4] }, { shape: [3, 4] }] },
  { name: 'add broadcast', kind: 'add', inputs: [{ shape: [2, 3, 4] }, { shape: [4] }] },
  { name: 'mul broadcast', kind: 'mul', inputs: [{ shape: [2, 3, 4] }, { shape: [3, 4] }] },
  { name: 'gelu', kind: 'gelu', inputs: [{ shape: [17], scale: 3 }] },
  { name: 'layerNorm', kind: 'layerNorm', inputs: [{ shape: [2, 3, 7] }, { shape: [7] }, { shape: [7] }], attrs: { eps: 1e-5 } },
  { name: 'softmax', kind: 'softmax', inputs: [{ shape: [3, 6], scale: 2 }] },
  { name: 'causalAttention', kind: 'causalAttention', inputs: [{ shape: [2, 5, 12] }], attrs: { heads: 2 } },
  { name: 'embedding', kind: 'embedding', inputs: [{ shape: [2, 4], int: 6 }, { shape: [6, 3] }] },
  { name: 'crossEntropy', kind: 'crossEntropy', inputs: [{ shape: [2, 3, 5], scale: 2 }, { shape: [2, 3], int: 5 }] },
  { name: 'reshape', kind: 'reshape', inputs: [{ shape: [2, 6] }], attrs: { shape: [3, 4] } },
  { name: 'transpose', kind: 'transpose', inputs: [{ shape: [2, 3, 4] }], attrs: { perm: [2, 0, 1] } },
  // model zoo (LLaMA, BERT)
  { name: 'rmsNorm', kind: 'rmsNorm', inputs: [{ shape: [2, 3, 7] }, { shape: [7] }], attrs: { eps: 1e-5 } },
  { name: 'silu', kind: 'silu', inputs: [{ shape: [17], scale: 4 }] },
  { name: 'gelu erf', kind: 'gelu', inputs: [{ shape: [17], scale: 3 }], attrs: { erf: true } },
  { name: 'rope', kind: 'rope', inputs: [{ shape: [2, 5, 12] }], attrs: { heads: 2, theta: 100 } },
  { name: 'rope inverse', kind: 'rope', inputs: [{ shape: [1, 4, 8] }], attrs: { heads: 1, theta: 10, inverse: true } },
  { name: 'attention causal GQA', kind: 'attention', inputs: [{ shape: [2, 5, 12] }, { shape: [2, 5, 6] }, { shape: [2, 5, 6] }], attrs: { heads: 4, kvHeads: 2, causal: true } },
  { name: 'attention bidirectional', kind: 'attention', inputs: [{ shape: [2, 4, 8], scale: 2 }, { shape: [2, 4, 8], scale: 2 }, { shape: [2, 4, 8] }], attrs: { heads: 2, kvHeads: 2, causal: false } },
  { name: 'attention causal MQA', kind: 'attention', inputs: [{ shape: [1, 4, 9] }, { shape: [1, 4, 3] }, { shape: [1, 4, 3] }], attrs: { heads: 3, kvHeads: 1, causal: true } },
];

describe('grad rules vs finite differences (f64)', () => {
  for (const c of CASES) it(c.name, () => checkGradRule(c));
});
