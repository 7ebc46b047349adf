// softmax.cc — softmax over the last dim, forward and backward.
//
// N = rows (numel of all leading dims), C = the softmax dim (last).
// Forward, per row:  y_i = exp(x_i - max_j x_j) / sum_j exp(x_j - max_j x_j)
// (subtracting the max keeps exp from overflowing; the row sum is accumulated
// in double). Backward, per row:  dx_i = y_i * (dy_i - sum_j dy_j * y_j).
// y may alias x, and dx may alias dy. Cost: O(N*C).
#include <cmath>

#include "kernels.h"

namespace tiercut {

template <typename T>
void softmax_forward(T* y, const T* x, int64_t N, int64_t C) {
  if (C <= 0) return;  // empty rows: nothing to write
  for (int64_t n = 0; n < N; n++) {
    const T* xn = x + n * C;
    T* yn = y + n * C;
    T maxval = xn[0];
    for (int64_t i = 1; i < C; i++) maxval = xn[i] > maxval ? xn[i] : maxval;
    double sum = 0.0;
    for (int64_t i = 0; i < C; i++) {
      T e = std::exp(xn[i] - maxval);
      yn[i] = e;
      sum += double(e);
    }
    T inv = T(1.0 / sum);
    for (int64_t i = 0; i < C; i++) yn[i] *= inv;
  }
}

template <typename T>
void softmax_backward(T* dx, const T* y, const T* dy, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; n++) {
    const T* yn = y + n * C;
    const T* dyn = dy + n * C;
    T* dxn = dx + n * C;
    T dot = T(0);
    for (int64_t i = 0; i < C; i++) dot += dyn[i] * yn[i];
    for (int64_t i = 0; i < C; i++) dxn[i] = yn[i] * (dyn[i] - dot);
  }
}

template void softmax_forward<float>(float*, const float*, int64_t, int64_t);
template void softmax_forward<double>(double*, const double*, int64_t, int64_t);
template void softmax_backward<float>(float*, const float*, const float*, int64_t, int64_t);
template void softmax_backward<double>(double*, const double*, const double*, int64_t, int64_t);

}  // namespace tiercut
