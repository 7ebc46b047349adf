// conv.cc — 2-D convolution (NCHW, groups, strides, zero padding, dilations),
// forward and the two gradients. Shape letters in kernels.h (Window2d).
//
// With Cg = C/G input and Mg = M/G output channels per group, g = m / Mg:
//   y[n,m,oh,ow] = b[m] + sum_{c<Cg,kh,kw} x[n, g*Cg+c, ih, iw] * w[m,c,kh,kw]
//   ih = oh*sH - pT + kh*dH,  iw = ow*sW - pL + kw*dW   (terms outside x are 0)
// The gradients scatter each dy element back along the same taps:
//   dx[n, g*Cg+c, ih, iw] += dy[n,m,oh,ow] * w[m,c,kh,kw]
//   dw[m,c,kh,kw]         += dy[n,m,oh,ow] * x[n, g*Cg+c, ih, iw]
//   db[m]                 += dy[n,m,oh,ow]
// Direct loops (the scalar reference; no im2col). Cost: O(N*M*OH*OW*Cg*kH*kW)
// for each of the three.
#include "kernels.h"

namespace tiercut {

namespace {
// calls f(ih, iw, kh, kw) for every tap of output (oh, ow) that lands inside x
template <typename F>
inline void for_taps(const Window2d& s, int64_t oh, int64_t ow, F f) {
  for (int64_t kh = 0; kh < s.kH; kh++) {
    const int64_t ih = oh * s.sH - s.pT + kh * s.dH;
    if (ih < 0 || ih >= s.H) continue;
    for (int64_t kw = 0; kw < s.kW; kw++) {
      const int64_t iw = ow * s.sW - s.pL + kw * s.dW;
      if (iw < 0 || iw >= s.W) continue;
      f(ih, iw, kh, kw);
    }
  }
}
}  // namespace

template <typename T>
void conv2d_forward(T* y, const T* x, const T* w, const T* b, const Window2d& s) {
  const int64_t Cg = s.C / s.G, Mg = s.M / s.G, K = s.kH * s.kW;
  for (int64_t n = 0; n < s.N; n++) {
    for (int64_t m = 0; m < s.M; m++) {
      const int64_t g = m / Mg;
      T* ym = y + (n * s.M + m) * s.OH * s.OW;
      for (int64_t oh = 0; oh < s.OH; oh++) {
        for (int64_t ow = 0; ow < s.OW; ow++) {
          T acc = b[m];
          for (int64_t c = 0; c < Cg; c++) {
            const T* xc = x + (n * s.C + g * Cg + c) * s.H * s.W;
            const T* wc = w + (m * Cg + c) * K;
            for_taps(s, oh, ow, [&](int64_t ih, int64_t iw, int64_t kh, int64_t kw) { acc += xc[ih * s.W + iw] * wc[kh * s.kW + kw]; });
          }
          ym[oh * s.OW + ow] = acc;
        }
      }
    }
  }
}

template <typename T>
void conv2d_backward_input(T* dx, const T* dy, const T* w, const Window2d& s) {
  const int64_t Cg = s.C / s.G, Mg = s.M / s.G, K = s.kH * s.kW;
  for (int64_t i = 0; i < s.N * s.C * s.H * s.W; i++) dx[i] = T(0);
  for (int64_t n = 0; n < s.N; n++) {
    for (int64_t m = 0; m < s.M; m++) {
      const int64_t g = m / Mg;
      const T* dym = dy + (n * s.M + m) * s.OH * s.OW;
      for (int64_t oh = 0; oh < s.OH; oh++) {
        for (int64_t ow = 0; ow < s.OW; ow++) {
          const T d = dym[oh * s.OW + ow];
          for (int64_t c = 0; c < Cg; c++) {
            T* dxc = dx + (n * s.C + g * Cg + c) * s.H * s.W;
            const T* wc = w + (m * Cg + c) * K;
            for_taps(s, oh, ow, [&](int64_t ih, int64_t iw, int64_t kh, int64_t kw) { dxc[ih * s.W + iw] += d * wc[kh * s.kW + kw]; });
          }
        }
      }
    }
  }
}

template <typename T>
void conv2d_backward_weight(T* dw, T* db, const T* x, const T* dy, const Window2d& s) {
  const int64_t Cg = s.C / s.G, Mg = s.M / s.G, K = s.kH * s.kW;
  for (int64_t i = 0; i < s.M * Cg * K; i++) dw[i] = T(0);
  for (int64_t m = 0; m < s.M; m++) db[m] = T(0);
  for (int64_t n = 0; n < s.N; n++) {
    for (int64_t m = 0; m < s.M; m++) {
      const int64_t g = m / Mg;
      const T* dym = dy + (n * s.M + m) * s.OH * s.OW;
      for (int64_t oh = 0; oh < s.OH; oh++) {
        for (int64_t ow = 0; ow < s.OW; ow++) {
          const T d = dym[oh * s.OW + ow];
          db[m] += d;
          for (int64_t c = 0; c < Cg; c++) {
            const T* xc = x + (n * s.C + g * Cg + c) * s.H * s.W;
            T* dwc = dw + (m * Cg + c) * K;
            for_taps(s, oh, ow, [&](int64_t ih, int64_t iw, int64_t kh, int64_t kw) { dwc[kh * s.kW + kw] += d * xc[ih * s.W + iw]; });
          }
        }
      }
    }
  }
}

#define TIERCUT_INSTANTIATE(T)                                                                   \
  template void conv2d_forward<T>(T*, const T*, const T*, const T*, const Window2d&);            \
  template void conv2d_backward_input<T>(T*, const T*, const T*, const Window2d&);               \
  template void conv2d_backward_weight<T>(T*, T*, const T*, const T*, const Window2d&);
TIERCUT_INSTANTIATE(float)
TIERCUT_INSTANTIATE(double)
#undef TIERCUT_INSTANTIATE

}  // namespace tiercut
