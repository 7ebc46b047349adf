// kernels.h — the scalar CPU kernels of tiercut's runtime, one op per .cc file.
//
// These are the reference kernels: plain loops, no threads, no SIMD intrinsics.
// Every one is a template over the element type T (float for the runtime,
// double for the finite-difference tests) and explicitly instantiated for both
// in its own .cc file. Integer operands (token ids, targets) are int32_t.
//
// Kernels trust their arguments: run_op (dispatch.cc) has already checked the
// operand counts, shapes, null pointers and id ranges. They never allocate,
// never throw, never abort. Output buffers are fully overwritten unless a
// comment says "accumulates".
//
// Shape letters used across the files:
//   N = rows (numel of all leading dims), K = inner dim, M = output columns,
//   C = channels (last dim), V = vocabulary size, B = batch, T = sequence,
//   NH = number of heads, hs = head size (C / NH).
#pragma once
#include <cstdint>

namespace tiercut {

// ---- matmul.cc --------------------------------------------------------------
// y[N,M] = a[N,K] @ b[K,M]          (trans_b: b is [M,K], y = a @ b^T)
template <typename T>
void matmul_forward(T* y, const T* a, const T* b, int64_t N, int64_t K, int64_t M, bool trans_b);
// da[N,K] = dy[N,M] @ b^T           (trans_b: da = dy @ b)
template <typename T>
void matmul_backward_da(T* da, const T* dy, const T* b, int64_t N, int64_t K, int64_t M, bool trans_b);
// db[K,M] = a^T @ dy                (trans_b: db[M,K] = dy^T @ a)
template <typename T>
void matmul_backward_db(T* db, const T* a, const T* dy, int64_t N, int64_t K, int64_t M, bool trans_b);

// ---- elementwise.cc ---------------------------------------------------------
// n = numel(a) = numel(y), nb = numel(b), n is a multiple of nb (trailing broadcast)
template <typename T> void add_forward(T* y, const T* a, const T* b, int64_t n, int64_t nb);
template <typename T> void mul_forward(T* y, const T* a, const T* b, int64_t n, int64_t nb);
// y[j] = sum over i = j (mod ny) of x[i]; n is a multiple of ny
template <typename T> void sum_to_shape_forward(T* y, const T* x, int64_t n, int64_t ny);
template <typename T> void gelu_forward(T* y, const T* x, int64_t n);
template <typename T> void gelu_backward(T* dx, const T* x, const T* dy, int64_t n);
template <typename T> void fill_forward(T* y, int64_t n, double value);

// ---- layernorm.cc -----------------------------------------------------------
template <typename T>
void layernorm_forward(T* y, T* mean, T* rstd, const T* x, const T* w, const T* b,
                       int64_t N, int64_t C, double eps);
// dx overwritten; dw, db overwritten with the sum over all N rows
template <typename T>
void layernorm_backward(T* dx, T* dw, T* db, const T* x, const T* w, const T* mean,
                        const T* rstd, const T* dy, int64_t N, int64_t C);

// ---- softmax.cc -------------------------------------------------------------
template <typename T> void softmax_forward(T* y, const T* x, int64_t N, int64_t C);
template <typename T> void softmax_backward(T* dx, const T* y, const T* dy, int64_t N, int64_t C);

// ---- attention.cc -----------------------------------------------------------
// qkv[B,T,3C] -> y[B,T,C], att[B,NH,T,T] (att is 0 above the diagonal)
template <typename T>
void causal_attention_forward(T* y, T* att, const T* qkv, int64_t B, int64_t Tn, int64_t C, int64_t NH);
// dqkv[B,T,3C] overwritten
template <typename T>
void causal_attention_backward(T* dqkv, const T* qkv, const T* att, const T* dy,
                               int64_t B, int64_t Tn, int64_t C, int64_t NH);

// ---- embedding.cc -----------------------------------------------------------
// every id must be in [0, V) (checked by run_op)
template <typename T>
void embedding_forward(T* y, const int32_t* ids, const T* table, int64_t N, int64_t C);
// dtable[V,C] = 0, then dtable[ids[n]] += dy[n]
template <typename T>
void embedding_backward(T* dtable, const int32_t* ids, const T* dy, int64_t N, int64_t V, int64_t C);

// ---- cross_entropy.cc -------------------------------------------------------
// loss[0] = -(1/N) sum_n log_softmax(logits[n])[targets[n]]; targets in [0, V)
template <typename T>
void cross_entropy_forward(T* loss, const T* logits, const int32_t* targets, int64_t N, int64_t V);
template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const int32_t* targets, const T* dloss,
                            int64_t N, int64_t V);

