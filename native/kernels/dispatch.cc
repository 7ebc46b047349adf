// dispatch.cc — run_op<T>: checks one OpCall against the contract of its kind
// (dispatch.h), then calls the kernel (kernels.h).
//
// Takes: an OpCall built by the executor (or the test export) from the plan.
// Gives: true and the outputs written, or false and a one-line message in *err
//        that names the op kind and the operand ("matmul: b has shape [3,5],
//        expected [4,M] to match a[...,4]"); nothing is written on failure.
// Keeps: kernels only ever see operands whose counts, ranks, shapes, data
//        pointers and integer ids have been checked, so they need no checks.
// Cost: O(rank) per operand, plus O(N) for the id / target range scans.
//
// Checks, in order: the kind is known; n_in / n_out are what the kind takes;
// every operand has rank 0..8, no negative dim, and non-null data when it has
// elements; then the kind's own shape rules. Operand names in messages are the
// ones in dispatch.h's table (a, b, y, dy, ...).
#include "dispatch.h"

#include <string>

#include "kernels.h"

namespace tiercut {

namespace {

struct KindInfo {
  const char* name;
  int n_in;
  int n_out;                        // ADAM also accepts n_out + 1 (the p copy)
  const char* in_names[kMaxOperands];
  const char* out_names[kMaxOperands];
};

// indexed by OpKind; the order must follow the enum
const KindInfo kKinds[OP_KIND_COUNT] = {
    {"matmul", 2, 1, {"a", "b"}, {"y"}},
    {"add", 2, 1, {"a", "b"}, {"y"}},
    {"mul", 2, 1, {"a", "b"}, {"y"}},
    {"gelu", 1, 1, {"x"}, {"y"}},
    {"layernorm", 3, 3, {"x", "w", "b"}, {"y", "mean", "rstd"}},
    {"softmax", 1, 1, {"x"}, {"y"}},
    {"causal_attention", 1, 2, {"qkv"}, {"y", "att"}},
    {"embedding", 2, 1, {"ids", "table"}, {"y"}},
    {"cross_entropy", 2, 1, {"logits", "targets"}, {"loss"}},
    {"reshape", 1, 1, {"x"}, {"y"}},
    {"transpose", 1, 1, {"x"}, {"y"}},
    {"matmul_grad_a", 2, 1, {"dy", "b"}, {"da"}},
    {"matmul_grad_b", 2, 1, {"a", "dy"}, {"db"}},
    {"sum_to_shape", 1, 1, {"x"}, {"y"}},
    {"gelu_backward", 2, 1, {"x", "dy"}, {"dx"}},
    {"layernorm_backward", 5, 3, {"x", "w", "mean", "rstd", "dy"}, {"dx", "dw", "db"}},
    {"softmax_backward", 2, 1, {"y", "dy"}, {"dx"}},
    {"causal_attention_backward", 3, 1, {"qkv", "att", "dy"}, {"dqkv"}},
    {"embedding_backward", 2, 1, {"ids", "dy"}, {"dtable"}},
    {"cross_entropy_backward", 3, 1, {"logits", "targets", "dloss"}, {"dlogits"}},
    {"fill", 0, 1, {}, {"y"}},
    {"adam", 4, 3, {"p", "g", "m", "v"}, {"p", "m", "v", "p_copy"}},
    {"sub", 2, 1, {"a", "b"}, {"y"}},
    {"div", 2, 1, {"a", "b"}, {"y"}},
    {"affine", 1, 1, {"x"}, {"y"}},
    {"pow_scalar", 1, 1, {"x"}, {"y"}},
    {"unary", 1, 1, {"x"}, {"y"}},
    {"unary_backward", 3, 1, {"x", "y", "dy"}, {"dx"}},
    {"where", 3, 1, {"cond", "a", "b"}, {"y"}},
    {"expand", 1, 1, {"x"}, {"y"}},
    {"unbroadcast", 1, 1, {"x"}, {"y"}},
    {"slice", 1, 1, {"x"}, {"y"}},
    {"slice_backward", 1, 1, {"dy"}, {"dx"}},
    {"concat", -1, 1, {"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7"}, {"y"}},
    {"bmm", 2, 1, {"a", "b"}, {"y"}},
    {"log_softmax", 1, 1, {"x"}, {"y"}},
    {"log_softmax_backward", 2, 1, {"y", "dy"}, {"dx"}},
    {"cast", 1, 1, {"x"}, {"y"}},
    {"rmsnorm", 2, 2, {"x", "w"}, {"y", "rstd"}},
    {"rmsnorm_backward", 4, 2, {"x", "w", "rstd", "dy"}, {"dx", "dw"}},
    {"silu", 1, 1, {"x"}, {"y"}},
    {"silu_backward", 2, 1, {"x", "dy"}, {"dx"}},
    {"rope", 1, 1, {"x"}, {"y"}},
    {"attention", 3, 2, {"q", "k", "v"}, {"y", "lse"}},
    {"attention_backward", 6, 3, {"q", "k", "v", "y", "lse", "dy"}, {"dq", "dk", "dv"}},
    {"conv2d", 3, 1, {"x", "w", "b"}, {"y"}},
    {"conv2d_grad_input", 2, 1, {"dy", "w"}, {"dx"}},
    {"conv2d_grad_weight", 2, 2, {"x", "dy"}, {"dw", "db"}},
    {"batchnorm", 3, 3, {"x", "w", "b"}, {"y", "mean", "var"}},
    {"batchnorm_backward", 5, 3, {"x", "w", "mean", "var", "dy"}, {"dx", "dw", "db"}},
    {"batchnorm_running", 4, 2, {"run_mean", "run_var", "mean", "var"}, {"run_mean", "run_var"}},
    {"maxpool2d", 1, 1, {"x"}, {"y"}},
    {"maxpool2d_backward", 2, 1, {"x", "dy"}, {"dx"}},
    {"avgpool2d", 1, 1, {"x"}, {"y"}},
    {"avgpool2d_backward", 1, 1, {"dy"}, {"dx"}},
    {"ring_attention", 1, 2, {"qkv"}, {"y", "lse"}},
    {"ring_attention_backward", 4, 1, {"qkv", "y", "lse", "dy"}, {"dqkv"}},
    {"all_reduce", 1, 1, {"x"}, {"y"}},
};

bool fail(std::string* err, const std::string& msg) {
  if (err) *err = msg;
  return false;
}

std::string dims_str(const int64_t* d, int r) {
  std::string s = "[";
  for (int i = 0; i < r; i++) {
    if (i) s += ",";
    s += std::to_string(d[i]);
  }
  return s + "]";
}
std::string shape_str(const TensorView& t) { return dims_str(t.shape, t.rank); }

bool same_shape(const TensorView& a, const TensorView& b) {
  if (a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; i++) if (a.shape[i] != b.shape[i]) return false;
  return true;
}

// t's shape without its last dim (rank >= 1)
TensorView lead_of(const TensorView& t) {
  TensorView l;
  l.rank = t.rank - 1;
  for (int i = 0; i < l.rank; i++) l.shape[i] = t.shape[i];
  return l;
}

// t's leading dims followed by `last` (t.rank >= 1)
TensorView with_last(const TensorView& t, int64_t last) {
  TensorView l = t;
  l.shape[t.rank - 1] = last;
  return l;
}

// lead's shape followed by `last` (lead.rank < kMaxRank)
TensorView append_dim(const TensorView& lead, int64_t last) {
  TensorView l = lead;
  l.shape[l.rank++] = last;
  return l;
}

// small's shape, after dropping its leading 1s, is a suffix of big's shape
// (numpy trailing broadcast of small over big, without stretching inner dims:
// [3], [1,3] and [2,3] all pair element i of a [2,3] with element i mod numel)
bool is_suffix(const TensorView& small, const TensorView& big) {
  int lead = 0;
  while (lead < small.rank && small.shape[lead] == 1) lead++;
  int r = small.rank - lead;
  if (r > big.rank) return false;
  for (int i = 0; i < r; i++)
    if (small.shape[lead + i] != big.shape[big.rank - r + i]) return false;
  return true;
}

int64_t last_dim(const TensorView& t) { return t.shape[t.rank - 1]; }

// "op: name has shape [..], expected [..]<why>"
bool want_shape(std::string* err, const char* op, const char* name, const TensorView& t,
                const TensorView& expected, const std::string& why = "") {
  if (same_shape(t, expected)) return true;
  return fail(err, std::string(op) + ": " + name + " has shape " + shape_str(t) + ", expected " +
                       shape_str(expected) + why);
}

bool want_min_rank(std::string* err, const char* op, const char* name, const TensorView& t, int r) {
  if (t.rank >= r) return true;
  return fail(err, std::string(op) + ": " + name + " has shape " + shape_str(t) + ", expected rank >= " +
                       std::to_string(r));
}

// every id in [0, limit); "op: <what> 70000 at position 3 is outside [0, 50257)"
bool want_ids_in_range(std::string* err, const char* op, const char* what, const TensorView& ids,
                       int64_t limit) {
  const int32_t* p = static_cast<const int32_t*>(ids.data);
  const int64_t n = ids.numel();
  for (int64_t i = 0; i < n; i++) {
    if (p[i] < 0 || p[i] >= limit)
      return fail(err, std::string(op) + ": " + what + " " + std::to_string(p[i]) + " at position " +
                           std::to_string(i) + " is outside [0, " + std::to_string(limit) + ")");
  }
  return true;
}

// an output that a kernel writes while still reading an input must not be that input
bool want_distinct(std::string* err, const char* op, const char* out_name, const TensorView& out,
                   const char* in_name, const TensorView& in) {
  if (out.data == nullptr || out.data != in.data || out.numel() <= 1) return true;
  return fail(err, std::string(op) + ": " + out_name + " is the same buffer as " + in_name +
                       " (this op cannot run in place)");
}

template <typename T> T* data(const TensorView& t) { return static_cast<T*>(t.data); }
const int32_t* ids_data(const TensorView& t) { return static_cast<const int32_t*>(t.data); }

// Counts, ranks, dims, null pointers: the same for every kind.
bool check_operands(const OpCall& c, const KindInfo& k, std::string* err) {
  const bool adam_copy = c.kind == OP_ADAM && c.n_out == k.n_out + 1;
  if (k.n_in < 0 ? (c.n_in < 1 || c.n_in > kMaxOperands) : c.n_in != k.n_in)  // n_in -1: 1..8 (concat)
    return fail(err, std::string(k.name) + ": expected " + (k.n_in < 0 ? std::string("1..8") : std::to_string(k.n_in)) + " input(s), got " +
                         std::to_string(c.n_in));
  if (c.n_out != k.n_out && !adam_copy)
    return fail(err, std::string(k.name) + ": expected " + std::to_string(k.n_out) +
                         (c.kind == OP_ADAM ? " or 4" : "") + " output(s), got " + std::to_string(c.n_out));
  for (int side = 0; side < 2; side++) {
    const int n = side == 0 ? c.n_in : c.n_out;
    const TensorView* views = side == 0 ? c.in : c.out;
    for (int i = 0; i < n; i++) {
      const TensorView& t = views[i];
      const std::string what = std::string(k.name) + ": " + (side == 0 ? "input " : "output ") +
                               (side == 0 ? k.in_names[i] : k.out_names[i]);
      if (t.rank < 0 || t.rank > kMaxRank)
        return fail(err, what + " has rank " + std::to_string(t.rank) + ", expected 0.." +
                             std::to_string(kMaxRank));
      for (int d = 0; d < t.rank; d++)
        if (t.shape[d] < 0) return fail(err, what + " has a negative dim: " + shape_str(t));
      if (t.data == nullptr && t.numel() > 0)
        return fail(err, what + " has no data for its " + std::to_string(t.numel()) + " elements");
    }
  }
  return true;
}

// numpy broadcast of small (aligned right) into big: fills small_strides (0 on
// broadcast dims); false when small does not broadcast to big
bool broadcast_strides(const TensorView& small, const TensorView& big, int64_t* small_strides) {
  if (small.rank > big.rank) return false;
  const int off = big.rank - small.rank;
  int64_t stride = 1;
  for (int d = big.rank - 1; d >= 0; d--) {
    const int sd = d - off;
    if (sd < 0) { small_strides[d] = 0; continue; }
    if (small.shape[sd] == big.shape[d]) small_strides[d] = stride;
    else if (small.shape[sd] == 1) small_strides[d] = 0;
    else return false;
    stride *= small.shape[sd];
  }
  return true;
}

// [outer, len, inner] around axis
void around_axis(const TensorView& t, int axis, int64_t* outer, int64_t* inner) {
  *outer = 1; *inner = 1;
  for (int d = 0; d < axis; d++) *outer *= t.shape[d];
  for (int d = axis + 1; d < t.rank; d++) *inner *= t.shape[d];
}

template <typename T>
bool run_onnx_kinds(const OpCall& c, const KindInfo& k, std::string* err);
template <typename T>
bool run_zoo_kinds(const OpCall& c, const KindInfo& k, std::string* err);
template <typename T>
bool run_cnn_kinds(const OpCall& c, const KindInfo& k, std::string* err);

template <typename T>
bool run_checked(const OpCall& c, const KindInfo& k, std::string* err) {
  const char* op = k.name;
  const TensorView* in = c.in;
  const TensorView* out = c.out;
  switch (c.kind) {
    case OP_MATMUL:
    case OP_MATMUL_GRAD_A:
    case OP_MATMUL_GRAD_B: {
      const int64_t trans_b = c.iattr[0];
      if (trans_b != 0 && trans_b != 1)
        return fail(err, std::string(op) + ": transB (iattr[0]) is " + std::to_string(trans_b) +
                             ", expected 0 or 1");
      if (c.kind == OP_MATMUL) {
        const TensorView &a = in[0], &b = in[1], &y = out[0];
        if (!want_min_rank(err, op, "a", a, 1)) return false;
        const int64_t K = last_dim(a);
        const std::string ks = std::to_string(K);
        const std::string why = " to match a[...," + ks + "]";
        if (b.rank != 2 || b.shape[trans_b ? 1 : 0] != K)
          return fail(err, std::string(op) + ": b has shape " + shape_str(b) + ", expected " +
                               (trans_b ? "[M," + ks + "]" : "[" + ks + ",M]") + why);
        const int64_t M = b.shape[trans_b ? 0 : 1];
        if (!want_shape(err, op, "y", y, with_last(a, M))) return false;
        if (!want_distinct(err, op, "y", y, "a", a) || !want_distinct(err, op, "y", y, "b", b)) return false;
        matmul_forward<T>(data<T>(y), data<T>(a), data<T>(b), lead_of(a).numel(), K, M, trans_b);
      } else if (c.kind == OP_MATMUL_GRAD_A) {
        const TensorView &dy = in[0], &b = in[1], &da = out[0];
        if (!want_min_rank(err, op, "dy", dy, 1)) return false;
        const int64_t M = last_dim(dy);
        const std::string ms = std::to_string(M);
        const std::string why = " to match dy[...," + ms + "]";
        if (b.rank != 2 || b.shape[trans_b ? 0 : 1] != M)
          return fail(err, std::string(op) + ": b has shape " + shape_str(b) + ", expected " +
                               (trans_b ? "[" + ms + ",K]" : "[K," + ms + "]") + why);
        const int64_t K = b.shape[trans_b ? 1 : 0];
        if (!want_shape(err, op, "da", da, with_last(dy, K))) return false;
        if (!want_distinct(err, op, "da", da, "dy", dy) || !want_distinct(err, op, "da", da, "b", b))
          return false;
        matmul_backward_da<T>(data<T>(da), data<T>(dy), data<T>(b), lead_of(dy).numel(), K, M, trans_b);
      } else {
        const TensorView &a = in[0], &dy = in[1], &db = out[0];
        if (!want_min_rank(err, op, "a", a, 1) || !want_min_rank(err, op, "dy", dy, 1)) return false;
        const int64_t K = last_dim(a);
        const int64_t M = last_dim(dy);
        if (!want_shape(err, op, "dy", dy, with_last(a, M), " to match a's leading dims")) return false;
        TensorView bshape;
        bshape.rank = 2;
        bshape.shape[0] = trans_b ? M : K;
        bshape.shape[1] = trans_b ? K : M;
        if (!want_shape(err, op, "db", db, bshape)) return false;
        if (!want_distinct(err, op, "db", db, "a", a) || !want_distinct(err, op, "db", db, "dy", dy))
          return false;
        matmul_backward_db<T>(data<T>(db), data<T>(a), data<T>(dy), lead_of(a).numel(), K, M, trans_b);
      }
      return true;
    }
    case OP_ADD:
    case OP_MUL: {
      const TensorView &a = in[0], &b = in[1], &y = out[0];
      if (!is_suffix(b, a))
        return fail(err, std::string(op) + ": b has shape " + shape_str(b) + ", expected a suffix of a's shape " +
                             shape_str(a));
      if (!want_shape(err, op, "y", y, a)) return false;
      if (c.kind == OP_ADD) add_forward<T>(data<T>(y), data<T>(a), data<T>(b), a.numel(), b.numel());
      else mul_forward<T>(data<T>(y), data<T>(a), data<T>(b), a.numel(), b.numel());
      return true;
    }
    case OP_SUM_TO_SHAPE: {
      const TensorView &x = in[0], &y = out[0];
      if (!is_suffix(y, x))
        return fail(err, std::string(op) + ": y has shape " + shape_str(y) + ", expected a suffix of x's shape " +
                             shape_str(x));
      if (!want_distinct(err, op, "y", y, "x", x)) return false;
      sum_to_shape_forward<T>(data<T>(y), data<T>(x), x.numel(), y.numel());
      return true;
    }
    case OP_GELU: {
      if (!want_shape(err, op, "y", out[0], in[0], " (the shape of x)")) return false;
      if (c.iattr[0] != 0 && c.iattr[0] != 1)
        return fail(err, std::string(op) + ": erf (iattr[0]) is " + std::to_string(c.iattr[0]) + ", expected 0 or 1");
      if (c.iattr[0] == 1) gelu_erf_forward<T>(data<T>(out[0]), data<T>(in[0]), in[0].numel());
      else gelu_forward<T>(data<T>(out[0]), data<T>(in[0]), in[0].numel());
      return true;
    }
    case OP_GELU_BACKWARD: {
      if (!want_shape(err, op, "dy", in[1], in[0], " (the shape of x)")) return false;
      if (!want_shape(err, op, "dx", out[0], in[0], " (the shape of x)")) return false;
      if (c.iattr[0] != 0 && c.iattr[0] != 1)
        return fail(err, std::string(op) + ": erf (iattr[0]) is " + std::to_string(c.iattr[0]) + ", expected 0 or 1");
      if (c.iattr[0] == 1) gelu_erf_backward<T>(data<T>(out[0]), data<T>(in[0]), data<T>(in[1]), in[0].numel());
      else gelu_backward<T>(data<T>(out[0]), data<T>(in[0]), data<T>(in[1]), in[0].numel());
      return true;
    }
    case OP_LAYERNORM:
    case OP_LAYERNORM_BACKWARD: {
      const TensorView &x = in[0], &w = in[1];
      if (!want_min_rank(err, op, "x", x, 1)) return false;
      const int64_t C = last_dim(x);
      const std::string why = " to match x[...," + std::to_string(C) + "]";
      TensorView cshape;
      cshape.rank = 1;
      cshape.shape[0] = C;
      const TensorView lead = lead_of(x);
      const int64_t N = lead.numel();
      if (!want_shape(err, op, "w", w, cshape, why)) return false;
      if (c.kind == OP_LAYERNORM) {
        const TensorView &b = in[2], &y = out[0], &mean = out[1], &rstd = out[2];
        if (!want_shape(err, op, "b", b, cshape, why)) return false;
        if (!want_shape(err, op, "y", y, x)) return false;
        if (!want_shape(err, op, "mean", mean, lead, " (x's leading dims)")) return false;
        if (!want_shape(err, op, "rstd", rstd, lead, " (x's leading dims)")) return false;
        layernorm_forward<T>(data<T>(y), data<T>(mean), data<T>(rstd), data<T>(x), data<T>(w), data<T>(b), N, C,
                             c.fattr[0]);
      } else {
        const TensorView &mean = in[2], &rstd = in[3], &dy = in[4];
        const TensorView &dx = out[0], &dw = out[1], &db = out[2];
        if (!want_shape(err, op, "mean", mean, lead, " (x's leading dims)")) return false;
        if (!want_shape(err, op, "rstd", rstd, lead, " (x's leading dims)")) return false;
        if (!want_shape(err, op, "dy", dy, x, " (the shape of x)")) return false;
        if (!want_shape(err, op, "dx", dx, x, " (the shape of x)")) return false;
        if (!want_shape(err, op, "dw", dw, cshape, why)) return false;
        if (!want_shape(err, op, "db", db, cshape, why)) return false;
        layernorm_backward<T>(data<T>(dx), data<T>(dw), data<T>(db), data<T>(x), data<T>(w), data<T>(mean),
                              data<T>(rstd), data<T>(dy), N, C);
      }
      return true;
    }
    case OP_SOFTMAX: {
      if (!want_min_rank(err, op, "x", in[0], 1)) return false;
      if (!want_shape(err, op, "y", out[0], in[0], " (the shape of x)")) return false;
      softmax_forward<T>(data<T>(out[0]), data<T>(in[0]), lead_of(in[0]).numel(), last_dim(in[0]));
      return true;
    }
    case OP_SOFTMAX_BACKWARD: {
      if (!want_min_rank(err, op, "y", in[0], 1)) return false;
      if (!want_shape(err, op, "dy", in[1], in[0], " (the shape of y)")) return false;
      if (!want_shape(err, op, "dx", out[0], in[0], " (the shape of y)")) return false;
      softmax_backward<T>(data<T>(out[0]), data<T>(in[0]), data<T>(in[1]), lead_of(in[0]).numel(),
                          last_dim(in[0]));
      return true;
    }
    case OP_CAUSAL_ATTENTION:
    case OP_CAUSAL_ATTENTION_BACKWARD: {
      const TensorView& qkv = in[0];
      if (qkv.rank != 3 || qkv.shape[2] % 3 != 0 || qkv.shape[2] == 0)
        return fail(err, std::string(op) + ": qkv has shape " + shape_str(qkv) +
                             ", expected [B,T,3C] with C >= 1");
      const int64_t B = qkv.shape[0], Tn = qkv.shape[1], C = qkv.shape[2] / 3;
      const int64_t NH = c.iattr[0];
      if (NH < 1 || C % NH != 0)
        return fail(err, std::string(op) + ": heads (iattr[0]) is " + std::to_string(NH) +
                             ", expected a positive divisor of C = " + std::to_string(C));
      TensorView yshape;
      yshape.rank = 3;
      yshape.shape[0] = B; yshape.shape[1] = Tn; yshape.shape[2] = C;
      TensorView attshape;
      attshape.rank = 4;
      attshape.shape[0] = B; attshape.shape[1] = NH; attshape.shape[2] = Tn; attshape.shape[3] = Tn;
      if (c.kind == OP_CAUSAL_ATTENTION) {
        const TensorView &y = out[0], &att = out[1];
        if (!want_shape(err, op, "y", y, yshape)) return false;
        if (!want_shape(err, op, "att", att, attshape)) return false;
        if (!want_distinct(err, op, "y", y, "qkv", qkv) || !want_distinct(err, op, "att", att, "qkv", qkv))
          return false;
        causal_attention_forward<T>(data<T>(y), data<T>(att), data<T>(qkv), B, Tn, C, NH);
      } else {
        const TensorView &att = in[1], &dy = in[2], &dqkv = out[0];
        if (!want_shape(err, op, "att", att, attshape)) return false;
        if (!want_shape(err, op, "dy", dy, yshape)) return false;
        if (!want_shape(err, op, "dqkv", dqkv, qkv, " (the shape of qkv)")) return false;
        if (!want_distinct(err, op, "dqkv", dqkv, "qkv", qkv) || !want_distinct(err, op, "dqkv", dqkv, "att", att) ||
            !want_distinct(err, op, "dqkv", dqkv, "dy", dy))
          return false;
        causal_attention_backward<T>(data<T>(dqkv), data<T>(qkv), data<T>(att), data<T>(dy), B, Tn, C, NH);
      }
      return true;
    }
    case OP_EMBEDDING: {
      const TensorView &ids = in[0], &table = in[1], &y = out[0];
      if (ids.rank >= kMaxRank)
        return fail(err, std::string(op) + ": ids has rank " + std::to_string(ids.rank) + ", expected at most " +
                             std::to_string(kMaxRank - 1));
      if (table.rank != 2)
        return fail(err, std::string(op) + ": table has shape " + shape_str(table) + ", expected [V,C]");
      const int64_t V = table.shape[0], C = table.shape[1];
      if (!want_shape(err, op, "y", y, append_dim(ids, C))) return false;
      if (!want_ids_in_range(err, op, "id", ids, V)) return false;
      embedding_forward<T>(data<T>(y), ids_data(ids), data<T>(table), ids.numel(), C);
      return true;
    }
    case OP_EMBEDDING_BACKWARD: {
      const TensorView &ids = in[0], &dy = in[1], &dtable = out[0];
      if (ids.rank >= kMaxRank)
        return fail(err, std::string(op) + ": ids has rank " + std::to_string(ids.rank) + ", expected at most " +
                             std::to_string(kMaxRank - 1));
      if (dtable.rank != 2)
        return fail(err, std::string(op) + ": dtable has shape " + shape_str(dtable) + ", expected [V,C]");
      const int64_t V = dtable.shape[0], C = dtable.shape[1];
      if (!want_shape(err, op, "dy", dy, append_dim(ids, C), " (ids' shape + [C] of dtable)")) return false;
      if (!want_ids_in_range(err, op, "id", ids, V)) return false;
      if (!want_distinct(err, op, "dtable", dtable, "dy", dy)) return false;
      embedding_backward<T>(data<T>(dtable), ids_data(ids), data<T>(dy), ids.numel(), V, C);
      return true;
    }
    case OP_CROSS_ENTROPY:
    case OP_CROSS_ENTROPY_BACKWARD: {
      const TensorView &logits = in[0], &targets = in[1];
      if (!want_min_rank(err, op, "logits", logits, 1)) return false;
      const int64_t V = last_dim(logits);
      if (!want_shape(err, op, "targets", targets, lead_of(logits), " (logits' leading dims)")) return false;
      if (!want_ids_in_range(err, op, "target", targets, V)) return false;
      const int64_t N = targets.numel();
      if (c.kind == OP_CROSS_ENTROPY) {
        if (out[0].numel() != 1)
          return fail(err, std::string(op) + ": loss has shape " + shape_str(out[0]) + ", expected [] (one element)");
        cross_entropy_forward<T>(data<T>(out[0]), data<T>(logits), ids_data(targets), N, V);
      } else {
        if (in[2].numel() != 1)
          return fail(err, std::string(op) + ": dloss has shape " + shape_str(in[2]) + ", expected [] (one element)");
        if (!want_shape(err, op, "dlogits", out[0], logits, " (the shape of logits)")) return false;
        if (!want_distinct(err, op, "dlogits", out[0], "dloss", in[2])) return false;
        cross_entropy_backward<T>(data<T>(out[0]), data<T>(logits), ids_data(targets), data<T>(in[2]), N, V);
      }
      return true;
    }
    case OP_RESHAPE: {
      if (out[0].numel() != in[0].numel())
        return fail(err, std::string(op) + ": y has shape " + shape_str(out[0]) + " (" +
                             std::to_string(out[0].numel()) + " elements), expected " +
                             std::to_string(in[0].numel()) + " elements like x " + shape_str(in[0]));
      reshape_forward<T>(data<T>(out[0]), data<T>(in[0]), in[0].numel());
      return true;
    }
    case OP_TRANSPOSE: {
      const TensorView &x = in[0], &y = out[0];
      const int r = x.rank;
      bool seen[kMaxRank] = {false};
      for (int i = 0; i < r; i++) {
        const int64_t p = c.iattr[i];
        if (p < 0 || p >= r || seen[p])
          return fail(err, std::string(op) + ": perm " + dims_str(c.iattr, r) + " is not a permutation of 0.." +
                               std::to_string(r - 1));
        seen[p] = true;
      }
      TensorView yshape;
      yshape.rank = r;
      for (int i = 0; i < r; i++) yshape.shape[i] = x.shape[c.iattr[i]];
      if (!want_shape(err, op, "y", y, yshape, " (x " + shape_str(x) + " permuted by " + dims_str(c.iattr, r) + ")"))
        return false;
      if (!want_distinct(err, op, "y", y, "x", x)) return false;
      transpose_forward<T>(data<T>(y), data<T>(x), r, x.shape, c.iattr);
      return true;
    }
    case OP_FILL: {
      fill_forward<T>(data<T>(out[0]), out[0].numel(), c.fattr[0]);
      return true;
    }
    case OP_ADAM: {
      const TensorView& p = in[0];
      for (int i = 1; i < 4; i++)
        if (!want_shape(err, op, k.in_names[i], in[i], p, " (the shape of p)")) return false;
      for (int i = 0; i < c.n_out; i++)
        if (!want_shape(err, op, k.out_names[i], out[i], p, " (the shape of p)")) return false;
      const int64_t adamw = c.iattr[0], step = c.iattr[1];
      if (adamw != 0 && adamw != 1)
        return fail(err, std::string(op) + ": adamw (iattr[0]) is " + std::to_string(adamw) + ", expected 0 or 1");
      if (step < 1)
        return fail(err, std::string(op) + ": step (iattr[1]) is " + std::to_string(step) + ", expected >= 1");
      T* p_copy = c.n_out == 4 ? data<T>(out[3]) : nullptr;
      adam_update<T>(data<T>(out[0]), data<T>(out[1]), data<T>(out[2]), p_copy, data<T>(in[0]), data<T>(in[1]),
                     data<T>(in[2]), data<T>(in[3]), p.numel(), c.fattr[0], c.fattr[1], c.fattr[2], c.fattr[3],
                     c.fattr[4], adamw == 1, step);
      return true;
    }
    default:
      return run_onnx_kinds<T>(c, k, err);
  }
}

// The kinds added for ONNX import (codes 22..37).
template <typename T>
bool run_onnx_kinds(const OpCall& c, const KindInfo& k, std::string* err) {
  const char* op = k.name;
  const TensorView* in = c.in;
  const TensorView* out = c.out;
  switch (c.kind) {
    case OP_SUB:
    case OP_DIV: {
      const TensorView &a = in[0], &b = in[1], &y = out[0];
      if (!is_suffix(b, a))
        return fail(err, std::string(op) + ": b has shape " + shape_str(b) + ", expected a suffix of a's shape " +
                             shape_str(a));
      if (!want_shape(err, op, "y", y, a)) return false;
      if (c.kind == OP_SUB) sub_forward<T>(data<T>(y), data<T>(a), data<T>(b), a.numel(), b.numel());
      else div_forward<T>(data<T>(y), data<T>(a), data<T>(b), a.numel(), b.numel());
      return true;
    }
    case OP_AFFINE:
    case OP_POW_SCALAR:
    case OP_UNARY:
    case OP_CAST: {
      if (!want_shape(err, op, "y", out[0], in[0], " (the shape of x)")) return false;
      const int64_t n = in[0].numel();
      if (c.kind == OP_AFFINE) affine_forward<T>(data<T>(out[0]), data<T>(in[0]), n, c.fattr[0], c.fattr[1]);
      else if (c.kind == OP_POW_SCALAR) pow_scalar_forward<T>(data<T>(out[0]), data<T>(in[0]), n, c.fattr[0]);
      else if (c.kind == OP_CAST) cast_forward<T>(data<T>(out[0]), ids_data(in[0]), n);
      else {
        if (c.iattr[0] < 0 || c.iattr[0] >= UNARY_COUNT)
          return fail(err, std::string(op) + ": function (iattr[0]) is " + std::to_string(c.iattr[0]) + ", expected 0.." +
                               std::to_string(UNARY_COUNT - 1));
        unary_forward<T>(data<T>(out[0]), data<T>(in[0]), n, (int32_t)c.iattr[0]);
      }
      return true;
    }
    case OP_UNARY_BACKWARD: {
      if (c.iattr[0] < 0 || c.iattr[0] >= UNARY_COUNT)
        return fail(err, std::string(op) + ": function (iattr[0]) is " + std::to_string(c.iattr[0]) + ", expected 0.." +
                             std::to_string(UNARY_COUNT - 1));
      for (int i = 1; i < 3; i++)
        if (!want_shape(err, op, k.in_names[i], in[i], in[0], " (the shape of x)")) return false;
      if (!want_shape(err, op, "dx", out[0], in[0], " (the shape of x)")) return false;
      unary_backward<T>(data<T>(out[0]), data<T>(in[0]), data<T>(in[1]), data<T>(in[2]), in[0].numel(), (int32_t)c.iattr[0]);
      return true;
    }
    case OP_WHERE: {
      for (int i = 1; i < 3; i++)
        if (!want_shape(err, op, k.in_names[i], in[i], in[0], " (the shape of cond)")) return false;
      if (!want_shape(err, op, "y", out[0], in[0], " (the shape of cond)")) return false;
      where_forward<T>(data<T>(out[0]), data<T>(in[0]), data<T>(in[1]), data<T>(in[2]), in[0].numel());
      return true;
    }
    case OP_EXPAND:
    case OP_UNBROADCAST: {
      const bool expand = c.kind == OP_EXPAND;
      const TensorView &small = expand ? in[0] : out[0], &big = expand ? out[0] : in[0];
      int64_t strides[kMaxRank] = {0};
      if (!broadcast_strides(small, big, strides))
        return fail(err, std::string(op) + ": " + shape_str(small) + " does not broadcast to " + shape_str(big));
      if (!want_distinct(err, op, "y", out[0], "x", in[0])) return false;
      if (expand) expand_forward<T>(data<T>(out[0]), data<T>(in[0]), big.rank, big.shape, strides);
      else unbroadcast_forward<T>(data<T>(out[0]), out[0].numel(), data<T>(in[0]), big.rank, big.shape, strides);
      return true;
    }
    case OP_SLICE:
    case OP_SLICE_BACKWARD: {
      const bool fwd = c.kind == OP_SLICE;
      const TensorView &full = fwd ? in[0] : out[0], &part = fwd ? out[0] : in[0];
      const int64_t axis = c.iattr[0], start = c.iattr[1];
      if (axis < 0 || axis >= full.rank || part.rank != full.rank)
        return fail(err, std::string(op) + ": axis (iattr[0]) " + std::to_string(axis) + " does not fit " + shape_str(full));
      for (int d = 0; d < full.rank; d++) {
        const bool ok = d == axis ? (start >= 0 && start + part.shape[d] <= full.shape[d]) : part.shape[d] == full.shape[d];
        if (!ok)
          return fail(err, std::string(op) + ": " + shape_str(part) + " at offset " + std::to_string(start) + " on axis " +
                               std::to_string(axis) + " does not fit in " + shape_str(full));
      }
      if (fwd && c.iattr[2] - start != part.shape[axis])
        return fail(err, std::string(op) + ": end (iattr[2]) - start is " + std::to_string(c.iattr[2] - start) +
                             ", y has " + std::to_string(part.shape[axis]) + " on the axis");
      if (!want_distinct(err, op, k.out_names[0], out[0], k.in_names[0], in[0])) return false;
      int64_t outer, inner;
      around_axis(full, (int)axis, &outer, &inner);
      if (fwd) slice_forward<T>(data<T>(out[0]), data<T>(in[0]), outer, full.shape[axis], part.shape[axis], inner, start);
      else slice_backward<T>(data<T>(out[0]), data<T>(in[0]), outer, full.shape[axis], part.shape[axis], inner, start);
      return true;
    }
    case OP_CONCAT: {
      const TensorView& y = out[0];
      const int64_t axis = c.iattr[0];
      if (axis < 0 || axis >= y.rank) return fail(err, std::string(op) + ": axis (iattr[0]) " + std::to_string(axis) + " is outside y " + shape_str(y));
      const T* xs[kMaxOperands];
      int64_t lens[kMaxOperands];
      int64_t total = 0;
      for (int j = 0; j < c.n_in; j++) {
        const TensorView& x = in[j];
        bool ok = x.rank == y.rank;
        for (int d = 0; ok && d < y.rank; d++) ok = d == axis || x.shape[d] == y.shape[d];
        if (!ok) return fail(err, std::string(op) + ": " + k.in_names[j] + " has shape " + shape_str(x) + ", expected y's " + shape_str(y) + " outside axis " + std::to_string(axis));
        if (!want_distinct(err, op, "y", y, k.in_names[j], x)) return false;
        xs[j] = data<T>(x);
        lens[j] = x.shape[axis];
        total += lens[j];
      }
      if (total != y.shape[axis]) return fail(err, std::string(op) + ": the inputs add up to " + std::to_string(total) + " on axis " + std::to_string(axis) + ", y has " + std::to_string(y.shape[axis]));
      int64_t outer, inner;
      around_axis(y, (int)axis, &outer, &inner);
      concat_forward<T>(data<T>(y), xs, lens, c.n_in, outer, y.shape[axis], inner);
      return true;
    }
    case OP_BMM: {
      const TensorView &a = in[0], &b = in[1], &y = out[0];
      const bool ta = c.iattr[0] != 0, tb = c.iattr[1] != 0;
      const int r = a.rank;
      bool ok = r >= 2 && b.rank == r;
      for (int d = 0; ok && d < r - 2; d++) ok = a.shape[d] == b.shape[d];
      if (!ok) return fail(err, std::string(op) + ": a " + shape_str(a) + " and b " + shape_str(b) + " need rank >= 2 and the same leading dims");
      const int64_t M = ta ? a.shape[r - 1] : a.shape[r - 2], K = ta ? a.shape[r - 2] : a.shape[r - 1];
      const int64_t Kb = tb ? b.shape[r - 1] : b.shape[r - 2], N = tb ? b.shape[r - 2] : b.shape[r - 1];
      if (K != Kb) return fail(err, std::string(op) + ": a " + shape_str(a) + " and b " + shape_str(b) + " disagree on the inner dimension");
      TensorView yshape = a;
      yshape.shape[r - 2] = M;
      yshape.shape[r - 1] = N;
      if (!want_shape(err, op, "y", y, yshape)) return false;
      if (!want_distinct(err, op, "y", y, "a", a) || !want_distinct(err, op, "y", y, "b", b)) return false;
      int64_t batch = 1;
      for (int d = 0; d < r - 2; d++) batch *= a.shape[d];
      bmm_forward<T>(data<T>(y), data<T>(a), data<T>(b), batch, M, K, N, ta, tb);
      return true;
    }
    case OP_LOG_SOFTMAX:
    case OP_LOG_SOFTMAX_BACKWARD: {
      if (!want_min_rank(err, op, k.in_names[0], in[0], 1)) return false;
      for (int i = 1; i < c.n_in; i++)
        if (!want_shape(err, op, k.in_names[i], in[i], in[0])) return false;
      if (!want_shape(err, op, k.out_names[0], out[0], in[0])) return false;
      const int64_t N = lead_of(in[0]).numel(), C = last_dim(in[0]);
      if (c.kind == OP_LOG_SOFTMAX) log_softmax_forward<T>(data<T>(out[0]), data<T>(in[0]), N, C);
      else log_softmax_backward<T>(data<T>(out[0]), data<T>(in[0]), data<T>(in[1]), N, C);
      return true;
    }
    default:
      return run_zoo_kinds<T>(c, k, err);
  }
}

// The model-zoo kinds (LLaMA, BERT): rms norm, silu, rope, grouped-query attention.
template <typename T>
bool run_zoo_kinds(const OpCall& c, const KindInfo& k, std::string* err) {
  const char* op = k.name;
  const TensorView* in = c.in;
  const TensorView* out = c.out;
  switch (c.kind) {
    case OP_RMSNORM:
    case OP_RMSNORM_BACKWARD: {
      const TensorView &x = in[0], &w = in[1];
      if (!want_min_rank(err, op, "x", x, 1)) return false;
      const int64_t C = last_dim(x);
      TensorView cshape;
      cshape.rank = 1;
      cshape.shape[0] = C;
      const TensorView lead = lead_of(x);
      if (!want_shape(err, op, "w", w, cshape, " to match x[...," + std::to_string(C) + "]")) return false;
      if (c.kind == OP_RMSNORM) {
        if (!want_shape(err, op, "y", out[0], x)) return false;
        if (!want_shape(err, op, "rstd", out[1], lead, " (x's leading dims)")) return false;
        if (!(c.fattr[0] >= 0))
          return fail(err, std::string(op) + ": eps (fattr[0]) is " + std::to_string(c.fattr[0]) + ", expected >= 0");
        rmsnorm_forward<T>(data<T>(out[0]), data<T>(out[1]), data<T>(x), data<T>(w), lead.numel(), C, c.fattr[0]);
      } else {
        const TensorView &rstd = in[2], &dy = in[3];
        if (!want_shape(err, op, "rstd", rstd, lead, " (x's leading dims)")) return false;
        if (!want_shape(err, op, "dy", dy, x, " (the shape of x)")) return false;
        if (!want_shape(err, op, "dx", out[0], x, " (the shape of x)")) return false;
        if (!want_shape(err, op, "dw", out[1], cshape)) return false;
        if (!want_distinct(err, op, "dw", out[1], "dy", dy)) return false;
        rmsnorm_backward<T>(data<T>(out[0]), data<T>(out[1]), data<T>(x), data<T>(w), data<T>(rstd), data<T>(dy),
                            lead.numel(), C);
      }
      return true;
    }
    case OP_SILU: {
      if (!want_shape(err, op, "y", out[0], in[0], " (the shape of x)")) return false;
      silu_forward<T>(data<T>(out[0]), data<T>(in[0]), in[0].numel());
      return true;
    }
    case OP_SILU_BACKWARD: {
      if (!want_shape(err, op, "dy", in[1], in[0], " (the shape of x)")) return false;
      if (!want_shape(err, op, "dx", out[0], in[0], " (the shape of x)")) return false;
      silu_backward<T>(data<T>(out[0]), data<T>(in[0]), data<T>(in[1]), in[0].numel());
      return true;
    }
    case OP_ROPE: {
      const TensorView &x = in[0], &y = out[0];
      const int64_t NH = c.iattr[0], inverse = c.iattr[1];
      const double theta = c.fattr[0];
      if (x.rank != 3) return fail(err, std::string(op) + ": x has shape " + shape_str(x) + ", expected [B,T,NH*hs]");
      if (NH < 1 || x.shape[2] % NH != 0 || (x.shape[2] / NH) % 2 != 0)
        return fail(err, std::string(op) + ": heads (iattr[0]) is " + std::to_string(NH) + ", expected a divisor of " +
                             std::to_string(x.shape[2]) + " channels giving an even head size");
      if (inverse != 0 && inverse != 1)
        return fail(err, std::string(op) + ": inverse (iattr[1]) is " + std::to_string(inverse) + ", expected 0 or 1");
      if (!(theta > 0)) return fail(err, std::string(op) + ": theta (fattr[0]) is " + std::to_string(theta) + ", expected > 0");
      if (!want_shape(err, op, "y", y, x, " (the shape of x)")) return false;
      rope_forward<T>(data<T>(y), data<T>(x), x.shape[0], x.shape[1], NH, x.shape[2] / NH, theta, inverse == 1);
      return true;
    }
    case OP_ATTENTION:
    case OP_ATTENTION_BACKWARD: {
      const TensorView &q = in[0], &kk = in[1], &v = in[2];
      const int64_t NH = c.iattr[0], KVH = c.iattr[1], causal = c.iattr[2];
      if (q.rank != 3) return fail(err, std::string(op) + ": q has shape " + shape_str(q) + ", expected [B,T,NH*hs]");
      const int64_t B = q.shape[0], Tn = q.shape[1];
      if (NH < 1 || q.shape[2] % NH != 0)
        return fail(err, std::string(op) + ": heads (iattr[0]) is " + std::to_string(NH) + ", expected a positive divisor of " +
                             std::to_string(q.shape[2]) + " (q's channels)");
      if (KVH < 1 || NH % KVH != 0)
        return fail(err, std::string(op) + ": kv heads (iattr[1]) is " + std::to_string(KVH) +
                             ", expected a positive divisor of heads = " + std::to_string(NH));
      if (causal != 0 && causal != 1)
        return fail(err, std::string(op) + ": causal (iattr[2]) is " + std::to_string(causal) + ", expected 0 or 1");
      const int64_t hs = q.shape[2] / NH;
      TensorView kvshape = q;
      kvshape.shape[2] = KVH * hs;
      const std::string why = " (KVH*hs = " + std::to_string(KVH) + "*" + std::to_string(hs) + ")";
      if (!want_shape(err, op, "k", kk, kvshape, why) || !want_shape(err, op, "v", v, kvshape, why)) return false;
      TensorView lse;
      lse.rank = 3;
      lse.shape[0] = B; lse.shape[1] = NH; lse.shape[2] = Tn;
      if (c.kind == OP_ATTENTION) {
        if (!want_shape(err, op, "y", out[0], q, " (the shape of q)")) return false;
        if (!want_shape(err, op, "lse", out[1], lse)) return false;
        for (int o = 0; o < 2; o++)
          for (int i = 0; i < 3; i++)
            if (!want_distinct(err, op, k.out_names[o], out[o], k.in_names[i], in[i])) return false;
        attention_forward<T>(data<T>(out[0]), data<T>(out[1]), data<T>(q), data<T>(kk), data<T>(v), B, Tn, NH, KVH, hs,
                             causal == 1);
      } else {
        if (!want_shape(err, op, "y", in[3], q, " (the shape of q)")) return false;
        if (!want_shape(err, op, "lse", in[4], lse)) return false;
        if (!want_shape(err, op, "dy", in[5], q, " (the shape of q)")) return false;
        if (!want_shape(err, op, "dq", out[0], q, " (the shape of q)")) return false;
        if (!want_shape(err, op, "dk", out[1], kvshape, why) || !want_shape(err, op, "dv", out[2], kvshape, why)) return false;
        for (int o = 0; o < 3; o++)
          for (int i = 0; i < 6; i++)
            if (!want_distinct(err, op, k.out_names[o], out[o], k.in_names[i], in[i])) return false;
        attention_backward<T>(data<T>(out[0]), data<T>(out[1]), data<T>(out[2]), data<T>(q), data<T>(kk), data<T>(v),
                              data<T>(in[3]), data<T>(in[4]), data<T>(in[5]), B, Tn, NH, KVH, hs, causal == 1);
      }
      return true;
    }
    default:
      return run_cnn_kinds<T>(c, k, err);
  }
}

// One spatial axis of a window: the output size (PyTorch's pooling_output_shape),
// floor or ceil mode; 0 when no window fits.
int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d, bool ceil) {
  const int64_t span = in + pb + pe - d * (k - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (span + (ceil ? s - 1 : 0)) / s + 1;
  if (ceil && (out - 1) * s >= in + pb) out--;
  return out;
}

std::string ints_str(const int64_t* v, int n) { return dims_str(v, n); }

// Fills *s from x [N,C,H,W], the window attributes and y [N,M,OH,OW] (y is the
// output, or dy for the gradients); checks that y is the window's output shape
// (floor size, or also the ceil-mode size when allow_ceil).
bool window_check(std::string* err, const char* op, const TensorView& x, const TensorView& y, const char* yname,
                  int64_t M, Window2d* s, bool allow_ceil) {
  if (x.rank != 4) return fail(err, std::string(op) + ": x has shape " + shape_str(x) + ", expected [N,C,H,W]");
  s->N = x.shape[0]; s->C = x.shape[1]; s->H = x.shape[2]; s->W = x.shape[3]; s->M = M;
  const int64_t geom[6] = {s->kH, s->kW, s->sH, s->sW, s->dH, s->dW};
  const int64_t pads[4] = {s->pT, s->pL, s->pB, s->pR};
  for (int i = 0; i < 6; i++)
    if (geom[i] < 1)
      return fail(err, std::string(op) + ": window " + ints_str(geom, 2) + ", strides " + ints_str(geom + 2, 2) + " and dilations " +
                           ints_str(geom + 4, 2) + " must be >= 1");
  for (int i = 0; i < 4; i++)
    if (pads[i] < 0) return fail(err, std::string(op) + ": pads " + ints_str(pads, 4) + " must be >= 0");
  // (as PyTorch: a plane of no rows or columns has windows of padding alone, whose max had been read
  // and written at an index of the empty x and dx)
  if (s->H < 1 || s->W < 1) return fail(err, std::string(op) + ": x has shape " + shape_str(x) + ": its planes need at least one row and one column");
  const int64_t fh = window_out(s->H, s->kH, s->sH, s->pT, s->pB, s->dH, false), fw = window_out(s->W, s->kW, s->sW, s->pL, s->pR, s->dW, false);
  const int64_t ch = window_out(s->H, s->kH, s->sH, s->pT, s->pB, s->dH, true), cw = window_out(s->W, s->kW, s->sW, s->pL, s->pR, s->dW, true);
  TensorView want;
  want.rank = 4;
  want.shape[0] = s->N; want.shape[1] = M; want.shape[2] = fh; want.shape[3] = fw;
  const bool is_floor = same_shape(y, want);
  want.shape[2] = ch; want.shape[3] = cw;
  const bool is_ceil = allow_ceil && same_shape(y, want);
  if (fh < 1 || fw < 1 || (!is_floor && !is_ceil)) {
    want.shape[2] = fh; want.shape[3] = fw;
    return fail(err, std::string(op) + ": " + yname + " has shape " + shape_str(y) + ", expected " + shape_str(want) +
                         (allow_ceil && (ch != fh || cw != fw) ? " (or with ceil mode [" + std::to_string(ch) + "," + std::to_string(cw) + "])" : "") +
                         " for x " + shape_str(x) + ", window " + ints_str(geom, 2) + ", strides " + ints_str(geom + 2, 2) + ", pads " +
                         ints_str(pads, 4) + ", dilations " + ints_str(geom + 4, 2));
  }
  s->OH = y.shape[2];
  s->OW = y.shape[3];
  return true;
}

// conv: x, w [M, C/G, kH, kW], y (or dy); iattr = strides, pads, dilations
bool conv_check(std::string* err, const char* op, const OpCall& c, const TensorView& x, const TensorView& w,
                const TensorView& y, const char* yname, Window2d* s) {
  if (w.rank != 4) return fail(err, std::string(op) + ": w has shape " + shape_str(w) + ", expected [M,C/groups,kH,kW]");
  // (x of 0 channels had divided by zero here: the process ended with SIGFPE)
  if (x.rank == 4 && (w.shape[1] < 1 || x.shape[1] < w.shape[1] || x.shape[1] % w.shape[1] != 0 || w.shape[0] % (x.shape[1] / w.shape[1]) != 0))
    return fail(err, std::string(op) + ": w has shape " + shape_str(w) + ", which does not split the " + std::to_string(x.shape[1]) +
                         " channels of x into groups (C / w[1] groups must divide M = w[0])");
  s->kH = w.shape[2]; s->kW = w.shape[3];
  s->sH = c.iattr[0]; s->sW = c.iattr[1];
  s->pT = c.iattr[2]; s->pL = c.iattr[3]; s->pB = c.iattr[4]; s->pR = c.iattr[5];
  s->dH = c.iattr[6]; s->dW = c.iattr[7];
  if (!window_check(err, op, x, y, yname, w.shape[0], s, false)) return false;
  s->G = s->C / w.shape[1];
  return true;
}

// pools: x, y (or dy); iattr = window, strides, pads (pads smaller than the window)
bool pool_check(std::string* err, const char* op, const OpCall& c, const TensorView& x, const TensorView& y,
                const char* yname, Window2d* s) {
  s->kH = c.iattr[0]; s->kW = c.iattr[1];
  s->sH = c.iattr[2]; s->sW = c.iattr[3];
  s->pT = c.iattr[4]; s->pL = c.iattr[5]; s->pB = c.iattr[6]; s->pR = c.iattr[7];
  if (s->pT >= s->kH || s->pB >= s->kH || s->pL >= s->kW || s->pR >= s->kW) {
    const int64_t pads[4] = {s->pT, s->pL, s->pB, s->pR}, k[2] = {s->kH, s->kW};
    return fail(err, std::string(op) + ": pads " + ints_str(pads, 4) + " must be smaller than the window " + ints_str(k, 2));
  }
  return window_check(err, op, x, y, yname, x.rank == 4 ? x.shape[1] : 0, s, true);
}

// The CNN kinds (ONNX import): conv, batch norm, pooling.
template <typename T>
bool run_cnn_kinds(const OpCall& c, const KindInfo& k, std::string* err) {
  const char* op = k.name;
  const TensorView* in = c.in;
  const TensorView* out = c.out;
  Window2d s;
  switch (c.kind) {
    case OP_CONV2D: {
      const TensorView &x = in[0], &w = in[1], &b = in[2], &y = out[0];
      if (!conv_check(err, op, c, x, w, y, "y", &s)) return false;
      TensorView bshape;
      bshape.rank = 1;
      bshape.shape[0] = s.M;
      if (!want_shape(err, op, "b", b, bshape, " (w's output channels)")) return false;
      for (int i = 0; i < 3; i++)
        if (!want_distinct(err, op, "y", y, k.in_names[i], in[i])) return false;
      conv2d_forward<T>(data<T>(y), data<T>(x), data<T>(w), data<T>(b), s);
      return true;
    }
    case OP_CONV2D_GRAD_INPUT: {
      const TensorView &dy = in[0], &w = in[1], &dx = out[0];
      if (!conv_check(err, op, c, dx, w, dy, "dy", &s)) return false;
      if (!want_distinct(err, op, "dx", dx, "dy", dy) || !want_distinct(err, op, "dx", dx, "w", w)) return false;
      conv2d_backward_input<T>(data<T>(dx), data<T>(dy), data<T>(w), s);
      return true;
    }
    case OP_CONV2D_GRAD_WEIGHT: {
      const TensorView &x = in[0], &dy = in[1], &dw = out[0], &db = out[1];
      if (!conv_check(err, op, c, x, dw, dy, "dy", &s)) return false;
      TensorView bshape;
      bshape.rank = 1;
      bshape.shape[0] = s.M;
      if (!want_shape(err, op, "db", db, bshape, " (dw's output channels)")) return false;
      for (int o = 0; o < 2; o++)
        for (int i = 0; i < 2; i++)
          if (!want_distinct(err, op, k.out_names[o], out[o], k.in_names[i], in[i])) return false;
      conv2d_backward_weight<T>(data<T>(dw), data<T>(db), data<T>(x), data<T>(dy), s);
      return true;
    }
    case OP_BATCHNORM:
    case OP_BATCHNORM_BACKWARD: {
      const TensorView &x = in[0], &w = in[1];
      if (!want_min_rank(err, op, "x", x, 2)) return false;
      const int64_t N = x.shape[0], C = x.shape[1];
      const int64_t S = C > 0 && N > 0 ? x.numel() / (N * C) : 0;
      TensorView cshape;
      cshape.rank = 1;
      cshape.shape[0] = C;
      const std::string why = " to match x[N," + std::to_string(C) + ",...]";
      if (!want_shape(err, op, "w", w, cshape, why)) return false;
      if (!(c.fattr[0] >= 0)) return fail(err, std::string(op) + ": eps (fattr[0]) is " + std::to_string(c.fattr[0]) + ", expected >= 0");
      if (c.kind == OP_BATCHNORM) {
        if (!want_shape(err, op, "b", in[2], cshape, why) || !want_shape(err, op, "y", out[0], x) ||
            !want_shape(err, op, "mean", out[1], cshape, why) || !want_shape(err, op, "var", out[2], cshape, why))
          return false;
        batchnorm_forward<T>(data<T>(out[0]), data<T>(out[1]), data<T>(out[2]), data<T>(x), data<T>(w), data<T>(in[2]), N, C,
                             S, c.fattr[0]);
      } else {
        if (!want_shape(err, op, "mean", in[2], cshape, why) || !want_shape(err, op, "var", in[3], cshape, why) ||
            !want_shape(err, op, "dy", in[4], x, " (the shape of x)") || !want_shape(err, op, "dx", out[0], x, " (the shape of x)") ||
            !want_shape(err, op, "dw", out[1], cshape, why) || !want_shape(err, op, "db", out[2], cshape, why))
          return false;
        for (int o = 1; o < 3; o++)
          if (!want_distinct(err, op, k.out_names[o], out[o], "dy", in[4])) return false;
        batchnorm_backward<T>(data<T>(out[0]), data<T>(out[1]), data<T>(out[2]), data<T>(x), data<T>(w), data<T>(in[2]),
                              data<T>(in[3]), data<T>(in[4]), N, C, S, c.fattr[0]);
      }
      return true;
    }
    case OP_BATCHNORM_RUNNING: {
      if (in[0].rank != 1) return fail(err, std::string(op) + ": run_mean has shape " + shape_str(in[0]) + ", expected [C]");
      for (int i = 1; i < 4; i++)
        if (!want_shape(err, op, k.in_names[i], in[i], in[0], " (the shape of run_mean)")) return false;
      for (int o = 0; o < 2; o++)
        if (!want_shape(err, op, k.out_names[o], out[o], in[0], " (the shape of run_mean)")) return false;
      const int64_t n = c.iattr[0];
      const double momentum = c.fattr[0];
      if (n < 2) return fail(err, std::string(op) + ": n (iattr[0]) is " + std::to_string(n) + ", expected >= 2 values per channel");
      if (!(momentum >= 0 && momentum <= 1))
        return fail(err, std::string(op) + ": momentum (fattr[0]) is " + std::to_string(momentum) + ", expected 0..1");
      batchnorm_running<T>(data<T>(out[0]), data<T>(out[1]), data<T>(in[0]), data<T>(in[1]), data<T>(in[2]), data<T>(in[3]),
                           in[0].shape[0], momentum, n);
      return true;
    }
    case OP_MAXPOOL2D:
    case OP_AVGPOOL2D: {
      const TensorView &x = in[0], &y = out[0];
      if (!pool_check(err, op, c, x, y, "y", &s)) return false;
      if (!want_distinct(err, op, "y", y, "x", x)) return false;
      if (c.kind == OP_MAXPOOL2D) {
        maxpool2d_forward<T>(data<T>(y), data<T>(x), s);
      } else {
        if (c.fattr[0] != 0 && c.fattr[0] != 1)
          return fail(err, std::string(op) + ": count_include_pad (fattr[0]) is " + std::to_string(c.fattr[0]) + ", expected 0 or 1");
        avgpool2d_forward<T>(data<T>(y), data<T>(x), s, c.fattr[0] == 1);
      }
      return true;
    }
    case OP_MAXPOOL2D_BACKWARD: {
      const TensorView &x = in[0], &dy = in[1], &dx = out[0];
      if (!pool_check(err, op, c, x, dy, "dy", &s)) return false;
      if (!want_shape(err, op, "dx", dx, x, " (the shape of x)")) return false;
      if (!want_distinct(err, op, "dx", dx, "x", x) || !want_distinct(err, op, "dx", dx, "dy", dy)) return false;
      maxpool2d_backward<T>(data<T>(dx), data<T>(x), data<T>(dy), s);
      return true;
    }
    case OP_AVGPOOL2D_BACKWARD: {
      const TensorView &dy = in[0], &dx = out[0];
      if (!pool_check(err, op, c, dx, dy, "dy", &s)) return false;
      if (c.fattr[0] != 0 && c.fattr[0] != 1)
        return fail(err, std::string(op) + ": count_include_pad (fattr[0]) is " + std::to_string(c.fattr[0]) + ", expected 0 or 1");
      if (!want_distinct(err, op, "dx", dx, "dy", dy)) return false;
      avgpool2d_backward<T>(data<T>(dx), data<T>(dy), s, c.fattr[0] == 1);
      return true;
    }
    case OP_RING_ATTENTION:
    case OP_RING_ATTENTION_BACKWARD:
    case OP_ALL_REDUCE:
      return fail(err, std::string(op) + ": a collective over the ranks of a ring; the executor runs it with its communicator (native/exec/collective.h)");
    default:
      return fail(err, "run_op: unknown op kind " + std::to_string(c.kind));
  }
}

}  // namespace

template <typename T>
bool run_op(const OpCall& call, std::string* err) {
  try {
    if (call.kind < 0 || call.kind >= OP_KIND_COUNT)
      return fail(err, "run_op: unknown op kind " + std::to_string(call.kind));
    if (call.n_in < 0 || call.n_in > kMaxOperands || call.n_out < 0 || call.n_out > kMaxOperands)
      return fail(err, std::string(kKinds[call.kind].name) + ": operand counts " + std::to_string(call.n_in) +
                           " in, " + std::to_string(call.n_out) + " out are outside 0.." + std::to_string(kMaxOperands));
    const KindInfo& k = kKinds[call.kind];
    if (!check_operands(call, k, err)) return false;
    return run_checked<T>(call, k, err);
  } catch (...) {  // only std::string can throw here (bad_alloc); never let it escape
    if (err) {
      try { *err = "run_op: out of memory while formatting a message"; } catch (...) {}
    }
    return false;
  }
}

template bool run_op<float>(const OpCall&, std::string*);
template bool run_op<double>(const OpCall&, std::string*);

}  // namespace tiercut
