// test_kernels.cc — standalone test of the CPU kernels, through run_op.
//
// Not part of the addon (binding.gyp lists the kernel .cc files by name and
// leaves this one out, so its main() never reaches the .node). Build and run:
//   g++ -O2 -std=c++17 native/kernels/*.cc -o /tmp/tk && /tmp/tk
//
// What it checks:
//   - every backward kernel against central finite differences of its forward
//     kernel, in double (eps = 1e-6), random inputs, awkward sizes (1, 3, 17):
//     for a forward f and a random upstream gradient dy, L(x) = sum f(x) * dy,
//     and dL/dx_i ~ (L(x + eps e_i) - L(x - eps e_i)) / (2 eps) for every i;
//   - forward kernels against tiny hand-computed cases (values from numpy);
//   - the blocked matmuls against naive triple loops at sizes that cross the
//     block edges, and the float instantiation against double;
//   - run_op's rejections (shapes, ids, counts, null data, attributes).
// Every check prints its max absolute difference and asserts
// |got - want| <= atol + rtol * |want| with its own tolerances; the program
// exits 1 if any check failed.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "dispatch.h"

using namespace tiercut;

namespace {

int g_checks = 0;
int g_failures = 0;
std::mt19937_64 g_rng(1234);

std::vector<double> randn(int64_t n, double scale = 1.0) {
  std::normal_distribution<double> d(0.0, scale);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(g_rng);
  return v;
}

template <typename T>
TensorView tv(std::vector<T>& v, std::vector<int64_t> shape) {
  TensorView t;
  t.data = v.empty() ? nullptr : v.data();
  t.rank = int32_t(shape.size());
  for (size_t i = 0; i < shape.size(); i++) t.shape[i] = shape[i];
  return t;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

OpCall make_call(int32_t kind, std::vector<TensorView> in, std::vector<TensorView> out,
                 std::vector<int64_t> iattr = {}, std::vector<double> fattr = {}) {
  OpCall c;
  c.kind = kind;
  c.n_in = int32_t(in.size());
  c.n_out = int32_t(out.size());
  for (size_t i = 0; i < in.size(); i++) c.in[i] = in[i];
  for (size_t i = 0; i < out.size(); i++) c.out[i] = out[i];
  for (size_t i = 0; i < iattr.size(); i++) c.iattr[i] = iattr[i];
  for (size_t i = 0; i < fattr.size(); i++) c.fattr[i] = fattr[i];
  return c;
}

// runs an op that must succeed; a failure counts and prints the message
template <typename T = double>
void run(int32_t kind, std::vector<TensorView> in, std::vector<TensorView> out,
         std::vector<int64_t> iattr = {}, std::vector<double> fattr = {}) {
  std::string err;
  if (!run_op<T>(make_call(kind, in, out, iattr, fattr), &err)) {
    g_failures++;
    std::printf("  FAIL run_op(kind %d) returned false: %s\n", kind, err.c_str());
  }
}

// got vs want elementwise; prints the max abs difference
template <typename A, typename B>
void check_close(const std::string& name, const std::vector<A>& got, const std::vector<B>& want,
                 double atol, double rtol) {
  g_checks++;
  double max_diff = 0.0;
  bool ok = got.size() == want.size();
  for (size_t i = 0; ok && i < got.size(); i++) {
    double g = double(got[i]), w = double(want[i]);
    double d = std::fabs(g - w);
    if (!(d <= atol + rtol * std::fabs(w))) ok = false;  // NaN fails too
    if (d > max_diff || std::isnan(d)) max_diff = d;
  }
  if (!ok) g_failures++;
  std::printf("  %s %-58s max|diff| = %.3e%s\n", ok ? "ok  " : "FAIL", name.c_str(), max_diff,
              got.size() == want.size() ? "" : "  (size mismatch)");
}

// run_op must fail; if want_msg is non-empty the message must equal it, else
// contain `contains`
void check_rejects(const std::string& name, const OpCall& c, const std::string& want_msg,
                   const std::string& contains = "") {
  g_checks++;
  std::string err;
  bool ok_ret = run_op<double>(c, &err);
  bool ok = !ok_ret && (want_msg.empty() ? err.find(contains) != std::string::npos : err == want_msg);
  if (!ok) g_failures++;
  std::printf("  %s %-58s \"%s\"\n", ok ? "ok  " : "FAIL", name.c_str(), ok_ret ? "(accepted)" : err.c_str());
}

// Central finite differences of loss() w.r.t. every element of x (perturbed in
// place), compared to the analytic gradient.
void fd_check(const std::string& name, std::vector<double>& x, const std::vector<double>& analytic,
              const std::function<double()>& loss, double atol = 1e-6, double rtol = 1e-5) {
  const double eps = 1e-6;
  std::vector<double> numeric(x.size());
  for (size_t i = 0; i < x.size(); i++) {
    double x0 = x[i];
    x[i] = x0 + eps;
    double lp = loss();
    x[i] = x0 - eps;
    double lm = loss();
    x[i] = x0;
    numeric[i] = (lp - lm) / (2 * eps);
  }
  check_close("fd " + name, analytic, numeric, atol, rtol);
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
  return s;
}

// ---------------------------------------------------------------- forward, by hand

void test_forward_by_hand() {
  std::printf("forward kernels vs hand-computed values\n");
  {  // matmul [2,3] @ [3,2], and with b given transposed
    std::vector<double> a = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9, 10, 11, 12}, bt = {7, 9, 11, 8, 10, 12}, y(4), yt(4);
    run(OP_MATMUL, {tv(a, {2, 3}), tv(b, {3, 2})}, {tv(y, {2, 2})}, {0});
    run(OP_MATMUL, {tv(a, {2, 3}), tv(bt, {2, 3})}, {tv(yt, {2, 2})}, {1});
    check_close("matmul [2,3]@[3,2]", y, std::vector<double>{58, 64, 139, 154}, 0, 0);
    check_close("matmul transB [2,3]@[2,3]^T", yt, std::vector<double>{58, 64, 139, 154}, 0, 0);
  }
  {  // add / mul with trailing broadcast
    std::vector<double> a = {1, 2, 3, 4, 5, 6}, b = {10, 20, 30}, y(6), y2(6), y3(6);
    run(OP_ADD, {tv(a, {2, 3}), tv(b, {3})}, {tv(y, {2, 3})});
    run(OP_MUL, {tv(a, {2, 3}), tv(b, {1, 3})}, {tv(y2, {2, 3})});  // leading 1s of b are dropped
    run(OP_ADD, {tv(a, {2, 3}), tv(a, {2, 3})}, {tv(y3, {2, 3})});
    check_close("add [2,3] + [3]", y, std::vector<double>{11, 22, 33, 14, 25, 36}, 0, 0);
    check_close("mul [2,3] * [1,3]", y2, std::vector<double>{10, 40, 90, 40, 100, 180}, 0, 0);
    check_close("add [2,3] + [2,3]", y3, std::vector<double>{2, 4, 6, 8, 10, 12}, 0, 0);
  }
  {  // sum_to_shape
    std::vector<double> x = {1, 2, 3, 4, 5, 6}, y(3), s(1), same(6);
    run(OP_SUM_TO_SHAPE, {tv(x, {2, 3})}, {tv(y, {3})});
    run(OP_SUM_TO_SHAPE, {tv(x, {2, 3})}, {tv(s, {})});
    run(OP_SUM_TO_SHAPE, {tv(x, {2, 3})}, {tv(same, {2, 3})});
    check_close("sum_to_shape [2,3] -> [3]", y, std::vector<double>{5, 7, 9}, 0, 0);
    check_close("sum_to_shape [2,3] -> []", s, std::vector<double>{21}, 0, 0);
    check_close("sum_to_shape [2,3] -> [2,3]", same, x, 0, 0);
  }
  {  // gelu (tanh)
    std::vector<double> x = {-3, -1, 0, 0.5, 2}, y(5);
    run(OP_GELU, {tv(x, {5})}, {tv(y, {5})});
    check_close("gelu tanh at -3,-1,0,0.5,2", y,
                std::vector<double>{-0.00363739208177299, -0.1588080093917233, 0.0, 0.34571400982514394,
                                    1.954597694087775},
                1e-15, 1e-13);
  }
  {  // layernorm
    std::vector<double> x = {1, 2, 3, 0, 0, 6}, w = {1, 1, 2}, b = {0, 1, 0}, y(6), mean(2), rstd(2);
    run(OP_LAYERNORM, {tv(x, {2, 3}), tv(w, {3}), tv(b, {3})}, {tv(y, {2, 3}), tv(mean, {2}), tv(rstd, {2})}, {},
        {1e-5});
    check_close("layernorm y [2,3] eps 1e-5", y,
                std::vector<double>{-1.2247356859083902, 1.0, 2.4494713718167804, -0.7071063392452236,
                                    0.2928936607547764, 2.8284253569808944},
                1e-14, 1e-13);
    check_close("layernorm mean", mean, std::vector<double>{2, 2}, 1e-15, 0);
    check_close("layernorm rstd", rstd, std::vector<double>{1.2247356859083902, 0.3535531696226118}, 1e-15, 1e-13);
  }
  {  // softmax, including a row that would overflow without the max
    std::vector<double> x = {1, 2, 3, 1000, 1000, 1000}, y(6);
    run(OP_SOFTMAX, {tv(x, {2, 3})}, {tv(y, {2, 3})});
    check_close("softmax [1,2,3], [1000,1000,1000]", y,
                std::vector<double>{0.09003057317038046, 0.24472847105479764, 0.6652409557748218, 1.0 / 3,
                                    1.0 / 3, 1.0 / 3},
                1e-15, 1e-13);
  }
  {  // causal attention B=1, T=2, C=2, NH=1; rows are [q0 q1 | k0 k1 | v0 v1]
    std::vector<double> qkv = {1, 0, 1, 2, 1, 2, 0, 1, 3, -1, -1, 5}, y(4), att(4);
    run(OP_CAUSAL_ATTENTION, {tv(qkv, {1, 2, 6})}, {tv(y, {1, 2, 2}), tv(att, {1, 1, 2, 2})}, {1});
    check_close("causal_attention att (0 above the diagonal)", att,
                std::vector<double>{1.0, 0.0, 0.8929581985348296, 0.10704180146517044}, 1e-15, 1e-13);
    check_close("causal_attention y", y, std::vector<double>{1.0, 2.0, 0.7859163970696592, 2.321125404395511},
                1e-15, 1e-13);
  }
  {  // embedding
    std::vector<double> table = {1, 2, 3, 4, 5, 6}, y(6);
    std::vector<int32_t> ids = {2, 0, 2};
    run(OP_EMBEDDING, {tv(ids, {3}), tv(table, {3, 2})}, {tv(y, {3, 2})});
    check_close("embedding ids [2,0,2]", y, std::vector<double>{5, 6, 1, 2, 5, 6}, 0, 0);
  }
  {  // cross entropy
    std::vector<double> logits = {1, 2, 3, 1, 1, 1}, loss(1);
    std::vector<int32_t> t = {2, 0};
    run(OP_CROSS_ENTROPY, {tv(logits, {2, 3}), tv(t, {2})}, {tv(loss, {})});
    check_close("cross_entropy [[1,2,3],[1,1,1]] -> [2,0]", loss, std::vector<double>{0.7531091265562451},
                1e-15, 1e-13);
  }
  {  // reshape, transpose, fill
    std::vector<double> x = {1, 2, 3, 4, 5, 6}, r(6), t(6), s = {7}, s2(1), f(5);
    run(OP_RESHAPE, {tv(x, {2, 3})}, {tv(r, {3, 1, 2})});
    run(OP_TRANSPOSE, {tv(x, {2, 3})}, {tv(t, {3, 2})}, {1, 0});
    run(OP_TRANSPOSE, {tv(s, {})}, {tv(s2, {})});
    run(OP_FILL, {}, {tv(f, {5})}, {}, {-2.5});
    check_close("reshape [2,3] -> [3,1,2]", r, x, 0, 0);
    check_close("transpose [2,3] perm [1,0]", t, std::vector<double>{1, 4, 2, 5, 3, 6}, 0, 0);
    check_close("transpose rank 0", s2, s, 0, 0);
    check_close("fill -2.5", f, std::vector<double>(5, -2.5), 0, 0);
  }
  {  // transpose rank 4 vs a naive index computation
    const int64_t d[4] = {2, 3, 1, 4};
    const int64_t perm[4] = {3, 1, 0, 2};
    std::vector<double> x = randn(24), y(24), want(24);
    for (int64_t i0 = 0; i0 < d[0]; i0++)
      for (int64_t i1 = 0; i1 < d[1]; i1++)
        for (int64_t i2 = 0; i2 < d[2]; i2++)
          for (int64_t i3 = 0; i3 < d[3]; i3++) {
            int64_t j[4] = {i0, i1, i2, i3};
            int64_t yi = ((j[perm[0]] * d[perm[1]] + j[perm[1]]) * d[perm[2]] + j[perm[2]]) * d[perm[3]] + j[perm[3]];
            want[yi] = x[((i0 * d[1] + i1) * d[2] + i2) * d[3] + i3];
          }
    run(OP_TRANSPOSE, {tv(x, {2, 3, 1, 4})}, {tv(y, {4, 3, 2, 1})}, {3, 1, 0, 2});
    check_close("transpose [2,3,1,4] perm [3,1,0,2]", y, want, 0, 0);
  }
}

// ---------------------------------------------------------------- adam

void test_adam() {
  std::printf("adam / adamw vs hand-computed values (numpy, torch 1.13 formulas)\n");
  struct Case { int adamw; int step; std::vector<double> p, m, v; };
  const std::vector<Case> cases = {
      {0, 1, {0.9559592141175512, -2.099999995652174, 0.5436771936150413}, {0.141, 0.023, -0.2795},
       {0.010250100000000002, 5.290000000000005e-05, 0.040950025}},
      {0, 3, {0.9718661471143464, -2.063881355131572, 0.5279015852329696}, {0.141, 0.023, -0.2795},
       {0.010250100000000002, 5.290000000000005e-05, 0.040950025}},
      {1, 1, {0.9552500001367187, -2.097999996, 0.5432499999316407}, {0.14, 0.025, -0.28},
       {0.01024, 6.250000000000006e-05, 0.04096}},
      {1, 3, {0.9710519051775128, -2.0618813555162343, 0.5274480948980861}, {0.14, 0.025, -0.28},
       {0.01024, 6.250000000000006e-05, 0.04096}},
  };
  for (const Case& k : cases) {
    std::vector<double> p = {1.0, -2.0, 0.5}, g = {0.5, 0.25, -1.0}, m = {0.1, 0.0, -0.2}, v = {0.01, 0.0, 0.04};
    std::vector<double> g0 = g, copy(3);
    // in place: the outputs are the input buffers; out[3] gets a copy of p
    run(OP_ADAM, {tv(p, {3}), tv(g, {3}), tv(m, {3}), tv(v, {3})}, {tv(p, {3}), tv(m, {3}), tv(v, {3}), tv(copy, {3})},
        {k.adamw, k.step}, {0.1, 0.9, 0.999, 1e-8, 0.01});
    std::string tag = std::string(k.adamw ? "adamw" : "adam (L2)") + " step " + std::to_string(k.step);
    check_close(tag + " p", p, k.p, 1e-15, 1e-13);
    check_close(tag + " m", m, k.m, 1e-15, 1e-13);
    check_close(tag + " v", v, k.v, 1e-15, 1e-13);
    check_close(tag + " p copy", copy, p, 0, 0);
    check_close(tag + " g untouched", g, g0, 0, 0);
  }
  {  // first step with m = v = 0, no decay, eps = 0: p moves by exactly lr against sign(g)
    std::vector<double> p = {1.0, 1.0}, g = {0.5, -3.0}, m(2), v(2);
    run(OP_ADAM, {tv(p, {2}), tv(g, {2}), tv(m, {2}), tv(v, {2})}, {tv(p, {2}), tv(m, {2}), tv(v, {2})}, {0, 1},
        {0.1, 0.9, 0.999, 0.0, 0.0});
    check_close("adam step 1 from zero moments: p -= lr*sign(g)", p, std::vector<double>{0.9, 1.1}, 1e-14, 0);
  }
  {  // float vs double
    std::vector<double> p = randn(17), g = randn(17), m = randn(17, 0.1), v(17);
    for (auto& x : v) x = std::fabs(randn(1, 0.01)[0]);
    std::vector<float> pf(p.begin(), p.end()), gf(g.begin(), g.end()), mf(m.begin(), m.end()), vf(v.begin(), v.end());
    run(OP_ADAM, {tv(p, {17}), tv(g, {17}), tv(m, {17}), tv(v, {17})}, {tv(p, {17}), tv(m, {17}), tv(v, {17})},
        {1, 5}, {1e-3, 0.9, 0.95, 1e-8, 0.1});
    run<float>(OP_ADAM, {tv(pf, {17}), tv(gf, {17}), tv(mf, {17}), tv(vf, {17})},
               {tv(pf, {17}), tv(mf, {17}), tv(vf, {17})}, {1, 5}, {1e-3, 0.9, 0.95, 1e-8, 0.1});
    check_close("adamw float vs double p [17]", pf, p, 1e-6, 1e-6);
  }
}

// ---------------------------------------------------------------- matmul vs naive

void naive_matmul(std::vector<double>& y, const std::vector<double>& a, const std::vector<double>& b, int64_t N,
                  int64_t K, int64_t M, bool tb) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t m = 0; m < M; m++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++) s += a[n * K + k] * (tb ? b[m * K + k] : b[k * M + m]);
      y[n * M + m] = s;
    }
}

