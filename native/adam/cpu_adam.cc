// cpu_adam.cc — run-time ISA choice, the check and update passes over tiles on
// the shared thread pool, in-order tile completion (see cpu_adam.h). The body
// itself is adam_body.inc, instantiated once per instruction set below.
#include "cpu_adam.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "simd.h"
#include "thread_pool.h"

// gcc 12's avx512fintrin.h initialises its "undefined" vectors from themselves,
// which -Wmaybe-uninitialized reports once per inlined intrinsic; a false alarm.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#ifdef TIERCUT_ADAM_X86
#include <cpuid.h>
#endif

namespace tiercut {

// ---------------------------------------------------------------------------
// the body, once per instruction set

namespace simd_scalar {
#define FN
#include "adam_body.inc"
#undef FN
}  // namespace simd_scalar

#ifdef TIERCUT_ADAM_X86
namespace simd_avx2 {
#define FN __attribute__((target("avx2,fma,f16c")))
#include "adam_body.inc"
#undef FN
}  // namespace simd_avx2

namespace simd_avx512 {
#define FN __attribute__((target("avx512f,avx2,fma,f16c")))
#include "adam_body.inc"
#undef FN
}  // namespace simd_avx512
#endif

namespace {

using SpanFn = void (*)(const AdamConsts&, float*, float*, float*, const void*, uint16_t*, int64_t, int64_t);
using CheckFn = bool (*)(const void*, float, int64_t, int64_t);
using RooflineFn = void (*)(float*, const float*, float*, float*, int64_t, int64_t);
using HalfFn = void (*)(const float*, uint16_t*, int64_t, int64_t);
using CopyCheckFn = bool (*)(void*, const void*, int64_t, int64_t);
using WidenFn = void (*)(const uint16_t*, float*, int64_t, int64_t);

template <int M, int G, int H>
SpanFn span_isa(AdamIsa isa) {
#ifdef TIERCUT_ADAM_X86
  if (isa == AdamIsa::avx512) return &simd_avx512::adam_span<M, G, H>;
  if (isa == AdamIsa::avx2) return &simd_avx2::adam_span<M, G, H>;
#endif
  (void)isa;
  return &simd_scalar::adam_span<M, G, H>;
}

template <int M, int G>
SpanFn span_half(AdamIsa isa, AdamHalfType h) {
  switch (h) {
    case ADAM_HALF_F16: return span_isa<M, G, ADAM_HALF_F16>(isa);
    case ADAM_HALF_BF16: return span_isa<M, G, ADAM_HALF_BF16>(isa);
    default: return span_isa<M, G, ADAM_HALF_NONE>(isa);
  }
}

template <int M>
SpanFn span_grad(AdamIsa isa, AdamGradType g, AdamHalfType h) {
  switch (g) {
    case ADAM_GRAD_F16: return span_half<M, ADAM_GRAD_F16>(isa, h);
    case ADAM_GRAD_BF16: return span_half<M, ADAM_GRAD_BF16>(isa, h);
    default: return span_half<M, ADAM_GRAD_F32>(isa, h);
  }
}

SpanFn select_span(AdamIsa isa, AdamMode mode, AdamGradType g, AdamHalfType h) {
  switch (mode) {
    case ADAM_MODE_L2: return span_grad<ADAM_MODE_L2>(isa, g, h);
    case ADAM_MODE_DECOUPLED: return span_grad<ADAM_MODE_DECOUPLED>(isa, g, h);
    default: return span_grad<ADAM_MODE_PLAIN>(isa, g, h);
  }
}

template <int G>
CheckFn check_isa(AdamIsa isa) {
#ifdef TIERCUT_ADAM_X86
  if (isa == AdamIsa::avx512) return &simd_avx512::grads_finite_span<G>;
  if (isa == AdamIsa::avx2) return &simd_avx2::grads_finite_span<G>;
#endif
  (void)isa;
  return &simd_scalar::grads_finite_span<G>;
}

CheckFn select_check(AdamIsa isa, AdamGradType g) {
  switch (g) {
    case ADAM_GRAD_F16: return check_isa<ADAM_GRAD_F16>(isa);
    case ADAM_GRAD_BF16: return check_isa<ADAM_GRAD_BF16>(isa);
    default: return check_isa<ADAM_GRAD_F32>(isa);
  }
}

template <int G>
CopyCheckFn copy_check_isa(AdamIsa isa) {
#ifdef TIERCUT_ADAM_X86
  if (isa == AdamIsa::avx512) return &simd_avx512::copy_grads_checked_span<G>;
  if (isa == AdamIsa::avx2) return &simd_avx2::copy_grads_checked_span<G>;
#endif
  (void)isa;
  return &simd_scalar::copy_grads_checked_span<G>;
}

RooflineFn select_roofline(AdamIsa isa) {
#ifdef TIERCUT_ADAM_X86
  if (isa == AdamIsa::avx512) return &simd_avx512::roofline_span;
  if (isa == AdamIsa::avx2) return &simd_avx2::roofline_span;
#endif
  (void)isa;
  return &simd_scalar::roofline_span;
}

template <int H>
HalfFn half_isa(AdamIsa isa) {
#ifdef TIERCUT_ADAM_X86
  if (isa == AdamIsa::avx512) return &simd_avx512::half_round_span<H>;
  if (isa == AdamIsa::avx2) return &simd_avx2::half_round_span<H>;
#endif
  (void)isa;
  return &simd_scalar::half_round_span<H>;
}

template <int H>
WidenFn widen_isa(AdamIsa isa) {
#ifdef TIERCUT_ADAM_X86
  if (isa == AdamIsa::avx512) return &simd_avx512::half_widen_span<H>;
  if (isa == AdamIsa::avx2) return &simd_avx2::half_widen_span<H>;
#endif
  (void)isa;
  return &simd_scalar::half_widen_span<H>;
}

// Tiles of one pass: handed out in increasing order; with a callback, completion
// is reported in order through a watermark over per-tile done flags.
struct TilePass {
  int64_t n, tile_elems, tiles;
  std::atomic<int64_t> next{0};
  AdamTileCallback on_tile = nullptr;
  void* ctx = nullptr;
  std::unique_ptr<std::atomic<uint8_t>[]> done;
  std::mutex watermark_mu;
  int64_t watermark = 0;  // tiles [0, watermark) reported