// ---- shape.cc ---------------------------------------------------------------
template <typename T> void reshape_forward(T* y, const T* x, int64_t n);
// x has rank r and shape x_shape; y.shape[i] = x_shape[perm[i]]
template <typename T>
void transpose_forward(T* y, const T* x, int32_t r, const int64_t* x_shape, const int64_t* perm);

// ---- adam.cc ----------------------------------------------------------------
// One step of torch 1.13 Adam (adamw = false) or AdamW (adamw = true), scalar.
// Reads p, g, m, v and writes p_out, m_out, v_out (may be the same buffers as
// p, m, v: the update is elementwise) and, when p_copy is non-null, a copy of
// the new p. step >= 1.
template <typename T>
void adam_update(T* p_out, T* m_out, T* v_out, T* p_copy,
                 const T* p, const T* g, const T* m, const T* v, int64_t n,
                 double lr, double beta1, double beta2, double eps, double weight_decay,
                 bool adamw, int64_t step);

// ---- added for ONNX import ---------------------------------------------------
constexpr int kMaxRankKernels = 8;  // = kMaxRank (dispatch.h)

// unary functions: iattr[0] of UNARY / UNARY_BACKWARD; the order of UNARY_FNS in compiler/ir/types.ts
enum UnaryFn : int32_t { UNARY_TANH = 0, UNARY_ERF, UNARY_SQRT, UNARY_RELU, UNARY_EXP, UNARY_LOG, UNARY_SIGMOID, UNARY_COUNT };

// ---- pointwise.cc -----------------------------------------------------------
template <typename T> void sub_forward(T* y, const T* a, const T* b, int64_t n, int64_t nb);
template <typename T> void div_forward(T* y, const T* a, const T* b, int64_t n, int64_t nb);
// y = x * scale + offset
template <typename T> void affine_forward(T* y, const T* x, int64_t n, double scale, double offset);
template <typename T> void pow_scalar_forward(T* y, const T* x, int64_t n, double exponent);
template <typename T> void unary_forward(T* y, const T* x, int64_t n, int32_t fn);
template <typename T> void unary_backward(T* dx, const T* x, const T* y, const T* dy, int64_t n, int32_t fn);
// y = cond != 0 ? a : b (all of one shape)
template <typename T> void where_forward(T* y, const T* cond, const T* a, const T* b, int64_t n);
template <typename T> void cast_forward(T* y, const int32_t* x, int64_t n);

// ---- broadcast.cc -----------------------------------------------------------
// big: the r dims of the large shape; small_strides: the small tensor's stride
// per big dim (0 where it is broadcast)
template <typename T>
void expand_forward(T* y, const T* x, int32_t r, const int64_t* big, const int64_t* small_strides);
// y (ny elements) = 0, then y[small offset] += x[i] over the big index space
template <typename T>
void unbroadcast_forward(T* y, int64_t ny, const T* x, int32_t r, const int64_t* big, const int64_t* small_strides);

// ---- slice.cc ---------------------------------------------------------------
template <typename T>
void slice_forward(T* y, const T* x, int64_t outer, int64_t xlen, int64_t ylen, int64_t inner, int64_t start);
template <typename T>
void slice_backward(T* dx, const T* dy, int64_t outer, int64_t xlen, int64_t ylen, int64_t inner, int64_t start);
template <typename T>
void concat_forward(T* y, const T* const* xs, const int64_t* lens, int32_t n, int64_t outer, int64_t ylen, int64_t inner);

// ---- bmm.cc -----------------------------------------------------------------
template <typename T>
void bmm_forward(T* y, const T* a, const T* b, int64_t batch, int64_t M, int64_t K, int64_t N, bool trans_a, bool trans_b);

// ---- log_softmax.cc ---------------------------------------------------------
template <typename T> void log_softmax_forward(T* y, const T* x, int64_t N, int64_t C);
template <typename T> void log_softmax_backward(T* dx, const T* y, const T* dy, int64_t N, int64_t C);

// ---- added for the model zoo (LLaMA, BERT) -----------------------------------
// ---- rmsnorm.cc -------------------------------------------------------------
template <typename T>
void rmsnorm_forward(T* y, T* rstd, const T* x, const T* w, int64_t N, int64_t C, double eps);
// dx overwritten; dw overwritten with the sum over all N rows
template <typename T>
void rmsnorm_backward(T* dx, T* dw, const T* x, const T* w, const T* rstd, const T* dy, int64_t N, int64_t C);

