// broadcast.cc — expand (numpy broadcast of x to a larger shape) and its
// adjoint unbroadcast (sum of x over the broadcast dims down to a smaller shape).
//
// r = rank of the large shape `big`; the small shape is aligned to its right
// and given as `small_strides`: for each of the r dims, the stride of the small
// tensor along it, or 0 where the small tensor has size 1 (or lacks the dim).
// Both walk the large index space in row-major order with an odometer.
// Cost: O(numel(big)).
#include "kernels.h"

namespace tiercut {

namespace {
// Advances idx (an odometer over big) by one; returns the small offset delta.
inline int64_t step(int64_t* idx, const int64_t* big, const int64_t* small_strides, int32_t r) {
  int64_t delta = 0;
  for (int32_t d = r - 1; d >= 0; d--) {
    idx[d]++;
    delta += small_strides[d];
    if (idx[d] < big[d]) return delta;
    delta -= small_strides[d] * big[d];
    idx[d] = 0;
  }
  return delta;
}
}  // namespace

template <typename T>
void expand_forward(T* y, const T* x, int32_t r, const int64_t* big, const int64_t* small_strides) {
  int64_t n = 1;
  for (int32_t d = 0; d < r; d++) n *= big[d];
  int64_t idx[kMaxRankKernels] = {0};
  int64_t off = 0;
  for (int64_t i = 0; i < n; i++) {
    y[i] = x[off];
    off += step(idx, big, small_strides, r);
  }
}

template <typename T>
void unbroadcast_forward(T* y, int64_t ny, const T* x, int32_t r, const int64_t* big, const int64_t* small_strides) {
  for (int64_t j = 0; j < ny; j++) y[j] = T(0);
  int64_t n = 1;
  for (int32_t d = 0; d < r; d++) n *= big[d];
  int64_t idx[kMaxRankKernels] = {0};
  int64_t off = 0;
  for (int64_t i = 0; i < n; i++) {
    y[off] += x[i];
    off += step(idx, big, small_strides, r);
  }
}

template void expand_forward<float>(float*, const float*, int32_t, const int64_t*, const int64_t*);
template void expand_forward<double>(double*, const double*, int32_t, const int64_t*, const int64_t*);
template void unbroadcast_forward<float>(float*, int64_t, const float*, int32_t, const int64_t*, const int64_t*);
template void unbroadcast_forward<double>(double*, int64_t, const double*, int32_t, const int64_t*, const int64_t*);

}  // namespace tiercut
