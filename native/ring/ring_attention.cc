// ring_attention.cc — the ring attention kernels (see ring_attention.h for the
// algorithm, layout and sharding). Tile kernels are plain loops written so the
// compiler vectorizes them (register-blocked tile GEMMs over GCC vector
// extensions); on x86-64 they are compiled for AVX-512, AVX2+FMA and baseline
// and the best the CPU has is picked at run time (kernels() below).
#include "ring_attention.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define TIERCUT_RING_X86 1
#else
#define TIERCUT_RING_X86 0
#endif
// -std=c++17 (ISO mode) turns off a*b+c -> fma contraction; the tile loops want it
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast")
#endif
#define TIERCUT_INLINE __attribute__((always_inline)) inline

namespace tiercut::ring {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr int kTagKv = 0;    // k/v block
constexpr int kTagDkv = 1;   // accumulated dk/dv of a block
int tag_of(int step, int kind) { return step * 2 + kind; }

// exp(x) for x <= 0 (Cephes expf: 2^n * p(r), |r| <= ln2/2), about 1 ulp;
// x below -87 gives ~1e-38 instead of underflowing. Branch-free so loops over
// it vectorize.
TIERCUT_INLINE float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float n = (x * 1.44269504088896341f + shifter) - shifter;
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

// A tile: `rows` consecutive local rows starting at local row `local`, holding
// global positions pos .. pos + rows - 1.
struct Tile {
  int64_t local, pos, rows;
};

// The tiles of a shard: each chunk cut into pieces of at most `block` rows.
std::vector<Tile> shard_tiles(int64_t seq, int ranks, int rank, int64_t block) {
  Chunk c[2];
  rank_chunks(seq, ranks, rank, c);
  std::vector<Tile> tiles;
  int64_t local = 0;
  for (const Chunk& ch : c) {
    for (int64_t o = 0; o < ch.length; o += block) tiles.push_back({local + o, ch.start + o, std::min(block, ch.length - o)});
    local += ch.length;
  }
  return tiles;
}

// How many keys of a key tile a query at position qpos may see (causal):
// keys at positions kpos .. kpos + nk - 1, visible when <= qpos.
TIERCUT_INLINE int64_t visible_keys(bool causal, int64_t qpos, const Tile& kt) {
  if (!causal) return kt.rows;
  int64_t n = qpos - kt.pos + 1;
  return n < 0 ? 0 : (n > kt.rows ? kt.rows : n);
}

// Buffers a rank allocates, counted (all are allocated up front, so the total
// is the peak).
struct Workspace {
  std::vector<std::vector<float>> bufs;
  int64_t bytes = 0;
  float* take(int64_t n) {
    bufs.emplace_back(static_cast<size_t>(std::max<int64_t>(n, 1)), 0.0f);
    bytes += n * static_cast<int64_t>(sizeof(float));
    return bufs.back().data();
  }
};

// dst[D][n] (leading dimension ld) = src[n][D]^T
void transpose_rows(const float* src, int64_t n, int64_t D, float* dst, int64_t ld) {
  for (int64_t j = 0; j < n; j++)
    for (int64_t d = 0; d < D; d++) dst[d * ld + j] = src[j * D + d];
}

// ---------------------------------------------------------------------------
// tile GEMM: C[M x N] (=|+=) alpha * op(A)[M x K] * B[K x N], all row-major,
// op(A) = A (A is M x K, lda) or A^T (A is K x M, lda). Register-blocked on
// 4 rows x 16 columns with 8-float vectors (GCC vector extensions: one ymm on
// AVX2 / AVX-512, two xmm on baseline); column tails (N % 16) run scalar, so no
// load or store ever leaves the matrices.

typedef float v8 __attribute__((vector_size(32)));

TIERCUT_INLINE v8 load8(const float* p) {
  v8 x;
  std::memcpy(&x, p, sizeof x);
  return x;
}
TIERCUT_INLINE void store8(float* p, v8 x) { std::memcpy(p, &x, sizeof x); }

template <bool TransA>
TIERCUT_INLINE float a_at(const float* A, int64_t lda, int64_t i, int64_t k) {
  return TransA ? A[k * lda + i] : A[i * lda + k];
}

template <bool TransA, bool Accumulate, int R>
TIERCUT_INLINE void gemm_rows(const float* __restrict A, int64_t lda, const float* __restrict B,
                                                     int64_t ldb, float* __restrict C, int64_t ldc, int64_t i0,
                                                     int64_t N, int64_t K, float alpha) {
  int64_t j0 = 0;
  for (; j0 + 16 <= N; j0 += 16) {
    v8 c0[R], c1[R];
    for (int r = 0; r < R; r++) c0[r] = c1[r] = v8{} ;
    for (int64_t k = 0; k < K; k++) {
      const v8 b0 = load8(B + k * ldb + j0), b1 = load8(B + k * ldb + j0 + 8);
      for (int r = 0; r < R; r++) {
        const float a = a_at<TransA>(A, lda, i0 + r, k);
        c0[r] += a * b0;
        c1[r] += a * b1;
      }
    }
    for (int r = 0; r < R; r++) {
      float* c = C + (i0 + r) * ldc + j0;
      if (Accumulate) {
        store8(c, load8(c) + alpha * c0[r]);
        store8(c + 8, load8(c + 8) + alpha * c1[r]);
      } else {
        store8(c, alpha * c0[r]);
        store8(c + 8, alpha * c1[r]);
      }
    }
  }
  for (int r = 0; r < R; r++) {
    for (int64_t j = j0; j < N; j++) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; k++) acc += a_at<TransA>(A, lda, i0 + r, k) * B[k * ldb + j];
      float* c = C + (i0 + r) * ldc + j;
      *c = Accumulate ? *c + alpha * acc : alpha * acc;
    }
  }
}

