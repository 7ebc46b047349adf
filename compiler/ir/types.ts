// The IR: one typed, plain-data structure shared by every compiler pass.
//
// A Graph is one training step: tensors (shape, dtype, bytes, role) and ops
// (kind, operands, attributes, cost, source location). Passes take a Graph and
// return a new one; nothing mutates a Graph after its pass returns (the arrays
// are readonly). Ids are indices: tensors[i].id === i, ops[i].id === i, and ops
// appear in a valid execution order (the program order every later stage keeps).

export type DType = 'f32' | 'f16' | 'bf16' | 'i32' | 'i64';

/** What a tensor is for (DESIGN.md glossary). "16" = the compute precision. */
export type Role =
  | 'input'          // data bound by the runtime every step (tokens, targets)
  | 'activation'     // forward intermediate (and saved-for-backward aux outputs)
  | 'activationGrad' // backward intermediate: the gradient of an activation
  | 'param16'        // a parameter in the compute precision (read by forward/backward)
  | 'grad16'         // the final gradient of a parameter, in the compute precision
  | 'master32'       // fp32 master copy of a parameter (fp16/bf16 training only)
  | 'adamM'          // Adam first moment
  | 'adamV'          // Adam second moment
  | 'loss';          // the scalar the step minimises

export const ROLES: readonly Role[] = [
  'input', 'activation', 'activationGrad', 'param16', 'grad16', 'master32', 'adamM', 'adamV', 'loss',
];

/** Where an op came from: a DSL model line, or an ONNX node. */
export type SourceLoc =
  | { readonly file: string; readonly line: number; readonly col: number }
  | { readonly file: string; readonly node: string };

/** How a parameter is initialised by the runtime when no weights are given. */
export type InitSpec =
  | { readonly kind: 'normal'; readonly std: number; readonly mean?: number }
  | { readonly kind: 'constant'; readonly value: number }
  /** The named initializer of the ONNX model in the plan's model.source (read at run time). */
  | { readonly kind: 'onnx'; readonly initializer: string }
  /** Values carried by the plan: little-endian f32, base64 (small folded constants, e.g. a mask). */
  | { readonly kind: 'data'; readonly f32Base64: string };

export interface Tensor {
  readonly id: number;
  readonly name: string;
  readonly shape: readonly number[];
  readonly dtype: DType;
  readonly sizeBytes: number;
  readonly role: Role;
  /** State that survives from one step to the next (parameters, master, moments). */
  readonly persistent: boolean;
  /** For param16/grad16/master32/adamM/adamV: the parameter's name. */
  readonly param?: string;
  /** For parameters that the runtime initialises. */
  readonly init?: InitSpec;
  /** A param16 that gets no gradient and no update (a constant, or frozen by --freeze). */
  readonly frozen?: boolean;
  /** A part of a parameter (compiler/lower/chunks.ts), and its master32, adamM, adamV: what checkpoints and initial values read and write. */
  readonly slice?: ParamSlice;
}

/**
 * A tensor that holds part of the parameter `of` (whole shape `whole`): the
 * ranges [start, end) of axis `axis`, in order, side by side; every other
 * axis whole. Checkpoints (--weights, --save) name the whole parameter, and
 * its initial values are the whole's (under the whole's name), cut so.
 */
export interface ParamSlice {
  readonly of: string;
  readonly whole: readonly number[];
  readonly axis: number;
  readonly ranges: readonly (readonly [number, number])[];
}

export type OpKind =
  | 'matmul' | 'add' | 'mul' | 'gelu' | 'layerNorm' | 'softmax' | 'causalAttention'
  | 'embedding' | 'crossEntropy' | 'reshape' | 'transpose'
  | 'matmulGradA' | 'matmulGradB' | 'sumToShape' | 'geluBackward' | 'layerNormBackward'
  | 'softmaxBackward' | 'causalAttentionBackward' | 'embeddingBackward' | 'crossEntropyBackward'
  | 'fill' | 'adam'
  // added for ONNX import (codes 22..; dispatch.h)
  | 'sub' | 'div' | 'affine' | 'powScalar' | 'unary' | 'unaryBackward' | 'where' | 'expand' | 'unbroadcast'
  | 'slice' | 'sliceBackward' | 'concat' | 'bmm' | 'logSoftmax' | 'logSoftmaxBackward' | 'cast'
  // added for the model zoo: LLaMA, BERT (codes 38..; dispatch.h)
  | 'rmsNorm' | 'rmsNormBackward' | 'silu' | 'siluBackward' | 'rope' | 'attention' | 'attentionBackward'
  // added for CNNs from ONNX (codes 45..; dispatch.h)
  | 'conv2d' | 'conv2dGradInput' | 'conv2dGradWeight' | 'batchNorm' | 'batchNormBackward' | 'batchNormRunning'
  | 'maxPool2d' | 'maxPool2dBackward' | 'avgPool2d' | 'avgPool2dBackward'
  // added for sequence parallelism (codes 55..; dispatch.h): collectives over the ranks' communicator
  | 'ringAttention' | 'ringAttentionBackward' | 'allReduce';

