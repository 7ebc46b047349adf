// bmm.cc — batched matmul y[b] = op(a[b]) @ op(b[b]) over shared leading dims,
// op = identity or transpose per operand (trans_a, trans_b). Each batch entry
// reuses the blocked 2-D loops of matmul.cc: nn and nt are matmul_forward,
// tn is matmul_backward_db; tt (both transposed) is a plain loop (it only
// appears in the gradient of a tt product, which the importer never emits).
// M, K, N are the sizes of op(a) = [M,K] and op(b) = [K,N]. Cost: 2*batch*M*K*N.
#include "kernels.h"

namespace tiercut {

template <typename T>
void bmm_forward(T* y, const T* a, const T* b, int64_t batch, int64_t M, int64_t K, int64_t N, bool trans_a,
                 bool trans_b) {
  for (int64_t i = 0; i < batch; i++) {
    const T* ai = a + i * M * K;
    const T* bi = b + i * K * N;
    T* yi = y + i * M * N;
    if (!trans_a) {
      matmul_forward<T>(yi, ai, bi, M, K, N, trans_b);
    } else if (!trans_b) {
      matmul_backward_db<T>(yi, ai, bi, K, M, N, false);  // a stored [K,M]: y = a^T b
    } else {
      for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
          T s = T(0);
          for (int64_t k = 0; k < K; k++) s += ai[k * M + m] * bi[n * K + k];
          yi[m * N + n] = s;
        }
    }
  }
}

template void bmm_forward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t, int64_t, bool, bool);
template void bmm_forward<double>(double*, const double*, const double*, int64_t, int64_t, int64_t, int64_t, bool, bool);

}  // namespace tiercut