template <bool TransA, bool Accumulate>
TIERCUT_INLINE void gemm(const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                                                int64_t ldc, int64_t M, int64_t N, int64_t K, float alpha) {
  int64_t i = 0;
  for (; i + 4 <= M; i += 4) gemm_rows<TransA, Accumulate, 4>(A, lda, B, ldb, C, ldc, i, N, K, alpha);
  for (; i < M; i++) gemm_rows<TransA, Accumulate, 1>(A, lda, B, ldb, C, ldc, i, N, K, alpha);
}

// Online-softmax update of one query tile by one key tile.
// q: qt.rows x D; kT: D x ld_k (the tile's keys at columns 0..kt.rows); v: kt.rows x D.
// m, l: per query row; acc: qt.rows x D. s: scratch of qt.rows x block.
TIERCUT_INLINE void forward_tile_impl(const float* __restrict q, const Tile& qt, const float* __restrict kT, int64_t ld_k,
                  const float* __restrict v, const Tile& kt, int64_t D, float scale, bool causal,
                  float* __restrict m, float* __restrict l, float* __restrict acc, float* __restrict s,
                  int64_t block) {
  const int64_t nk = kt.rows;
  gemm<false, false>(q, D, kT, ld_k, s, block, qt.rows, nk, D, scale);
  for (int64_t i = 0; i < qt.rows; i++) {
    const int64_t nv = visible_keys(causal, qt.pos + i, kt);
    float* __restrict si = s + i * block;
    if (nv == 0) {
      for (int64_t j = 0; j < nk; j++) si[j] = 0.0f;  // contributes nothing; acc, m, l unchanged
      continue;
    }
    float row_max = si[0];
    for (int64_t j = 1; j < nv; j++) row_max = si[j] > row_max ? si[j] : row_max;
    const float m_new = row_max > m[i] ? row_max : m[i];
    const float alpha = exp_nonpositive(m[i] - m_new);  // m[i] = -inf the first time: ~0, times l = 0
    for (int64_t j = 0; j < nv; j++) si[j] = exp_nonpositive(si[j] - m_new);
    for (int64_t j = nv; j < nk; j++) si[j] = 0.0f;  // masked: exactly zero weight
    float sum = 0.0f;
    for (int64_t j = 0; j < nv; j++) sum += si[j];
    l[i] = l[i] * alpha + sum;
    m[i] = m_new;
    float* __restrict ai = acc + i * D;
    for (int64_t d = 0; d < D; d++) ai[d] *= alpha;
  }
  gemm<false, true>(s, block, v, D, acc, D, qt.rows, D, nk, 1.0f);  // acc += p v
}

