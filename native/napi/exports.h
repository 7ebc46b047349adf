// exports.h — the N-API functions addon.cc puts on the module's exports.
// Everything here runs on the JS main thread; runtime/binding.ts documents each
// one (sync or async, what it throws).
#pragma once
#include <napi.h>

namespace tiercut {

// session.cc
Napi::Value create_session(const Napi::CallbackInfo& info);   // createSession(program)
void init_session_class(Napi::Env env);                       // once, from addon.cc
Napi::Value create_ring_group(const Napi::CallbackInfo& info); // createRingGroup(ranks, timeoutMs)
Napi::Value step_group(const Napi::CallbackInfo& info);        // stepGroup(sessions, step, opts)

// testing.cc
Napi::Value run_op_js(const Napi::CallbackInfo& info);        // runOp(kind, dtype, iattr, fattr, inputs, outputs)
Napi::Value half_round_js(const Napi::CallbackInfo& info);    // halfRound(values, 'fp16' | 'bf16')
Napi::Value half_widen_js(const Napi::CallbackInfo& info);    // halfWiden(bits, 'fp16' | 'bf16')

// ring.cc
Napi::Value ring_attention_js(const Napi::CallbackInfo& info);           // ringAttention(options)
Napi::Value ring_attention_backward_js(const Napi::CallbackInfo& info);  // ringAttentionBackward(options)
Napi::Value run_collective_js(const Napi::CallbackInfo& info);           // runCollective(kind, iattr, ranks, outputs)

// adam.cc
Napi::Value adam_step_js(const Napi::CallbackInfo& info);        // adamStep(options)
Napi::Value adam_roofline_js(const Napi::CallbackInfo& info);    // adamRoofline(options)
Napi::Value adam_info_js(const Napi::CallbackInfo& info);        // adamInfo()
Napi::Value adam_tile_trace_js(const Napi::CallbackInfo& info);  // adamTileTrace(options)
Napi::Value adam_half_round_js(const Napi::CallbackInfo& info);  // adamHalfRound(values, type, isa)
Napi::Value adam_half_widen_js(const Napi::CallbackInfo& info);  // adamHalfWiden(bits, type, isa)
Napi::Value adam_copy_grads_js(const Napi::CallbackInfo& info);  // adamCopyGrads(options)

// calibrate.cc
Napi::Value host_bandwidth_js(const Napi::CallbackInfo& info);  // hostBandwidth(options)
Napi::Value nvme_bench_js(const Napi::CallbackInfo& info);      // nvmeBench(options)
Napi::Value nvme_backends_js(const Napi::CallbackInfo& info);   // nvmeBackends()
Napi::Value nvme_latency_js(const Napi::CallbackInfo& info);    // nvmeLatency(options)
Napi::Value nvme_batch_js(const Napi::CallbackInfo& info);      // nvmeBatch(options)

}  // namespace tiercut
