// half.h — fp16 (IEEE 754 binary16) and bf16 (bfloat16) <-> float conversion.
//
// Takes: a float, or the 16 bits of a half value.
// Gives: the nearest half value (round to nearest, ties to even), or the exact
//        float of a half value (widening is always exact).
// Keeps true: NaN stays NaN (quiet, sign and top payload bits kept); +-inf stay
//        inf; finite values too large for fp16 (|x| >= 65520) become inf, as
//        IEEE rounding prescribes; fp16 subnormals are produced and read
//        exactly. The results are bit-for-bit those of torch's .half() /
//        .bfloat16() on a CPU.
// Cost: a few integer operations per value; scalar on purpose (this is the
//        reference the executor and the tests share).
#pragma once
#include <cstdint>
#include <cstring>

namespace tiercut {

inline uint32_t float_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// Shifts m right by `shift` bits (1..31), rounding to nearest, ties to even.
inline uint32_t shift_round_even(uint32_t m, int shift) {
  uint32_t kept = m >> shift;
  uint32_t rest = m & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1))) kept += 1;
  return kept;
}

inline uint16_t float_to_fp16(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) {
    // NaN: quiet bit set so a payload living only in the low bits cannot turn into inf
    return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  }
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // >= 65520 (and inf) -> inf
  if (ax >= 0x38800000u) {
    // normal fp16 (>= 2^-14): rebias the exponent 127 -> 15, keep 10 mantissa bits.
    // A carry out of the mantissa moves into the exponent, which is the right answer.
    uint32_t h = shift_round_even(ax, 13) - ((127u - 15u) << 10);
    return (uint16_t)(sign | h);
  }
  if (ax <= 0x33000000u) return (uint16_t)sign;  // <= 2^-25 (a tie with 0 goes to 0, which is even)
  // subnormal fp16: value = m * 2^(e-150) = h * 2^-24  =>  h = m >> (126 - e)
  uint32_t e = ax >> 23;
  uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  uint32_t h = shift_round_even(m, (int)(126u - e));  // may round up to 0x400 = the smallest normal
  return (uint16_t)(sign | h);
}

inline float fp16_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return bits_float(sign | ((exp + 127u - 15u) << 23) | (mant << 13));
  if (mant == 0) return bits_float(sign);
  // subnormal: normalise the mantissa into a float exponent
  int shift = 0;
  while ((mant & 0x400u) == 0) { mant <<= 1; shift++; }
  mant &= 0x3ffu;
  uint32_t fexp = 127u - 15u + 1u - (uint32_t)shift;
  return bits_float(sign | (fexp << 23) | (mant << 13));
}

inline uint16_t float_to_bf16(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);  // NaN stays (quiet) NaN
  // round to nearest even on the low 16 bits; overflow carries into inf, as it should
  uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(rounded >> 16);
}

inline float bf16_to_float(uint16_t b) { return bits_float((uint32_t)b << 16); }

// Bulk forms: the scalar reference of the executor's vectorised widening and
// rounding (adam/cpu_adam.h adam_half_widen, adam_half_round), for the tests.
inline void half_widen(const uint16_t* src, float* dst, int64_t n, bool bf16) {
  if (bf16) for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_float(src[i]);
  else      for (int64_t i = 0; i < n; i++) dst[i] = fp16_to_float(src[i]);
}

inline void half_round(const float* src, uint16_t* dst, int64_t n, bool bf16) {
  if (bf16) for (int64_t i = 0; i < n; i++) dst[i] = float_to_bf16(src[i]);
  else      for (int64_t i = 0; i < n; i++) dst[i] = float_to_fp16(src[i]);
}

}  // namespace tiercut