/** Elementwise functions of the `unary` kind (iattr[0] = index in this list). */
export const UNARY_FNS = ['tanh', 'erf', 'sqrt', 'relu', 'exp', 'log', 'sigmoid'] as const;
export type UnaryFn = typeof UNARY_FNS[number];

export interface AdamAttrs {
  readonly lr: number;
  readonly beta1: number;
  readonly beta2: number;
  readonly eps: number;
  readonly weightDecay: number;
  /** true: torch.optim.AdamW (decoupled decay); false: torch.optim.Adam (L2 in the gradient). */
  readonly adamw: boolean;
}

/** Attributes, typed; each op kind uses the fields its catalog entry names. */
export interface OpAttrs {
  readonly transB?: boolean;
  readonly eps?: number;
  readonly heads?: number;
  readonly perm?: readonly number[];
  /** Target shape: reshape, sumToShape, fill, embeddingBackward (the table's shape). */
  readonly shape?: readonly number[];
  readonly value?: number;
  readonly adam?: AdamAttrs;
  /** affine: y = x * scale + offset */
  readonly scale?: number;
  readonly offset?: number;
  /** powScalar: y = x ** exponent */
  readonly exponent?: number;
  /** unary, unaryBackward */
  readonly fn?: UnaryFn;
  /** slice, sliceBackward, concat: the axis; slice: [start, end) along it */
  readonly axis?: number;
  readonly start?: number;
  readonly end?: number;
  /** bmm: a is [...,K,M] (transA) and/or b is [...,N,K] (transB) */
  readonly transA?: boolean;
  /** attention(Backward): key/value heads (grouped-query; = heads when absent) and the causal mask */
  readonly kvHeads?: number;
  readonly causal?: boolean;
  /** rope: the base of the rotary frequencies; inverse: rotate by minus the angle (rope's backward) */
  readonly theta?: number;
  readonly inverse?: boolean;
  /** gelu, geluBackward: the exact erf form instead of the tanh approximation */
  readonly erf?: boolean;
  /** conv2d*, pools: [sH, sW] (default [1, 1]) */
  readonly strides?: readonly number[];
  /** conv2d*, pools: zero (conv) or ignored (pools) padding [top, left, bottom, right] (default 0) */
  readonly pads?: readonly number[];
  /** conv2d*: [dH, dW] (default [1, 1]) */
  readonly dilations?: readonly number[];
  /** pools: the window [kH, kW] */
  readonly kernel?: readonly number[];
  /** pools: the output size rounds up (PyTorch's ceil_mode: the last window starts inside the input or its top/left padding) */
  readonly ceilMode?: boolean;
  /** avgPool2d(Backward): padded positions count in the divisor */
  readonly countIncludePad?: boolean;
  /** batchNormRunning: weight of the batch statistic (PyTorch's momentum; ONNX's is 1 minus it) */
  readonly momentum?: number;
  /** batchNormRunning: elements per channel in the batch (the unbiased variance is var * count / (count - 1)) */
  readonly count?: number;
  /** ringAttention(Backward), allReduce: the ranks P of the ring (sequence parallelism) */
  readonly ranks?: number;
}

export type Phase = 'forward' | 'backward' | 'update';

export interface Op {
  readonly id: number;
  readonly kind: OpKind;
  readonly inputs: readonly number[];
  readonly outputs: readonly number[];
  readonly attrs: OpAttrs;
  readonly phase: Phase;
  /** Floating-point operations of one execution. */
  readonly flops: number;
  /** Bytes read plus bytes written by one execution (the roofline's memory term). */
  readonly bytesTouched: number;
  readonly loc: SourceLoc;
}

export type Precision = 'fp32' | 'fp16' | 'bf16';

export interface Graph {
  readonly name: string;
  readonly tensors: readonly Tensor[];
  readonly ops: readonly Op[];
  /** The scalar loss tensor id. */
  readonly loss: number;
  readonly precision: Precision;
  /** Number of trainable parameters (elements). */
  readonly paramCount: number;
}

export function dtypeBytes(d: DType): number {
  switch (d) {
    case 'f32': case 'i32': return 4;
    case 'f16': case 'bf16': return 2;
    case 'i64': return 8;
  }
}

export function numel(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

export function isFloat(d: DType): boolean {
  return d === 'f32' || d === 'f16' || d === 'bf16';
}

export function formatLoc(loc: SourceLoc): string {
  return 'line' in loc ? `${loc.file}:${loc.line}:${loc.col}` : `${loc.file} (node ${loc.node})`;
}

export function shapeStr(shape: readonly number[]): string {
  return `[${shape.join(',')}]`;
}
