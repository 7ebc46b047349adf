// addon.cc — the export table of tiercut_native.node. Nothing else lives here;
// the contract (types, sync/async, errors) is declared in runtime/binding.ts.
#include <napi.h>

#include "napi/exports.h"

static Napi::Object init(Napi::Env env, Napi::Object exports) {
  tiercut::init_session_class(env);
  exports.Set("createSession", Napi::Function::New(env, tiercut::create_session, "createSession"));
  exports.Set("createRingGroup", Napi::Function::New(env, tiercut::create_ring_group, "createRingGroup"));
  exports.Set("stepGroup", Napi::Function::New(env, tiercut::step_group, "stepGroup"));
  exports.Set("runCollective", Napi::Function::New(env, tiercut::run_collective_js, "runCollective"));
  exports.Set("runOp", Napi::Function::New(env, tiercut::run_op_js, "runOp"));
  exports.Set("halfRound", Napi::Function::New(env, tiercut::half_round_js, "halfRound"));
  exports.Set("halfWiden", Napi::Function::New(env, tiercut::half_widen_js, "halfWiden"));
  exports.Set("ringAttention", Napi::Function::New(env, tiercut::ring_attention_js, "ringAttention"));
  exports.Set("ringAttentionBackward",
              Napi::Function::New(env, tiercut::ring_attention_backward_js, "ringAttentionBackward"));
  exports.Set("adamStep", Napi::Function::New(env, tiercut::adam_step_js, "adamStep"));
  exports.Set("adamRoofline", Napi::Function::New(env, tiercut::adam_roofline_js, "adamRoofline"));
  exports.Set("adamInfo", Napi::Function::New(env, tiercut::adam_info_js, "adamInfo"));
  exports.Set("adamTileTrace", Napi::Function::New(env, tiercut::adam_tile_trace_js, "adamTileTrace"));
  exports.Set("adamHalfRound", Napi::Function::New(env, tiercut::adam_half_round_js, "adamHalfRound"));
  exports.Set("adamHalfWiden", Napi::Function::New(env, tiercut::adam_half_widen_js, "adamHalfWiden"));
  exports.Set("adamCopyGrads", Napi::Function::New(env, tiercut::adam_copy_grads_js, "adamCopyGrads"));
  exports.Set("hostBandwidth", Napi::Function::New(env, tiercut::host_bandwidth_js, "hostBandwidth"));
  exports.Set("nvmeBench", Napi::Function::New(env, tiercut::nvme_bench_js, "nvmeBench"));
  exports.Set("nvmeBackends", Napi::Function::New(env, tiercut::nvme_backends_js, "nvmeBackends"));
  exports.Set("nvmeLatency", Napi::Function::New(env, tiercut::nvme_latency_js, "nvmeLatency"));
  exports.Set("nvmeBatch", Napi::Function::New(env, tiercut::nvme_batch_js, "nvmeBatch"));
  return exports;
}

NODE_API_MODULE(tiercut_native, init)