  TilePass(int64_t n_, int64_t tile_elems_) : n(n_), tile_elems(tile_elems_), tiles((n_ + tile_elems_ - 1) / tile_elems_) {}

  bool claim(int64_t* tile, int64_t* begin, int64_t* end) {
    int64_t t = next.fetch_add(1, std::memory_order_relaxed);
    if (t >= tiles) return false;
    *tile = t;
    *begin = t * tile_elems;
    *end = std::min(n, *begin + tile_elems);
    return true;
  }

  void enable_events(AdamTileCallback cb, void* c) {
    on_tile = cb;
    ctx = c;
    done.reset(new std::atomic<uint8_t>[(size_t)tiles]);
    for (int64_t t = 0; t < tiles; t++) done[t].store(0, std::memory_order_relaxed);
  }

  void complete(int64_t t) {
    if (!on_tile) return;
    done[t].store(1, std::memory_order_release);
    std::lock_guard<std::mutex> lk(watermark_mu);  // blocking: a try_lock could strand a finished tile
    while (watermark < tiles && done[watermark].load(std::memory_order_acquire)) {
      int64_t b = watermark * tile_elems;
      AdamTileEvent e{watermark, b, std::min(n, b + tile_elems),
                      std::min(tiles, next.load(std::memory_order_relaxed)), tiles};
      on_tile(ctx, e);
      watermark++;
    }
  }
};

int threads_for(const AdamRunOptions& opts, int64_t tiles) {
  int max = ThreadPool::shared().max_threads();
  int t = opts.threads > 0 ? std::min(opts.threads, max) : max;
  return (int)std::max<int64_t>(1, std::min<int64_t>(t, tiles));
}

bool cpu_has_avx2() {
#ifdef TIERCUT_ADAM_X86
  unsigned a, b, c, d;
  bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
  __builtin_cpu_init();
  // libgcc's answers include the OS check (XGETBV) for the AVX state
  return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#ifdef TIERCUT_ADAM_X86
  __builtin_cpu_init();
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

}  // namespace

// ---------------------------------------------------------------------------

AdamConsts adam_consts(const AdamHyper& hp) {
  const double bias_correction1 = 1.0 - std::pow(hp.beta1, double(hp.step));
  const double bias_correction2 = 1.0 - std::pow(hp.beta2, double(hp.step));
  AdamConsts k;
  k.grad_scale = float(hp.grad_scale);
  k.decay_mul = float(1.0 - hp.lr * hp.weight_decay);
  k.wd = float(hp.weight_decay);
  k.b1 = float(hp.beta1);
  k.one_minus_b1 = float(1.0 - hp.beta1);
  k.b2 = float(hp.beta2);
  k.one_minus_b2 = float(1.0 - hp.beta2);
  k.step_size = float(hp.lr / bias_correction1);
  k.bc2_sqrt = float(std::sqrt(bias_correction2));
  k.eps = float(hp.eps);
  return k;
}

const char* adam_isa_name(AdamIsa isa) {
  switch (isa) {
    case AdamIsa::avx2: return "avx2";
    case AdamIsa::avx512: return "avx512";
    default: return "scalar";
  }
}

bool adam_parse_isa(const std::string& name, AdamIsa* isa) {
  if (name == "scalar") *isa = AdamIsa::scalar;
  else if (name == "avx2") *isa = AdamIsa::avx2;
  else if (name == "avx512") *isa = AdamIsa::avx512;
  else return false;
  return true;
}

bool adam_isa_supported(AdamIsa isa) {
  static const bool avx2 = cpu_has_avx2(), avx512 = cpu_has_avx512();
  switch (isa) {
    case AdamIsa::scalar: return true;
    case AdamIsa::avx2: return avx2;
    case AdamIsa::avx512: return avx512;
  }
  return false;
}

AdamIsa adam_best_isa() {
  if (adam_isa_supported(AdamIsa::avx512)) return AdamIsa::avx512;
  if (adam_isa_supported(AdamIsa::avx2)) return AdamIsa::avx2;
  return AdamIsa::scalar;
}

bool adam_select_isa(const std::string& forced, AdamIsa* isa, std::string* err) {
  std::string name = forced, source = "isa";
  if (name.empty()) {
    const char* env = std::getenv("TIERCUT_ADAM_ISA");
    if (env && *env) { name = env; source = "TIERCUT_ADAM_ISA"; }
  }
  if (name.empty()) { *isa = adam_best_isa(); return true; }
  if (!adam_parse_isa(name, isa)) {
    *err = source + ": expected scalar, avx2 or avx512, got \"" + name + "\"";
    return false;
  }
  if (!adam_isa_supported(*isa)) {
    std::string have = "scalar";
    if (adam_isa_supported(AdamIsa::avx2)) have += ", avx2";
    if (adam_isa_supported(AdamIsa::avx512)) have += ", avx512";
    *err = source + ": " + name + " is not supported by this CPU (it has: " + have + ")";
    return false;
  }
  return true;
}

int adam_max_threads() { return ThreadPool::shared().max_threads(); }

void cpu_adam_step(const AdamTensors& t, const AdamHyper& hp, const AdamRunOptions& opts, AdamResult* result) {
  result->finite = true;
  if (t.n <= 0) return;
  const int64_t tile_elems = std::max<int64_t>(1, opts.tile_elems);
  ThreadPool& pool = ThreadPool::shared();
  const AdamConsts k = adam_consts(hp);

  if (opts.check_finite) {
    TilePass pass(t.n, tile_elems);
    CheckFn check = select_check(opts.isa, t.g_type);
    std::atomic<bool> bad{false};
    pool.run(threads_for(opts, pass.tiles), [&](int) {
      int64_t tile, b, e;
      while (!bad.load(std::memory_order_relaxed) && pass.claim(&tile, &b, &e))
        if (!check(t.g, k.grad_scale, b, e)) bad.store(true, std::memory_order_relaxed);
    });
    if (bad.load()) { result->finite = false; return; }
  }

  AdamMode mode = hp.weight_decay == 0.0 ? ADAM_MODE_PLAIN : hp.adamw ? ADAM_MODE_DECOUPLED : ADAM_MODE_L2;
  AdamHalfType half_type = t.half ? t.half_type : ADAM_HALF_NONE;
  SpanFn span = select_span(opts.isa, mode, t.g_type, half_type);
  TilePass pass(t.n, tile_elems);
  if (opts.on_tile) pass.enable_events(opts.on_tile, opts.ctx);
  std::atomic<bool> stopped{false};
  pool.run(threads_for(opts, pass.tiles), [&](int) {
    int64_t tile, b, e;
    while (!stopped.load(std::memory_order_relaxed) && pass.claim(&tile, &b, &e)) {
      if (opts.wait_tile && !opts.wait_tile(opts.wait_ctx, e)) { stopped.store(true, std::memory_order_relaxed); break; }
      span(k, t.p, t.m, t.v, t.g, t.half, b, e);
      pass.complete(tile);
    }
  });
  result->stopped = stopped.load();
}

void adam_roofline(float* p, const float* g, float* m, float* v, int64_t n, const AdamRunOptions& opts) {
  if (n <= 0) return;
  RooflineFn fn = select_roofline(opts.isa);
  TilePass pass(n, std::max<int64_t>(1, opts.tile_elems));
  ThreadPool::shared().run(threads_for(opts, pass.tiles), [&](int) {
    int64_t tile, b, e;
    while (pass.claim(&tile, &b, &e)) fn(p, g, m, v, b, e);
  });
}

bool adam_copy_grads_checked(void* dst, const void* src, int64_t n, AdamGradType g_type, AdamIsa isa) {
  if (n <= 0) return true;
  CopyCheckFn fn = g_type == ADAM_GRAD_F16    ? copy_check_isa<ADAM_GRAD_F16>(isa)
                   : g_type == ADAM_GRAD_BF16 ? copy_check_isa<ADAM_GRAD_BF16>(isa)
                                              : copy_check_isa<ADAM_GRAD_F32>(isa);
  return fn(dst, src, 0, n);
}

bool adam_grads_finite(const void* g, int64_t n, AdamGradType g_type, AdamIsa isa) {
  return n <= 0 || select_check(isa, g_type)(g, 1.0f, 0, n);
}

void adam_half_copy(const float* x, uint16_t* out, int64_t n, AdamHalfType type, const AdamRunOptions& opts) {
  if (n <= 0) return;
  HalfFn fn = type == ADAM_HALF_BF16 ? half_isa<ADAM_HALF_BF16>(opts.isa) : half_isa<ADAM_HALF_F16>(opts.isa);
  TilePass pass(n, std::max<int64_t>(1, opts.tile_elems));
  if (opts.on_tile) pass.enable_events(opts.on_tile, opts.ctx);
  ThreadPool::shared().run(threads_for(opts, pass.tiles), [&](int) {
    int64_t tile, b, e;
    while (pass.claim(&tile, &b, &e)) {
      fn(x, out, b, e);
      pass.complete(tile);
    }
  });
}

void adam_half_round(const float* x, uint16_t* out, int64_t n, AdamHalfType type, AdamIsa isa) {
  HalfFn fn = type == ADAM_HALF_BF16 ? half_isa<ADAM_HALF_BF16>(isa) : half_isa<ADAM_HALF_F16>(isa);
  fn(x, out, 0, n);
}

void adam_half_widen(const uint16_t* x, float* out, int64_t n, AdamHalfType type, AdamIsa isa) {
  WidenFn fn = type == ADAM_HALF_BF16 ? widen_isa<ADAM_HALF_BF16>(isa) : widen_isa<ADAM_HALF_F16>(isa);
  fn(x, out, 0, n);
}

}  // namespace tiercut