// Gradient contributions of one (query tile, key tile) pair.
// q, dout, dq: qt.rows x D; lse, delta: per query row; kT, vT: D x ld (tile at
// columns 0..); k: kt.rows x D; dk, dv: kt.rows x D (accumulated into).
// p, dp: scratch of qt.rows x block.
TIERCUT_INLINE void backward_tile_impl(const float* __restrict q, const float* __restrict dout, const float* __restrict lse,
                   const float* __restrict delta, const Tile& qt, const float* __restrict kT,
                   const float* __restrict vT, int64_t ld, const float* __restrict k, const Tile& kt, int64_t D,
                   float scale, bool causal, float* __restrict dq, float* __restrict dk, float* __restrict dv,
                   float* __restrict p, float* __restrict dp, int64_t block) {
  const int64_t nq = qt.rows, nk = kt.rows;
  gemm<false, false>(q, D, kT, ld, p, block, nq, nk, D, scale);     // s
  gemm<false, false>(dout, D, vT, ld, dp, block, nq, nk, D, 1.0f);  // dp = dout v^T
  for (int64_t i = 0; i < nq; i++) {
    const int64_t nv = visible_keys(causal, qt.pos + i, kt);
    float* __restrict pi = p + i * block;
    float* __restrict dpi = dp + i * block;
    const float lse_i = lse[i], delta_i = delta[i];
    for (int64_t j = 0; j < nv; j++) {
      const float pij = exp_nonpositive(pi[j] - lse_i);
      pi[j] = pij;
      dpi[j] = pij * (dpi[j] - delta_i);  // ds
    }
    for (int64_t j = nv; j < nk; j++) pi[j] = dpi[j] = 0.0f;
  }
  gemm<true, true>(p, block, dout, D, dv, D, nk, D, nq, 1.0f);   // dv += p^T dout
  gemm<true, true>(dp, block, q, D, dk, D, nk, D, nq, scale);    // dk += scale ds^T q
  gemm<false, true>(dp, block, k, D, dq, D, nq, D, nk, scale);   // dq += scale ds k
}

// Run-time ISA dispatch: the same bodies compiled for AVX-512, AVX2+FMA and
// the baseline; the best the CPU supports is picked once. (GCC's target_clones
// "arch=" dispatches on the CPU model, not its features, and fell back to the
// baseline on VMs.) TIERCUT_RING_ISA=avx512|avx2|baseline forces one.
#define TIERCUT_RING_FWD_ARGS                                                                                   \
  const float *q, const Tile &qt, const float *kT, int64_t ld_k, const float *v, const Tile &kt, int64_t D,     \
      float scale, bool causal, float *m, float *l, float *acc, float *s, int64_t block
#define TIERCUT_RING_FWD_CALL q, qt, kT, ld_k, v, kt, D, scale, causal, m, l, acc, s, block
#define TIERCUT_RING_BWD_ARGS                                                                                   \
  const float *q, const float *dout, const float *lse, const float *delta, const Tile &qt, const float *kT,     \
      const float *vT, int64_t ld, const float *k, const Tile &kt, int64_t D, float scale, bool causal,          \
      float *dq, float *dk, float *dv, float *p, float *dp, int64_t block
#define TIERCUT_RING_BWD_CALL q, dout, lse, delta, qt, kT, vT, ld, k, kt, D, scale, causal, dq, dk, dv, p, dp, block