void test_matmul_vs_naive() {
  std::printf("blocked matmul vs naive loops (sizes crossing the block edges)\n");
  const int64_t sizes[][3] = {{1, 1, 1}, {37, 133, 301}, {5, 300, 17}, {70, 9, 513}};
  for (const auto& s : sizes) {
    const int64_t N = s[0], K = s[1], M = s[2];
    for (int tb = 0; tb < 2; tb++) {
      std::vector<double> a = randn(N * K), b = randn(K * M), dy = randn(N * M);
      std::vector<double> y(N * M), want(N * M), da(N * K), want_da(N * K), db(K * M), want_db(K * M);
      std::vector<int64_t> bshape = tb ? std::vector<int64_t>{M, K} : std::vector<int64_t>{K, M};
      run(OP_MATMUL, {tv(a, {N, K}), tv(b, bshape)}, {tv(y, {N, M})}, {tb});
      run(OP_MATMUL_GRAD_A, {tv(dy, {N, M}), tv(b, bshape)}, {tv(da, {N, K})}, {tb});
      run(OP_MATMUL_GRAD_B, {tv(a, {N, K}), tv(dy, {N, M})}, {tv(db, bshape)}, {tb});
      naive_matmul(want, a, b, N, K, M, tb);
      // da[n,k] = sum_m dy[n,m] b[k,m] (tb: b[m,k])
      for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
          double acc = 0;
          for (int64_t m = 0; m < M; m++) acc += dy[n * M + m] * (tb ? b[m * K + k] : b[k * M + m]);
          want_da[n * K + k] = acc;
        }
      // db[k,m] = sum_n a[n,k] dy[n,m] (tb: stored at [m,k])
      for (int64_t k = 0; k < K; k++)
        for (int64_t m = 0; m < M; m++) {
          double acc = 0;
          for (int64_t n = 0; n < N; n++) acc += a[n * K + k] * dy[n * M + m];
          want_db[tb ? m * K + k : k * M + m] = acc;
        }
      char tag[96];
      std::snprintf(tag, sizeof tag, "N=%ld K=%ld M=%ld transB=%d", long(N), long(K), long(M), tb);
      check_close(std::string("matmul ") + tag, y, want, 1e-12, 1e-12);
      check_close(std::string("matmul_grad_a ") + tag, da, want_da, 1e-12, 1e-12);
      check_close(std::string("matmul_grad_b ") + tag, db, want_db, 1e-12, 1e-12);
      // the float instantiation against double
      std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), yf(N * M);
      run<float>(OP_MATMUL, {tv(af, {N, K}), tv(bf, bshape)}, {tv(yf, {N, M})}, {tb});
      check_close(std::string("matmul float vs double ") + tag, yf, y, 1e-4, 1e-4);
    }
  }
}

