// ring_threads.h — ring attention over whole-sequence arrays with the P ranks
// run as threads of this process (ThreadComm). Each rank copies its zigzag
// shard out of the whole arrays, runs ring_attention_forward/backward, and
// copies its result rows back; ranks write disjoint rows, so no locking.
// Synchronous: returns when every rank's thread has ended. Throws
// std::invalid_argument for bad arguments (validate_ring_args) and CommError /
// std::runtime_error with the first failing rank's message.
#pragma once
#include <vector>

#include "ring_attention.h"

namespace tiercut::ring {

struct ThreadedRing {
  int ranks = 1;
  int timeout_ms = 120000;
  RingOptions options;
};

// q, k, v, out: [B, H, S, D]; lse: [B, H, S]. stats: resized to ranks.
void ring_forward_threads(const AttentionShape& shape, const ThreadedRing& ring, const float* q, const float* k,
                          const float* v, float* out, float* lse, std::vector<RankStats>* stats);

// dq, dk, dv: [B, H, S, D], written.
void ring_backward_threads(const AttentionShape& shape, const ThreadedRing& ring, const float* q, const float* k,
                           const float* v, const float* out, const float* lse, const float* dout, float* dq, float* dk,
                           float* dv, std::vector<RankStats>* stats);

}  // namespace tiercut::ring
