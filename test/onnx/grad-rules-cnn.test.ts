// The grad rules of the CNN op kinds (conv2d, batchNorm, maxPool2d, avgPool2d)
// against central finite differences in float64 on the native kernels (the
// harness in test/grad-check.ts): L(x) = sum(y(x) * dy) for a random dy;
// dL/dx from the rule's backward ops must match (L(x+h) - L(x-h)) / 2h. Also
// the running-statistics update against PyTorch's formula.
import { describe, it, expect } from 'vitest';
import { encodeAttrs, OP_CODES } from '../../compiler/ir/ops.js';
import { nativeAddon } from '../../runtime/binding.js';
import { checkGradRule, type GradCase } from '../grad-check.js';
import { randomValues, expectClose } from '../helpers.js';


const CASES: GradCase[] = [
  { name: 'conv2d 3x3 pad 1', kind: 'conv2d', inputs: [{ shape: [2, 3, 5, 5] }, { shape: [4, 3, 3, 3] }, { shape: [4] }], attrs: { pads: [1, 1, 1, 1] } },
  {
    name: 'conv2d strides, asymmetric pads, dilations', kind: 'conv2d',
    inputs: [{ shape: [1, 2, 7, 6] }, { shape: [3, 2, 2, 3] }, { shape: [3] }], attrs: { strides: [2, 1], pads: [0, 1, 1, 0], dilations: [2, 1] },
  },
  { name: 'conv2d groups 2, stride 2', kind: 'conv2d', inputs: [{ shape: [2, 4, 5, 5] }, { shape: [6, 2, 3, 3] }, { shape: [6] }], attrs: { strides: [2, 2], pads: [1, 1, 1, 1] } },
  { name: 'conv2d 1x1', kind: 'conv2d', inputs: [{ shape: [2, 3, 3, 4] }, { shape: [5, 3, 1, 1] }, { shape: [5] }] },
  { name: 'batchNorm NCHW', kind: 'batchNorm', inputs: [{ shape: [3, 4, 2, 3], scale: 2, offset: 0.5 }, { shape: [4], scale: 0.5, offset: 1 }, { shape: [4] }], attrs: { eps: 1e-5 } },
  { name: 'batchNorm [N,C]', kind: 'batchNorm', inputs: [{ shape: [5, 3] }, { shape: [3], scale: 0.5, offset: 1 }, { shape: [3] }], attrs: { eps: 1e-3 } },
  { name: 'maxPool2d 2x2 stride 2', kind: 'maxPool2d', inputs: [{ shape: [2, 3, 4, 5] }], attrs: { kernel: [2, 2], strides: [2, 2] } },
  { name: 'maxPool2d 3x3 stride 2 pad 1 ceil', kind: 'maxPool2d', inputs: [{ shape: [1, 2, 6, 7] }], attrs: { kernel: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1], ceilMode: true } },
  { name: 'avgPool2d 3x3 pad 1 (pads not counted)', kind: 'avgPool2d', inputs: [{ shape: [2, 2, 5, 4] }], attrs: { kernel: [3, 3], pads: [1, 1, 1, 1] } },
  { name: 'avgPool2d 3x3 pad 1 count_include_pad', kind: 'avgPool2d', inputs: [{ shape: [2, 2, 5, 4] }], attrs: { kernel: [3, 3], pads: [1, 1, 1, 1], countIncludePad: true } },
  { name: 'avgPool2d 2x2 stride 2 ceil', kind: 'avgPool2d', inputs: [{ shape: [1, 3, 5, 5] }], attrs: { kernel: [2, 2], strides: [2, 2], ceilMode: true, countIncludePad: true } },
];

describe('CNN grad rules vs finite differences (f64)', () => {
  for (const c of CASES) it(c.name, () => checkGradRule(c));

  it('batchNormRunning: PyTorch\'s update (unbiased variance, momentum on the batch statistic)', () => {
    const C = 5, count = 12, momentum = 0.1;
    const [rm, rv, mean, v] = [randomValues(C, 1), randomValues(C, 2).map((x) => x + 2), randomValues(C, 3), randomValues(C, 4).map((x) => x + 1.5)];
    const { iattr, fattr } = encodeAttrs('batchNormRunning', { momentum, count });
    const outs = nativeAddon().runOp(OP_CODES.batchNormRunning, 'f64', iattr, fattr, [rm, rv, mean, v].map((data) => ({ shape: [C], data })), [{ shape: [C] }, { shape: [C] }]) as Float64Array[];
    expectClose('running mean', outs[0], rm.map((r, i) => (1 - momentum) * r + momentum * mean[i]), 1e-15, 1e-14);
    expectClose('running var', outs[1], rv.map((r, i) => (1 - momentum) * r + momentum * v[i] * count / (count - 1)), 1e-15, 1e-14);
    expect(() => nativeAddon().runOp(OP_CODES.batchNormRunning, 'f64', [1], fattr, [rm, rv, mean, v].map((data) => ({ shape: [C], data })), [{ shape: [C] }, { shape: [C] }])).toThrow(/n \(iattr\[0\]\) is 1/);
  });

  it('conv2d: the kernel checks the window against the output shape', () => {
    const { iattr, fattr } = encodeAttrs('conv2d', { pads: [1, 1, 1, 1] });
    const x = { shape: [1, 2, 4, 4], data: new Float64Array(32) }, w = { shape: [3, 2, 3, 3], data: new Float64Array(54) }, bias = { shape: [3], data: new Float64Array(3) };
    expect(() => nativeAddon().runOp(OP_CODES.conv2d, 'f64', iattr, fattr, [x, w, bias], [{ shape: [1, 3, 3, 3] }])).toThrow(/conv2d: y has shape \[1,3,3,3\], expected \[1,3,4,4\]/);
  });
});
