// collective.cc — ring attention and the all-reduce as executor ops (see collective.h).
//
// Shape letters: B = batch, R = this rank's rows (its two zigzag chunks, see
// native/ring/ring_attention.h), P = ranks, S = R * P the whole sequence,
// C = channels, NH = heads, D = C / NH head size.
// The plan keeps activations token-major, qkv[B,R,3C] (q in channels [0,C), k in
// [C,2C), v in [2C,3C), head h in channels h*D .. h*D+D-1 of each, as
// causal_attention); the ring kernels want head-major [B,NH,R,D]. So the op
// gathers q, k, v into head-major scratch, runs the kernel, and scatters the
// result back: y[b,i,h*D+d] = out[b,h,i,d]. lse [B,NH,R] is the kernel's layout.
// The scratch and the kernel's ring buffers live outside the plan's arenas (the
// ring kernels allocate their own workspace).
#include "collective.h"

#include <algorithm>
#include <climits>
#include <exception>
#include <vector>

#include "../ring/ring_attention.h"

namespace tiercut {

using namespace tiercut::ring;

namespace {

// The rank's communicator with this op's tags shifted into its own range.
class TaggedComm : public Communicator {
 public:
  TaggedComm(Communicator& base, int offset) : base_(base), offset_(offset) {}
  int rank() const override { return base_.rank(); }
  int size() const override { return base_.size(); }
  int timeout_ms() const override { return base_.timeout_ms(); }
  const char* backend() const override { return base_.backend(); }
  Request isend(const void* data, size_t bytes, int peer, int tag, const std::string& what) override {
    return base_.isend(data, bytes, peer, tag + offset_, what);
  }
  Request irecv(void* data, size_t bytes, int peer, int tag, const std::string& what) override {
    return base_.irecv(data, bytes, peer, tag + offset_, what);
  }
  void wait(Request& r) override { base_.wait(r); }
  void progress() override { base_.progress(); }
  void abort(const std::string& why) override { base_.abort(why); }

 private:
  Communicator& base_;
  int offset_;
};

bool fail(std::string* err, const std::string& msg) {
  *err = msg;
  return false;
}

std::string dims(const TensorView& t) {
  std::string s = "[";
  for (int i = 0; i < t.rank; i++) s += (i ? "," : "") + std::to_string(t.shape[i]);
  return s + "]";
}

bool has_shape(const TensorView& t, std::initializer_list<int64_t> want) {
  if (t.rank != (int)want.size()) return false;
  int i = 0;
  for (int64_t d : want)
    if (t.shape[i++] != d) return false;
  return true;
}

// Moves one of q, k, v (which = 0, 1, 2) of qkv[B,R,3C] to or from head-major [B,NH,R,D].
void to_heads(const float* qkv, int which, float* x, int64_t B, int64_t R, int64_t C, int64_t NH, int64_t width) {
  const int64_t D = C / NH;
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < R; i++)
      for (int64_t h = 0; h < NH; h++) {
        const float* src = qkv + (b * R + i) * width + which * C + h * D;
        float* dst = x + ((b * NH + h) * R + i) * D;
        for (int64_t d = 0; d < D; d++) dst[d] = src[d];
      }
}
void from_heads(const float* x, float* tok, int which, int64_t B, int64_t R, int64_t C, int64_t NH, int64_t width) {
  const int64_t D = C / NH;
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < R; i++)
      for (int64_t h = 0; h < NH; h++) {
        const float* src = x + ((b * NH + h) * R + i) * D;
        float* dst = tok + (b * R + i) * width + which * C + h * D;
        for (int64_t d = 0; d < D; d++) dst[d] = src[d];
      }
}

