// pool.cc — 2-D max and average pooling (NCHW), forward and backward. Shape
// letters in kernels.h (Window2d; M = C).
//
// Window (oh, ow) of plane (n, c) covers rows [oh*sH - pT, oh*sH - pT + kH) and
// columns [ow*sW - pL, ow*sW - pL + kW), clipped to x. Padding never wins a max.
// The average divides by the clipped window's size, or, with count_include_pad,
// by the window clipped to the padded input (PyTorch's divisor; in ceil mode the
// part past the bottom/right padding is not counted).
// Max backward recomputes each window's first maximum (a NaN wins, as in torch)
// and adds dy there. Cost: O(N*C*OH*OW*kH*kW) for each.
#include <algorithm>
#include <cmath>

#include "kernels.h"

namespace tiercut {

namespace {
struct Span { int64_t h0, h1, w0, w1; int64_t padded; };

inline Span window_of(const Window2d& s, int64_t oh, int64_t ow) {
  int64_t h0 = oh * s.sH - s.pT, w0 = ow * s.sW - s.pL;
  int64_t h1 = std::min(h0 + s.kH, s.H + s.pB), w1 = std::min(w0 + s.kW, s.W + s.pR);
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, s.H);
  w1 = std::min(w1, s.W);
  return {h0, h1, w0, w1, padded};
}

// index (within the plane) of the first maximum of the window
template <typename T>
inline int64_t argmax_of(const T* xp, const Window2d& s, const Span& sp) {
  int64_t best = sp.h0 * s.W + sp.w0;
  for (int64_t ih = sp.h0; ih < sp.h1; ih++)
    for (int64_t iw = sp.w0; iw < sp.w1; iw++) {
      const int64_t at = ih * s.W + iw;
      const T v = xp[at];
      if (v > xp[best] || (std::isnan(v) && !std::isnan(xp[best]))) best = at;
    }
  return best;
}
}  // namespace

template <typename T>
void maxpool2d_forward(T* y, const T* x, const Window2d& s) {
  for (int64_t p = 0; p < s.N * s.C; p++) {
    const T* xp = x + p * s.H * s.W;
    T* yp = y + p * s.OH * s.OW;
    for (int64_t oh = 0; oh < s.OH; oh++)
      for (int64_t ow = 0; ow < s.OW; ow++) yp[oh * s.OW + ow] = xp[argmax_of(xp, s, window_of(s, oh, ow))];
  }
}

template <typename T>
void maxpool2d_backward(T* dx, const T* x, const T* dy, const Window2d& s) {
  for (int64_t i = 0; i < s.N * s.C * s.H * s.W; i++) dx[i] = T(0);
  for (int64_t p = 0; p < s.N * s.C; p++) {
    const T* xp = x + p * s.H * s.W;
    const T* dyp = dy + p * s.OH * s.OW;
    T* dxp = dx + p * s.H * s.W;
    for (int64_t oh = 0; oh < s.OH; oh++)
      for (int64_t ow = 0; ow < s.OW; ow++) dxp[argmax_of(xp, s, window_of(s, oh, ow))] += dyp[oh * s.OW + ow];
  }
}

template <typename T>
void avgpool2d_forward(T* y, const T* x, const Window2d& s, bool count_include_pad) {
  for (int64_t p = 0; p < s.N * s.C; p++) {
    const T* xp = x + p * s.H * s.W;
    T* yp = y + p * s.OH * s.OW;
    for (int64_t oh = 0; oh < s.OH; oh++)
      for (int64_t ow = 0; ow < s.OW; ow++) {
        const Span sp = window_of(s, oh, ow);
        T sum = T(0);
        for (int64_t ih = sp.h0; ih < sp.h1; ih++)
          for (int64_t iw = sp.w0; iw < sp.w1; iw++) sum += xp[ih * s.W + iw];
        const int64_t divisor = count_include_pad ? sp.padded : (sp.h1 - sp.h0) * (sp.w1 - sp.w0);
        yp[oh * s.OW + ow] = sum / T(divisor);
      }
  }
}

template <typename T>
void avgpool2d_backward(T* dx, const T* dy, const Window2d& s, bool count_include_pad) {
  for (int64_t i = 0; i < s.N * s.C * s.H * s.W; i++) dx[i] = T(0);
  for (int64_t p = 0; p < s.N * s.C; p++) {
    const T* dyp = dy + p * s.OH * s.OW;
    T* dxp = dx + p * s.H * s.W;
    for (int64_t oh = 0; oh < s.OH; oh++)
      for (int64_t ow = 0; ow < s.OW; ow++) {
        const Span sp = window_of(s, oh, ow);
        const int64_t divisor = count_include_pad ? sp.padded : (sp.h1 - sp.h0) * (sp.w1 - sp.w0);
        const T g = dyp[oh * s.OW + ow] / T(divisor);
        for (int64_t ih = sp.h0; ih < sp.h1; ih++)
          for (int64_t iw = sp.w0; iw < sp.w1; iw++) dxp[ih * s.W + iw] += g;
      }
  }
}

#define TIERCUT_INSTANTIATE(T)                                                      \
  template void maxpool2d_forward<T>(T*, const T*, const Window2d&);                \
  template void maxpool2d_backward<T>(T*, const T*, const T*, const Window2d&);     \
  template void avgpool2d_forward<T>(T*, const T*, const Window2d&, bool);          \
  template void avgpool2d_backward<T>(T*, const T*, const Window2d&, bool);
TIERCUT_INSTANTIATE(float)
TIERCUT_INSTANTIATE(double)
#undef TIERCUT_INSTANTIATE

}  // namespace tiercut
