// matmul.cc — y = a @ b (or a @ b^T) and its two gradients, scalar CPU.
//
// N = rows of a (numel(a) / K: all leading dims flattened), K = inner dim,
// M = output columns. b is [K,M], or [M,K] when trans_b.
//
// All three ops reduce to three loop nests over row-major arrays:
//   nn:  y[n,m]   = sum_k a[n,k] * b[k,m]      (row n of y is an axpy of rows of b)
//   nt:  y[n,m]   = sum_k a[n,k] * b[m,k]      (dot products of contiguous rows)
//   tn:  out[p,q] = sum_n x[n,p] * z[n,q]      (outer products of rows, summed over n)
// Each is blocked so that the block of the second operand being reused stays
// in L2 and the rows being written stay in L1, and processes 4 rows at a time
// so one load of the reused operand feeds 4 multiply-adds. Inner loops are
// unit-stride over __restrict pointers, in chunks of 8 with a scalar tail, so
// the compiler vectorizes them even at -O2 (whose cheap cost model skips loops
// of unknown trip count). Summation order is fixed by the loops: results are
// deterministic, and equal for float and double up to rounding.
// Cost: 2*N*K*M flops each; single-threaded.
#include "kernels.h"

namespace tiercut {

namespace {

constexpr int64_t kBlockCols = 256;  // columns of y / out kept hot in L1 per row
constexpr int64_t kBlockInner = 128; // rows of b kept hot in L2 (nn)
constexpr int64_t kBlockRows = 64;   // rows of b (nt) / out (tn) kept hot in L2

// y0..y3[m] += s0..s3 * brow[m] for m in [m0, m1)
template <typename T>
inline void axpy4(T* __restrict y0, T* __restrict y1, T* __restrict y2, T* __restrict y3,
                  const T* __restrict brow, T s0, T s1, T s2, T s3, int64_t m0, int64_t m1) {
  int64_t m = m0;
  for (; m + 8 <= m1; m += 8) {  // fixed-width chunks: vectorized even at -O2
    for (int j = 0; j < 8; j++) {
      T bm = brow[m + j];
      y0[m + j] += s0 * bm;
      y1[m + j] += s1 * bm;
      y2[m + j] += s2 * bm;
      y3[m + j] += s3 * bm;
    }
  }
  for (; m < m1; m++) {
    T bm = brow[m];
    y0[m] += s0 * bm;
    y1[m] += s1 * bm;
    y2[m] += s2 * bm;
    y3[m] += s3 * bm;
  }
}

template <typename T>
inline void axpy1(T* __restrict y0, const T* __restrict brow, T s0, int64_t m0, int64_t m1) {
  int64_t m = m0;
  for (; m + 8 <= m1; m += 8) {
    for (int j = 0; j < 8; j++) y0[m + j] += s0 * brow[m + j];
  }
  for (; m < m1; m++) y0[m] += s0 * brow[m];
}

// y[N,M] = a[N,K] @ b[K,M]
template <typename T>
void matmul_nn(T* y, const T* a, const T* b, int64_t N, int64_t K, int64_t M) {
  for (int64_t i = 0; i < N * M; i++) y[i] = T(0);
  for (int64_t m0 = 0; m0 < M; m0 += kBlockCols) {
    int64_t m1 = m0 + kBlockCols < M ? m0 + kBlockCols : M;
    for (int64_t k0 = 0; k0 < K; k0 += kBlockInner) {
      int64_t k1 = k0 + kBlockInner < K ? k0 + kBlockInner : K;
      int64_t n = 0;
      for (; n + 4 <= N; n += 4) {
        const T* a0 = a + n * K;
        for (int64_t k = k0; k < k1; k++) {
          axpy4(y + n * M, y + (n + 1) * M, y + (n + 2) * M, y + (n + 3) * M, b + k * M,
                a0[k], a0[K + k], a0[2 * K + k], a0[3 * K + k], m0, m1);
        }
      }
      for (; n < N; n++) {
        for (int64_t k = k0; k < k1; k++) axpy1(y + n * M, b + k * M, a[n * K + k], m0, m1);
      }
    }
  }
}

// sum_k x[k] * z[k] with 8 independent partial sums (vectorizable without
// reassociating a single accumulator), then the 8 lanes and the tail.
template <typename T>
inline T dot(const T* __restrict x, const T* __restrict z, int64_t K) {
  T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    for (int j = 0; j < 8; j++) acc[j] += x[k + j] * z[k + j];
  }
  T s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; k < K; k++) s += x[k] * z[k];
  return s;
}