bool ring_attention_op(Communicator& comm, const OpCall& c, CollectiveStats* cs, std::string* err) {
  const bool fwd = c.kind == OP_RING_ATTENTION;
  const char* op = fwd ? "ring_attention" : "ring_attention_backward";
  const TensorView& qkv = c.in[0];
  if (qkv.rank != 3 || qkv.shape[2] % 3 != 0 || qkv.shape[2] == 0)
    return fail(err, std::string(op) + ": qkv has shape " + dims(qkv) + ", expected [B,R,3C] with C >= 1");
  const int64_t B = qkv.shape[0], R = qkv.shape[1], C = qkv.shape[2] / 3, NH = c.iattr[0], P = c.iattr[1];
  if (NH < 1 || C % NH != 0)
    return fail(err, std::string(op) + ": heads (iattr[0]) is " + std::to_string(NH) + ", expected a positive divisor of C = " + std::to_string(C));
  if (P != comm.size())
    return fail(err, std::string(op) + ": the plan is for " + std::to_string(P) + " ranks (iattr[1]), the communicator has " + std::to_string(comm.size()));
  if (R % 2 != 0) return fail(err, std::string(op) + ": " + std::to_string(R) + " rows are not two zigzag chunks of equal length");
  const int64_t D = C / NH;
  AttentionShape sh{B, NH, R * P, D, true};
  RingOptions options;
  std::string bad = validate_ring_args(sh, (int)P, options.block);
  if (!bad.empty()) return fail(err, std::string(op) + ": " + bad);
  const int64_t n = B * NH * R * D;
  RankStats st;
  if (fwd) {
    const TensorView &y = c.out[0], &lse = c.out[1];
    if (!has_shape(y, {B, R, C})) return fail(err, std::string(op) + ": y has shape " + dims(y) + ", expected [B,R,C]");
    if (!has_shape(lse, {B, NH, R})) return fail(err, std::string(op) + ": lse has shape " + dims(lse) + ", expected [B,NH,R]");
    std::vector<float> q(n), k(n), v(n), out(n);
    to_heads((const float*)qkv.data, 0, q.data(), B, R, C, NH, 3 * C);
    to_heads((const float*)qkv.data, 1, k.data(), B, R, C, NH, 3 * C);
    to_heads((const float*)qkv.data, 2, v.data(), B, R, C, NH, 3 * C);
    ring_attention_forward(comm, sh, options, q.data(), k.data(), v.data(), out.data(), (float*)lse.data, &st);
    from_heads(out.data(), (float*)y.data, 0, B, R, C, NH, C);
    st.peak_bytes += 4 * n * int64_t(sizeof(float));  // q, k, v, out
  } else {
    const TensorView &y = c.in[1], &lse = c.in[2], &dy = c.in[3], &dqkv = c.out[0];
    if (!has_shape(y, {B, R, C}) || !has_shape(dy, {B, R, C}) || !has_shape(lse, {B, NH, R}) || !has_shape(dqkv, {B, R, 3 * C}))
      return fail(err, std::string(op) + ": y" + dims(y) + ", lse" + dims(lse) + ", dy" + dims(dy) + " and dqkv" + dims(dqkv) +
                           " do not match qkv" + dims(qkv) + " (expected [B,R,C], [B,NH,R], [B,R,C], [B,R,3C])");
    std::vector<float> q(n), k(n), v(n), out(n), dout(n), dq(n), dk(n), dv(n);
    to_heads((const float*)qkv.data, 0, q.data(), B, R, C, NH, 3 * C);
    to_heads((const float*)qkv.data, 1, k.data(), B, R, C, NH, 3 * C);
    to_heads((const float*)qkv.data, 2, v.data(), B, R, C, NH, 3 * C);
    to_heads((const float*)y.data, 0, out.data(), B, R, C, NH, C);
    to_heads((const float*)dy.data, 0, dout.data(), B, R, C, NH, C);
    ring_attention_backward(comm, sh, options, q.data(), k.data(), v.data(), out.data(), (const float*)lse.data, dout.data(),
                            dq.data(), dk.data(), dv.data(), &st);
    from_heads(dq.data(), (float*)dqkv.data, 0, B, R, C, NH, 3 * C);
    from_heads(dk.data(), (float*)dqkv.data, 1, B, R, C, NH, 3 * C);
    from_heads(dv.data(), (float*)dqkv.data, 2, B, R, C, NH, 3 * C);
    st.peak_bytes += 8 * n * int64_t(sizeof(float));  // q, k, v, out, dout, dq, dk, dv
  }
  cs->sent_bytes += st.sent_bytes;
  cs->workspace_bytes = std::max(cs->workspace_bytes, st.peak_bytes);
  return true;
}

