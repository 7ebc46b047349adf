// ring_threads.cc — see ring_threads.h.
#include "ring_threads.h"

#include <stdexcept>

#include "comm_threads.h"

namespace tiercut::ring {

namespace {

void check(const AttentionShape& shape, const ThreadedRing& ring) {
  std::string err = validate_ring_args(shape, ring.ranks, ring.options.block);
  if (!err.empty()) throw std::invalid_argument(err);
  if (ring.timeout_ms <= 0) throw std::invalid_argument("timeoutMs: expected a positive integer");
}

// A rank's shard buffers, counted into its peak bytes.
struct Shards {
  std::vector<std::vector<float>> bufs;
  float* take(int64_t n, RankStats* st) {
    bufs.emplace_back(static_cast<size_t>(n));
    st->peak_bytes += n * static_cast<int64_t>(sizeof(float));
    return bufs.back().data();
  }
};

}  // namespace

void ring_forward_threads(const AttentionShape& sh, const ThreadedRing& ring, const float* q, const float* k,
                          const float* v, float* out, float* lse, std::vector<RankStats>* stats) {
  check(sh, ring);
  std::vector<RankStats> local(ring.ranks);
  run_as_threads(ring.ranks, ring.timeout_ms, [&](Communicator& comm) {
    const int r = comm.rank();
    RankStats* st = &local[r];
    const int64_t n = sh.batch * sh.heads * shard_rows(sh.seq, ring.ranks, r);
    Shards b;
    float *lq = b.take(n * sh.dim, st), *lk = b.take(n * sh.dim, st), *lv = b.take(n * sh.dim, st);
    float *lo = b.take(n * sh.dim, st), *ll = b.take(n, st);
    gather_shard(sh, ring.ranks, r, sh.dim, q, lq);
    gather_shard(sh, ring.ranks, r, sh.dim, k, lk);
    gather_shard(sh, ring.ranks, r, sh.dim, v, lv);
    ring_attention_forward(comm, sh, ring.options, lq, lk, lv, lo, ll, st);
    scatter_shard(sh, ring.ranks, r, sh.dim, lo, out);
    scatter_shard(sh, ring.ranks, r, 1, ll, lse);
  });
  if (stats) *stats = local;
}

void ring_backward_threads(const AttentionShape& sh, const ThreadedRing& ring, const float* q, const float* k,
                           const float* v, const float* out, const float* lse, const float* dout, float* dq, float* dk,
                           float* dv, std::vector<RankStats>* stats) {
  check(sh, ring);
  std::vector<RankStats> local(ring.ranks);
  run_as_threads(ring.ranks, ring.timeout_ms, [&](Communicator& comm) {
    const int r = comm.rank();
    RankStats* st = &local[r];
    const int64_t n = sh.batch * sh.heads * shard_rows(sh.seq, ring.ranks, r);
    const int64_t nd = n * sh.dim;
    Shards b;
    float *lq = b.take(nd, st), *lk = b.take(nd, st), *lv = b.take(nd, st), *lo = b.take(nd, st);
    float *ll = b.take(n, st), *ldo = b.take(nd, st);
    float *ldq = b.take(nd, st), *ldk = b.take(nd, st), *ldv = b.take(nd, st);
    gather_shard(sh, ring.ranks, r, sh.dim, q, lq);
    gather_shard(sh, ring.ranks, r, sh.dim, k, lk);
    gather_shard(sh, ring.ranks, r, sh.dim, v, lv);
    gather_shard(sh, ring.ranks, r, sh.dim, out, lo);
    gather_shard(sh, ring.ranks, r, 1, lse, ll);
    gather_shard(sh, ring.ranks, r, sh.dim, dout, ldo);
    ring_attention_backward(comm, sh, ring.options, lq, lk, lv, lo, ll, ldo, ldq, ldk, ldv, st);
    scatter_shard(sh, ring.ranks, r, sh.dim, ldq, dq);
    scatter_shard(sh, ring.ranks, r, sh.dim, ldk, dk);
    scatter_shard(sh, ring.ranks, r, sh.dim, ldv, dv);
  });
  if (stats) *stats = local;
}

}  // namespace tiercut::ring
