// rope.cc — rotary position embedding (RoPE, Su et al. 2021) in the
// "rotate_half" layout of GPT-NeoX and Hugging Face LLaMA.
//
// B = batch, T = sequence length (Tn in code), NH = heads, hs = head size
// (even), h2 = hs / 2. x and y are [B,T,NH*hs]; head h of token t is
// channels h*hs .. h*hs+hs-1. For i < h2, with the position p = t and
//   freq_i = theta^(-2i/hs),  angle = p * freq_i   (computed in double)
// the pair (x_i, x_{i+h2}) of every head is rotated by angle:
//   y_i      = x_i cos - x_{i+h2} sin
//   y_{i+h2} = x_{i+h2} cos + x_i sin
// inverse = true rotates by -angle. The rotation is orthogonal, so the
// backward of rope is rope with the inverse rotation (dx = R^T dy).
// y may alias x (each pair is read before it is written). Cost: O(B*T*C)
// plus T*h2 sin/cos.
#include <cmath>

#include "kernels.h"

namespace tiercut {

template <typename T>
void rope_forward(T* y, const T* x, int64_t B, int64_t Tn, int64_t NH, int64_t hs, double theta, bool inverse) {
  const int64_t h2 = hs / 2;
  const int64_t C = NH * hs;
  for (int64_t t = 0; t < Tn; t++) {
    for (int64_t i = 0; i < h2; i++) {
      const double angle = double(t) * std::pow(theta, -2.0 * double(i) / double(hs));
      const T c = T(std::cos(angle));
      const T s = T(inverse ? -std::sin(angle) : std::sin(angle));
      for (int64_t b = 0; b < B; b++) {
        for (int64_t h = 0; h < NH; h++) {
          const int64_t at = (b * Tn + t) * C + h * hs + i;
          const T x0 = x[at], x1 = x[at + h2];
          y[at] = x0 * c - x1 * s;
          y[at + h2] = x1 * c + x0 * s;
        }
      }
    }
  }
}

template void rope_forward<float>(float*, const float*, int64_t, int64_t, int64_t, int64_t, double, bool);
template void rope_forward<double>(double*, const double*, int64_t, int64_t, int64_t, int64_t, double, bool);

}  // namespace tiercut