// Mean over the ranks, exact and the same bits on every rank: the n elements are
// cut into P chunks; a ring reduce-scatter (P-1 steps: send one chunk on, add the
// received one in) leaves rank r with the whole sum of chunk r+1, which it divides
// by P; a ring all-gather (P-1 steps) then copies every finished chunk to every
// rank. Each chunk's sum is computed once, in one order, by one rank.
bool all_reduce_op(Communicator& comm, const OpCall& c, CollectiveStats* cs, std::string* err) {
  const TensorView &x = c.in[0], &y = c.out[0];
  const int64_t P = c.iattr[0];
  if (P != comm.size())
    return fail(err, "all_reduce: the plan is for " + std::to_string(P) + " ranks (iattr[0]), the communicator has " + std::to_string(comm.size()));
  if (x.numel() != y.numel()) return fail(err, "all_reduce: y has shape " + dims(y) + ", expected x's " + dims(x));
  const int64_t n = x.numel();
  const float* xs = (const float*)x.data;
  float* ys = (float*)y.data;
  if (ys != xs)
    for (int64_t i = 0; i < n; i++) ys[i] = xs[i];
  if (P == 1 || n == 0) return true;
  const int r = comm.rank();
  auto mod = [&](int64_t v) { return int((v % P + P) % P); };
  auto start = [&](int ch) { return ch * n / P; };
  auto length = [&](int ch) { return (ch + 1) * n / P - ch * n / P; };
  const int64_t max_chunk = (n + P - 1) / P;
  std::vector<float> in((size_t)max_chunk);
  cs->workspace_bytes = std::max(cs->workspace_bytes, max_chunk * int64_t(sizeof(float)));
  auto name = [](const char* what, int ch, int64_t s) { return std::string(what) + " chunk " + std::to_string(ch) + " (step " + std::to_string(s) + ")"; };
  for (int64_t s = 0; s + 1 < P; s++) {
    const int sc = mod(r - s), rc = mod(r - s - 1);
    Request send = comm.isend(ys + start(sc), sizeof(float) * length(sc), comm.next(), (int)s, name("all-reduce", sc, s));
    Request recv = comm.irecv(in.data(), sizeof(float) * length(rc), comm.prev(), (int)s, name("all-reduce", rc, s));
    cs->sent_bytes += int64_t(sizeof(float)) * length(sc);
    comm.wait(recv);  // receive first: the threads backend's send completes when the receiver copies
    comm.wait(send);
    float* acc = ys + start(rc);
    for (int64_t i = 0; i < length(rc); i++) acc[i] = in[i] + acc[i];
  }
  const int own = mod(r + 1);
  for (int64_t i = start(own); i < start(own) + length(own); i++) ys[i] = ys[i] / float(P);
  for (int64_t s = 0; s + 1 < P; s++) {
    const int sc = mod(r + 1 - s), rc = mod(r - s);
    Request send = comm.isend(ys + start(sc), sizeof(float) * length(sc), comm.next(), int(P + s), name("all-gather", sc, s));
    Request recv = comm.irecv(ys + start(rc), sizeof(float) * length(rc), comm.prev(), int(P + s), name("all-gather", rc, s));
    cs->sent_bytes += int64_t(sizeof(float)) * length(sc);
    comm.wait(recv);
    comm.wait(send);
  }
  return true;
}

}  // namespace

bool is_collective(int32_t kind) {
  return kind == OP_RING_ATTENTION || kind == OP_RING_ATTENTION_BACKWARD || kind == OP_ALL_REDUCE;
}

int collective_tag_span(int ranks) { return 2 * ranks + 2; }

bool run_collective(Communicator& comm, const OpCall& call, int tag_base, CollectiveStats* stats, std::string* err) {
  try {
    TaggedComm tagged(comm, tag_base);
    if (call.kind == OP_ALL_REDUCE) {
      if (call.n_in != 1 || call.n_out != 1) return fail(err, "all_reduce: takes 1 input and gives 1 output");
      return all_reduce_op(tagged, call, stats, err);
    }
    if (call.kind == OP_RING_ATTENTION || call.kind == OP_RING_ATTENTION_BACKWARD) {
      const bool fwd = call.kind == OP_RING_ATTENTION;
      if (call.n_in != (fwd ? 1 : 4) || call.n_out != (fwd ? 2 : 1))
        return fail(err, std::string(fwd ? "ring_attention: takes 1 input and gives 2 outputs" : "ring_attention_backward: takes 4 inputs and gives 1 output"));
      return ring_attention_op(tagged, call, stats, err);
    }
    return fail(err, "run_collective: op kind " + std::to_string(call.kind) + " is not a collective");
  } catch (const std::exception& e) {  // CommError (a timeout names the peer), bad_alloc
    *err = e.what();
    return false;
  }
}

}  // namespace tiercut
