// The model DSL, as types only. A model file under models/ imports these types
// (`import type { Model } from 'tiercut/dsl'`) and exports a Model as default.
// compiler/import/dsl.ts type-checks the file against this file, runs it, and
// records one IR op per call, with the model line that made it.

/** A tensor handle. Shapes are concrete numbers; no data is ever attached. */
export interface Tensor {
  readonly name: string;
  readonly shape: readonly number[];
  readonly dtype: 'f32' | 'i32';
}

/** How the runtime initialises a parameter when no weights file is given. */
export type Init = { normal: number; mean?: number } | { constant: number };

export interface Dsl {
  /** Data fed every step: token ids ('i32') or features ('f32'). */
  input(name: string, shape: readonly number[], dtype?: 'f32' | 'i32'): Tensor;
  /** A trainable parameter; its name is prefixed by the enclosing scopes. Default init: normal(0.02). */
  param(name: string, shape: readonly number[], init?: Init): Tensor;
  /** a[...,K] @ b[K,M] -> [...,M]; with transB, b is [M,K] (e.g. a tied embedding as the output layer). */
  matmul(a: Tensor, b: Tensor, opts?: { transB?: boolean }): Tensor;
  /** Elementwise; b may be a trailing part of a's shape (bias, position table). */
  add(a: Tensor, b: Tensor): Tensor;
  mul(a: Tensor, b: Tensor): Tensor;
  /** GELU, tanh approximation; with `erf: true` the exact form 0.5 x (1 + erf(x / sqrt 2)) (BERT). */
  gelu(x: Tensor, opts?: { erf?: boolean }): Tensor;
  /** SiLU (swish): x * sigmoid(x) (LLaMA's SwiGLU gate). */
  silu(x: Tensor): Tensor;
  /** Over the last dimension; weight and bias are [C]. */
  layerNorm(x: Tensor, weight: Tensor, bias: Tensor, eps?: number): Tensor;
  /** RMS norm over the last dimension (no mean, no bias): x / sqrt(mean(x^2) + eps) * weight; weight is [C]. */
  rmsNorm(x: Tensor, weight: Tensor, eps?: number): Tensor;
  /** Over the last dimension. */
  softmax(x: Tensor): Tensor;
  /** Causal multi-head self-attention of packed qkv [B,T,3C] -> [B,T,C]. */
  causalAttention(qkv: Tensor, heads: number): Tensor;
  /**
   * Rotary position embedding of x [B,T,heads*headSize] (headSize even), positions 0..T-1, in the
   * rotate-half layout of Hugging Face LLaMA: channel i of a head pairs with i + headSize/2,
   * rotated by t * theta^(-2i/headSize). Default theta 10000.
   */
  rope(x: Tensor, heads: number, theta?: number): Tensor;
  /**
   * Multi-head attention of q [B,T,heads*hs] over k, v [B,T,kvHeads*hs] -> [B,T,heads*hs].
   * kvHeads (default: heads) must divide heads: query head h reads key/value head
   * h / (heads / kvHeads) (grouped-query attention). causal: token t sees tokens <= t;
   * otherwise every token sees every token (no padding mask). Scale 1/sqrt(hs).
   */
  attention(q: Tensor, k: Tensor, v: Tensor, opts: { heads: number; kvHeads?: number; causal: boolean }): Tensor;
  /** ids [...] (i32) into table [V,C] -> [...,C]. */
  embedding(ids: Tensor, table: Tensor): Tensor;
  /** Mean cross-entropy of logits [...,V] against targets [...] (i32): a scalar. */
  crossEntropy(logits: Tensor, targets: Tensor): Tensor;
  reshape(x: Tensor, shape: readonly number[]): Tensor;
  transpose(x: Tensor, perm: readonly number[]): Tensor;
  /** Prefixes parameter names made inside body with `name.`. */
  scope<R>(name: string, body: () => R): R;
}

/** Every preset names its default batch and sequence length (the CLI may override them). */
export interface PresetBase {
  batch: number;
  seq: number;
}

export interface Model<P extends PresetBase> {
  presets: Record<string, P>;
  /** Builds the forward graph and returns the scalar loss. */
  build(nn: Dsl, cfg: P): Tensor;
}
