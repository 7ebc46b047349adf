// batchnorm.cc — batch normalization in training mode (batch statistics),
// forward, backward, and the running-statistics update.
//
// x, y, dx, dy are [N,C,S] (S = numel of the dims after C: H*W for NCHW, 1 for
// [N,C]); statistics are per channel c over its n = N*S values.
// Forward (eps = fattr[0]):
//   mean = sum x / n,  var = sum (x - mean)^2 / n        (biased, as torch)
//   rstd = 1 / sqrt(var + eps)
//   y    = x * alpha + beta, alpha = rstd * w, beta = b - mean * alpha  (torch's form)
// Sums run in double (two passes); mean and var are stored as T and rstd is
// always recomputed from the stored var, so backward sees what forward used.
// Backward (torch's form), per channel:
//   dotp = sum (x - mean) * dy,  sdy = sum dy
//   dw = dotp * rstd,  db = sdy
//   dx = (dy - sdy/n - (x - mean) * dotp * rstd^2 / n) * rstd * w
// Running statistics (PyTorch's update, momentum = its momentum, not ONNX's):
//   running_mean = (1 - momentum) * running_mean + momentum * mean
//   running_var  = (1 - momentum) * running_var  + momentum * var * n / (n - 1)
// Cost: O(N*C*S) for forward and backward, O(C) for the update.
#include <cmath>

#include "kernels.h"

namespace tiercut {

template <typename T>
void batchnorm_forward(T* y, T* mean, T* var, const T* x, const T* w, const T* b, int64_t N, int64_t C, int64_t S,
                       double eps) {
  const double n = double(N * S);
  for (int64_t c = 0; c < C; c++) {
    double sum = 0.0;
    for (int64_t i = 0; i < N; i++)
      for (int64_t s = 0; s < S; s++) sum += double(x[(i * C + c) * S + s]);
    const double m = sum / n;
    double ss = 0.0;
    for (int64_t i = 0; i < N; i++)
      for (int64_t s = 0; s < S; s++) {
        const double d = double(x[(i * C + c) * S + s]) - m;
        ss += d * d;
      }
    mean[c] = T(m);
    var[c] = T(ss / n);
    const T rstd = T(1.0 / std::sqrt(double(var[c]) + eps));
    const T alpha = rstd * w[c];
    const T beta = b[c] - mean[c] * alpha;
    for (int64_t i = 0; i < N; i++)
      for (int64_t s = 0; s < S; s++) {
        const int64_t at = (i * C + c) * S + s;
        y[at] = x[at] * alpha + beta;
      }
  }
}

template <typename T>
void batchnorm_backward(T* dx, T* dw, T* db, const T* x, const T* w, const T* mean, const T* var, const T* dy,
                        int64_t N, int64_t C, int64_t S, double eps) {
  const double n = double(N * S);
  for (int64_t c = 0; c < C; c++) {
    const T rstd = T(1.0 / std::sqrt(double(var[c]) + eps));
    const T mc = mean[c];
    double dotp = 0.0, sdy = 0.0;
    for (int64_t i = 0; i < N; i++)
      for (int64_t s = 0; s < S; s++) {
        const int64_t at = (i * C + c) * S + s;
        dotp += double(x[at] - mc) * double(dy[at]);
        sdy += double(dy[at]);
      }
    dw[c] = T(dotp) * rstd;
    db[c] = T(sdy);
    const T k = T(dotp) * rstd * rstd / T(n);
    const T grad_mean = T(sdy / n);
    const T scale = rstd * w[c];
    for (int64_t i = 0; i < N; i++)
      for (int64_t s = 0; s < S; s++) {
        const int64_t at = (i * C + c) * S + s;
        dx[at] = (dy[at] - grad_mean - (x[at] - mc) * k) * scale;
      }
  }
}

template <typename T>
void batchnorm_running(T* out_mean, T* out_var, const T* run_mean, const T* run_var, const T* mean, const T* var,
                       int64_t C, double momentum, int64_t count) {
  const double unbias = double(count) / double(count - 1);
  for (int64_t c = 0; c < C; c++) {
    const double rm = double(run_mean[c]), rv = double(run_var[c]);
    out_mean[c] = T(momentum * double(mean[c]) + (1.0 - momentum) * rm);
    out_var[c] = T(momentum * double(var[c]) * unbias + (1.0 - momentum) * rv);
  }
}

#define TIERCUT_INSTANTIATE(T)                                                                                  \
  template void batchnorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t, int64_t, double); \
  template void batchnorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, int64_t,     \
                                      int64_t, int64_t, double);                                                \
  template void batchnorm_running<T>(T*, T*, const T*, const T*, const T*, const T*, int64_t, double, int64_t);
TIERCUT_INSTANTIATE(float)
TIERCUT_INSTANTIATE(double)
#undef TIERCUT_INSTANTIATE

}  // namespace tiercut
