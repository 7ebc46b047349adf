// pointwise.cc — the elementwise kinds added for ONNX import: sub, div (with
// trailing broadcast, like add/mul), affine, pow_scalar, unary functions and
// their backward, where, and the int32 -> float cast.
//
// n = numel of the full-shape operand, nb = numel of the broadcast operand b
// (element i of a pairs with element i mod nb of b). Outputs may alias the
// same-shape input for every op here. Cost: O(n), memory bound.
#include <cmath>

#include "kernels.h"

namespace tiercut {

template <typename T>
void sub_forward(T* y, const T* a, const T* b, int64_t n, int64_t nb) {
  if (nb <= 0) return;
  for (int64_t i0 = 0; i0 < n; i0 += nb)
    for (int64_t j = 0; j < nb; j++) y[i0 + j] = a[i0 + j] - b[j];
}

template <typename T>
void div_forward(T* y, const T* a, const T* b, int64_t n, int64_t nb) {
  if (nb <= 0) return;
  for (int64_t i0 = 0; i0 < n; i0 += nb)
    for (int64_t j = 0; j < nb; j++) y[i0 + j] = a[i0 + j] / b[j];
}

template <typename T>
void affine_forward(T* y, const T* x, int64_t n, double scale, double offset) {
  const T s = T(scale), o = T(offset);
  for (int64_t i = 0; i < n; i++) y[i] = x[i] * s + o;
}

template <typename T>
void pow_scalar_forward(T* y, const T* x, int64_t n, double exponent) {
  const T e = T(exponent);
  if (exponent == 2.0) { for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i]; return; }
  if (exponent == 1.0) { for (int64_t i = 0; i < n; i++) y[i] = x[i]; return; }
  for (int64_t i = 0; i < n; i++) y[i] = std::pow(x[i], e);
}

template <typename T>
void unary_forward(T* y, const T* x, int64_t n, int32_t fn) {
  switch (fn) {
    case UNARY_TANH: for (int64_t i = 0; i < n; i++) y[i] = std::tanh(x[i]); break;
    case UNARY_ERF: for (int64_t i = 0; i < n; i++) y[i] = std::erf(x[i]); break;
    case UNARY_SQRT: for (int64_t i = 0; i < n; i++) y[i] = std::sqrt(x[i]); break;
    case UNARY_RELU: for (int64_t i = 0; i < n; i++) y[i] = x[i] > T(0) ? x[i] : T(0); break;
    case UNARY_EXP: for (int64_t i = 0; i < n; i++) y[i] = std::exp(x[i]); break;
    case UNARY_LOG: for (int64_t i = 0; i < n; i++) y[i] = std::log(x[i]); break;
    case UNARY_SIGMOID: for (int64_t i = 0; i < n; i++) y[i] = T(1) / (T(1) + std::exp(-x[i])); break;
    default: break;
  }
}

// dx from x, y = f(x) and dy
template <typename T>
void unary_backward(T* dx, const T* x, const T* y, const T* dy, int64_t n, int32_t fn) {
  switch (fn) {
    case UNARY_TANH: for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * (T(1) - y[i] * y[i]); break;
    case UNARY_ERF: {
      const T k = T(1.1283791670955126);  // 2 / sqrt(pi)
      for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * k * std::exp(-x[i] * x[i]);
      break;
    }
    case UNARY_SQRT: for (int64_t i = 0; i < n; i++) dx[i] = dy[i] / (T(2) * y[i]); break;
    case UNARY_RELU: for (int64_t i = 0; i < n; i++) dx[i] = x[i] > T(0) ? dy[i] : T(0); break;
    case UNARY_EXP: for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * y[i]; break;
    case UNARY_LOG: for (int64_t i = 0; i < n; i++) dx[i] = dy[i] / x[i]; break;
    case UNARY_SIGMOID: for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * y[i] * (T(1) - y[i]); break;
    default: break;
  }
}

template <typename T>
void where_forward(T* y, const T* cond, const T* a, const T* b, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = cond[i] != T(0) ? a[i] : b[i];
}

template <typename T>
void cast_forward(T* y, const int32_t* x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = T(x[i]);
}

#define TIERCUT_INSTANTIATE(T)                                                              \
  template void sub_forward<T>(T*, const T*, const T*, int64_t, int64_t);                   \
  template void div_forward<T>(T*, const T*, const T*, int64_t, int64_t);                   \
  template void affine_forward<T>(T*, const T*, int64_t, double, double);                   \
  template void pow_scalar_forward<T>(T*, const T*, int64_t, double);                       \
  template void unary_forward<T>(T*, const T*, int64_t, int32_t);                           \
  template void unary_backward<T>(T*, const T*, const T*, const T*, int64_t, int32_t);      \
  template void where_forward<T>(T*, const T*, const T*, const T*, int64_t);                \
  template void cast_forward<T>(T*, const int32_t*, int64_t);
TIERCUT_INSTANTIATE(float)
TIERCUT_INSTANTIATE(double)
#undef TIERCUT_INSTANTIATE

}  // namespace tiercut