// ---------------------------------------------------------------- backward vs finite differences

void test_matmul_fd() {
  std::printf("matmul gradients vs finite differences\n");
  const std::vector<std::vector<int64_t>> lead_shapes = {{1, 3}, {1}, {17}};
  const int64_t km[][2] = {{17, 3}, {1, 1}, {3, 17}};
  for (int c = 0; c < 3; c++) {
    for (int tb = 0; tb < 2; tb++) {
      std::vector<int64_t> ashape = lead_shapes[c], yshape = lead_shapes[c];
      const int64_t K = km[c][0], M = km[c][1], N = numel(lead_shapes[c]);
      ashape.push_back(K);
      yshape.push_back(M);
      std::vector<int64_t> bshape = tb ? std::vector<int64_t>{M, K} : std::vector<int64_t>{K, M};
      std::vector<double> a = randn(N * K), b = randn(K * M), dy = randn(N * M), y(N * M), da(N * K), db(K * M);
      auto loss = [&]() {
        run(OP_MATMUL, {tv(a, ashape), tv(b, bshape)}, {tv(y, yshape)}, {tb});
        return dot(y, dy);
      };
      run(OP_MATMUL_GRAD_A, {tv(dy, yshape), tv(b, bshape)}, {tv(da, ashape)}, {tb});
      run(OP_MATMUL_GRAD_B, {tv(a, ashape), tv(dy, yshape)}, {tv(db, bshape)}, {tb});
      char tag[64];
      std::snprintf(tag, sizeof tag, "N=%ld K=%ld M=%ld transB=%d", long(N), long(K), long(M), tb);
      fd_check(std::string("matmul_grad_a ") + tag, a, da, loss);
      fd_check(std::string("matmul_grad_b ") + tag, b, db, loss);
    }
  }
}

