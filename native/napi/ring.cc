// ring.cc — ringAttention / ringAttentionBackward on tiercut_native.node: ring
// attention with the ranks run as threads (native/ring/ring_threads.h).
// Synchronous: parses the options (ring_napi.h), runs the P rank threads over
// the caller's arrays (read-only) and fresh output arrays, joins them, and
// returns. The contract is declared in runtime/binding.ts.
#include <stdexcept>

#include "../ring/comm.h"
#include "../ring/ring_napi.h"
#include "../ring/ring_threads.h"
#include "exports.h"

namespace tiercut {

using namespace tiercut::ring;

static ThreadedRing read_ring(const RingArgs& a, const AttentionShape& sh) {
  ThreadedRing ring;
  ring.ranks = int(a.integer("ranks", 1, 1 << 16));
  ring.options.block = a.integer("block", 1, 1 << 16, true, 64);
  ring.timeout_ms = int(a.integer("timeoutMs", 1, 1 << 30, true, 120000));
  std::string err = validate_ring_args(sh, ring.ranks, ring.options.block);
  if (!err.empty()) throw Napi::RangeError::New(a.env(), a.fn() + ": " + err);
  return ring;
}

Napi::Value ring_attention_js(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RingArgs a(info[0], "ringAttention");
  AttentionShape sh = read_shape(a);
  ThreadedRing ring = read_ring(a, sh);
  const int64_t n = sh.batch * sh.heads * sh.seq;
  RingInputs in = read_inputs(a, n, sh.dim, "seq", false);
  Napi::Float32Array out = new_floats(env, n * sh.dim), lse = new_floats(env, n);
  std::vector<RankStats> stats;
  try {
    ring_forward_threads(sh, ring, in.q, in.k, in.v, out.Data(), lse.Data(), &stats);
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, std::string("ringAttention: ") + e.what());
  }
  return forward_result(env, out, lse, stats);
}

Napi::Value ring_attention_backward_js(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RingArgs a(info[0], "ringAttentionBackward");
  AttentionShape sh = read_shape(a);
  ThreadedRing ring = read_ring(a, sh);
  const int64_t n = sh.batch * sh.heads * sh.seq;
  RingInputs in = read_inputs(a, n, sh.dim, "seq", true);
  Napi::Float32Array dq = new_floats(env, n * sh.dim), dk = new_floats(env, n * sh.dim), dv = new_floats(env, n * sh.dim);
  std::vector<RankStats> stats;
  try {
    ring_backward_threads(sh, ring, in.q, in.k, in.v, in.out, in.lse, in.dout, dq.Data(), dk.Data(), dv.Data(), &stats);
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, std::string("ringAttentionBackward: ") + e.what());
  }
  return backward_result(env, dq, dk, dv, stats);
}

}  // namespace tiercut
