// mpi_addon.cc — the export table and N-API glue of tiercut_ring_mpi.node: ring
// attention with each rank a process under mpirun (MpiComm). A separate addon
// so that tiercut_native.node never links libmpi or initialises MPI; only a
// process that loads this one and calls start() joins an MPI job. Built with
// TIERCUT_HAVE_MPI=0 when mpicxx was absent at build time: then haveMpi is
// false and every function throws saying so. The contract is declared in
// runtime/binding.ts (NativeRingMpiAddon). All calls synchronous, main thread.
#include <napi.h>

#include <memory>

#include "ring_napi.h"
#if TIERCUT_HAVE_MPI
#include "comm_mpi.h"
#endif

namespace tiercut::ring {

#if TIERCUT_HAVE_MPI

static std::unique_ptr<MpiComm> g_comm;

static MpiComm& comm_for(const RingArgs& a, int timeout_ms) {
  if (!g_comm) throw Napi::Error::New(a.env(), a.fn() + ": call start() first");
  g_comm->set_timeout_ms(timeout_ms);
  return *g_comm;
}

static Napi::Value start_js(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::pair<int, int> rs;
  try {
    rs = mpi_start();
    if (!g_comm) g_comm = std::make_unique<MpiComm>(120000);
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, std::string("start: ") + e.what());
  }
  Napi::Object o = Napi::Object::New(env);
  o.Set("rank", rs.first);
  o.Set("size", rs.second);
  return o;
}

static Napi::Value stop_js(const Napi::CallbackInfo& info) {
  g_comm.reset();
  mpi_stop();
  return info.Env().Undefined();
}

static Napi::Value abort_js(const Napi::CallbackInfo& info) {
  std::string why = info[0].IsString() ? info[0].As<Napi::String>().Utf8Value() : "aborted";
  mpi_abort_world(why, 1);
}

struct Local {
  AttentionShape shape;
  RingOptions options;
  int timeout_ms;
  int64_t rows;
};

static Local read_local(const RingArgs& a) {
  Local l;
  l.shape = read_shape(a);
  l.options.block = a.integer("block", 1, 1 << 16, true, 64);
  l.timeout_ms = int(a.integer("timeoutMs", 1, 1 << 30, true, 120000));
  MpiComm& c = comm_for(a, l.timeout_ms);
  std::string err = validate_ring_args(l.shape, c.size(), l.options.block);
  if (!err.empty()) throw Napi::RangeError::New(a.env(), a.fn() + ": " + err);
  l.rows = shard_rows(l.shape.seq, c.size(), c.rank());
  return l;
}

static Napi::Value forward_js(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RingArgs a(info[0], "ringAttention");
  Local l = read_local(a);
  const AttentionShape& sh = l.shape;
  const int64_t n = sh.batch * sh.heads * l.rows;
  RingInputs in = read_inputs(a, n, sh.dim, "shardRows", false);
  Napi::Float32Array out = new_floats(env, n * sh.dim), lse = new_floats(env, n);
  std::vector<RankStats> stats(1);
  try {
    ring_attention_forward(*g_comm, sh, l.options, in.q, in.k, in.v, out.Data(), lse.Data(), &stats[0]);
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, std::string("ringAttention: ") + e.what());
  }
  return forward_result(env, out, lse, stats);
}

static Napi::Value backward_js(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RingArgs a(info[0], "ringAttentionBackward");
  Local l = read_local(a);
  const AttentionShape& sh = l.shape;
  const int64_t n = sh.batch * sh.heads * l.rows;
  RingInputs in = read_inputs(a, n, sh.dim, "shardRows", true);
  Napi::Float32Array dq = new_floats(env, n * sh.dim), dk = new_floats(env, n * sh.dim), dv = new_floats(env, n * sh.dim);
  std::vector<RankStats> stats(1);
  try {
    ring_attention_backward(*g_comm, sh, l.options, in.q, in.k, in.v, in.out, in.lse, in.dout, dq.Data(), dk.Data(),
                            dv.Data(), &stats[0]);
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, std::string("ringAttentionBackward: ") + e.what());
  }
  return backward_result(env, dq, dk, dv, stats);
}

#else  // built without MPI

static Napi::Value no_mpi(const Napi::CallbackInfo& info) {
  throw Napi::Error::New(info.Env(),
                         "tiercut_ring_mpi was built without MPI (mpicxx was not found at build time); install "
                         "openmpi-bin and libopenmpi-dev, then run: npx node-gyp rebuild");
}
static Napi::Value start_js(const Napi::CallbackInfo& info) { return no_mpi(info); }
static Napi::Value stop_js(const Napi::CallbackInfo& info) { return info.Env().Undefined(); }
static Napi::Value abort_js(const Napi::CallbackInfo& info) { return no_mpi(info); }
static Napi::Value forward_js(const Napi::CallbackInfo& info) { return no_mpi(info); }
static Napi::Value backward_js(const Napi::CallbackInfo& info) { return no_mpi(info); }

#endif

}  // namespace tiercut::ring

static Napi::Object init(Napi::Env env, Napi::Object exports) {
  using namespace tiercut::ring;
  exports.Set("haveMpi", Napi::Boolean::New(env, TIERCUT_HAVE_MPI != 0));
  exports.Set("start", Napi::Function::New(env, start_js, "start"));
  exports.Set("stop", Napi::Function::New(env, stop_js, "stop"));
  exports.Set("abort", Napi::Function::New(env, abort_js, "abort"));
  exports.Set("ringAttention", Napi::Function::New(env, forward_js, "ringAttention"));
  exports.Set("ringAttentionBackward", Napi::Function::New(env, backward_js, "ringAttentionBackward"));
  return exports;
}

NODE_API_MODULE(tiercut_ring_mpi, init)
