// ring_napi.h — argument parsing and result building shared by the two addons
// that expose ring attention (tiercut_native: native/napi/ring.cc, threads;
// tiercut_ring_mpi: native/ring/mpi_addon.cc). Main thread only. Every error
// names the function and the argument: "ringAttention: q: expected a
// Float32Array of 1184 elements (batch*heads*seq*dim), got 1000".
#pragma once
#include <napi.h>

#include <cmath>
#include <string>
#include <vector>

#include "ring_attention.h"

namespace tiercut::ring {

inline std::string describe_js(const Napi::Value& v) {
  if (v.IsUndefined()) return "undefined";
  if (v.IsNull()) return "null";
  if (v.IsBoolean()) return v.As<Napi::Boolean>().Value() ? "true" : "false";
  if (v.IsNumber()) {
    double d = v.As<Napi::Number>().DoubleValue();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e15) return std::to_string((long long)d);
    return std::to_string(d);
  }
  if (v.IsString()) return "a string";
  if (v.IsTypedArray()) return "a typed array of another type";
  if (v.IsArray()) return "an array";
  if (v.IsFunction()) return "a function";
  return "an object";
}

class RingArgs {
 public:
  RingArgs(const Napi::Value& v, std::string fn) : fn_(std::move(fn)) {
    if (!v.IsObject() || v.IsArray()) throw Napi::TypeError::New(v.Env(), fn_ + ": expected an options object, got " + describe_js(v));
    o_ = v.As<Napi::Object>();
  }
  Napi::Env env() const { return o_.Env(); }

  int64_t integer(const char* name, int64_t lo, int64_t hi, bool optional = false, int64_t def = 0) const {
    Napi::Value v = o_.Get(name);
    if (optional && v.IsUndefined()) return def;
    double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : NAN;
    if (!std::isfinite(d) || d != std::floor(d) || d < double(lo) || d > double(hi))
      throw Napi::RangeError::New(env(), fn_ + ": " + name + ": expected an integer in [" + std::to_string(lo) + ", " +
                                             std::to_string(hi) + "], got " + describe_js(v));
    return int64_t(d);
  }
  bool boolean(const char* name, bool optional = false, bool def = false) const {
    Napi::Value v = o_.Get(name);
    if (optional && v.IsUndefined()) return def;
    if (!v.IsBoolean()) throw Napi::TypeError::New(env(), fn_ + ": " + name + ": expected a boolean, got " + describe_js(v));
    return v.As<Napi::Boolean>().Value();
  }
  // A Float32Array of exactly n elements; the pointer is valid while the call runs.
  const float* floats(const char* name, int64_t n, const char* what) const {
    Napi::Value v = o_.Get(name);
    if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
      throw Napi::TypeError::New(env(), fn_ + ": " + name + ": expected a Float32Array, got " + describe_js(v));
    Napi::Float32Array a = v.As<Napi::Float32Array>();
    if (int64_t(a.ElementLength()) != n)
      throw Napi::RangeError::New(env(), fn_ + ": " + name + ": expected " + std::to_string(n) + " elements (" + what +
                                             "), got " + std::to_string(a.ElementLength()));
    return a.Data();
  }
  const std::string& fn() const { return fn_; }

 private:
  Napi::Object o_;
  std::string fn_;
};

// batch, heads, seq, dim, causal; throws RangeError naming the argument.
inline AttentionShape read_shape(const RingArgs& a) {
  AttentionShape s;
  const int64_t big = int64_t(1) << 40;
  s.batch = a.integer("batch", 1, big);
  s.heads = a.integer("heads", 1, big);
  s.seq = a.integer("seq", 1, big);
  s.dim = a.integer("dim", 1, big);
  s.causal = a.boolean("causal", true, false);
  return s;
}

// The arrays of one call: n = batch*heads*rows query rows of `dim` each, where
// `rows` names the row count in messages ("seq", or "shardRows" on one MPI rank).
struct RingInputs {
  const float *q = nullptr, *k = nullptr, *v = nullptr;                 // forward and backward
  const float *out = nullptr, *lse = nullptr, *dout = nullptr;          // backward only
};

inline RingInputs read_inputs(const RingArgs& a, int64_t n, int64_t dim, const std::string& rows, bool backward) {
  const std::string what = "batch*heads*" + rows + "*dim", lse_what = "batch*heads*" + rows;
  RingInputs in;
  in.q = a.floats("q", n * dim, what.c_str());
  in.k = a.floats("k", n * dim, what.c_str());
  in.v = a.floats("v", n * dim, what.c_str());
  if (backward) {
    in.out = a.floats("out", n * dim, what.c_str());
    in.lse = a.floats("lse", n, lse_what.c_str());
    in.dout = a.floats("dout", n * dim, what.c_str());
  }
  return in;
}

inline Napi::Float32Array new_floats(Napi::Env env, int64_t n) { return Napi::Float32Array::New(env, size_t(n)); }

inline Napi::Object stats_to_js(Napi::Env env, const std::vector<RankStats>& ranks) {
  Napi::Array arr = Napi::Array::New(env, ranks.size());
  for (size_t i = 0; i < ranks.size(); i++) {
    const RankStats& s = ranks[i];
    Napi::Object o = Napi::Object::New(env);
    o.Set("rank", double(i));
    o.Set("rows", double(s.rows));
    o.Set("seconds", s.seconds);
    o.Set("computeSeconds", s.compute_seconds);
    o.Set("waitSeconds", s.wait_seconds);
    o.Set("peakBytes", double(s.peak_bytes));
    o.Set("sentBytes", double(s.sent_bytes));
    arr.Set(uint32_t(i), o);
  }
  Napi::Object st = Napi::Object::New(env);
  st.Set("ranks", arr);
  return st;
}

// The results both addons return: { out, lse, stats } and { dq, dk, dv, stats }.
inline Napi::Object forward_result(Napi::Env env, Napi::Float32Array out, Napi::Float32Array lse,
                                   const std::vector<RankStats>& stats) {
  Napi::Object res = Napi::Object::New(env);
  res.Set("out", out);
  res.Set("lse", lse);
  res.Set("stats", stats_to_js(env, stats));
  return res;
}

inline Napi::Object backward_result(Napi::Env env, Napi::Float32Array dq, Napi::Float32Array dk, Napi::Float32Array dv,
                                    const std::vector<RankStats>& stats) {
  Napi::Object res = Napi::Object::New(env);
  res.Set("dq", dq);
  res.Set("dk", dk);
  res.Set("dv", dv);
  res.Set("stats", stats_to_js(env, stats));
  return res;
}

}  // namespace tiercut::ring
