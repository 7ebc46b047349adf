// attention.cc — two attention kernels, forward and backward:
//  - causal_attention: causal multi-head self-attention from a fused qkv (as
//    llm.c's attention_forward / attention_backward, but keeping only the
//    normalized att, not the pre-softmax scores); GPT-2 style models.
//  - attention: separate q, k, v, grouped-query heads, causal or not, keeping
//    only the log-sum-exp per row (below); LLaMA and BERT.
//
// B = batch, T = sequence length (Tn in code, T is the element type),
// C = channels, NH = heads, hs = C / NH = head size.
// qkv[b,t,:] holds q in channels [0,C), k in [C,2C), v in [2C,3C); head h uses
// channels h*hs .. h*hs+hs-1 of each. With scale = 1/sqrt(hs):
//   att[b,h,t,u] = softmax_{u <= t}(q_t . k_u * scale)      (0 for u > t)
//   y[b,t,h*hs+i] = sum_{u <= t} att[b,h,t,u] * v_u[h*hs+i]
// Cost: O(B * NH * T^2 * hs) = O(B * T^2 * C), no scratch memory.
#include <cmath>

#include "kernels.h"

namespace tiercut {

template <typename T>
void causal_attention_forward(T* y, T* att, const T* qkv, int64_t B, int64_t Tn, int64_t C, int64_t NH) {
  const int64_t C3 = 3 * C;
  const int64_t hs = C / NH;
  const T scale = T(1.0 / std::sqrt(double(hs)));
  for (int64_t b = 0; b < B; b++) {
    for (int64_t t = 0; t < Tn; t++) {
      for (int64_t h = 0; h < NH; h++) {
        const T* q = qkv + b * Tn * C3 + t * C3 + h * hs;
        T* att_row = att + ((b * NH + h) * Tn + t) * Tn;
        // pass 1: scores q.k_u * scale for u <= t (into att_row), and their max
        T maxval = T(0);
        for (int64_t u = 0; u <= t; u++) {
          const T* k = qkv + b * Tn * C3 + u * C3 + C + h * hs;
          T s = T(0);
          for (int64_t i = 0; i < hs; i++) s += q[i] * k[i];
          s *= scale;
          if (u == 0 || s > maxval) maxval = s;
          att_row[u] = s;
        }
        // pass 2: exp and the row sum (in double), pass 3: normalize; 0 above the diagonal
        double sum = 0.0;
        for (int64_t u = 0; u <= t; u++) {
          T e = std::exp(att_row[u] - maxval);
          att_row[u] = e;
          sum += double(e);
        }
        T inv = T(1.0 / sum);
        for (int64_t u = 0; u <= t; u++) att_row[u] *= inv;
        for (int64_t u = t + 1; u < Tn; u++) att_row[u] = T(0);
        // y_t = sum_u att[t,u] * v_u
        T* out = y + b * Tn * C + t * C + h * hs;
        for (int64_t i = 0; i < hs; i++) out[i] = T(0);
        for (int64_t u = 0; u <= t; u++) {
          const T* v = qkv + b * Tn * C3 + u * C3 + 2 * C + h * hs;
          T a = att_row[u];
          for (int64_t i = 0; i < hs; i++) out[i] += a * v[i];
        }
      }
    }
  }
}

// Backward, per (b, h, t), with datt[t,u] = dy_t . v_u:
//   dv_u      += att[t,u] * dy_t
//   dpre[t,u]  = att[t,u] * (datt[t,u] - sum_{u' <= t} att[t,u'] * datt[t,u'])   (softmax backward)
//   dq_t      += dpre[t,u] * scale * k_u
//   dk_u      += dpre[t,u] * scale * q_t
// The row sum needs every datt[t,u] first; rather than keep a scratch row we
// compute datt in a first pass for the sum and again in the second pass
// (2 extra hs-long dot products per (t,u), no allocation).
// dqkv is zeroed, then accumulated.
template <typename T>
void causal_attention_backward(T* dqkv, const T* qkv, const T* att, const T* dy,
                               int64_t B, int64_t Tn, int64_t C, int64_t NH) {
  const int64_t C3 = 3 * C;
  const int64_t hs = C / NH;
  const T scale = T(1.0 / std::sqrt(double(hs)));
  for (int64_t i = 0; i < B * Tn * C3; i++) dqkv[i] = T(0);
  for (int64_t b = 0; b < B; b++) {
    for (int64_t t = 0; t < Tn; t++) {
      for (int64_t h = 0; h < NH; h++) {
        const T* q = qkv + b * Tn * C3 + t * C3 + h * hs;
        T* dq = dqkv + b * Tn * C3 + t * C3 + h * hs;
        const T* att_row = att + ((b * NH + h) * Tn + t) * Tn;
        const T* dyt = dy + b * Tn * C + t * C + h * hs;
        // pass 1: s = sum_u att[t,u] * datt[t,u]
        T s = T(0);
        for (int64_t u = 0; u <= t; u++) {
          const T* v = qkv + b * Tn * C3 + u * C3 + 2 * C + h * hs;
          T datt = T(0);
          for (int64_t i = 0; i < hs; i++) datt += dyt[i] * v[i];
          s += att_row[u] * datt;
        }
        // pass 2: gradients into dv_u, dq_t, dk_u
        for (int64_t u = 0; u <= t; u++) {
          const T* k = qkv + b * Tn * C3 + u * C3 + C + h * hs;
          const T* v = qkv + b * Tn * C3 + u * C3 + 2 * C + h * hs;
          T* dk = dqkv + b * Tn * C3 + u * C3 + C + h * hs;
          T* dv = dqkv + b * Tn * C3 + u * C3 + 2 * C + h * hs;
          const T a = att_row[u];
          T datt = T(0);
          for (int64_t i = 0; i < hs; i++) datt += dyt[i] * v[i];
          for (int64_t i = 0; i < hs; i++) dv[i] += a * dyt[i];
          const T dpre = a * (datt - s) * scale;
          for (int64_t i = 0; i < hs; i++) {
            dq[i] += dpre * k[i];
            dk[i] += dpre * q[i];
          }
        }
      }
    }
  }
}

// ---- attention: separate q, k, v; grouped-query; causal or bidirectional ----
//
// NH = query heads, KVH = key/value heads (NH % KVH == 0; query head h reads
// kv head h / (NH / KVH): grouped-query attention, MHA when KVH == NH, MQA when
// KVH == 1), hs = head size, C = NH*hs, Ckv = KVH*hs.
// q[B,T,C], k[B,T,Ckv], v[B,T,Ckv] -> y[B,T,C], lse[B,NH,T]. With
// scale = 1/sqrt(hs) and U(t) = {u <= t} (causal) or all u (bidirectional):
//   s[t,u]   = q_t . k_u * scale
//   lse[t]   = log sum_{u in U(t)} exp(s[t,u])
//   y_t      = sum_{u in U(t)} exp(s[t,u] - lse[t]) v_u
// Only lse is kept for backward (as FlashAttention), not the T x T
// probabilities: backward recomputes them. Forward is one pass per query row
// with an online softmax (running max and sum), so there is no scratch
// memory. Cost: O(B * NH * T^2 * hs) each way (half of it when causal).
template <typename T>
void attention_forward(T* y, T* lse, const T* q, const T* k, const T* v, int64_t B, int64_t Tn,
                       int64_t NH, int64_t KVH, int64_t hs, bool causal) {
  const int64_t C = NH * hs, Ckv = KVH * hs, group = NH / KVH;
  const T scale = T(1.0 / std::sqrt(double(hs)));
  for (int64_t b = 0; b < B; b++) {
    for (int64_t t = 0; t < Tn; t++) {
      const int64_t uend = causal ? t + 1 : Tn;
      for (int64_t h = 0; h < NH; h++) {
        const T* qt = q + (b * Tn + t) * C + h * hs;
        const int64_t kvo = (h / group) * hs;
        T* out = y + (b * Tn + t) * C + h * hs;
        for (int64_t i = 0; i < hs; i++) out[i] = T(0);
        T m = T(0);
        double l = 0.0;
        for (int64_t u = 0; u < uend; u++) {
          const T* ku = k + (b * Tn + u) * Ckv + kvo;
          const T* vu = v + (b * Tn + u) * Ckv + kvo;
          T s = T(0);
          for (int64_t i = 0; i < hs; i++) s += qt[i] * ku[i];
          s *= scale;
          if (u == 0) {
            m = s;
          } else if (s > m) {  // a new max: rescale what was summed so far
            const T corr = std::exp(m - s);
            l *= double(corr);
            for (int64_t i = 0; i < hs; i++) out[i] *= corr;
            m = s;
          }
          const T p = std::exp(s - m);
          l += double(p);
          for (int64_t i = 0; i < hs; i++) out[i] += p * vu[i];
        }
        const T inv = T(1.0 / l);
        for (int64_t i = 0; i < hs; i++) out[i] *= inv;
        lse[(b * NH + h) * Tn + t] = m + T(std::log(l));
      }
    }
  }
}

// Backward, per (b, h, t), with p[t,u] = exp(s[t,u] - lse[t]) recomputed and
// D_t = dy_t . y_t (= sum_u p[t,u] dp[t,u], the softmax row term):
//   dp[t,u] = dy_t . v_u
//   ds[t,u] = p[t,u] (dp[t,u] - D_t) * scale
//   dq_t += ds k_u,   dk_u += ds q_t,   dv_u += p[t,u] dy_t
// dk and dv of a kv head sum over the query heads of its group. dq, dk, dv are
// zeroed, then accumulated.
template <typename T>
void attention_backward(T* dq, T* dk, T* dv, const T* q, const T* k, const T* v, const T* y, const T* lse,
                        const T* dy, int64_t B, int64_t Tn, int64_t NH, int64_t KVH, int64_t hs, bool causal) {
  const int64_t C = NH * hs, Ckv = KVH * hs, group = NH / KVH;
  const T scale = T(1.0 / std::sqrt(double(hs)));
  for (int64_t i = 0; i < B * Tn * C; i++) dq[i] = T(0);
  for (int64_t i = 0; i < B * Tn * Ckv; i++) { dk[i] = T(0); dv[i] = T(0); }
  for (int64_t b = 0; b < B; b++) {
    for (int64_t t = 0; t < Tn; t++) {
      const int64_t uend = causal ? t + 1 : Tn;
      for (int64_t h = 0; h < NH; h++) {
        const int64_t qo = (b * Tn + t) * C + h * hs;
        const int64_t kvo = (h / group) * hs;
        const T* qt = q + qo;
        const T* dyt = dy + qo;
        const T* yt = y + qo;
        T* dqt = dq + qo;
        const T l = lse[(b * NH + h) * Tn + t];
        T D = T(0);
        for (int64_t i = 0; i < hs; i++) D += dyt[i] * yt[i];
        for (int64_t u = 0; u < uend; u++) {
          const int64_t ko = (b * Tn + u) * Ckv + kvo;
          const T* ku = k + ko;
          const T* vu = v + ko;
          T s = T(0), dp = T(0);
          for (int64_t i = 0; i < hs; i++) {
            s += qt[i] * ku[i];
            dp += dyt[i] * vu[i];
          }
          const T p = std::exp(s * scale - l);
          const T ds = p * (dp - D) * scale;
          T* dku = dk + ko;
          T* dvu = dv + ko;
          for (int64_t i = 0; i < hs; i++) {
            dqt[i] += ds * ku[i];
            dku[i] += ds * qt[i];
            dvu[i] += p * dyt[i];
          }
        }
      }
    }
  }
}

#define TIERCUT_INSTANTIATE(T)                                                                            \
  template void attention_forward<T>(T*, T*, const T*, const T*, const T*, int64_t, int64_t, int64_t,      \
                                     int64_t, int64_t, bool);                                             \
  template void attention_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*,        \
                                      const T*, int64_t, int64_t, int64_t, int64_t, int64_t, bool);
TIERCUT_INSTANTIATE(float)
TIERCUT_INSTANTIATE(double)
#undef TIERCUT_INSTANTIATE

template void causal_attention_forward<float>(float*, float*, const float*, int64_t, int64_t, int64_t, int64_t);
template void causal_attention_forward<double>(double*, double*, const double*, int64_t, int64_t, int64_t, int64_t);
template void causal_attention_backward<float>(float*, const float*, const float*, const float*,
                                               int64_t, int64_t, int64_t, int64_t);
template void causal_attention_backward<double>(double*, const double*, const double*, const double*,
                                                int64_t, int64_t, int64_t, int64_t);

}  // namespace tiercut
