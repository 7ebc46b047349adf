// activation.cc — SiLU (LLaMA's SwiGLU gate) and exact GELU (BERT), forward and
// backward. The tanh-approximate GELU is in elementwise.cc.
//
// n = numel of x, y, dy and dx (all one shape). y may alias x and dx may alias
// dy. Cost: O(n).
#include <cmath>

#include "kernels.h"

namespace tiercut {

// y = x * sigmoid(x)   (torch.nn.functional.silu)
template <typename T>
void silu_forward(T* y, const T* x, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const T xi = x[i];
    y[i] = xi / (T(1) + std::exp(-xi));
  }
}

// with s = sigmoid(x):  silu'(x) = s + x s (1 - s) = s (1 + x (1 - s))
template <typename T>
void silu_backward(T* dx, const T* x, const T* dy, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const T xi = x[i];
    const T s = T(1) / (T(1) + std::exp(-xi));
    dx[i] = dy[i] * s * (T(1) + xi * (T(1) - s));
  }
}

// GELU, exact (erf) form (torch.nn.functional.gelu(x), approximate='none'):
//   y = 0.5 x (1 + erf(x / sqrt 2))
template <typename T>
void gelu_erf_forward(T* y, const T* x, int64_t n) {
  const T r = T(0.70710678118654752440);  // 1/sqrt(2)
  for (int64_t i = 0; i < n; i++) {
    const T xi = x[i];
    y[i] = T(0.5) * xi * (T(1) + std::erf(xi * r));
  }
}

//   gelu'(x) = 0.5 (1 + erf(x / sqrt 2)) + x * exp(-x^2 / 2) / sqrt(2 pi)
template <typename T>
void gelu_erf_backward(T* dx, const T* x, const T* dy, int64_t n) {
  const T r = T(0.70710678118654752440);
  const T c = T(0.39894228040143267794);  // 1/sqrt(2 pi)
  for (int64_t i = 0; i < n; i++) {
    const T xi = x[i];
    const T grad = T(0.5) * (T(1) + std::erf(xi * r)) + xi * c * std::exp(T(-0.5) * xi * xi);
    dx[i] = dy[i] * grad;
  }
}

#define TIERCUT_INSTANTIATE(T)                                                \
  template void silu_forward<T>(T*, const T*, int64_t);                      \
  template void silu_backward<T>(T*, const T*, const T*, int64_t);           \
  template void gelu_erf_forward<T>(T*, const T*, int64_t);                  \
  template void gelu_erf_backward<T>(T*, const T*, const T*, int64_t);
TIERCUT_INSTANTIATE(float)
TIERCUT_INSTANTIATE(double)
#undef TIERCUT_INSTANTIATE

}  // namespace tiercut
