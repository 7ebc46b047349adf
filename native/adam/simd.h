// simd.h — the few vector helpers the fused Adam body (adam_body.inc) is
// written over, once per instruction set:
//   simd_scalar   W = 1,  plain float; the reference every other path must match
//   simd_avx2     W = 8,  AVX2 + FMA + F16C   (functions carry target("avx2,fma,f16c"))
//   simd_avx512   W = 16, AVX-512F            (functions carry target("avx512f,avx2,fma,f16c"))
// Each namespace gives the same names:
//   VF                         a vector of W floats
//   vset(x)                    broadcast
//   vload / vstore             W floats, unaligned
//   vload_fp16 / vload_bf16    W half values widened to float (exact)
//   vstore_fp16 / vstore_bf16  W floats rounded to half, nearest-even, bit for
//                              bit as native/exec/half.h (NaN stays a quiet NaN)
//   vadd vsub vmul vdiv vsqrt  IEEE, correctly rounded, lane by lane
//   vfma(a, b, c)              a * b + c rounded once (std::fma in the scalar path)
//   vany_nan(x)                true when some lane is NaN
// Multiply-adds are fused exactly where the body says vfma and nowhere else
// (binding.gyp builds with -ffp-contract=off so the compiler adds none): every
// path performs the same correctly rounded operations in the same order, so
// every path gives the scalar path's bits.
// The SIMD namespaces exist on x86 only; elsewhere the scalar path is all there is.
#pragma once
#include <cmath>
#include <cstdint>

#include "../exec/half.h"

#if defined(__x86_64__) || defined(__i386__)
#define TIERCUT_ADAM_X86 1
#include <immintrin.h>
#endif

namespace tiercut {
namespace simd_scalar {

constexpr int W = 1;
using VF = float;
static inline VF vset(float x) { return x; }
static inline VF vload(const float* p) { return *p; }
static inline void vstore(float* p, VF x) { *p = x; }
static inline VF vload_fp16(const uint16_t* p) { return fp16_to_float(*p); }
static inline VF vload_bf16(const uint16_t* p) { return bf16_to_float(*p); }
static inline void vstore_fp16(uint16_t* p, VF x) { *p = float_to_fp16(x); }
static inline void vstore_bf16(uint16_t* p, VF x) { *p = float_to_bf16(x); }
static inline VF vadd(VF a, VF b) { return a + b; }
static inline VF vsub(VF a, VF b) { return a - b; }
static inline VF vmul(VF a, VF b) { return a * b; }
static inline VF vdiv(VF a, VF b) { return a / b; }
static inline VF vsqrt(VF a) { return std::sqrt(a); }
static inline VF vfma(VF a, VF b, VF c) { return std::fma(a, b, c); }
static inline bool vany_nan(VF a) { return a != a; }

}  // namespace simd_scalar

#ifdef TIERCUT_ADAM_X86

#define TIERCUT_AVX2 __attribute__((target("avx2,fma,f16c"), always_inline))
namespace simd_avx2 {

constexpr int W = 8;
using VF = __m256;
TIERCUT_AVX2 static inline VF vset(float x) { return _mm256_set1_ps(x); }
TIERCUT_AVX2 static inline VF vload(const float* p) { return _mm256_loadu_ps(p); }
TIERCUT_AVX2 static inline void vstore(float* p, VF x) { _mm256_storeu_ps(p, x); }
TIERCUT_AVX2 static inline VF vload_fp16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p));
}
TIERCUT_AVX2 static inline VF vload_bf16(const uint16_t* p) {
  __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
TIERCUT_AVX2 static inline void vstore_fp16(uint16_t* p, VF x) {
  _mm_storeu_si128((__m128i*)p, _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
TIERCUT_AVX2 static inline void vstore_bf16(uint16_t* p, VF f) {
  // half.h float_to_bf16, 8 lanes: x + 0x7fff + lsb, keep the high half; NaN -> (x >> 16) | 0x40
  __m256i x = _mm256_castps_si256(f);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
  __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  __m256i r = _mm256_blendv_epi8(rounded, quiet, is_nan);
  // 32 -> 16 bits: packus works per 128-bit lane, so gather qwords 0 and 2 afterwards
  __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
  _mm_storeu_si128((__m128i*)p, _mm256_castsi256_si128(packed));
}
TIERCUT_AVX2 static inline VF vadd(VF a, VF b) { return _mm256_add_ps(a, b); }
TIERCUT_AVX2 static inline VF vsub(VF a, VF b) { return _mm256_sub_ps(a, b); }
TIERCUT_AVX2 static inline VF vmul(VF a, VF b) { return _mm256_mul_ps(a, b); }
TIERCUT_AVX2 static inline VF vdiv(VF a, VF b) { return _mm256_div_ps(a, b); }
TIERCUT_AVX2 static inline VF vsqrt(VF a) { return _mm256_sqrt_ps(a); }
TIERCUT_AVX2 static inline VF vfma(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
TIERCUT_AVX2 static inline bool vany_nan(VF a) { return _mm256_movemask_ps(_mm256_cmp_ps(a, a, _CMP_UNORD_Q)) != 0; }

}  // namespace simd_avx2

#define TIERCUT_AVX512 __attribute__((target("avx512f,avx2,fma,f16c"), always_inline))
namespace simd_avx512 {

constexpr int W = 16;
using VF = __m512;
TIERCUT_AVX512 static inline VF vset(float x) { return _mm512_set1_ps(x); }
TIERCUT_AVX512 static inline VF vload(const float* p) { return _mm512_loadu_ps(p); }
TIERCUT_AVX512 static inline void vstore(float* p, VF x) { _mm512_storeu_ps(p, x); }
TIERCUT_AVX512 static inline VF vload_fp16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p));
}
TIERCUT_AVX512 static inline VF vload_bf16(const uint16_t* p) {
  __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
TIERCUT_AVX512 static inline void vstore_fp16(uint16_t* p, VF x) {
  _mm256_storeu_si256((__m256i*)p, _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
TIERCUT_AVX512 static inline void vstore_bf16(uint16_t* p, VF f) {
  __m512i x = _mm512_castps_si512(f);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
  __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
  __mmask16 is_nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  __m512i r = _mm512_mask_blend_epi32(is_nan, rounded, quiet);
  _mm256_storeu_si256((__m256i*)p, _mm512_cvtepi32_epi16(r));
}
TIERCUT_AVX512 static inline VF vadd(VF a, VF b) { return _mm512_add_ps(a, b); }
TIERCUT_AVX512 static inline VF vsub(VF a, VF b) { return _mm512_sub_ps(a, b); }
TIERCUT_AVX512 static inline VF vmul(VF a, VF b) { return _mm512_mul_ps(a, b); }
TIERCUT_AVX512 static inline VF vdiv(VF a, VF b) { return _mm512_div_ps(a, b); }
TIERCUT_AVX512 static inline VF vsqrt(VF a) { return _mm512_sqrt_ps(a); }
TIERCUT_AVX512 static inline VF vfma(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
TIERCUT_AVX512 static inline bool vany_nan(VF a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q) != 0; }

}  // namespace simd_avx512
#endif  // TIERCUT_ADAM_X86

}  // namespace tiercut
