// layernorm.cc — layer normalization over the last dim, forward and backward.
//
// N = rows (numel of all leading dims), C = channels (the normalized last dim).
// Forward, per row (eps = fattr[0]):
//   mean = sum_i x_i / C
//   var  = sum_i (x_i - mean)^2 / C                 (biased, as torch)
//   rstd = 1 / sqrt(var + eps)
//   y_i  = (x_i - mean) * rstd * w_i + b_i
// mean and var are accumulated in double (two passes) and stored as T; y is
// computed from the stored values, so backward sees exactly what forward used.
// Cost: O(N*C).
#include <cmath>

#include "kernels.h"

namespace tiercut {

template <typename T>
void layernorm_forward(T* y, T* mean, T* rstd, const T* x, const T* w, const T* b,
                       int64_t N, int64_t C, double eps) {
  for (int64_t n = 0; n < N; n++) {
    const T* xn = x + n * C;
    T* yn = y + n * C;
    double sum = 0.0;
    for (int64_t i = 0; i < C; i++) sum += double(xn[i]);
    double m = sum / double(C);
    double ss = 0.0;
    for (int64_t i = 0; i < C; i++) {
      double d = double(xn[i]) - m;
      ss += d * d;
    }
    double var = ss / double(C);
    T mt = T(m);
    T rt = T(1.0 / std::sqrt(var + eps));
    for (int64_t i = 0; i < C; i++) yn[i] = (xn[i] - mt) * rt * w[i] + b[i];
    mean[n] = mt;
    rstd[n] = rt;
  }
}

// With xhat_i = (x_i - mean) * rstd and g_i = dy_i * w_i (the gradient w.r.t. xhat):
//   dx_i = rstd * (g_i - mean_j(g_j) - xhat_i * mean_j(g_j * xhat_j))
//   dw_i = sum over rows of dy_i * xhat_i
//   db_i = sum over rows of dy_i
// dx is overwritten (one row at a time, after both row sums: dx may alias dy);
// dw and db are zeroed, then summed over all N rows.
template <typename T>
void layernorm_backward(T* dx, T* dw, T* db, const T* x, const T* w, const T* mean,
                        const T* rstd, const T* dy, int64_t N, int64_t C) {
  for (int64_t i = 0; i < C; i++) { dw[i] = T(0); db[i] = T(0); }
  for (int64_t n = 0; n < N; n++) {
    const T* xn = x + n * C;
    const T* dyn = dy + n * C;
    T* dxn = dx + n * C;
    const T mn = mean[n];
    const T rs = rstd[n];
    // the two row means
    T g_mean = T(0);
    T gx_mean = T(0);
    for (int64_t i = 0; i < C; i++) {
      T xhat = (xn[i] - mn) * rs;
      T g = dyn[i] * w[i];
      g_mean += g;
      gx_mean += g * xhat;
    }
    g_mean /= T(C);
    gx_mean /= T(C);
    // accumulate dw, db and write dx
    for (int64_t i = 0; i < C; i++) {
      T xhat = (xn[i] - mn) * rs;
      T g = dyn[i] * w[i];
      db[i] += dyn[i];
      dw[i] += dyn[i] * xhat;
      dxn[i] = rs * (g - g_mean - xhat * gx_mean);
    }
  }
}

#define TIERCUT_INSTANTIATE(T)                                                             \
  template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t,     \
                                     int64_t, double);                                     \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,   \
                                      const T*, int64_t, int64_t);
TIERCUT_INSTANTIATE(float)
TIERCUT_INSTANTIATE(double)
#undef TIERCUT_INSTANTIATE

}  // namespace tiercut
