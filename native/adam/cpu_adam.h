// cpu_adam.h — the fused CPU Adam / AdamW step over tiles (ZeRO-Offload's
// "CPU-Adam"): one pass reads grad (fp32, fp16 or bf16), master p, m, v and
// writes p, m, v and, optionally, the half-precision copy of p.
//
// Takes: n fp32 parameters with their moments (updated in place), the gradient
//        in its own storage type, torch's hyper-parameters, an optional fused
//        gradient scale (loss-scale unscale x clipping coefficient).
// Gives: the torch 1.13 Adam / AdamW update (formula in adam_body.inc; the
//        oracle is the scalar path here and native/kernels/adam.cc), and
//        AdamResult::finite = false when some grad * grad_scale is inf or NaN.
// Keeps true:
//   - non-finite gradients leave p, m, v and the half copy exactly untouched.
//     Choice: a check pass over the gradients runs first (parallel, stops at
//     the first bad tile) and the update pass runs only if it found nothing.
//     It costs one extra read of the gradients (4 B/param for fp32, 2 B for
//     fp16/bf16) on top of the update's 28 B (fp32); the alternative, detect
//     per tile and roll back, would need a copy of every updated tile to be
//     exact, which costs more. AdamRunOptions::check_finite = false skips it
//     (for callers that checked the gradients already, as DeepSpeed does on
//     the GPU). The runtime does the latter: the copy that brings an adam's
//     gradient in checks it as it copies (adam_copy_grads_checked), at no cost
//     in memory traffic, and its adam runs without the second pass.
//   - every instruction-set path (scalar, AVX2+FMA+F16C, AVX-512F) gives the
//     same bits: same rounded operations in the same order, no fused
//     multiply-add (simd.h). The path is chosen at run time from CPUID, or
//     forced with TIERCUT_ADAM_ISA=scalar|avx2|avx512 (an error if this CPU
//     lacks it); binding.gyp keeps portable flags (no -march).
//   - work is split into tiles of tile_elems parameters (default 32768: the
//     tile's p, g, m, v fit a 1 MiB L2 with room to spare) handed out in
//     increasing order to the threads of the shared ThreadPool; no thread is
//     created per step.
//   - arriving gradients: when wait_tile is set, a worker calls it before it
//     updates tile [begin, end) and updates only once it returns true (the
//     gradient's elements [0, end) are there: the runtime's update that follows
//     its gradient's copy down chunk by chunk); false stops the update, tiles
//     already updated stay so (AdamResult::stopped: the step is being aborted).
//     The gradient must have been checked whole before (check_finite = false).
//   - tile completion: when on_tile is set, it is called once per tile, in
//     tile order (0, 1, 2, ...), serialised, from whichever worker finished the
//     last tile of the completed prefix, as soon as every tile up to it is
//     done, while later tiles may still be running. A caller can start copying
//     tile [begin, end) of the half copy (or of p) from that moment.
// Never throws, never calls N-API. Cost: O(n), memory bound.
#pragma once
#include <cstdint>
#include <string>

namespace tiercut {

enum class AdamIsa : int32_t { scalar = 0, avx2 = 1, avx512 = 2 };
enum AdamGradType : int32_t { ADAM_GRAD_F32 = 0, ADAM_GRAD_F16 = 1, ADAM_GRAD_BF16 = 2 };
enum AdamHalfType : int32_t { ADAM_HALF_NONE = 0, ADAM_HALF_F16 = 1, ADAM_HALF_BF16 = 2 };
enum AdamMode : int32_t { ADAM_MODE_PLAIN = 0, ADAM_MODE_L2 = 1, ADAM_MODE_DECOUPLED = 2 };

constexpr int64_t kAdamTileElems = 32768;

struct AdamHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool adamw = false;     // false: torch.optim.Adam (L2, g += wd*p); true: torch.optim.AdamW (p *= 1 - lr*wd)
  int64_t step = 1;       // counts from 1
  double grad_scale = 1;  // g is multiplied by this first
};

struct AdamTensors {
  float* p = nullptr;            // fp32 master parameters, updated in place
  float* m = nullptr;            // first moment, in place
  float* v = nullptr;            // second moment, in place
  const void* g = nullptr;       // float* or uint16_t* (g_type)
  AdamGradType g_type = ADAM_GRAD_F32;
  uint16_t* half = nullptr;      // receives round(p) when half_type != NONE
  AdamHalfType half_type = ADAM_HALF_NONE;
  int64_t n = 0;
};