void forward_tile_base(TIERCUT_RING_FWD_ARGS) { forward_tile_impl(TIERCUT_RING_FWD_CALL); }
void backward_tile_base(TIERCUT_RING_BWD_ARGS) { backward_tile_impl(TIERCUT_RING_BWD_CALL); }
#if TIERCUT_RING_X86
__attribute__((target("avx2,fma"))) void forward_tile_avx2(TIERCUT_RING_FWD_ARGS) {
  forward_tile_impl(TIERCUT_RING_FWD_CALL);
}
__attribute__((target("avx2,fma"))) void backward_tile_avx2(TIERCUT_RING_BWD_ARGS) {
  backward_tile_impl(TIERCUT_RING_BWD_CALL);
}
__attribute__((target("avx512f,avx512vl,avx2,fma"))) void forward_tile_avx512(TIERCUT_RING_FWD_ARGS) {
  forward_tile_impl(TIERCUT_RING_FWD_CALL);
}
__attribute__((target("avx512f,avx512vl,avx2,fma"))) void backward_tile_avx512(TIERCUT_RING_BWD_ARGS) {
  backward_tile_impl(TIERCUT_RING_BWD_CALL);
}
#endif

struct TileKernels {
  void (*forward)(TIERCUT_RING_FWD_ARGS);
  void (*backward)(TIERCUT_RING_BWD_ARGS);
  const char* isa;
};

TileKernels pick_kernels() {
  const char* force = std::getenv("TIERCUT_RING_ISA");
  std::string want = force ? force : "";
#if TIERCUT_RING_X86
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
  if ((want.empty() || want == "avx512") && avx512) return {forward_tile_avx512, backward_tile_avx512, "avx512"};
  if ((want.empty() || want == "avx2" || want == "avx512") && avx2) return {forward_tile_avx2, backward_tile_avx2, "avx2"};
#endif
  return {forward_tile_base, backward_tile_base, "baseline"};
}

const TileKernels& kernels() {
  static const TileKernels k = pick_kernels();
  return k;
}

// Shard geometry of every rank, computed once.
struct RingGeometry {
  int P = 1, r = 0;
  int64_t BH = 0, D = 0, rows = 0, max_rows = 0;
  std::vector<int64_t> rows_of;          // per rank
  std::vector<std::vector<Tile>> tiles;  // per rank
};

RingGeometry geometry(const Communicator& comm, const AttentionShape& sh, const RingOptions& opt) {
  RingGeometry g;
  g.P = comm.size();
  g.r = comm.rank();
  g.BH = sh.batch * sh.heads;
  g.D = sh.dim;
  for (int rank = 0; rank < g.P; rank++) {
    g.rows_of.push_back(shard_rows(sh.seq, g.P, rank));
    g.tiles.push_back(shard_tiles(sh.seq, g.P, rank, opt.block));
    g.max_rows = std::max(g.max_rows, g.rows_of.back());
  }
  g.rows = g.rows_of[g.r];
  return g;
}

std::string block_name(const char* what, int owner, int step) {
  return std::string(what) + " of rank " + std::to_string(owner) + " (step " + std::to_string(step) + ")";
}

void timed_wait(Communicator& comm, Request& req, RankStats* st) {
  auto t0 = Clock::now();
  comm.wait(req);
  st->wait_seconds += seconds_since(t0);
}

}  // namespace

// ---------------------------------------------------------------------------
// sharding

Chunk zigzag_chunk(int64_t seq, int ranks, int chunk) {
  const int64_t n = 2 * static_cast<int64_t>(ranks);
  const int64_t a = chunk * seq / n, b = (chunk + 1) * seq / n;
  return {a, b - a};
}

void rank_chunks(int64_t seq, int ranks, int rank, Chunk out[2]) {
  out[0] = zigzag_chunk(seq, ranks, rank);
  out[1] = zigzag_chunk(seq, ranks, 2 * ranks - 1 - rank);
}

int64_t shard_rows(int64_t seq, int ranks, int rank) {
  Chunk c[2];
  rank_chunks(seq, ranks, rank, c);
  return c[0].length + c[1].length;
}

