// shape.cc — reshape (a copy in order) and transpose (a general permutation of
// up to kMaxRank = 8 dims).
//
// r = rank, x_shape = x's dims, perm = the permutation: y.shape[i] = x.shape[perm[i]],
// y[i_0, ..., i_{r-1}] = x[j] with j_{perm[d]} = i_d.
// Cost: O(numel), memory bound; transpose reads x with the permuted strides.
#include <cstring>

#include "dispatch.h"
#include "kernels.h"

namespace tiercut {

// y = x's elements in order; nothing to do when y is x (an in-place view)
template <typename T>
void reshape_forward(T* y, const T* x, int64_t n) {
  if (y == x || n <= 0) return;
  std::memmove(y, x, size_t(n) * sizeof(T));
}

// Walks y in order with an odometer over y's index, moving the x offset by the
// stride of x's dim perm[d] each time y's index d steps.
template <typename T>
void transpose_forward(T* y, const T* x, int32_t r, const int64_t* x_shape, const int64_t* perm) {
  int64_t x_stride[kMaxRank];
  int64_t s = 1;
  for (int32_t d = r - 1; d >= 0; d--) { x_stride[d] = s; s *= x_shape[d]; }
  int64_t y_dim[kMaxRank], step[kMaxRank], idx[kMaxRank];
  int64_t n = 1;
  for (int32_t d = 0; d < r; d++) {
    y_dim[d] = x_shape[perm[d]];
    step[d] = x_stride[perm[d]];
    idx[d] = 0;
    n *= y_dim[d];
  }
  int64_t off = 0;
  for (int64_t o = 0; o < n; o++) {
    y[o] = x[off];
    for (int32_t d = r - 1; d >= 0; d--) {  // increment the odometer, last dim fastest
      idx[d]++;
      off += step[d];
      if (idx[d] < y_dim[d]) break;
      off -= step[d] * y_dim[d];
      idx[d] = 0;
    }
  }
}

template void reshape_forward<float>(float*, const float*, int64_t);
template void reshape_forward<double>(double*, const double*, int64_t);
template void transpose_forward<float>(float*, const float*, int32_t, const int64_t*, const int64_t*);
template void transpose_forward<double>(double*, const double*, int32_t, const int64_t*, const int64_t*);

}  // namespace tiercut
