// ring_attention.h — exact attention over a sequence sharded across the P ranks
// of a ring (Liu et al. 2023, "Ring Attention"; Colossal-AI sequence
// parallelism). Each rank holds S/P tokens of q, k, v; k/v blocks pass around
// the ring P-1 times so every query sees every key, and no rank ever holds more
// than two k/v blocks. Plain functions over raw float pointers and a
// Communicator, so that an executor instruction can call them as they are.
//
// Shape letters: B = batch, H = heads, S = sequence length, D = head dim.
// Layout: every tensor is row-major [B, H, rows, D] (lse: [B, H, rows]), where
// rows is S for a whole tensor and shard_rows(S, P, r) for rank r's shard.
// scale = 1 / sqrt(D); lse[b,h,i] = log sum_j exp(scale * q_i . k_j) over the
// keys row i may see (natural log, the scaled scores).
//
// Zigzag sharding (load balance under the causal mask): the sequence is cut
// into 2P chunks, chunk c = positions [floor(c*S/2P), floor((c+1)*S/2P)), so
// chunk lengths differ by at most one (the longer ones are spread evenly, the
// last chunk is never the short one when S % 2P != 0). Rank r holds chunk r
// followed by chunk 2P-1-r, in that order, as its local rows. An early chunk
// sees few keys and a late one many, so every rank does the same causal work
// (to within one row). The same layout is used without the causal mask.
// Requires S >= 2P (every chunk non-empty).
//
// Forward (per rank, step t = 0..P-1, the k/v block of rank src = r - t):
//   online softmax per query row: m = running max, l = running sum,
//   acc = running sum of exp(s - m) * v; a new tile with max m' rescales l and
//   acc by exp(m - m'). out = acc / l, lse = m + log l.
//   Double buffering: the next block (from the previous rank) is received into
//   the second buffer while the current one is computed; the current block is
//   sent on to the next rank at the same time.
// Backward (per rank): Delta_i = dout_i . out_i; p_ij = exp(s_ij - lse_i)
//   (recomputed, never stored); dv_j += p_ij dout_i; dp_ij = dout_i . v_j;
//   ds_ij = p_ij (dp_ij - Delta_i); dq_i += scale ds_ij k_j; dk_j += scale ds_ij q_i.
//   k, v circulate as in the forward pass (double-buffered); the partial dk, dv
//   of a block travel with it: a rank computes its contribution into a fresh
//   buffer, then adds the accumulated dk, dv of the same block received from
//   the previous rank (sent while it computed), and sends the sum on. After P
//   steps the sum arrives at the block's owner: P-1 k/v hops and P dk/dv hops.
//
// Tiles: queries and keys are processed in tiles of `block` rows that never
// cross a chunk boundary; a (query tile, key tile) pair entirely above the
// diagonal is skipped, one entirely below it is unmasked, and only diagonal
// tiles look at positions. S need not be a multiple of block (short last tiles).
//
// Cost per rank: O(B H S^2 D / P) flops (halved when causal); memory
// O(B H (S/P) D): its q, k, v, out shards, two k/v buffers, (backward) dout,
// dq and two dk/dv buffers, and O(D * S/P) scratch — flat in S for fixed S/P.
//
// Errors: CommError from the communicator (timeouts name the peer);
// std::invalid_argument from validate_ring_args() callers. The kernels
// themselves assume valid arguments (check with validate_ring_args first).
#pragma once
#include <cstdint>
#include <string>

#include "comm.h"

namespace tiercut::ring {

struct AttentionShape {
  int64_t batch = 0, heads = 0, seq = 0, dim = 0;
  bool causal = false;
};

struct RingOptions {
  int64_t block = 64;   // tile rows for queries and keys
};

// Measured per rank; peak_bytes counts every buffer the rank allocates (its
// shards when a driver copies them, the ring buffers, scratch), not the
// caller's whole-sequence arrays.
struct RankStats {
  double seconds = 0;          // the whole call on this rank
  double compute_seconds = 0;  // in tile kernels
  double wait_seconds = 0;     // blocked in Communicator::wait
  int64_t peak_bytes = 0;
  int64_t sent_bytes = 0;
  int64_t rows = 0;            // local rows (shard_rows)
};

struct Chunk {
  int64_t start = 0, length = 0;
};

// chunk c of the 2P zigzag chunks of a sequence of seq tokens
Chunk zigzag_chunk(int64_t seq, int ranks, int chunk);
// the two chunks of rank r, in local order: chunk r, then chunk 2P-1-r
void rank_chunks(int64_t seq, int ranks, int rank, Chunk out[2]);
int64_t shard_rows(int64_t seq, int ranks, int rank);

// "" when valid, else a message naming the argument ("ranks: 8 ranks need 16
// zigzag chunks of at least one token, but seq is 10").
std::string validate_ring_args(const AttentionShape& shape, int ranks, int64_t block);

// Copies rank r's rows of a whole-sequence tensor [B, H, S, width] into its
// shard [B, H, rows, width] (width = D for q/k/v, 1 for lse), and back.
void gather_shard(const AttentionShape& shape, int ranks, int rank, int64_t width, const float* whole, float* shard);
void scatter_shard(const AttentionShape& shape, int ranks, int rank, int64_t width, const float* shard, float* whole);

// One rank's part of the forward pass. q, k, v: this rank's shards; out, lse:
// written. The communicator's size is P and its rank is r. Collective: every
// rank of the ring must call it with the same shape and options.
void ring_attention_forward(Communicator& comm, const AttentionShape& shape, const RingOptions& options,
                            const float* q, const float* k, const float* v, float* out, float* lse,
                            RankStats* stats);

// One rank's part of the backward pass; out and lse are the forward pass's.
// dq, dk, dv: written (this rank's shards). Collective like the forward.
void ring_attention_backward(Communicator& comm, const AttentionShape& shape, const RingOptions& options,
                             const float* q, const float* k, const float* v, const float* out, const float* lse,
                             const float* dout, float* dq, float* dk, float* dv, RankStats* stats);

}  // namespace tiercut::ring