// ---- activation.cc ----------------------------------------------------------
template <typename T> void silu_forward(T* y, const T* x, int64_t n);
template <typename T> void silu_backward(T* dx, const T* x, const T* dy, int64_t n);
template <typename T> void gelu_erf_forward(T* y, const T* x, int64_t n);
template <typename T> void gelu_erf_backward(T* dx, const T* x, const T* dy, int64_t n);

// ---- rope.cc ----------------------------------------------------------------
// x, y [B,T,NH*hs], hs even; inverse rotates by minus the angle
template <typename T>
void rope_forward(T* y, const T* x, int64_t B, int64_t Tn, int64_t NH, int64_t hs, double theta, bool inverse);

// ---- attention.cc (grouped-query) ---------------------------------------------
// q[B,T,NH*hs], k, v[B,T,KVH*hs] -> y[B,T,NH*hs], lse[B,NH,T]; NH % KVH == 0
template <typename T>
void attention_forward(T* y, T* lse, const T* q, const T* k, const T* v, int64_t B, int64_t Tn,
                       int64_t NH, int64_t KVH, int64_t hs, bool causal);
// dq, dk, dv overwritten
template <typename T>
void attention_backward(T* dq, T* dk, T* dv, const T* q, const T* k, const T* v, const T* y, const T* lse,
                        const T* dy, int64_t B, int64_t Tn, int64_t NH, int64_t KVH, int64_t hs, bool causal);

// ---- added for CNNs (ONNX import) ---------------------------------------------
// Shape letters: N = batch, C = input channels, H, W = input height and width,
// M = output channels (C for the pools), OH, OW = output height and width,
// kH, kW = window, sH, sW = strides, pT, pL, pB, pR = padding (top, left,
// bottom, right), dH, dW = dilations, G = conv groups. Tensors are NCHW,
// row-major; conv weights are [M, C/G, kH, kW].
struct Window2d {
  int64_t N = 0, C = 0, H = 0, W = 0;
  int64_t M = 0, OH = 0, OW = 0;
  int64_t kH = 1, kW = 1, sH = 1, sW = 1, pT = 0, pL = 0, pB = 0, pR = 0, dH = 1, dW = 1;
  int64_t G = 1;
};

// ---- conv.cc ----------------------------------------------------------------
// y[N,M,OH,OW] = conv(x, w) + b[M]   (zero padding)
template <typename T> void conv2d_forward(T* y, const T* x, const T* w, const T* b, const Window2d& s);
// dx[N,C,H,W] overwritten
template <typename T> void conv2d_backward_input(T* dx, const T* dy, const T* w, const Window2d& s);
// dw[M,C/G,kH,kW] and db[M] overwritten (sums over N, OH, OW)
template <typename T> void conv2d_backward_weight(T* dw, T* db, const T* x, const T* dy, const Window2d& s);

// ---- batchnorm.cc (training mode) ------------------------------------------------
// x, y [N,C,S] (S = numel of the dims after C); mean, var [C] over N and S (var biased)
template <typename T>
void batchnorm_forward(T* y, T* mean, T* var, const T* x, const T* w, const T* b, int64_t N, int64_t C, int64_t S, double eps);
// dx overwritten (may alias dy); dw, db overwritten
template <typename T>
void batchnorm_backward(T* dx, T* dw, T* db, const T* x, const T* w, const T* mean, const T* var, const T* dy,
                        int64_t N, int64_t C, int64_t S, double eps);
// PyTorch's running-statistics update; out_* may alias run_* (in place)
template <typename T>
void batchnorm_running(T* out_mean, T* out_var, const T* run_mean, const T* run_var, const T* mean, const T* var,
                       int64_t C, double momentum, int64_t count);

// ---- pool.cc ----------------------------------------------------------------------
// padding is ignored by max and, unless count_include_pad, by the average's divisor
template <typename T> void maxpool2d_forward(T* y, const T* x, const Window2d& s);
// dx overwritten; the gradient goes to the first maximum of each window (as PyTorch)
template <typename T> void maxpool2d_backward(T* dx, const T* x, const T* dy, const Window2d& s);
template <typename T> void avgpool2d_forward(T* y, const T* x, const Window2d& s, bool count_include_pad);
template <typename T> void avgpool2d_backward(T* dx, const T* dy, const Window2d& s, bool count_include_pad);

}  // namespace tiercut