void test_broadcast_fd() {
  std::printf("add / mul broadcast gradients (via sum_to_shape, mul) vs finite differences\n");
  const std::vector<int64_t> ashape = {3, 1, 17}, bshape = {1, 17};
  const int64_t n = 51, nb = 17;
  std::vector<double> a = randn(n), b = randn(nb), dy = randn(n), y(n), t(n), da(n), db(nb);
  auto loss_add = [&]() {
    run(OP_ADD, {tv(a, ashape), tv(b, bshape)}, {tv(y, ashape)});
    return dot(y, dy);
  };
  auto loss_mul = [&]() {
    run(OP_MUL, {tv(a, ashape), tv(b, bshape)}, {tv(y, ashape)});
    return dot(y, dy);
  };
  // add: da = dy, db = sum_to_shape(dy)
  run(OP_SUM_TO_SHAPE, {tv(dy, ashape)}, {tv(db, bshape)});
  fd_check("add db = sum_to_shape(dy) [3,1,17]+[1,17]", b, db, loss_add);
  fd_check("add da = dy", a, dy, loss_add);
  // mul: da = dy * b (broadcast), db = sum_to_shape(dy * a)
  run(OP_MUL, {tv(dy, ashape), tv(b, bshape)}, {tv(da, ashape)});
  run(OP_MUL, {tv(dy, ashape), tv(a, ashape)}, {tv(t, ashape)});
  run(OP_SUM_TO_SHAPE, {tv(t, ashape)}, {tv(db, bshape)});
  fd_check("mul da = dy * b", a, da, loss_mul);
  fd_check("mul db = sum_to_shape(dy * a)", b, db, loss_mul);
}

