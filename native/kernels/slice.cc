// slice.cc — slice along one axis (step 1), its adjoint (zero-padded scatter
// back into the full shape) and concat along one axis.
//
// A shape is seen as [outer, len, inner] around the axis: outer = product of
// the dims before it, inner = product of the dims after it. Cost: O(numel).
#include "kernels.h"

namespace tiercut {

// y[o, i, k] = x[o, start + i, k] for i < ylen (x has xlen along the axis)
template <typename T>
void slice_forward(T* y, const T* x, int64_t outer, int64_t xlen, int64_t ylen, int64_t inner, int64_t start) {
  for (int64_t o = 0; o < outer; o++) {
    const T* src = x + (o * xlen + start) * inner;
    T* dst = y + o * ylen * inner;
    for (int64_t i = 0; i < ylen * inner; i++) dst[i] = src[i];
  }
}

// dx = 0, then dx[o, start + i, k] = dy[o, i, k]
template <typename T>
void slice_backward(T* dx, const T* dy, int64_t outer, int64_t xlen, int64_t ylen, int64_t inner, int64_t start) {
  for (int64_t i = 0; i < outer * xlen * inner; i++) dx[i] = T(0);
  for (int64_t o = 0; o < outer; o++) {
    T* dst = dx + (o * xlen + start) * inner;
    const T* src = dy + o * ylen * inner;
    for (int64_t i = 0; i < ylen * inner; i++) dst[i] = src[i];
  }
}

// y = concat(x[0..n), axis): lens[j] = x[j]'s size along the axis, ylen = their sum
template <typename T>
void concat_forward(T* y, const T* const* xs, const int64_t* lens, int32_t n, int64_t outer, int64_t ylen, int64_t inner) {
  for (int64_t o = 0; o < outer; o++) {
    int64_t at = 0;
    for (int32_t j = 0; j < n; j++) {
      const T* src = xs[j] + o * lens[j] * inner;
      T* dst = y + (o * ylen + at) * inner;
      for (int64_t i = 0; i < lens[j] * inner; i++) dst[i] = src[i];
      at += lens[j];
    }
  }
}

#define TIERCUT_INSTANTIATE(T)                                                                      \
  template void slice_forward<T>(T*, const T*, int64_t, int64_t, int64_t, int64_t, int64_t);        \
  template void slice_backward<T>(T*, const T*, int64_t, int64_t, int64_t, int64_t, int64_t);       \
  template void concat_forward<T>(T*, const T* const*, const int64_t*, int32_t, int64_t, int64_t, int64_t);
TIERCUT_INSTANTIATE(float)
TIERCUT_INSTANTIATE(double)
#undef TIERCUT_INSTANTIATE

}  // namespace tiercut
