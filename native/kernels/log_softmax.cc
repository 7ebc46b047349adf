// log_softmax.cc — log-softmax over the last dim, forward and backward.
//
// N = rows, C = the last dim. Forward, per row: y_i = x_i - max - log(sum_j
// exp(x_j - max)) (sum in double). Backward: dx_i = dy_i - exp(y_i) * sum_j dy_j.
// Cost: O(N*C).
#include <cmath>

#include "kernels.h"

namespace tiercut {

template <typename T>
void log_softmax_forward(T* y, const T* x, int64_t N, int64_t C) {
  if (C <= 0) return;
  for (int64_t n = 0; n < N; n++) {
    const T* xn = x + n * C;
    T* yn = y + n * C;
    T maxval = xn[0];
    for (int64_t i = 1; i < C; i++) maxval = xn[i] > maxval ? xn[i] : maxval;
    double sum = 0.0;
    for (int64_t i = 0; i < C; i++) sum += std::exp(double(xn[i] - maxval));
    const T lse = T(std::log(sum));
    for (int64_t i = 0; i < C; i++) yn[i] = xn[i] - maxval - lse;
  }
}

template <typename T>
void log_softmax_backward(T* dx, const T* y, const T* dy, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; n++) {
    const T* yn = y + n * C;
    const T* dyn = dy + n * C;
    T* dxn = dx + n * C;
    double s = 0.0;
    for (int64_t i = 0; i < C; i++) s += double(dyn[i]);
    for (int64_t i = 0; i < C; i++) dxn[i] = dyn[i] - std::exp(yn[i]) * T(s);
  }
}

template void log_softmax_forward<float>(float*, const float*, int64_t, int64_t);
template void log_softmax_forward<double>(double*, const double*, int64_t, int64_t);
template void log_softmax_backward<float>(float*, const float*, const float*, int64_t, int64_t);
template void log_softmax_backward<double>(double*, const double*, const double*, int64_t, int64_t);

}  // namespace tiercut