void test_gelu_fd() {
  std::printf("gelu_backward vs finite differences\n");
  for (int64_t n : {1, 17}) {
    std::vector<double> x = randn(n, 2.0), dy = randn(n), y(n), dx(n);
    auto loss = [&]() {
      run(OP_GELU, {tv(x, {n})}, {tv(y, {n})});
      return dot(y, dy);
    };
    run(OP_GELU_BACKWARD, {tv(x, {n}), tv(dy, {n})}, {tv(dx, {n})});
    fd_check("gelu_backward n=" + std::to_string(n), x, dx, loss);
  }
}

void test_layernorm_fd() {
  std::printf("layernorm_backward vs finite differences\n");
  const std::vector<std::vector<int64_t>> shapes = {{3, 17}, {2, 1, 3}, {1, 1}, {17}};
  for (const auto& shape : shapes) {
    const int64_t C = shape.back(), N = numel(shape) / C;
    std::vector<int64_t> lead(shape.begin(), shape.end() - 1);
    std::vector<double> x = randn(N * C), w = randn(C), b = randn(C), dy = randn(N * C);
    std::vector<double> y(N * C), mean(N), rstd(N), dx(N * C), dw(C, 99.0), db(C, 99.0);  // 99: must be overwritten
    auto loss = [&]() {
      run(OP_LAYERNORM, {tv(x, shape), tv(w, {C}), tv(b, {C})}, {tv(y, shape), tv(mean, lead), tv(rstd, lead)}, {},
          {1e-5});
      return dot(y, dy);
    };
    loss();  // mean, rstd for the backward
    run(OP_LAYERNORM_BACKWARD, {tv(x, shape), tv(w, {C}), tv(mean, lead), tv(rstd, lead), tv(dy, shape)},
        {tv(dx, shape), tv(dw, {C}), tv(db, {C})});
    std::string tag = "x" + std::string("[") + std::to_string(N) + "," + std::to_string(C) + "]";
    // C = 1: var = 0, rstd = 1/sqrt(eps) ~ 316, dx = 0 exactly; the FD of the
    // flat function is noise of order 1e-10, so atol covers it
    fd_check("layernorm dx " + tag, x, dx, loss, 1e-6, 1e-5);
    fd_check("layernorm dw " + tag, w, dw, loss);
    fd_check("layernorm db " + tag, b, db, loss);
  }
}