// y[N,M] = a[N,K] @ b[M,K]^T
template <typename T>
void matmul_nt(T* y, const T* a, const T* b, int64_t N, int64_t K, int64_t M) {
  for (int64_t m0 = 0; m0 < M; m0 += kBlockRows) {
    int64_t m1 = m0 + kBlockRows < M ? m0 + kBlockRows : M;
    for (int64_t n = 0; n < N; n++) {
      const T* an = a + n * K;
      T* yn = y + n * M;
      for (int64_t m = m0; m < m1; m++) yn[m] = dot(an, b + m * K, K);
    }
  }
}

// o[q] += x0*z0[q] + x1*z1[q] + x2*z2[q] + x3*z3[q] for q in [q0, q1)
template <typename T>
inline void outer4(T* __restrict o, const T* __restrict z0, const T* __restrict z1,
                   const T* __restrict z2, const T* __restrict z3,
                   T x0, T x1, T x2, T x3, int64_t q0, int64_t q1) {
  int64_t q = q0;
  for (; q + 8 <= q1; q += 8) {
    for (int j = 0; j < 8; j++)
      o[q + j] += x0 * z0[q + j] + x1 * z1[q + j] + x2 * z2[q + j] + x3 * z3[q + j];
  }
  for (; q < q1; q++) o[q] += x0 * z0[q] + x1 * z1[q] + x2 * z2[q] + x3 * z3[q];
}

// out[P,Q] = x[N,P]^T @ z[N,Q]
template <typename T>
void matmul_tn(T* out, const T* x, const T* z, int64_t N, int64_t P, int64_t Q) {
  for (int64_t i = 0; i < P * Q; i++) out[i] = T(0);
  for (int64_t p0 = 0; p0 < P; p0 += kBlockRows) {
    int64_t p1 = p0 + kBlockRows < P ? p0 + kBlockRows : P;
    for (int64_t q0 = 0; q0 < Q; q0 += kBlockCols) {
      int64_t q1 = q0 + kBlockCols < Q ? q0 + kBlockCols : Q;
      int64_t n = 0;
      for (; n + 4 <= N; n += 4) {
        const T* xn = x + n * P;
        const T* zn = z + n * Q;
        for (int64_t p = p0; p < p1; p++) {
          outer4(out + p * Q, zn, zn + Q, zn + 2 * Q, zn + 3 * Q,
                 xn[p], xn[P + p], xn[2 * P + p], xn[3 * P + p], q0, q1);
        }
      }
      for (; n < N; n++) {
        for (int64_t p = p0; p < p1; p++) axpy1(out + p * Q, z + n * Q, x[n * P + p], q0, q1);
      }
    }
  }
}

}  // namespace

// y[n,m] = sum_k a[n,k] * b[k,m]        (trans_b: b[m,k])
template <typename T>
void matmul_forward(T* y, const T* a, const T* b, int64_t N, int64_t K, int64_t M, bool trans_b) {
  if (trans_b) matmul_nt(y, a, b, N, K, M);
  else matmul_nn(y, a, b, N, K, M);
}

// da[n,k] = sum_m dy[n,m] * b[k,m]      (trans_b: b[m,k])
// i.e. da = dy @ b^T, or dy @ b when trans_b: a forward matmul with inner dim M.
template <typename T>
void matmul_backward_da(T* da, const T* dy, const T* b, int64_t N, int64_t K, int64_t M, bool trans_b) {
  if (trans_b) matmul_nn(da, dy, b, N, M, K);
  else matmul_nt(da, dy, b, N, M, K);
}

// db[k,m] = sum_n a[n,k] * dy[n,m]      (trans_b: db[m,k] = sum_n dy[n,m] * a[n,k])
template <typename T>
void matmul_backward_db(T* db, const T* a, const T* dy, int64_t N, int64_t K, int64_t M, bool trans_b) {
  if (trans_b) matmul_tn(db, dy, a, N, M, K);
  else matmul_tn(db, a, dy, N, K, M);
}

template void matmul_forward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t, bool);
template void matmul_forward<double>(double*, const double*, const double*, int64_t, int64_t, int64_t, bool);
template void matmul_backward_da<float>(float*, const float*, const float*, int64_t, int64_t, int64_t, bool);
template void matmul_backward_da<double>(double*, const double*, const double*, int64_t, int64_t, int64_t, bool);
template void matmul_backward_db<float>(float*, const float*, const float*, int64_t, int64_t, int64_t, bool);
template void matmul_backward_db<double>(double*, const double*, const double*, int64_t, int64_t, int64_t, bool);

}  // namespace tiercut
