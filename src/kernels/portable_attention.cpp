// The `portable` policy's attention row (portable_simd.h has the order): the invariant policy's
// tile-anchored online softmax with every reduction in the 16-lane order, the score transforms
// and exp/tanh done with the policy's own functions, and no libm call on the way.
#include <algorithm>
#include <cmath>

#include "core/kv_type.h"
#include "kernels/kernels.h"  // start_softmax_state
#include "kernels/portable_parts.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/portable_attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "kernels/portable_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvp::psimd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using simd_common::HWY_NAMESPACE::ScaleAccumulatePV;
using simd_common::HWY_NAMESPACE::WidenKv;

size_t AttnRowScratchFloats(int head_dim, int n_q) {
  const size_t tpad = round_up(size_t(kAttnTile), kLanes);
  return 2 * size_t(kAttnTile) * size_t(head_dim) + tpad + 2 * size_t(n_q) + kLanes;
}

// Scores of one tile (n keys, padded to a multiple of 16 with -inf) as attention_score() rounds
// them (kernels.h), with the policy's tanh for the soft-capping.
void TransformScores(const AttnRow& a, float* s, size_t n, size_t npad) {
  const DF d;
  const VF div = hn::Set(d, a.score_divisor), scale = hn::Set(d, a.score_scale), cap = hn::Set(d, a.softcap);
  for (size_t j = 0; j < npad; j += kL) {
    VF v = RoundAct(d, hn::LoadU(d, s + j), a.act);
    v = a.score_scale > 0.0f ? RoundAct(d, hn::Mul(v, scale), a.act) : RoundAct(d, hn::Div(v, div), a.act);
    if (a.softcap > 0.0f) {
      const VF t = RoundAct(d, Tanh(RoundAct(d, hn::Div(v, cap), a.act)), a.act);
      v = RoundAct(d, hn::Mul(t, cap), a.act);
    }
    hn::StoreU(v, d, s + j);
  }
  std::fill(s + n, s + npad, kNegInf);  // padding keys never win the max and exp() makes them 0
}

void AttnRowImpl(const AttnRow& a) {
  const DF d;
  const size_t hd = size_t(a.head_dim);
  const size_t T = size_t(kAttnTile);
  const size_t nv = hd / kLanes, tail = hd % kLanes;
  float* kt = a.scratch;
  float* vt = kt + T * hd;
  float* s = vt + T * hd;
  float* m = s + round_up(T, kLanes);
  float* l = m + a.n_q;
  float* qt = l + a.n_q;  // the current head's zero-padded last 16 q values
  start_softmax_state(a.sinks, a.n_q, m, l);
  std::fill(a.out, a.out + size_t(a.n_q) * hd, 0.0f);

  for (int c = a.first / kAttnTile; c <= a.last / kAttnTile; ++c) {
    const int js = std::max(a.first, c * kAttnTile);
    const int je = std::min(a.last + 1, (c + 1) * kAttnTile);
    const size_t n = size_t(je - js);
    const size_t npad = round_up(n, kLanes);
    WidenKv(a.k, a.kv, size_t(js) * hd, n * hd, kt);
    WidenKv(a.v, a.kv, size_t(js) * hd, n * hd, vt);
    for (int g = 0; g < a.n_q; ++g) {
      const float* q = a.q + size_t(g) * hd;
      if (tail > 0) FillXTails(q, 1, hd, nv, tail, qt);
      size_t j = 0;
      for (; j + 4 <= n; j += 4) {
        const float* ks[4] = {kt + j * hd, kt + (j + 1) * hd, kt + (j + 2) * hd, kt + (j + 3) * hd};
        DirectTile<1, 4>(&q, &qt, ks, nv, tail, s + j, 0);
      }
      for (; j < n; ++j) {
        const float* kr = kt + j * hd;
        DirectTile<1, 1>(&q, &qt, &kr, nv, tail, s + j, 0);
      }
      TransformScores(a, s, n, npad);
      VF vmax = hn::Set(d, kNegInf);
      for (size_t jj = 0; jj < npad; jj += kL) vmax = hn::Max(vmax, hn::LoadU(d, s + jj));
      const float tile_max = hn::GetLane(hn::MaxOfLanes(d, vmax));  // exact: no order to fix
      const float m_old = m[g];
      const float m_new = std::max(m_old, tile_max);
      const float scale = (m_old == kNegInf) ? 0.0f : hn::GetLane(Exp(hn::Set(d, m_old - m_new)));
      const VF vm = hn::Set(d, m_new);
      VF sum[kSub];
      for (size_t p = 0; p < kSub; ++p) sum[p] = hn::Zero(d);
      for (size_t jj = 0; jj < npad; jj += kLanes)
        for (size_t p = 0; p < kSub; ++p) {
          const VF e = Exp(hn::Sub(hn::LoadU(d, s + jj + p * kL), vm));
          sum[p] = hn::Add(sum[p], e);
          // As FlashAttention: the sum keeps fp32 probabilities, P.V uses them rounded to act.
          hn::StoreU(RoundAct(d, e, a.act), d, s + jj + p * kL);
        }
      const float l_scaled = l[g] * scale;
      l[g] = l_scaled + Reduce(sum);
      m[g] = m_new;

      ScaleAccumulatePV(a.out + size_t(g) * hd, s, vt, n, hd, scale,
                        [](VF x, VF y, VF z) { return Fma(x, y, z); });
    }
  }
  for (int g = 0; g < a.n_q; ++g) {
    float* o = a.out + size_t(g) * hd;
    for (size_t dd = 0; dd < hd; ++dd) o[dd] /= l[g];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kvp::psimd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvp::psimd {

HWY_EXPORT(AttnRowScratchFloats);
HWY_EXPORT(AttnRowImpl);

size_t attn_row_scratch_floats(int head_dim, int n_q) {
  return HWY_DYNAMIC_DISPATCH(AttnRowScratchFloats)(head_dim, n_q);
}
void attn_row(const AttnRow& a) { HWY_DYNAMIC_DISPATCH(AttnRowImpl)(a); }

}  // namespace kvp::psimd
#endif  // HWY_ONCE
