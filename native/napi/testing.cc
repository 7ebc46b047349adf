// testing.cc — exports that let tests reach the native numerics directly:
//   runOp      one kernel through run_op<float|double>, on copies of the inputs
//   halfRound  float -> fp16/bf16 bits, the executor's own conversion
//   halfWiden  fp16/bf16 bits -> float
//   runCollective  one collective op (exec/collective.h) on P rank threads of a ThreadGroup
// All synchronous, main thread, no arenas; only runCollective starts threads (and joins them).
#define TIERCUT_WITH_NAPI 1
#include <cstring>
#include <vector>

#include <exception>
#include <stdexcept>

#include "../exec/collective.h"
#include "../exec/half.h"
#include "../ring/comm_threads.h"
#include "../kernels/dispatch.h"
#include "../plan/program.h"
#include "exports.h"

namespace tiercut {

static const char* typed_array_name(napi_typedarray_type t) {
  switch (t) {
    case napi_int8_array: return "Int8Array";
    case napi_uint8_array: return "Uint8Array";
    case napi_uint8_clamped_array: return "Uint8ClampedArray";
    case napi_int16_array: return "Int16Array";
    case napi_uint16_array: return "Uint16Array";
    case napi_int32_array: return "Int32Array";
    case napi_uint32_array: return "Uint32Array";
    case napi_float32_array: return "Float32Array";
    case napi_float64_array: return "Float64Array";
    case napi_bigint64_array: return "BigInt64Array";
    case napi_biguint64_array: return "BigUint64Array";
    default: return "a typed array";
  }
}

static std::string describe_array(const Napi::Value& v) {
  if (v.IsTypedArray()) return typed_array_name(v.As<Napi::TypedArray>().TypedArrayType());
  return describe_value(v);
}

static Napi::Array read_list(const Napi::Value& v, const std::string& field, uint32_t max_len) {
  if (!v.IsArray()) throw Napi::TypeError::New(v.Env(), field + ": expected an array, got " + describe_value(v));
  Napi::Array a = v.As<Napi::Array>();
  if (a.Length() > max_len)
    throw Napi::RangeError::New(v.Env(), field + ": expected at most " + std::to_string(max_len) + " entries, got " +
                                             std::to_string(a.Length()));
  return a;
}

static void read_shape(const Napi::Value& v, const std::string& field, TensorView* t) {
  if (!v.IsObject()) throw Napi::TypeError::New(v.Env(), field + ": expected an object, got " + describe_value(v));
  Napi::Array shape = read_list(v.As<Napi::Object>().Get("shape"), field + ".shape", kMaxRank);
  t->rank = (int32_t)shape.Length();
  int64_t numel = 1;
  for (uint32_t d = 0; d < shape.Length(); d++) {
    t->shape[d] = read_int(shape.Get(d), field + ".shape[" + std::to_string(d) + "]", 0, (int64_t)1 << 40);
    // (as the plan reader: [2^32, 2^32] had wrapped to 0 elements, passed the data's length check, and the kernel ran past it)
    if (t->shape[d] > 0 && numel > ((int64_t)1 << 50) / t->shape[d])
      throw Napi::RangeError::New(v.Env(), field + ".shape: more than 2^50 elements");
    numel *= t->shape[d];
  }
}

template <typename T>
static Napi::Value run_op_typed(const Napi::CallbackInfo& info, int32_t kind, napi_typedarray_type float_type) {
  Napi::Env env = info.Env();
  OpCall call;
  call.kind = kind;
  Napi::Array iattr = read_list(info[2], "runOp: iattr", 8);
  Napi::Array fattr = read_list(info[3], "runOp: fattr", 8);
  for (uint32_t a = 0; a < iattr.Length(); a++)
    call.iattr[a] = read_int(iattr.Get(a), "runOp: iattr[" + std::to_string(a) + "]", -9007199254740991LL, 9007199254740991LL);
  for (uint32_t a = 0; a < fattr.Length(); a++) call.fattr[a] = read_number(fattr.Get(a), "runOp: fattr[" + std::to_string(a) + "]");

  // inputs: copied, so that no kernel (adam updates in place) can touch the caller's arrays
  Napi::Array inputs = read_list(info[4], "runOp: inputs", kMaxOperands);
  std::vector<std::vector<uint8_t>> in_bytes(inputs.Length());
  call.n_in = (int32_t)inputs.Length();
  for (uint32_t j = 0; j < inputs.Length(); j++) {
    std::string f = "runOp: inputs[" + std::to_string(j) + "]";
    read_shape(inputs.Get(j), f, &call.in[j]);
    Napi::Value d = inputs.Get(j).As<Napi::Object>().Get("data");
    bool ok = d.IsTypedArray() && (d.As<Napi::TypedArray>().TypedArrayType() == float_type ||
                                   d.As<Napi::TypedArray>().TypedArrayType() == napi_int32_array);
    if (!ok)
      throw Napi::TypeError::New(env, f + ".data: expected " + typed_array_name(float_type) + " or Int32Array, got " +
                                          describe_array(d));
    Napi::TypedArray ta = d.As<Napi::TypedArray>();
    int64_t numel = call.in[j].numel();
    if ((int64_t)ta.ElementLength() != numel)
      throw Napi::RangeError::New(env, f + ".data: expected " + std::to_string(numel) + " elements for its shape, got " +
                                           std::to_string(ta.ElementLength()));
    in_bytes[j].resize(ta.ByteLength() + 8);  // + 8: never a null pointer, even for 0 elements
    std::memcpy(in_bytes[j].data(), (const uint8_t*)ta.ArrayBuffer().Data() + ta.ByteOffset(), ta.ByteLength());
    call.in[j].data = in_bytes[j].data();
  }

  Napi::Array outputs = read_list(info[5], "runOp: outputs", kMaxOperands);
  std::vector<std::vector<T>> out_data(outputs.Length());
  call.n_out = (int32_t)outputs.Length();
  for (uint32_t j = 0; j < outputs.Length(); j++) {
    read_shape(outputs.Get(j), "runOp: outputs[" + std::to_string(j) + "]", &call.out[j]);
    out_data[j].assign((size_t)call.out[j].numel() + 1, T(0));
    call.out[j].data = out_data[j].data();
  }

  std::string err;
  if (!run_op<T>(call, &err)) throw Napi::Error::New(env, err);

  Napi::Array result = Napi::Array::New(env, outputs.Length());
  for (uint32_t j = 0; j < outputs.Length(); j++) {
    size_t n = (size_t)call.out[j].numel();
    if constexpr (std::is_same<T, float>::value) {
      Napi::Float32Array a = Napi::Float32Array::New(env, n);
      if (n) std::memcpy(a.Data(), out_data[j].data(), n * sizeof(T));
      result.Set(j, a);
    } else {
      Napi::Float64Array a = Napi::Float64Array::New(env, n);
      if (n) std::memcpy(a.Data(), out_data[j].data(), n * sizeof(T));
      result.Set(j, a);
    }
  }
  return result;
}

Napi::Value run_op_js(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int32_t kind = (int32_t)read_int(info[0], "runOp: kind", 0, OP_KIND_COUNT - 1);
  Napi::Value dt = info[1];
  std::string dtype = dt.IsString() ? dt.As<Napi::String>().Utf8Value() : "";
  if (dtype == "f32") return run_op_typed<float>(info, kind, napi_float32_array);
  if (dtype == "f64") return run_op_typed<double>(info, kind, napi_float64_array);
  throw Napi::TypeError::New(env, "runOp: dtype: expected 'f32' or 'f64', got " +
                                      (dt.IsString() ? "'" + dtype + "'" : describe_value(dt)));
}

static bool read_half_type(const Napi::CallbackInfo& info, const char* fn) {
  Napi::Value v = info[1];
  std::string s = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
  if (s == "fp16") return false;
  if (s == "bf16") return true;
  throw Napi::TypeError::New(info.Env(), std::string(fn) + ": type: expected 'fp16' or 'bf16', got " +
                                             (v.IsString() ? "'" + s + "'" : describe_value(v)));
}

Napi::Value half_round_js(const Napi::CallbackInfo& info) {
  Napi::Value v = info[0];
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
    throw Napi::TypeError::New(info.Env(), "halfRound: values: expected a Float32Array, got " + describe_array(v));
  bool bf16 = read_half_type(info, "halfRound");
  Napi::Float32Array src = v.As<Napi::Float32Array>();
  Napi::Uint16Array out = Napi::Uint16Array::New(info.Env(), src.ElementLength());
  half_round(src.Data(), out.Data(), (int64_t)src.ElementLength(), bf16);
  return out;
}

Napi::Value half_widen_js(const Napi::CallbackInfo& info) {
  Napi::Value v = info[0];
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_uint16_array)
    throw Napi::TypeError::New(info.Env(), "halfWiden: bits: expected a Uint16Array, got " + describe_array(v));
  bool bf16 = read_half_type(info, "halfWiden");
  Napi::Uint16Array src = v.As<Napi::Uint16Array>();
  Napi::Float32Array out = Napi::Float32Array::New(info.Env(), src.ElementLength());
  half_widen(src.Data(), out.Data(), (int64_t)src.ElementLength(), bf16);
  return out;
}