void test_softmax_fd() {
  std::printf("softmax_backward vs finite differences\n");
  const std::vector<std::vector<int64_t>> shapes = {{3, 17}, {1, 1}, {2, 1, 3}};
  for (const auto& shape : shapes) {
    const int64_t n = numel(shape);
    std::vector<double> x = randn(n, 2.0), dy = randn(n), y(n), dx(n);
    auto loss = [&]() {
      run(OP_SOFTMAX, {tv(x, shape)}, {tv(y, shape)});
      return dot(y, dy);
    };
    loss();
    run(OP_SOFTMAX_BACKWARD, {tv(y, shape), tv(dy, shape)}, {tv(dx, shape)});
    fd_check("softmax dx n=" + std::to_string(n) + " C=" + std::to_string(shape.back()), x, dx, loss);
  }
}

void test_attention_fd() {
  std::printf("causal_attention_backward vs finite differences\n");
  const int64_t cases[][4] = {{2, 5, 6, 2}, {1, 1, 3, 3}, {1, 17, 4, 1}, {3, 3, 3, 1}};  // B, T, C, NH
  for (const auto& k : cases) {
    const int64_t B = k[0], Tn = k[1], C = k[2], NH = k[3];
    std::vector<double> qkv = randn(B * Tn * 3 * C), dy = randn(B * Tn * C);
    std::vector<double> y(B * Tn * C), att(B * NH * Tn * Tn), dqkv(B * Tn * 3 * C, 99.0);
    auto loss = [&]() {
      run(OP_CAUSAL_ATTENTION, {tv(qkv, {B, Tn, 3 * C})}, {tv(y, {B, Tn, C}), tv(att, {B, NH, Tn, Tn})}, {NH});
      return dot(y, dy);
    };
    loss();
    run(OP_CAUSAL_ATTENTION_BACKWARD, {tv(qkv, {B, Tn, 3 * C}), tv(att, {B, NH, Tn, Tn}), tv(dy, {B, Tn, C})},
        {tv(dqkv, {B, Tn, 3 * C})}, {NH});
    char tag[64];
    std::snprintf(tag, sizeof tag, "dqkv B=%ld T=%ld C=%ld NH=%ld", long(B), long(Tn), long(C), long(NH));
    fd_check(std::string("causal_attention ") + tag, qkv, dqkv, loss);
    // rows of att sum to 1 and are 0 above the diagonal
    std::vector<double> rowsum, zero_above;
    for (int64_t r = 0; r < B * NH * Tn; r++) {
      const int64_t t = r % Tn;
      double s = 0, z = 0;
      for (int64_t u = 0; u < Tn; u++) {
        s += att[r * Tn + u];
        if (u > t) z += std::fabs(att[r * Tn + u]);
      }
      rowsum.push_back(s);
      zero_above.push_back(z);
    }
    check_close(std::string("causal_attention att rows sum to 1, ") + tag, rowsum,
                std::vector<double>(rowsum.size(), 1.0), 1e-14, 0);
    check_close(std::string("causal_attention att = 0 for u > t, ") + tag, zero_above,
                std::vector<double>(zero_above.size(), 0.0), 0, 0);
    // the float instantiation against double
    std::vector<float> qf(qkv.begin(), qkv.end()), yf(y.size()), af(att.size());
    run<float>(OP_CAUSAL_ATTENTION, {tv(qf, {B, Tn, 3 * C})}, {tv(yf, {B, Tn, C}), tv(af, {B, NH, Tn, Tn})}, {NH});
    check_close(std::string("causal_attention float vs double y, ") + tag, yf, y, 1e-5, 1e-5);
  }
}

void test_embedding_fd() {
  std::printf("embedding_backward vs finite differences\n");
  const int64_t V = 5, C = 3;
  std::vector<int32_t> ids = {2, 4, 2, 0, 2, 1};  // repeats, and row 3 never used
  std::vector<double> table = randn(V * C), dy = randn(6 * C), y(6 * C), dtable(V * C, 99.0);
  auto loss = [&]() {
    run(OP_EMBEDDING, {tv(ids, {2, 3}), tv(table, {V, C})}, {tv(y, {2, 3, C})});
    return dot(y, dy);
  };
  run(OP_EMBEDDING_BACKWARD, {tv(ids, {2, 3}), tv(dy, {2, 3, C})}, {tv(dtable, {V, C})});
  fd_check("embedding dtable V=5 C=3 ids [2,3]", table, dtable, loss);
}

