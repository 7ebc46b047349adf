// cross_entropy.cc — mean cross-entropy of logits against integer targets,
// forward and backward (torch.nn.functional.cross_entropy, reduction='mean').
//
// N = rows (numel of targets = numel of logits' leading dims), V = classes
// (last dim of logits). Targets are int32, already checked by run_op to be in
// [0, V). Per row, with lse = max + log(sum_v exp(logits[v] - max)):
//   log_softmax(logits)[v] = logits[v] - lse
//   loss = -(1/N) sum_n log_softmax(logits[n])[targets[n]] = (1/N) sum_n (lse_n - logits[n, targets[n]])
// The row sums of exp and the sum over n are accumulated in double.
// N = 0 gives loss = NaN (0/0), like torch's mean over nothing.
// Backward: dlogits[n,v] = (softmax(logits[n])[v] - [v == targets[n]]) * dloss / N.
// Cost: O(N*V).
#include <cmath>

#include "kernels.h"

namespace tiercut {

template <typename T>
void cross_entropy_forward(T* loss, const T* logits, const int32_t* targets, int64_t N, int64_t V) {
  double total = 0.0;
  for (int64_t n = 0; n < N; n++) {
    const T* row = logits + n * V;
    T maxval = row[0];  // V >= 1 here: a target in [0, V) exists
    for (int64_t v = 1; v < V; v++) maxval = row[v] > maxval ? row[v] : maxval;
    double sum = 0.0;
    for (int64_t v = 0; v < V; v++) sum += std::exp(double(row[v]) - double(maxval));
    // lse - logit[t] as (max - logit[t]) + log(sum): with |max| past ~1e15 the log(sum) had been
    // absorbed into max and cancelled out (every logit 1e17: a loss of 0, not log V)
    total += (double(maxval) - double(row[targets[n]])) + std::log(sum);
  }
  loss[0] = T(total / double(N));
}

template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const int32_t* targets, const T* dloss,
                            int64_t N, int64_t V) {
  if (N <= 0) return;
  const T scale = dloss[0] / T(N);
  for (int64_t n = 0; n < N; n++) {
    const T* row = logits + n * V;
    T* drow = dlogits + n * V;
    T maxval = row[0];
    for (int64_t v = 1; v < V; v++) maxval = row[v] > maxval ? row[v] : maxval;
    double sum = 0.0;
    for (int64_t v = 0; v < V; v++) {
      T e = std::exp(row[v] - maxval);
      drow[v] = e;  // unnormalized for now (row[v] is not read again, so dlogits may alias logits)
      sum += double(e);
    }
    const T inv = T(1.0 / sum);
    const int64_t target = targets[n];
    for (int64_t v = 0; v < V; v++) {
      T p = drow[v] * inv;
      drow[v] = (p - (v == target ? T(1) : T(0))) * scale;
    }
  }
}

template void cross_entropy_forward<float>(float*, const float*, const int32_t*, int64_t, int64_t);
template void cross_entropy_forward<double>(double*, const double*, const int32_t*, int64_t, int64_t);
template void cross_entropy_backward<float>(float*, const float*, const int32_t*, const float*, int64_t, int64_t);
template void cross_entropy_backward<double>(double*, const double*, const int32_t*, const double*, int64_t, int64_t);

}  // namespace tiercut
