// Kernels on degenerate shapes and extreme values, through the addon's runOp:
// each case had crashed the process, touched memory outside its buffers, or
// returned a wrong number. The reference is the closed form (log V for equal
// logits) or PyTorch's refusal of the same shape.
import { describe, it, expect } from 'vitest';
import { encodeAttrs, OP_CODES } from '../../compiler/ir/ops.js';
import { nativeAddon } from '../../runtime/binding.js';

const run = (kind: number, iattr: number[], fattr: number[], ins: { shape: number[]; data: Float32Array | Int32Array }[], outs: { shape: number[] }[]) =>
  nativeAddon().runOp(kind, 'f32', iattr, fattr, ins, outs) as Float32Array[];

describe('kernels at the edges', () => {
  it('conv2d over an x of no channels: refused (it had divided by zero: SIGFPE)', () => {
    const { iattr, fattr } = encodeAttrs('conv2d', {});
    const x = { shape: [1, 0, 4, 4], data: new Float32Array(0) }, w = { shape: [2, 1, 3, 3], data: new Float32Array(18) }, b = { shape: [2], data: new Float32Array(2) };
    expect(() => run(OP_CODES.conv2d, iattr, fattr, [x, w, b], [{ shape: [1, 2, 2, 2] }])).toThrow(/conv2d: w has shape \[2,1,3,3\], which does not split the 0 channels of x/);
  });

  it('max-pool over a plane of no rows (padding alone in its windows): refused, as PyTorch does (it had read and written outside x and dx)', () => {
    const iattr = [2, 1, 1, 1, 1, 0, 1, 0]; // window [2,1], strides [1,1], pads T=1 L=0 B=1 R=0
    const x = { shape: [1, 1, 0, 3], data: new Float32Array(0) };
    expect(() => run(OP_CODES.maxPool2d, iattr, [], [x], [{ shape: [1, 1, 1, 3] }])).toThrow(/x has shape \[1,1,0,3\]: its planes need at least one row and one column/);
    // one row is a plane: fine
    const y = run(OP_CODES.maxPool2d, iattr, [], [{ shape: [1, 1, 1, 3], data: Float32Array.from([1, 5, 2]) }], [{ shape: [1, 1, 2, 3] }])[0];
    expect([...y]).toEqual([1, 5, 2, 1, 5, 2]);
  });

  it('cross-entropy of logits past 1e15: log V where they are equal (the log-sum had been absorbed into the max: a loss of 0)', () => {
    for (const big of [1e15, 1e17, 1e30, -1e30]) {
      const loss = run(OP_CODES.crossEntropy, [], [], [{ shape: [1, 7], data: new Float32Array(7).fill(big) }, { shape: [1], data: Int32Array.from([3]) }], [{ shape: [] }])[0][0];
      expect(Math.abs(loss - Math.log(7)), String(big)).toBeLessThan(1e-6);
    }
    const two = run(OP_CODES.crossEntropy, [], [], [{ shape: [1, 3], data: Float32Array.from([1e30, 1e30, -1e30]) }, { shape: [1], data: Int32Array.from([0]) }], [{ shape: [] }])[0][0];
    expect(Math.abs(two - Math.log(2))).toBeLessThan(1e-6);
  });

  it('a shape of more than 2^50 elements: refused (2^32 x 2^32 had wrapped to 0 and the kernel ran past an empty array)', () => {
    expect(() => run(OP_CODES.softmax, [], [], [{ shape: [2 ** 32, 2 ** 32], data: new Float32Array(0) }], [{ shape: [2 ** 32, 2 ** 32] }])).toThrow(/inputs\[0\]\.shape: more than 2\^50 elements/);
  });
});