void test_cross_entropy_fd() {
  std::printf("cross_entropy_backward vs finite differences\n");
  const std::vector<std::vector<int64_t>> shapes = {{3, 17}, {1, 1}, {2, 2, 3}};
  for (const auto& shape : shapes) {
    const int64_t V = shape.back(), N = numel(shape) / V;
    std::vector<int64_t> lead(shape.begin(), shape.end() - 1);
    std::vector<double> logits = randn(N * V, 3.0), loss_v(1), dloss = {0.7}, dlogits(N * V);
    std::vector<int32_t> targets(N);
    for (int64_t n = 0; n < N; n++) targets[n] = int32_t((n * 7 + 3) % V);
    auto loss = [&]() {
      run(OP_CROSS_ENTROPY, {tv(logits, shape), tv(targets, lead)}, {tv(loss_v, {})});
      return loss_v[0] * dloss[0];
    };
    run(OP_CROSS_ENTROPY_BACKWARD, {tv(logits, shape), tv(targets, lead), tv(dloss, {})}, {tv(dlogits, shape)});
    fd_check("cross_entropy dlogits N=" + std::to_string(N) + " V=" + std::to_string(V), logits, dlogits, loss);
  }
  {  // float: the row sums in double keep a large-V loss close to double
    const int64_t N = 4, V = 1000;
    std::vector<double> logits = randn(N * V, 5.0), loss(1);
    std::vector<float> lf(logits.begin(), logits.end()), lossf(1);
    std::vector<int32_t> targets = {0, 999, 500, 7};
    run(OP_CROSS_ENTROPY, {tv(logits, {N, V}), tv(targets, {N})}, {tv(loss, {})});
    run<float>(OP_CROSS_ENTROPY, {tv(lf, {N, V}), tv(targets, {N})}, {tv(lossf, {})});
    check_close("cross_entropy float vs double N=4 V=1000", lossf, loss, 1e-5, 1e-6);
  }
}

// ---------------------------------------------------------------- rejections

void test_rejections() {
  std::printf("run_op rejections\n");
  std::vector<double> a(8), b(15), y(10), big(50257);
  std::vector<int32_t> ids = {1, 2, 3, 70000, 5};
  check_rejects("matmul b shape mismatch",
                make_call(OP_MATMUL, {tv(a, {2, 4}), tv(b, {3, 5})}, {tv(y, {2, 5})}),
                "matmul: b has shape [3,5], expected [4,M] to match a[...,4]");
  check_rejects("matmul transB b shape mismatch",
                make_call(OP_MATMUL, {tv(a, {2, 4}), tv(b, {5, 3})}, {tv(y, {2, 5})}, {1}),
                "matmul: b has shape [5,3], expected [M,4] to match a[...,4]");
  check_rejects("matmul y shape", make_call(OP_MATMUL, {tv(a, {2, 4}), tv(a, {4, 2})}, {tv(y, {2, 5})}),
                "matmul: y has shape [2,5], expected [2,2]");
  check_rejects("matmul y aliases a", make_call(OP_MATMUL, {tv(a, {2, 2}), tv(b, {2, 2})}, {tv(a, {2, 2})}), "",
                "same buffer");
  check_rejects("matmul_grad_b dy leading dims",
                make_call(OP_MATMUL_GRAD_B, {tv(a, {2, 4}), tv(b, {3, 5})}, {tv(y, {4, 5})}), "",
                "matmul_grad_b: dy has shape [3,5], expected [2,5]");
  check_rejects("embedding id out of range",
                make_call(OP_EMBEDDING, {tv(ids, {5}), tv(big, {50257, 1})}, {tv(y, {5, 1})}),
                "embedding: id 70000 at position 3 is outside [0, 50257)");
  std::vector<int32_t> bad_t = {0, -1};
  std::vector<double> logits(6), loss(1);
  check_rejects("cross_entropy target out of range",
                make_call(OP_CROSS_ENTROPY, {tv(logits, {2, 3}), tv(bad_t, {2})}, {tv(loss, {})}),
                "cross_entropy: target -1 at position 1 is outside [0, 3)");
  check_rejects("add b not a suffix", make_call(OP_ADD, {tv(a, {2, 4}), tv(a, {2})}, {tv(y, {2, 4})}), "",
                "add: b has shape [2], expected a suffix");
  check_rejects("adam step 0",
                make_call(OP_ADAM, {tv(a, {2}), tv(a, {2}), tv(a, {2}), tv(a, {2})}, {tv(a, {2}), tv(a, {2}), tv(a, {2})},
                          {0, 0}, {0.1, 0.9, 0.999, 1e-8, 0}),
                "adam: step (iattr[1]) is 0, expected >= 1");
  check_rejects("gelu with 2 inputs", make_call(OP_GELU, {tv(a, {8}), tv(a, {8})}, {tv(y, {8})}),
                "gelu: expected 1 input(s), got 2");
  TensorView null_x;
  null_x.rank = 1;
  null_x.shape[0] = 4;
  check_rejects("null data", make_call(OP_SOFTMAX, {null_x}, {tv(a, {4})}), "",
                "softmax: input x has no data for its 4 elements");
  check_rejects("attention heads do not divide C",
                make_call(OP_CAUSAL_ATTENTION, {tv(b, {1, 1, 15})}, {tv(y, {1, 1, 5}), tv(a, {1, 2, 1, 1})}, {2}), "",
                "causal_attention: heads (iattr[0]) is 2");
  check_rejects("transpose bad perm", make_call(OP_TRANSPOSE, {tv(a, {2, 4})}, {tv(y, {4, 2})}, {1, 1}), "",
                "transpose: perm [1,1] is not a permutation");
  check_rejects("layernorm mean shape",
                make_call(OP_LAYERNORM, {tv(a, {2, 4}), tv(a, {4}), tv(a, {4})},
                          {tv(y, {2, 4}), tv(b, {2, 1}), tv(b, {2})}),
                "layernorm: mean has shape [2,1], expected [2] (x's leading dims)");
  check_rejects("unknown kind", make_call(99, {}, {}), "run_op: unknown op kind 99");
  {  // nothing written on failure
    std::vector<double> out(5, 42.0);
    std::vector<double> table(3 * 1);
    std::vector<int32_t> bad = {0, 1, 2, 3, 0};
    std::string err;
    run_op<double>(make_call(OP_EMBEDDING, {tv(bad, {5}), tv(table, {3, 1})}, {tv(out, {5, 1})}), &err);
    check_close("embedding: output untouched after a rejection", out, std::vector<double>(5, 42.0), 0, 0);
  }
}

