// elementwise.cc — add, mul (with trailing broadcast), sum_to_shape, gelu, fill.
//
// n = numel of the full-shape operand, nb / ny = numel of the broadcast operand
// (whose shape is a suffix of the full shape, so n is a multiple of it and
// element i of the full operand pairs with element i mod nb).
// y may be the same buffer as a (or x) for every op here except sum_to_shape.
// Cost: O(n), memory bound.
#include <cmath>

#include "kernels.h"

namespace tiercut {

// y[i] = a[i] + b[i mod nb]
template <typename T>
void add_forward(T* y, const T* a, const T* b, int64_t n, int64_t nb) {
  if (nb <= 0) return;  // then n == 0 too
  for (int64_t i0 = 0; i0 < n; i0 += nb) {
    for (int64_t j = 0; j < nb; j++) y[i0 + j] = a[i0 + j] + b[j];
  }
}

// y[i] = a[i] * b[i mod nb]
template <typename T>
void mul_forward(T* y, const T* a, const T* b, int64_t n, int64_t nb) {
  if (nb <= 0) return;
  for (int64_t i0 = 0; i0 < n; i0 += nb) {
    for (int64_t j = 0; j < nb; j++) y[i0 + j] = a[i0 + j] * b[j];
  }
}

// y[j] = sum_{i = j mod ny} x[i]: the adjoint of the broadcast in add/mul.
// Sums in order of increasing i.
template <typename T>
void sum_to_shape_forward(T* y, const T* x, int64_t n, int64_t ny) {
  if (ny <= 0) return;
  for (int64_t j = 0; j < ny; j++) y[j] = T(0);
  for (int64_t i0 = 0; i0 < n; i0 += ny) {
    for (int64_t j = 0; j < ny; j++) y[j] += x[i0 + j];
  }
}

// GELU, tanh approximation (torch.nn.functional.gelu(x, approximate='tanh')):
//   u = sqrt(2/pi) * (x + 0.044715 x^3)
//   y = 0.5 x (1 + tanh(u))
template <typename T>
void gelu_forward(T* y, const T* x, int64_t n) {
  const T s = T(0.7978845608028654);  // sqrt(2/pi)
  const T c = T(0.044715);
  for (int64_t i = 0; i < n; i++) {
    T xi = x[i];
    T u = s * (xi + c * xi * xi * xi);
    y[i] = T(0.5) * xi * (T(1) + std::tanh(u));
  }
}

// dx = dy * gelu'(x), where with t = tanh(u):
//   gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) * sqrt(2/pi) (1 + 3 * 0.044715 x^2)
template <typename T>
void gelu_backward(T* dx, const T* x, const T* dy, int64_t n) {
  const T s = T(0.7978845608028654);
  const T c = T(0.044715);
  for (int64_t i = 0; i < n; i++) {
    T xi = x[i];
    T t = std::tanh(s * (xi + c * xi * xi * xi));
    T du = s * (T(1) + T(3) * c * xi * xi);
    T grad = T(0.5) * (T(1) + t) + T(0.5) * xi * (T(1) - t * t) * du;
    dx[i] = dy[i] * grad;
  }
}

// y[i] = value (rounded once to T)
template <typename T>
void fill_forward(T* y, int64_t n, double value) {
  const T v = T(value);
  for (int64_t i = 0; i < n; i++) y[i] = v;
}

#define TIERCUT_INSTANTIATE(T)                                                  \
  template void add_forward<T>(T*, const T*, const T*, int64_t, int64_t);       \
  template void mul_forward<T>(T*, const T*, const T*, int64_t, int64_t);       \
  template void sum_to_shape_forward<T>(T*, const T*, int64_t, int64_t);        \
  template void gelu_forward<T>(T*, const T*, int64_t);                         \
  template void gelu_backward<T>(T*, const T*, const T*, int64_t);              \
  template void fill_forward<T>(T*, int64_t, double);
TIERCUT_INSTANTIATE(float)
TIERCUT_INSTANTIATE(double)
#undef TIERCUT_INSTANTIATE

}  // namespace tiercut