std::string validate_ring_args(const AttentionShape& sh, int ranks, int64_t block) {
  const char* names[4] = {"batch", "heads", "seq", "dim"};
  const int64_t vals[4] = {sh.batch, sh.heads, sh.seq, sh.dim};
  for (int i = 0; i < 4; i++)
    if (vals[i] <= 0) return std::string(names[i]) + ": expected a positive integer, got " + std::to_string(vals[i]);
  if (ranks <= 0) return "ranks: expected a positive integer, got " + std::to_string(ranks);
  if (block <= 0) return "block: expected a positive integer, got " + std::to_string(block);
  if (sh.seq < 2 * static_cast<int64_t>(ranks))
    return "ranks: " + std::to_string(ranks) + " ranks need " + std::to_string(2 * static_cast<int64_t>(ranks)) +
           " zigzag chunks of at least one token each, but seq is " + std::to_string(sh.seq);
  const double elems = double(sh.batch) * double(sh.heads) * double(sh.seq) * double(sh.dim);
  if (elems > double(int64_t(1) << 40)) return "batch*heads*seq*dim: " + std::to_string(elems) + " elements is too many";
  return "";
}

void gather_shard(const AttentionShape& sh, int ranks, int rank, int64_t width, const float* whole, float* shard) {
  Chunk c[2];
  rank_chunks(sh.seq, ranks, rank, c);
  const int64_t rows = c[0].length + c[1].length;
  for (int64_t bh = 0; bh < sh.batch * sh.heads; bh++) {
    float* dst = shard + bh * rows * width;
    for (const Chunk& ch : c) {
      std::memcpy(dst, whole + (bh * sh.seq + ch.start) * width, sizeof(float) * ch.length * width);
      dst += ch.length * width;
    }
  }
}

void scatter_shard(const AttentionShape& sh, int ranks, int rank, int64_t width, const float* shard, float* whole) {
  Chunk c[2];
  rank_chunks(sh.seq, ranks, rank, c);
  const int64_t rows = c[0].length + c[1].length;
  for (int64_t bh = 0; bh < sh.batch * sh.heads; bh++) {
    const float* src = shard + bh * rows * width;
    for (const Chunk& ch : c) {
      std::memcpy(whole + (bh * sh.seq + ch.start) * width, src, sizeof(float) * ch.length * width);
      src += ch.length * width;
    }
  }
}

// ---------------------------------------------------------------------------
// forward