// ---------------------------------------------------------------- empty operands

void test_empty() {
  std::printf("empty operands (numel 0, null data) are accepted and touch nothing\n");
  std::vector<double> none, y(6, 5.0), loss(1);
  std::vector<double> a = {1, 2, 3, 4, 5, 6}, b(6, 7.0);
  std::vector<int32_t> no_ids;
  run(OP_SOFTMAX, {tv(none, {3, 0})}, {tv(none, {3, 0})});
  run(OP_ADD, {tv(none, {0, 3}), tv(b, {3})}, {tv(none, {0, 3})});
  run(OP_MATMUL, {tv(none, {2, 0}), tv(none, {0, 3})}, {tv(y, {2, 3})});  // K = 0: y = 0
  check_close("matmul with K = 0 gives zeros", y, std::vector<double>(6, 0.0), 0, 0);
  run(OP_CAUSAL_ATTENTION, {tv(none, {2, 0, 6})}, {tv(none, {2, 0, 2}), tv(none, {2, 1, 0, 0})}, {1});
  run(OP_EMBEDDING, {tv(no_ids, {0}), tv(a, {3, 2})}, {tv(none, {0, 2})});
  run(OP_TRANSPOSE, {tv(none, {2, 0, 3})}, {tv(none, {3, 2, 0})}, {2, 0, 1});
  run(OP_CROSS_ENTROPY, {tv(none, {0, 4}), tv(no_ids, {0})}, {tv(loss, {})});
  g_checks++;
  const bool nan_ok = std::isnan(loss[0]);
  if (!nan_ok) g_failures++;
  std::printf("  %s %-58s %g\n", nan_ok ? "ok  " : "FAIL", "cross_entropy of no rows is NaN (torch's mean)", loss[0]);
}

// ---------------------------------------------------------------- speed (printed, not asserted)

void bench_matmul() {
  std::printf("matmul speed, float, single thread (printed, not asserted)\n");
  const int64_t N = 256, K = 768, M = 3072;
  std::vector<float> a(N * K, 0.5f), b(K * M, 0.25f), y(N * M), da(N * K), db(K * M);
  struct { const char* name; int kind; int tb; } runs[] = {
      {"matmul    y[256,3072] = a[256,768] @ b[768,3072]", OP_MATMUL, 0},
      {"matmul    transB (b [3072,768])", OP_MATMUL, 1},
      {"grad_a    da[256,768]", OP_MATMUL_GRAD_A, 0},
      {"grad_b    db[768,3072]", OP_MATMUL_GRAD_B, 0},
  };
  for (const auto& r : runs) {
    std::vector<int64_t> bshape = r.tb ? std::vector<int64_t>{M, K} : std::vector<int64_t>{K, M};
    auto t0 = std::chrono::steady_clock::now();
    if (r.kind == OP_MATMUL) run<float>(OP_MATMUL, {tv(a, {N, K}), tv(b, bshape)}, {tv(y, {N, M})}, {r.tb});
    if (r.kind == OP_MATMUL_GRAD_A) run<float>(OP_MATMUL_GRAD_A, {tv(y, {N, M}), tv(b, bshape)}, {tv(da, {N, K})}, {r.tb});
    if (r.kind == OP_MATMUL_GRAD_B) run<float>(OP_MATMUL_GRAD_B, {tv(a, {N, K}), tv(y, {N, M})}, {tv(db, bshape)}, {r.tb});
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("  %-52s %7.1f ms  %6.2f GFLOP/s\n", r.name, s * 1e3, 2.0 * N * K * M / s / 1e9);
  }
}

}  // namespace

int main() {
  test_forward_by_hand();
  test_adam();
  test_matmul_vs_naive();
  test_matmul_fd();
  test_broadcast_fd();
  test_gelu_fd();
  test_layernorm_fd();
  test_softmax_fd();
  test_attention_fd();
  test_embedding_fd();
  test_cross_entropy_fd();
  test_rejections();
  test_empty();
  bench_matmul();
  std::printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
