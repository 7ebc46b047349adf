// dispatch.h — the one entry point from the executor (and the test export) into
// the CPU kernels. Every op kind of the IR (compiler/ir/ops.ts) has a number
// here; the numbers are part of the plan contract (docs/PLAN-FORMAT.md) and
// never change meaning.
//
// Kernels are written once as templates over the element type T and
// instantiated for float (what the runtime executes) and double (what the
// finite-difference tests execute). Integer operands (token ids, targets) are
// always int32. Half-precision storage (fp16, bf16) never reaches a kernel: the
// executor widens operands to float before the call and rounds results after.
#pragma once
#include <cstdint>
#include <string>

namespace tiercut {

enum OpKind : int32_t {
  OP_MATMUL = 0,                 // in: a[...,K], b[K,M] (transB: b[M,K])      out: y[...,M]
  OP_ADD = 1,                    // in: a[S], b[suffix of S]                    out: y[S]
  OP_MUL = 2,                    // in: a[S], b[suffix of S]                    out: y[S]
  OP_GELU = 3,                   // in: x                                       out: y
  OP_LAYERNORM = 4,              // in: x[...,C], w[C], b[C]                    out: y[...,C], mean[...], rstd[...]
  OP_SOFTMAX = 5,                // in: x[...,C]                                out: y[...,C]
  OP_CAUSAL_ATTENTION = 6,       // in: qkv[B,T,3C]                             out: y[B,T,C], att[B,NH,T,T]
  OP_EMBEDDING = 7,              // in: ids[...] i32, table[V,C]                out: y[...,C]
  OP_CROSS_ENTROPY = 8,          // in: logits[...,V], targets[...] i32         out: loss[] (mean)
  OP_RESHAPE = 9,                // in: x                                       out: y (same elements)
  OP_TRANSPOSE = 10,             // in: x (rank r)                              out: y = permute(x, perm)
  OP_MATMUL_GRAD_A = 11,         // in: dy[...,M], b                            out: da[...,K]
  OP_MATMUL_GRAD_B = 12,         // in: a[...,K], dy[...,M]                     out: db (shape of b)
  OP_SUM_TO_SHAPE = 13,          // in: x[S]                                    out: y[suffix of S] (sum over leading dims)
  OP_GELU_BACKWARD = 14,         // in: x, dy                                   out: dx
  OP_LAYERNORM_BACKWARD = 15,    // in: x, w, mean, rstd, dy                    out: dx, dw, db
  OP_SOFTMAX_BACKWARD = 16,      // in: y, dy                                   out: dx
  OP_CAUSAL_ATTENTION_BACKWARD = 17, // in: qkv, att, dy                        out: dqkv
  OP_EMBEDDING_BACKWARD = 18,    // in: ids, dy[...,C]                          out: dtable[V,C]
  OP_CROSS_ENTROPY_BACKWARD = 19,// in: logits, targets, dloss[]                out: dlogits
  OP_FILL = 20,                  // in: (none)                                  out: y filled with fattr[0]
  OP_ADAM = 21,                  // in: p, g, m, v   out: p, m, v [, p16]  (in place; see adam below)
  // added for ONNX import
  OP_SUB = 22,                   // in: a[S], b[suffix of S]                    out: y[S]
  OP_DIV = 23,                   // in: a[S], b[suffix of S]                    out: y[S]
  OP_AFFINE = 24,                // in: x                                       out: y = x * fattr[0] + fattr[1]
  OP_POW_SCALAR = 25,            // in: x                                       out: y = x ** fattr[0]
  OP_UNARY = 26,                 // in: x                                       out: y = f(x), f = iattr[0] (UnaryFn)
  OP_UNARY_BACKWARD = 27,        // in: x, y, dy                                out: dx
  OP_WHERE = 28,                 // in: cond, a, b (one shape)                  out: y = cond != 0 ? a : b
  OP_EXPAND = 29,                // in: x (broadcasts to y)                     out: y (numpy broadcast)
  OP_UNBROADCAST = 30,           // in: x (y broadcasts to x)                   out: y = sum of x over the broadcast
  OP_SLICE = 31,                 // in: x                                       out: y = x[.., iattr[1]:iattr[2], ..] on axis iattr[0]
  OP_SLICE_BACKWARD = 32,        // in: dy                                      out: dx (zeros, dy at offset iattr[1] on axis iattr[0])
  OP_CONCAT = 33,                // in: x0..x(n-1) (1..8)                       out: y = concat on axis iattr[0]
  OP_BMM = 34,                   // in: a[...,M,K], b[...,K,N]                  out: y[...,M,N] (iattr: transA, transB)
  OP_LOG_SOFTMAX = 35,           // in: x[...,C]                                out: y[...,C]
  OP_LOG_SOFTMAX_BACKWARD = 36,  // in: y, dy                                   out: dx
  OP_CAST = 37,                  // in: x i32                                   out: y float
  // added for the model zoo (LLaMA, BERT)
  OP_RMSNORM = 38,               // in: x[...,C], w[C]                          out: y[...,C], rstd[...]
  OP_RMSNORM_BACKWARD = 39,      // in: x, w, rstd, dy                          out: dx, dw
  OP_SILU = 40,                  // in: x                                       out: y = x * sigmoid(x)
  OP_SILU_BACKWARD = 41,         // in: x, dy                                   out: dx
  OP_ROPE = 42,                  // in: x[B,T,NH*hs]                            out: y (rotary position embedding)
  OP_ATTENTION = 43,             // in: q[B,T,NH*hs], k, v[B,T,KVH*hs]          out: y[B,T,NH*hs], lse[B,NH,T]
  OP_ATTENTION_BACKWARD = 44,    // in: q, k, v, y, lse, dy                     out: dq, dk, dv
  // added for CNNs (ONNX import); NCHW, shape letters in kernels.h
  OP_CONV2D = 45,                // in: x[N,C,H,W], w[M,C/G,kH,kW], b[M]        out: y[N,M,OH,OW]
  OP_CONV2D_GRAD_INPUT = 46,     // in: dy[N,M,OH,OW], w                        out: dx[N,C,H,W]
  OP_CONV2D_GRAD_WEIGHT = 47,    // in: x, dy                                   out: dw[M,C/G,kH,kW], db[M]
  OP_BATCHNORM = 48,             // in: x[N,C,...], w[C], b[C]                  out: y, mean[C], var[C] (batch statistics)
  OP_BATCHNORM_BACKWARD = 49,    // in: x, w, mean, var, dy                     out: dx, dw, db
  OP_BATCHNORM_RUNNING = 50,     // in: run_mean[C], run_var[C], mean, var      out: run_mean, run_var (in place)
  OP_MAXPOOL2D = 51,             // in: x[N,C,H,W]                              out: y[N,C,OH,OW]
  OP_MAXPOOL2D_BACKWARD = 52,    // in: x, dy                                   out: dx
  OP_AVGPOOL2D = 53,             // in: x[N,C,H,W]                              out: y[N,C,OH,OW]
  OP_AVGPOOL2D_BACKWARD = 54,    // in: dy[N,C,OH,OW]                           out: dx[N,C,H,W]
  // added for sequence parallelism: collectives, run by the executor with its
  // communicator (native/exec/collective.h), never by run_op
  OP_RING_ATTENTION = 55,        // in: qkv[B,R,3C] (this rank's R rows)        out: y[B,R,C], lse[B,NH,R]
  OP_RING_ATTENTION_BACKWARD = 56, // in: qkv, y, lse, dy                       out: dqkv
  OP_ALL_REDUCE = 57,            // in: x                                       out: y = mean of x over the ranks
  OP_KIND_COUNT = 58
};

enum DType : int32_t { DT_F32 = 0, DT_F16 = 1, DT_BF16 = 2, DT_I32 = 3, DT_I64 = 4, DT_F64 = 5 };

constexpr int kMaxRank = 8;
constexpr int kMaxOperands = 8;

struct TensorView {
  void* data = nullptr;      // T* for float operands, int32_t* for ids/targets
  int32_t rank = 0;          // 0 = scalar
  int64_t shape[kMaxRank] = {0};
  int64_t numel() const { int64_t n = 1; for (int i = 0; i < rank; i++) n *= shape[i]; return n; }
};

// Attributes by op kind (unused slots are zero):
//   MATMUL, MATMUL_GRAD_A, MATMUL_GRAD_B: iattr[0] = transB (0|1)
//   LAYERNORM, LAYERNORM_BACKWARD:        fattr[0] = eps (forward only)
//   CAUSAL_ATTENTION(_BACKWARD):          iattr[0] = number of heads NH
//   TRANSPOSE:                            iattr[0..rank-1] = perm (y.shape[i] = x.shape[perm[i]])
//   FILL:                                 fattr[0] = value
//   GELU, GELU_BACKWARD:                  iattr[0] = 1: exact erf form, 0: tanh approximation
//   RMSNORM:                              fattr[0] = eps
//   ROPE:                                 iattr[0] = heads NH, iattr[1] = inverse (0|1), fattr[0] = theta
//   ATTENTION(_BACKWARD):                 iattr[0] = heads NH, iattr[1] = kv heads KVH (NH % KVH == 0),
//                                         iattr[2] = causal (0|1)
//   CONV2D, CONV2D_GRAD_INPUT, CONV2D_GRAD_WEIGHT:
//                                         iattr = [sH, sW, pT, pL, pB, pR, dH, dW]; the groups G are
//                                         C / w.shape[1]; OH = (H + pT + pB - dH*(kH-1) - 1) / sH + 1
//   BATCHNORM, BATCHNORM_BACKWARD:        fattr[0] = eps
//   BATCHNORM_RUNNING:                    iattr[0] = n (values per channel, >= 2), fattr[0] = momentum
//                                         (PyTorch's: the weight of the batch statistic)
//   MAXPOOL2D(_BACKWARD), AVGPOOL2D(_BACKWARD):
//                                         iattr = [kH, kW, sH, sW, pT, pL, pB, pR] (pads < window);
//                                         OH is the floor or the ceil-mode size (PyTorch's rule)
//   AVGPOOL2D(_BACKWARD):                 fattr[0] = count_include_pad (0|1)
//   RING_ATTENTION(_BACKWARD):            iattr[0] = heads NH, iattr[1] = ranks P (the sequence is R * P)
//   ALL_REDUCE:                           iattr[0] = ranks P
//   ADAM: fattr[0] = lr, [1] = beta1, [2] = beta2, [3] = eps, [4] = weightDecay
//         iattr[0] = adamw (0: L2 added to the gradient, torch.optim.Adam;
//                           1: decoupled, torch.optim.AdamW), iattr[1] = step (>= 1)
//         inputs p, g, m, v; outputs p, m, v (the same buffers as the inputs:
//         updated in place) and, when n_out == 4, out[3] receives a copy of the
//         new p (the executor rounds it to fp16/bf16).
struct OpCall {
  int32_t kind = 0;
  int32_t n_in = 0, n_out = 0;
  TensorView in[kMaxOperands];
  TensorView out[kMaxOperands];
  int64_t iattr[8] = {0};
  double fattr[8] = {0};
};

// Runs one op. Returns true on success; on failure returns false and writes a
// one-line message to *err (bad shapes, id out of range, ...). Never throws,
// never aborts. T is float or double.
template <typename T> bool run_op(const OpCall& call, std::string* err);

}  // namespace tiercut