struct AdamTileEvent {
  int64_t tile;           // 0, 1, 2, ... in order
  int64_t begin, end;     // element range [begin, end)
  int64_t tiles_claimed;  // tiles handed to workers so far (< tiles: the update is still running)
  int64_t tiles;          // total
};
using AdamTileCallback = void (*)(void* ctx, const AdamTileEvent& event);
using AdamTileWait = bool (*)(void* ctx, int64_t end);

struct AdamRunOptions {
  AdamIsa isa = AdamIsa::scalar;        // see adam_default_isa
  int threads = 0;                      // 0: every thread of the shared pool
  int64_t tile_elems = kAdamTileElems;  // >= 1
  bool check_finite = true;
  AdamTileCallback on_tile = nullptr;   // called off the calling thread; must be cheap and thread-safe
  void* ctx = nullptr;
  AdamTileWait wait_tile = nullptr;     // see "arriving gradients"; called off the calling thread, may block
  void* wait_ctx = nullptr;
};

struct AdamResult {
  bool finite = true;     // false: some grad * grad_scale was inf/NaN and nothing was written
  bool stopped = false;   // wait_tile returned false: some tiles were not updated
};

// The scalars of one step, as torch computes them (double, rounded to float once).
struct AdamConsts {
  float grad_scale, decay_mul, wd, b1, one_minus_b1, b2, one_minus_b2, step_size, bc2_sqrt, eps;
};
AdamConsts adam_consts(const AdamHyper& hp);

const char* adam_isa_name(AdamIsa isa);                    // "scalar" | "avx2" | "avx512"
bool adam_parse_isa(const std::string& name, AdamIsa* isa);
bool adam_isa_supported(AdamIsa isa);                      // by this CPU (and build)
AdamIsa adam_best_isa();
// The path to use: `forced` (a name, "" for none), else TIERCUT_ADAM_ISA, else
// the best this CPU has. false with *err when the name is unknown or the CPU
// lacks it, e.g. "TIERCUT_ADAM_ISA: avx512 is not supported by this CPU (it has: scalar, avx2)".
bool adam_select_isa(const std::string& forced, AdamIsa* isa, std::string* err);
int adam_max_threads();                                     // of the shared pool

void cpu_adam_step(const AdamTensors& t, const AdamHyper& hp, const AdamRunOptions& opts, AdamResult* result);

// The roofline for the benchmark: streams the bytes of an fp32 step (reads p,
// g, m, v; writes p, m, v) with the same tiles, threads and vector width.
void adam_roofline(float* p, const float* g, float* m, float* v, int64_t n, const AdamRunOptions& opts);

// Copies n gradient elements (g_type) from src to dst, single-threaded, and
// returns false when some element is inf or NaN: cpu_adam_step's check (with
// grad_scale 1) done by the copy that brings the gradient in, which reads every
// byte anyway, so the update can run with check_finite = false. The runtime
// does this on the copy that delivers an adam's gradient (exec/executor.cc).
bool adam_copy_grads_checked(void* dst, const void* src, int64_t n, AdamGradType g_type, AdamIsa isa);

// The same check without a copy, single-threaded: whether n gradient elements
// are all finite. The runtime checks a gradient whole before its update follows
// its copy chunk by chunk (on a GPU, a pass where the backward pass left it).
bool adam_grads_finite(const void* g, int64_t n, AdamGradType g_type, AdamIsa isa);

// The half-precision copy of n fp32 values (fp16 or bf16, nearest-even, the
// bits of adam_half_round), over tiles on the shared pool with opts.on_tile
// events in tile order, as cpu_adam_step reports its tiles: the runtime's cast
// of master32 to param16 lets the copy towards the GPU follow it tile by tile.
void adam_half_copy(const float* x, uint16_t* out, int64_t n, AdamHalfType type, const AdamRunOptions& opts);

// float -> half (nearest-even) and half -> float (exact) with the given path's
// conversion, single-threaded: the executor's widening and rounding of the half
// operands of the kernels it runs in float, and the tests' view of each path.
void adam_half_round(const float* x, uint16_t* out, int64_t n, AdamHalfType type, AdamIsa isa);
void adam_half_widen(const uint16_t* x, float* out, int64_t n, AdamHalfType type, AdamIsa isa);

}  // namespace tiercut