void ring_attention_forward(Communicator& comm, const AttentionShape& sh, const RingOptions& opt, const float* q,
                            const float* k, const float* v, float* out, float* lse, RankStats* stats) {
  auto t_start = Clock::now();
  RankStats local_stats;
  RankStats* st = stats ? stats : &local_stats;
  const RingGeometry g = geometry(comm, sh, opt);
  const int64_t BH = g.BH, D = g.D, block = opt.block;
  const float scale = float(1.0 / std::sqrt(double(D)));
  st->rows = g.rows;

  // ring buffers: [K (BH x rows x D) | V (BH x rows x D)] of the block's owner
  Workspace ws;
  float* kv[2] = {ws.take(2 * BH * g.max_rows * D), ws.take(2 * BH * g.max_rows * D)};
  float* m = ws.take(BH * g.rows);
  float* l = ws.take(BH * g.rows);
  float* kT = ws.take(D * g.max_rows);
  float* s = ws.take(block * block);
  st->peak_bytes += ws.bytes;

  std::memcpy(kv[0], k, sizeof(float) * BH * g.rows * D);
  std::memcpy(kv[0] + BH * g.rows * D, v, sizeof(float) * BH * g.rows * D);
  std::fill(m, m + BH * g.rows, -std::numeric_limits<float>::infinity());
  std::fill(l, l + BH * g.rows, 0.0f);
  std::fill(out, out + BH * g.rows * D, 0.0f);

  for (int t = 0; t < g.P; t++) {
    const int src = (g.r - t + g.P) % g.P;
    const int64_t src_rows = g.rows_of[src];
    float* cur = kv[t % 2];
    Request recv, send;
    if (t + 1 < g.P) {
      const int nsrc = (g.r - t - 1 + 2 * g.P) % g.P;
      recv = comm.irecv(kv[(t + 1) % 2], sizeof(float) * 2 * BH * g.rows_of[nsrc] * D, comm.prev(), tag_of(t + 1, kTagKv),
                        block_name("K/V block", nsrc, t + 1));
      send = comm.isend(cur, sizeof(float) * 2 * BH * src_rows * D, comm.next(), tag_of(t + 1, kTagKv),
                        block_name("K/V block", src, t + 1));
      st->sent_bytes += int64_t(sizeof(float)) * 2 * BH * src_rows * D;
    }
    auto t0 = Clock::now();
    const std::vector<Tile>& ktiles = g.tiles[src];
    for (int64_t bh = 0; bh < BH; bh++) {
      const float* kb = cur + bh * src_rows * D;
      const float* vb = cur + BH * src_rows * D + bh * src_rows * D;
      transpose_rows(kb, src_rows, D, kT, src_rows);
      for (const Tile& qt : g.tiles[g.r]) {
        const int64_t qrow = bh * g.rows + qt.local;
        for (const Tile& kt : ktiles) {
          if (sh.causal && kt.pos > qt.pos + qt.rows - 1) continue;  // entirely above the diagonal
          kernels().forward(q + qrow * D, qt, kT + kt.local, src_rows, vb + kt.local * D, kt, D, scale, sh.causal,
                       m + qrow, l + qrow, out + qrow * D, s, block);
        }
        comm.progress();
      }
    }
    st->compute_seconds += seconds_since(t0);
    timed_wait(comm, recv, st);
    timed_wait(comm, send, st);
  }

  for (int64_t i = 0; i < BH * g.rows; i++) {
    const float inv = 1.0f / l[i];
    for (int64_t d = 0; d < D; d++) out[i * D + d] *= inv;
    lse[i] = m[i] + std::log(l[i]);
  }
  st->seconds += seconds_since(t_start);
}

// ---------------------------------------------------------------------------
// backward