// runCollective({ kind, iattr, timeoutMs?, inputs, outputs }): inputs[r] holds rank r's
// operands ({ shape, data: Float32Array }), outputs the output shapes (the same on
// every rank). Runs the op on inputs.length rank threads; returns { outputs[r][k]:
// Float32Array, sentBytes[r], workspaceBytes[r] }. Throws the first failing rank's message.
Napi::Value run_collective_js(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsObject()) throw Napi::TypeError::New(env, "runCollective: expected an options object");
  Napi::Object o = info[0].As<Napi::Object>();
  const int32_t kind = (int32_t)read_int(o.Get("kind"), "runCollective: kind", 0, OP_KIND_COUNT - 1);
  if (!is_collective(kind)) throw Napi::RangeError::New(env, "runCollective: kind " + std::to_string(kind) + " is not a collective");
  Napi::Array iattr = read_list(o.Get("iattr"), "runCollective: iattr", 8);
  const int timeout_ms = o.Get("timeoutMs").IsUndefined() ? 120000 : (int)read_int(o.Get("timeoutMs"), "runCollective: timeoutMs", 1, 1 << 30);
  Napi::Array ranks_in = read_list(o.Get("inputs"), "runCollective: inputs", 1024);
  Napi::Array outs = read_list(o.Get("outputs"), "runCollective: outputs", kMaxOperands);
  const int P = (int)ranks_in.Length();
  if (P < 1) throw Napi::RangeError::New(env, "runCollective: inputs: expected one operand list per rank");
  std::vector<std::vector<std::vector<float>>> in_data(P);
  std::vector<OpCall> calls(P);
  for (int r = 0; r < P; r++) {
    std::string field = "runCollective: inputs[" + std::to_string(r) + "]";
    Napi::Array ops = read_list(ranks_in.Get(r), field, kMaxOperands);
    OpCall& c = calls[r];
    c.kind = kind;
    c.n_in = (int32_t)ops.Length();
    c.n_out = (int32_t)outs.Length();
    for (uint32_t j = 0; j < iattr.Length(); j++) c.iattr[j] = read_int(iattr.Get(j), "runCollective: iattr[" + std::to_string(j) + "]", INT32_MIN, INT32_MAX);
    for (int j = 0; j < c.n_in; j++) {
      std::string f = field + "[" + std::to_string(j) + "]";
      read_shape(ops.Get(j), f, &c.in[j]);
      Napi::Value d = ops.Get(j).As<Napi::Object>().Get("data");
      if (!d.IsTypedArray() || d.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
        throw Napi::TypeError::New(env, f + ".data: expected a Float32Array, got " + describe_array(d));
      Napi::Float32Array a = d.As<Napi::Float32Array>();
      if ((int64_t)a.ElementLength() != c.in[j].numel())
        throw Napi::RangeError::New(env, f + ".data: expected " + std::to_string(c.in[j].numel()) + " elements, got " + std::to_string(a.ElementLength()));
      in_data[r].emplace_back(a.Data(), a.Data() + a.ElementLength());
    }
    for (int j = 0; j < c.n_out; j++) read_shape(outs.Get(j), "runCollective: outputs[" + std::to_string(j) + "]", &c.out[j]);
  }
  std::vector<std::vector<std::vector<float>>> out_data(P);
  for (int r = 0; r < P; r++) {
    for (int j = 0; j < calls[r].n_in; j++) calls[r].in[j].data = in_data[r][j].data();
    for (int j = 0; j < calls[r].n_out; j++) {
      out_data[r].emplace_back((size_t)calls[r].out[j].numel());
      calls[r].out[j].data = out_data[r][j].data();
    }
  }
  std::vector<CollectiveStats> cstats(P);
  try {
    ring::run_as_threads(P, timeout_ms, [&](ring::Communicator& comm) {
      std::string err;
      if (!run_collective(comm, calls[comm.rank()], 0, &cstats[comm.rank()], &err)) throw std::runtime_error(err);
    });
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, std::string("runCollective: ") + e.what());
  }
  Napi::Array res_outs = Napi::Array::New(env, P), res_sent = Napi::Array::New(env, P), res_ws = Napi::Array::New(env, P);
  for (int r = 0; r < P; r++) {
    Napi::Array per = Napi::Array::New(env, out_data[r].size());
    for (size_t j = 0; j < out_data[r].size(); j++) {
      Napi::Float32Array a = Napi::Float32Array::New(env, out_data[r][j].size());
      std::memcpy(a.Data(), out_data[r][j].data(), sizeof(float) * out_data[r][j].size());
      per.Set((uint32_t)j, a);
    }
    res_outs.Set((uint32_t)r, per);
    res_sent.Set((uint32_t)r, Napi::Number::New(env, (double)cstats[r].sent_bytes));
    res_ws.Set((uint32_t)r, Napi::Number::New(env, (double)cstats[r].workspace_bytes));
  }
  Napi::Object res = Napi::Object::New(env);
  res.Set("outputs", res_outs);
  res.Set("sentBytes", res_sent);
  res.Set("workspaceBytes", res_ws);
  return res;
}

}  // namespace tiercut
