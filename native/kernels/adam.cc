// adam.cc — one step of Adam / AdamW, scalar reference (the fused SIMD version
// lives in native/adam/ and is tested against this one).
//
// n = number of parameters. Follows torch 1.13 torch.optim.Adam / AdamW,
// single-tensor (foreach=False) path, operation by operation:
//   AdamW:  p = p * (1 - lr*wd)                   (decoupled decay, before the moments)
//   Adam:   g' = fma(p, wd, g)                     (L2; the g array is not modified)
//   m = fma(g', 1 - beta1, m * beta1)
//   v = fma((1 - beta2) * g', g', v * beta2)
//   bias_correction1 = 1 - beta1^step,  bias_correction2 = 1 - beta2^step   (double)
//   step_size = lr / bias_correction1
//   denom = sqrt(v) / sqrt(bias_correction2) + eps
//   p = p - step_size * m / denom
// Scalars are computed in double and rounded to T once, as torch rounds a
// Python float Scalar to the tensor's dtype; the order of the multiplies
// follows torch's kernels (addcmul: (value * t1) * t2, addcdiv: (value * t1) / t2),
// and the multiply-adds are fused where torch's AVX2/AVX-512 kernels fuse them
// (add with alpha is vec::fmadd; addcmul's self + product is contracted), which
// makes fp32 results bit-identical to torch 1.13 on such CPUs
// (test/adam/torch-parity.test.ts) and to the fused kernel in native/adam.
// torch skips the decay entirely when wd == 0, and so do we.
// Outputs may be the same buffers as the inputs (in place): all elementwise.
// Cost: O(n), memory bound (4 reads, 3-4 writes per parameter).
#include <cmath>

#include "kernels.h"

namespace tiercut {

template <typename T>
void adam_update(T* p_out, T* m_out, T* v_out, T* p_copy,
                 const T* p, const T* g, const T* m, const T* v, int64_t n,
                 double lr, double beta1, double beta2, double eps, double weight_decay,
                 bool adamw, int64_t step) {
  const bool decay = weight_decay != 0.0;
  const T decay_mul = T(1.0 - lr * weight_decay);  // AdamW
  const T wd = T(weight_decay);                     // Adam (L2)
  const T b1 = T(beta1), one_minus_b1 = T(1.0 - beta1);
  const T b2 = T(beta2), one_minus_b2 = T(1.0 - beta2);
  const double bias_correction1 = 1.0 - std::pow(beta1, double(step));
  const double bias_correction2 = 1.0 - std::pow(beta2, double(step));
  const T step_size = T(lr / bias_correction1);
  const T bias_correction2_sqrt = T(std::sqrt(bias_correction2));
  const T eps_t = T(eps);
  for (int64_t i = 0; i < n; i++) {
    T pi = p[i];
    T gi = g[i];
    if (decay) {
      if (adamw) pi = pi * decay_mul;
      else gi = std::fma(pi, wd, gi);
    }
    T mi = std::fma(gi, one_minus_b1, m[i] * b1);
    T vi = std::fma(one_minus_b2 * gi, gi, v[i] * b2);
    T denom = std::sqrt(vi) / bias_correction2_sqrt + eps_t;
    pi = pi - (step_size * mi) / denom;
    m_out[i] = mi;
    v_out[i] = vi;
    p_out[i] = pi;
    if (p_copy) p_copy[i] = pi;
  }
}

template void adam_update<float>(float*, float*, float*, float*, const float*, const float*, const float*,
                                 const float*, int64_t, double, double, double, double, double, bool, int64_t);
template void adam_update<double>(double*, double*, double*, double*, const double*, const double*,
                                  const double*, const double*, int64_t, double, double, double, double,
                                  double, bool, int64_t);

}  // namespace tiercut