void ring_attention_backward(Communicator& comm, const AttentionShape& sh, const RingOptions& opt, const float* q,
                             const float* k, const float* v, const float* out, const float* lse, const float* dout,
                             float* dq, float* dk, float* dv, RankStats* stats) {
  auto t_start = Clock::now();
  RankStats local_stats;
  RankStats* st = stats ? stats : &local_stats;
  const RingGeometry g = geometry(comm, sh, opt);
  const int64_t BH = g.BH, D = g.D, block = opt.block;
  const float scale = float(1.0 / std::sqrt(double(D)));
  st->rows = g.rows;

  Workspace ws;
  const int64_t kv_elems = 2 * BH * g.max_rows * D;
  float* kv[2] = {ws.take(kv_elems), ws.take(kv_elems)};
  // this rank's contribution to the current block, then the running sum; two,
  // because the sum sent at step t may still be in flight at step t + 1 (a
  // single buffer would make every rank wait for its successor's compute: a
  // cycle around the ring)
  float* dkv_part[2] = {ws.take(kv_elems), ws.take(kv_elems)};
  float* dkv_in = ws.take(kv_elems);     // the running sum from the previous rank
  float* delta = ws.take(BH * g.rows);
  float* kT = ws.take(D * g.max_rows);
  float* vT = ws.take(D * g.max_rows);
  float* p = ws.take(block * block);
  float* dp = ws.take(block * block);
  st->peak_bytes += ws.bytes;

  std::memcpy(kv[0], k, sizeof(float) * BH * g.rows * D);
  std::memcpy(kv[0] + BH * g.rows * D, v, sizeof(float) * BH * g.rows * D);
  for (int64_t i = 0; i < BH * g.rows; i++) {
    float acc = 0.0f;
    for (int64_t d = 0; d < D; d++) acc += dout[i * D + d] * out[i * D + d];
    delta[i] = acc;
  }
  std::fill(dq, dq + BH * g.rows * D, 0.0f);

  Request dkv_send[2];  // the running sums sent from dkv_part[0] and [1]
  for (int t = 0; t < g.P; t++) {
    const int src = (g.r - t + g.P) % g.P;
    const int64_t src_rows = g.rows_of[src];
    const int64_t src_elems = 2 * BH * src_rows * D;
    float* cur = kv[t % 2];
    Request recv, send, dkv_recv;
    if (t + 1 < g.P) {
      const int nsrc = (g.r - t - 1 + 2 * g.P) % g.P;
      recv = comm.irecv(kv[(t + 1) % 2], sizeof(float) * 2 * BH * g.rows_of[nsrc] * D, comm.prev(), tag_of(t + 1, kTagKv),
                        block_name("K/V block", nsrc, t + 1));
      send = comm.isend(cur, sizeof(float) * src_elems, comm.next(), tag_of(t + 1, kTagKv),
                        block_name("K/V block", src, t + 1));
      st->sent_bytes += int64_t(sizeof(float)) * src_elems;
    }
    if (t > 0)
      dkv_recv = comm.irecv(dkv_in, sizeof(float) * src_elems, comm.prev(), tag_of(t, kTagDkv),
                            block_name("dK/dV sum", src, t));
    float* part = dkv_part[t % 2];
    timed_wait(comm, dkv_send[t % 2], st);  // sent at step t - 2, taken at its end

    auto t0 = Clock::now();
    std::fill(part, part + src_elems, 0.0f);
    const std::vector<Tile>& ktiles = g.tiles[src];
    for (int64_t bh = 0; bh < BH; bh++) {
      const float* kb = cur + bh * src_rows * D;
      const float* vb = cur + BH * src_rows * D + bh * src_rows * D;
      float* dkb = part + bh * src_rows * D;
      float* dvb = part + BH * src_rows * D + bh * src_rows * D;
      transpose_rows(kb, src_rows, D, kT, src_rows);
      transpose_rows(vb, src_rows, D, vT, src_rows);
      for (const Tile& qt : g.tiles[g.r]) {
        const int64_t qrow = bh * g.rows + qt.local;
        for (const Tile& kt : ktiles) {
          if (sh.causal && kt.pos > qt.pos + qt.rows - 1) continue;
          kernels().backward(q + qrow * D, dout + qrow * D, lse + qrow, delta + qrow, qt, kT + kt.local, vT + kt.local,
                        src_rows, kb + kt.local * D, kt, D, scale, sh.causal, dq + qrow * D, dkb + kt.local * D,
                        dvb + kt.local * D, p, dp, block);
        }
        comm.progress();
      }
    }
    st->compute_seconds += seconds_since(t0);

    if (t > 0) {
      timed_wait(comm, dkv_recv, st);
      auto t1 = Clock::now();
      for (int64_t i = 0; i < src_elems; i++) part[i] += dkv_in[i];
      st->compute_seconds += seconds_since(t1);
    }
    // the running sum goes to the next rank, which holds this block at step t + 1
    // (after the last step, that is the block's owner)
    dkv_send[t % 2] = comm.isend(part, sizeof(float) * src_elems, comm.next(), tag_of(t + 1, kTagDkv),
                          block_name("dK/dV sum", src, t + 1));
    st->sent_bytes += int64_t(sizeof(float)) * src_elems;
    timed_wait(comm, recv, st);
    timed_wait(comm, send, st);
  }

  // this rank's own block comes back from the previous rank after P steps
  Request final_recv = comm.irecv(dkv_in, sizeof(float) * 2 * BH * g.rows * D, comm.prev(), tag_of(g.P, kTagDkv),
                                  block_name("dK/dV sum", g.r, g.P));
  timed_wait(comm, final_recv, st);
  timed_wait(comm, dkv_send[0], st);
  timed_wait(comm, dkv_send[1], st);
  std::memcpy(dk, dkv_in, sizeof(float) * BH * g.rows * D);
  std::memcpy(dv, dkv_in + BH * g.rows * D, sizeof(float) * BH * g.rows * D);
  st->seconds += seconds_since(t_start);
}

}  // namespace tiercut::ring
