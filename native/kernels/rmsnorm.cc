// rmsnorm.cc — RMS normalization over the last dim (LLaMA's RMSNorm), forward
// and backward.
//
// N = rows (numel of all leading dims), C = channels (the normalized last dim).
// Forward, per row (eps = fattr[0]):
//   rstd = 1 / sqrt(sum_i x_i^2 / C + eps)
//   y_i  = x_i * rstd * w_i
// (as torch / Hugging Face LlamaRMSNorm: no mean subtraction, no bias). The sum
// of squares is accumulated in double and rstd stored as T; y is computed from
// the stored rstd, so backward sees exactly what forward used.
// Cost: O(N*C).
#include <cmath>

#include "kernels.h"

namespace tiercut {

template <typename T>
void rmsnorm_forward(T* y, T* rstd, const T* x, const T* w, int64_t N, int64_t C, double eps) {
  for (int64_t n = 0; n < N; n++) {
    const T* xn = x + n * C;
    T* yn = y + n * C;
    double ss = 0.0;
    for (int64_t i = 0; i < C; i++) ss += double(xn[i]) * double(xn[i]);
    const T rt = T(1.0 / std::sqrt(ss / double(C) + eps));
    for (int64_t i = 0; i < C; i++) yn[i] = xn[i] * rt * w[i];
    rstd[n] = rt;
  }
}

// With xhat_i = x_i * rstd and g_i = dy_i * w_i (the gradient w.r.t. xhat):
//   dx_i = rstd * (g_i - xhat_i * mean_j(g_j * xhat_j))
//   dw_i = sum over rows of dy_i * xhat_i
// (d rstd / d x_j = -rstd^3 x_j / C gives the second term.) dx is written one
// row at a time after the row sum, so dx may alias dy; dw is zeroed, then
// summed over all N rows.
template <typename T>
void rmsnorm_backward(T* dx, T* dw, const T* x, const T* w, const T* rstd, const T* dy, int64_t N, int64_t C) {
  for (int64_t i = 0; i < C; i++) dw[i] = T(0);
  for (int64_t n = 0; n < N; n++) {
    const T* xn = x + n * C;
    const T* dyn = dy + n * C;
    T* dxn = dx + n * C;
    const T rs = rstd[n];
    T gx_mean = T(0);
    for (int64_t i = 0; i < C; i++) gx_mean += dyn[i] * w[i] * xn[i] * rs;
    gx_mean /= T(C);
    for (int64_t i = 0; i < C; i++) {
      const T xhat = xn[i] * rs;
      const T g = dyn[i] * w[i];
      dw[i] += dyn[i] * xhat;
      dxn[i] = rs * (g - xhat * gx_mean);
    }
  }
}

#define TIERCUT_INSTANTIATE(T)                                                                     \
  template void rmsnorm_forward<T>(T*, T*, const T*, const T*, int64_t, int64_t, double);          \
  template void rmsnorm_backward<T>(T*, T*, const T*, const T*, const T*, const T*, int64_t, int64_t);
TIERCUT_INSTANTIATE(float)
TIERCUT_INSTANTIATE(double)
#undef TIERCUT_INSTANTIATE

}  // namespace tiercut
