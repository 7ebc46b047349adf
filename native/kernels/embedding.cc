// embedding.cc — token embedding lookup, forward and backward.
//
// N = number of ids (numel of ids, any shape), V = rows of the table
// (vocabulary), C = channels. Ids are int32 and already checked by run_op to be
// in [0, V).
//   forward:  y[n,:] = table[ids[n],:]
//   backward: dtable = 0, then dtable[ids[n],:] += dy[n,:] for n in order
//             (rows hit by several ids get the sum, in order of n)
// Cost: O(N*C) (+ O(V*C) to zero dtable).
#include "kernels.h"

namespace tiercut {

template <typename T>
void embedding_forward(T* y, const int32_t* ids, const T* table, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; n++) {
    const T* row = table + int64_t(ids[n]) * C;
    T* yn = y + n * C;
    for (int64_t i = 0; i < C; i++) yn[i] = row[i];
  }
}

template <typename T>
void embedding_backward(T* dtable, const int32_t* ids, const T* dy, int64_t N, int64_t V, int64_t C) {
  for (int64_t i = 0; i < V * C; i++) dtable[i] = T(0);
  for (int64_t n = 0; n < N; n++) {
    T* row = dtable + int64_t(ids[n]) * C;
    const T* dyn = dy + n * C;
    for (int64_t i = 0; i < C; i++) row[i] += dyn[i];
  }
}

template void embedding_forward<float>(float*, const int32_t*, const float*, int64_t, int64_t);
template void embedding_forward<double>(double*, const int32_t*, const double*, int64_t, int64_t);
template void embedding_backward<float>(float*, const int32_t*, const float*, int64_t, int64_t, int64_t);
template void embedding_backward<double>(double*, const int32_t*, const double*, int64_t, int64_t, int64_t);

}  // namespace tiercut
