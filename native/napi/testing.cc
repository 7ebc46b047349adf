// testing.cc — exports that let tests reach the native numerics directly:
//   runOp      one kernel through run_op<float|double>, on copies of the inputs
//   halfRound  float -> fp16/bf16 bits, the executor's own conversion
//   halfWiden  fp16/bf16 bits -> float
// All synchronous, main thread, no arenas, no threads.
#define TIERCUT_WITH_NAPI 1
#include <cstring>
#include <vector>

#include "../exec/half.h"
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
  for (uint32_t d = 0; d < shape.Length(); d++)
    t->shape[d] = read_int(shape.Get(d), field + ".shape[" + std::to_string(d) + "]", 0, (int64_t)1 << 40);
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

}  // namespace tiercut
