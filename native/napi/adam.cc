// adam.cc — the N-API side of the fused CPU Adam (native/adam/cpu_adam.h):
//   adamStep      one step on caller-owned typed arrays, in place (sync)
//   adamRoofline  the streaming roofline kernel, for the benchmark (sync)
//   adamInfo      which paths this CPU has and the pool size
//   adamTileTrace for tests: a step on internal buffers that records the
//                 in-order tile completion events and copies each finished
//                 half tile out from inside the event
//   adamHalfRound for tests: one path's float -> fp16/bf16 conversion
//   adamCopyGrads for tests and the benchmark: the runtime's gradient copy
//                 with the inf/NaN check riding on it, or a plain memcpy
// Arguments are parsed once on the main thread into plain structs; the work
// then runs on the shared thread pool while the main thread waits (all calls
// are synchronous). runtime/adam.ts validates arguments first with the public
// messages; the checks here keep a bad call from ever touching memory it
// should not, and name the field too.
#define TIERCUT_WITH_NAPI 1
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "../adam/cpu_adam.h"
#include "../exec/half.h"
#include "../plan/program.h"
#include "exports.h"

namespace tiercut {

namespace {

Napi::TypedArray typed(const Napi::Object& o, const char* fn, const char* field, napi_typedarray_type want,
                       const char* want_name) {
  Napi::Value v = o.Get(field);
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != want)
    throw Napi::TypeError::New(o.Env(), std::string(fn) + ": " + field + ": expected a " + want_name + ", got " +
                                            describe_value(v));
  return v.As<Napi::TypedArray>();
}

void* data_of(const Napi::TypedArray& a) {
  return (uint8_t*)a.ArrayBuffer().Data() + a.ByteOffset();
}

void want_length(const Napi::TypedArray& a, const char* fn, const char* field, size_t n) {
  if (a.ElementLength() != n)
    throw Napi::RangeError::New(a.Env(), std::string(fn) + ": " + field + ": expected " + std::to_string(n) +
                                             " elements to match params, got " + std::to_string(a.ElementLength()));
}

double finite_number(const Napi::Object& o, const char* fn, const char* field) {
  double d = read_number(o.Get(field), std::string(fn) + ": " + field);
  if (!std::isfinite(d))
    throw Napi::RangeError::New(o.Env(), std::string(fn) + ": " + field + ": expected a finite number, got " +
                                             (std::isnan(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity"));
  return d;
}

AdamIsa read_isa(const Napi::Object& o, const char* fn) {
  Napi::Value v = o.Get("isa");
  std::string name;
  if (!v.IsUndefined() && !v.IsNull()) {
    if (!v.IsString()) throw Napi::TypeError::New(o.Env(), std::string(fn) + ": isa: expected a string, got " + describe_value(v));
    name = v.As<Napi::String>().Utf8Value();
  }
  AdamIsa isa;
  std::string err;
  if (!adam_select_isa(name, &isa, &err)) throw Napi::Error::New(o.Env(), std::string(fn) + ": " + err);
  return isa;
}

int read_threads(const Napi::Object& o, const char* fn) {
  Napi::Value v = o.Get("threads");
  if (v.IsUndefined()) return 0;
  return (int)read_int(v, std::string(fn) + ": threads", 1, adam_max_threads());
}

Napi::Object want_object(const Napi::CallbackInfo& info, const char* fn) {
  if (!info[0].IsObject() || info[0].IsArray() || info[0].IsTypedArray())
    throw Napi::TypeError::New(info.Env(), std::string(fn) + ": expected an options object, got " + describe_value(info[0]));
  return info[0].As<Napi::Object>();
}

}  // namespace

// adamStep({ params, grads, gradType: 0|1|2, expAvg, expAvgSq, half?, halfType: 0|1|2, step, lr, beta1, beta2,
//            eps, weightDecay, adamw, gradScale, threads?, tileElems?, checkFinite, isa? }) -> { finite, isa }
Napi::Value adam_step_js(const Napi::CallbackInfo& info) {
  const char* fn = "adamStep";
  Napi::Env env = info.Env();
  Napi::Object o = want_object(info, fn);
  Napi::TypedArray params = typed(o, fn, "params", napi_float32_array, "Float32Array");
  const size_t n = params.ElementLength();
  AdamTensors t;
  t.n = (int64_t)n;
  t.p = (float*)data_of(params);
  Napi::TypedArray m = typed(o, fn, "expAvg", napi_float32_array, "Float32Array");
  Napi::TypedArray v = typed(o, fn, "expAvgSq", napi_float32_array, "Float32Array");
  want_length(m, fn, "expAvg", n);
  want_length(v, fn, "expAvgSq", n);
  t.m = (float*)data_of(m);
  t.v = (float*)data_of(v);
  t.g_type = (AdamGradType)read_int(o.Get("gradType"), std::string(fn) + ": gradType", 0, 2);
  Napi::TypedArray g = t.g_type == ADAM_GRAD_F32 ? typed(o, fn, "grads", napi_float32_array, "Float32Array")
                                                 : typed(o, fn, "grads", napi_uint16_array, "Uint16Array");
  want_length(g, fn, "grads", n);
  t.g = data_of(g);
  t.half_type = (AdamHalfType)read_int(o.Get("halfType"), std::string(fn) + ": halfType", 0, 2);
  if (t.half_type != ADAM_HALF_NONE) {
    Napi::TypedArray h = typed(o, fn, "half", napi_uint16_array, "Uint16Array");
    want_length(h, fn, "half", n);
    t.half = (uint16_t*)data_of(h);
  }

  AdamHyper hp;
  hp.step = read_int(o.Get("step"), std::string(fn) + ": step", 1, (int64_t)1 << 53);
  hp.lr = finite_number(o, fn, "lr");
  hp.beta1 = finite_number(o, fn, "beta1");
  hp.beta2 = finite_number(o, fn, "beta2");
  hp.eps = finite_number(o, fn, "eps");
  hp.weight_decay = finite_number(o, fn, "weightDecay");
  hp.grad_scale = finite_number(o, fn, "gradScale");
  Napi::Value adamw = o.Get("adamw");
  if (!adamw.IsBoolean()) throw Napi::TypeError::New(env, std::string(fn) + ": adamw: expected a boolean, got " + describe_value(adamw));
  hp.adamw = adamw.As<Napi::Boolean>().Value();

  AdamRunOptions run;
  run.isa = read_isa(o, fn);
  run.threads = read_threads(o, fn);
  Napi::Value tile = o.Get("tileElems");
  if (!tile.IsUndefined()) run.tile_elems = read_int(tile, std::string(fn) + ": tileElems", 1, (int64_t)1 << 40);
  Napi::Value check = o.Get("checkFinite");
  run.check_finite = !check.IsBoolean() || check.As<Napi::Boolean>().Value();

  AdamResult result;
  cpu_adam_step(t, hp, run, &result);
  Napi::Object out = Napi::Object::New(env);
  out.Set("finite", result.finite);
  out.Set("isa", adam_isa_name(run.isa));
  return out;
}

// adamRoofline({ params, grads, expAvg, expAvgSq, threads?, tileElems?, isa? }): p += g, m += g, v += g
Napi::Value adam_roofline_js(const Napi::CallbackInfo& info) {
  const char* fn = "adamRoofline";
  Napi::Object o = want_object(info, fn);
  Napi::TypedArray p = typed(o, fn, "params", napi_float32_array, "Float32Array");
  Napi::TypedArray g = typed(o, fn, "grads", napi_float32_array, "Float32Array");
  Napi::TypedArray m = typed(o, fn, "expAvg", napi_float32_array, "Float32Array");
  Napi::TypedArray v = typed(o, fn, "expAvgSq", napi_float32_array, "Float32Array");
  const size_t n = p.ElementLength();
  want_length(g, fn, "grads", n);
  want_length(m, fn, "expAvg", n);
  want_length(v, fn, "expAvgSq", n);
  AdamRunOptions run;
  run.isa = read_isa(o, fn);
  run.threads = read_threads(o, fn);
  Napi::Value tile = o.Get("tileElems");
  if (!tile.IsUndefined()) run.tile_elems = read_int(tile, std::string(fn) + ": tileElems", 1, (int64_t)1 << 40);
  adam_roofline((float*)data_of(p), (const float*)data_of(g), (float*)data_of(m), (float*)data_of(v), (int64_t)n, run);
  return info.Env().Undefined();
}

// adamInfo() -> { best, supported: string[], maxThreads, tileElems }
Napi::Value adam_info_js(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object out = Napi::Object::New(env);
  out.Set("best", adam_isa_name(adam_best_isa()));
  Napi::Array supported = Napi::Array::New(env);
  uint32_t k = 0;
  for (AdamIsa isa : {AdamIsa::scalar, AdamIsa::avx2, AdamIsa::avx512})
    if (adam_isa_supported(isa)) supported.Set(k++, adam_isa_name(isa));
  out.Set("supported", supported);
  out.Set("maxThreads", adam_max_threads());
  out.Set("tileElems", (double)kAdamTileElems);
  return out;
}

namespace {
struct TraceState {
  std::mutex mu;  // events are serialised by the kernel already; this guards against a contract slip
  std::vector<AdamTileEvent> events;
  const uint16_t* half = nullptr;
  uint16_t* shadow = nullptr;
};

void record_tile(void* ctx, const AdamTileEvent& e) {
  TraceState* s = (TraceState*)ctx;
  std::lock_guard<std::mutex> lk(s->mu);
  s->events.push_back(e);
  // what a runtime would do here: start the copy of the finished half tile
  std::memcpy(s->shadow + e.begin, s->half + e.begin, (size_t)(e.end - e.begin) * sizeof(uint16_t));
}
}  // namespace

// adamTileTrace({ n, tileElems, threads?, isa? }) -> { tile, begin, end, claimed: Float64Array, tiles, half, shadow }
// A bf16-grad, fp16-copy AdamW step on n parameters made up here (xorshift); every
// tile event copies that tile's fp16 output into `shadow`.
Napi::Value adam_tile_trace_js(const Napi::CallbackInfo& info) {
  const char* fn = "adamTileTrace";
  Napi::Env env = info.Env();
  Napi::Object o = want_object(info, fn);
  const int64_t n = read_int(o.Get("n"), std::string(fn) + ": n", 1, (int64_t)1 << 28);
  AdamRunOptions run;
  run.tile_elems = read_int(o.Get("tileElems"), std::string(fn) + ": tileElems", 1, (int64_t)1 << 28);
  run.isa = read_isa(o, fn);
  run.threads = read_threads(o, fn);
  std::vector<float> p(n), m(n), v(n);
  std::vector<uint16_t> g(n);
  uint32_t s = 2463534242u;
  auto next = [&] { s ^= s << 13; s ^= s >> 17; s ^= s << 5; return (float)(s >> 8) / 16777216.0f * 2.0f - 1.0f; };
  for (int64_t i = 0; i < n; i++) {
    p[i] = next();
    m[i] = 0.01f * next();
    v[i] = 1e-4f * std::fabs(next());
    g[i] = float_to_bf16(0.1f * next());
  }
  Napi::Uint16Array half = Napi::Uint16Array::New(env, (size_t)n);
  Napi::Uint16Array shadow = Napi::Uint16Array::New(env, (size_t)n);
  std::memset(shadow.Data(), 0, (size_t)n * 2);
  TraceState st;
  st.half = half.Data();
  st.shadow = shadow.Data();
  run.on_tile = &record_tile;
  run.ctx = &st;
  AdamTensors t;
  t.p = p.data(); t.m = m.data(); t.v = v.data(); t.g = g.data(); t.g_type = ADAM_GRAD_BF16;
  t.half = half.Data(); t.half_type = ADAM_HALF_F16; t.n = n;
  AdamHyper hp;
  hp.adamw = true;
  hp.weight_decay = 0.01;
  AdamResult result;
  cpu_adam_step(t, hp, run, &result);

  const size_t k = st.events.size();
  Napi::Float64Array tile = Napi::Float64Array::New(env, k), begin = Napi::Float64Array::New(env, k),
                     end = Napi::Float64Array::New(env, k), claimed = Napi::Float64Array::New(env, k);
  for (size_t j = 0; j < k; j++) {
    tile[j] = (double)st.events[j].tile;
    begin[j] = (double)st.events[j].begin;
    end[j] = (double)st.events[j].end;
    claimed[j] = (double)st.events[j].tiles_claimed;
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("tile", tile);
  out.Set("begin", begin);
  out.Set("end", end);
  out.Set("claimed", claimed);
  out.Set("tiles", (double)(k ? st.events[0].tiles : 0));
  out.Set("half", half);
  out.Set("shadow", shadow);
  return out;
}

// The arguments of adamHalfRound / adamHalfWiden after the array: the half
// type ('fp16' | 'bf16') and the path (an isa name).
static void read_half_args(const Napi::CallbackInfo& info, const char* fn, AdamHalfType* type, AdamIsa* isa) {
  std::string t = info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : "";
  if (t != "fp16" && t != "bf16")
    throw Napi::TypeError::New(info.Env(), std::string(fn) + ": type: expected 'fp16' or 'bf16', got " + describe_value(info[1]));
  *type = t == "bf16" ? ADAM_HALF_BF16 : ADAM_HALF_F16;
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("isa", info[2]);
  *isa = read_isa(o, fn);
}

// adamHalfRound(values: Float32Array, 'fp16' | 'bf16', isa) -> Uint16Array
Napi::Value adam_half_round_js(const Napi::CallbackInfo& info) {
  Napi::Value v = info[0];
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
    throw Napi::TypeError::New(info.Env(), "adamHalfRound: values: expected a Float32Array, got " + describe_value(v));
  AdamHalfType type;
  AdamIsa isa;
  read_half_args(info, "adamHalfRound", &type, &isa);
  Napi::Float32Array src = v.As<Napi::Float32Array>();
  Napi::Uint16Array out = Napi::Uint16Array::New(info.Env(), src.ElementLength());
  adam_half_round(src.Data(), out.Data(), (int64_t)src.ElementLength(), type, isa);
  return out;
}

// adamHalfWiden(bits: Uint16Array, 'fp16' | 'bf16', isa) -> Float32Array
Napi::Value adam_half_widen_js(const Napi::CallbackInfo& info) {
  Napi::Value v = info[0];
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_uint16_array)
    throw Napi::TypeError::New(info.Env(), "adamHalfWiden: bits: expected a Uint16Array, got " + describe_value(v));
  AdamHalfType type;
  AdamIsa isa;
  read_half_args(info, "adamHalfWiden", &type, &isa);
  Napi::Uint16Array src = v.As<Napi::Uint16Array>();
  Napi::Float32Array out = Napi::Float32Array::New(info.Env(), src.ElementLength());
  adam_half_widen(src.Data(), out.Data(), (int64_t)src.ElementLength(), type, isa);
  return out;
}

// adamCopyGrads({ dst, src, type: 'fp32'|'fp16'|'bf16', check?, isa? }) -> boolean
// dst and src: Float32Array (fp32) or Uint16Array (fp16, bf16) of one length.
// check (default true): adam_copy_grads_checked, returning whether every value
// is finite; false: memcpy, returning true (the benchmark's baseline).
Napi::Value adam_copy_grads_js(const Napi::CallbackInfo& info) {
  const char* fn = "adamCopyGrads";
  Napi::Object o = want_object(info, fn);
  Napi::Value tv = o.Get("type");
  std::string type = tv.IsString() ? tv.As<Napi::String>().Utf8Value() : "";
  if (type != "fp32" && type != "fp16" && type != "bf16")
    throw Napi::TypeError::New(info.Env(), std::string(fn) + ": type: expected 'fp32', 'fp16' or 'bf16', got " + describe_value(tv));
  const bool f32 = type == "fp32";
  napi_typedarray_type want = f32 ? napi_float32_array : napi_uint16_array;
  const char* want_name = f32 ? "Float32Array" : "Uint16Array";
  Napi::TypedArray src = typed(o, fn, "src", want, want_name);
  Napi::TypedArray dst = typed(o, fn, "dst", want, want_name);
  want_length(dst, fn, "dst", src.ElementLength());
  Napi::Value cv = o.Get("check");
  const bool check = !cv.IsBoolean() || cv.As<Napi::Boolean>().Value();
  AdamIsa isa = read_isa(o, fn);
  const int64_t n = (int64_t)src.ElementLength();
  if (!check) {
    std::memcpy(data_of(dst), data_of(src), (size_t)n * (f32 ? 4 : 2));
    return Napi::Boolean::New(info.Env(), true);
  }
  AdamGradType g = f32 ? ADAM_GRAD_F32 : type == "fp16" ? ADAM_GRAD_F16 : ADAM_GRAD_BF16;
  return Napi::Boolean::New(info.Env(), adam_copy_grads_checked(data_of(dst), data_of(src), n, g, isa));
}

}  // namespace tiercut
