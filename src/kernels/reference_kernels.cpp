// The `reference` policy: scalar code, every reduction summed strictly in index order, with the
// rounding points of Hugging Face's eager PyTorch implementation. It is the oracle the faster
// policies are tested against, so clarity beats speed here.
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "kernels/dequant_rows.h"
#include "kernels/cpu_kernels.h"
#include "kernels/policies.h"

namespace kvp {
namespace {

inline float load(DType t, const void* base, size_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(base)[i];
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
  }
  return 0.0f;
}

class ReferenceKernels final : public CpuKernels {
 public:
  KernelPolicy policy() const override { return KernelPolicy::Reference; }

  void matmul(const float* x, int M, const TensorView& W, DType /*act*/, float* y) override {
    const int64_t N = W.rows(), K = W.cols();
    std::vector<float> wrow(W.quantized() ? size_t(K) : 0);
    for (int64_t n = 0; n < N; ++n) {
      const void* base = W.data;
      size_t row = size_t(n * K);
      if (W.quantized()) {
        dequantize_rows(W, n, 1, 0, K, 0, wrow.data(), size_t(K));
        base = wrow.data();
        row = 0;
      }
      const DType wt = W.quantized() ? DType::F32 : W.dtype;
      for (int m = 0; m < M; ++m) {
        const float* xm = x + int64_t(m) * K;
        float acc = 0.0f;
        for (int64_t k = 0; k < K; ++k) acc += xm[k] * load(wt, base, row + size_t(k));
        y[int64_t(m) * N + n] = acc;
      }
    }
  }

  void attention(const AttentionParams& p) override {
    const int group = p.n_heads / p.n_kv_heads;
    const int q_stride = p.n_heads * p.head_dim;
    std::vector<float> scores(size_t(p.start_pos + p.n_rows)), keys, vals;
    for (int i = 0; i < p.n_rows; ++i) {
      const int pos = p.start_pos + i;
      const int first = p.sliding_window > 0 ? std::max(0, pos - p.sliding_window + 1) : 0;
      for (int h = 0; h < p.n_heads; ++h) {
        const int kvh = h / group;
        const float* q = p.q + size_t(i) * q_stride + size_t(h) * p.head_dim;
        // Keys and values [first, pos] of this head as fp32 (decoded from the cache's format).
        const size_t hd = size_t(p.head_dim), rows_at = (size_t(kvh) * p.capacity + size_t(first)) * hd;
        const size_t span = size_t(pos - first + 1) * hd;
        keys.resize(span);
        vals.resize(span);
        kv_decode(p.kv, p.k_cache, rows_at, span, keys.data());
        kv_decode(p.kv, p.v_cache, rows_at, span, vals.data());
        float max_score = -std::numeric_limits<float>::infinity();
        for (int j = first; j <= pos; ++j) {
          const float* kr = keys.data() + size_t(j - first) * hd;
          float dot = 0.0f;
          for (int d = 0; d < p.head_dim; ++d) dot += q[d] * kr[d];
          const float s = attention_score(dot, p.score_divisor, p.score_scale, p.softcap, p.act);
          scores[j] = s;
          max_score = std::max(max_score, s);
        }
        // With a sink, GPT-OSS's eager order: the sink is one more logit, and every logit has the
        // row's max subtracted in the compute dtype before the softmax (which computes in fp32).
        const bool sunk = p.sinks != nullptr;
        if (sunk) max_score = std::max(max_score, p.sinks[h]);
        auto shifted = [&](float s) { return sunk ? round_to(p.act, s - max_score) : s - max_score; };
        float sum = 0.0f;
        for (int j = first; j <= pos; ++j) {
          scores[j] = std::exp(shifted(scores[j]));
          sum += scores[j];
        }
        if (sunk) sum += std::exp(shifted(p.sinks[h]));
        for (int j = first; j <= pos; ++j) scores[j] = round_to(p.act, scores[j] / sum);
        float* out = p.out + size_t(i) * q_stride + size_t(h) * p.head_dim;
        for (int d = 0; d < p.head_dim; ++d) {
          float acc = 0.0f;
          for (int j = first; j <= pos; ++j)
            acc += scores[j] * vals[size_t(j - first) * hd + size_t(d)];
          out[d] = acc;
        }
      }
    }
  }

  void rmsnorm(const float* x, int M, int dim, const float* w, float eps, DType act, float* y) override {
    for (int m = 0; m < M; ++m) {
      const float* xm = x + size_t(m) * dim;
      float* ym = y + size_t(m) * dim;
      float ss = 0.0f;
      for (int i = 0; i < dim; ++i) ss += xm[i] * xm[i];
      const float inv = 1.0f / std::sqrt(ss / float(dim) + eps);
      for (int i = 0; i < dim; ++i) ym[i] = round_to(act, w[i] * round_to(act, xm[i] * inv));
    }
  }

  void rmsnorm_fp32_gain(const float* x, int M, int dim, const float* g, float eps, DType act, float* y) override {
    for (int m = 0; m < M; ++m) {
      const float* xm = x + size_t(m) * dim;
      float* ym = y + size_t(m) * dim;
      float ss = 0.0f;
      for (int i = 0; i < dim; ++i) ss += xm[i] * xm[i];
      const float inv = 1.0f / std::sqrt(ss / float(dim) + eps);
      for (int i = 0; i < dim; ++i) ym[i] = round_to(act, (xm[i] * inv) * g[i]);
    }
  }
};

}  // namespace

std::unique_ptr<Kernels> make_reference_kernels() { return std::make_unique<ReferenceKernels>(); }

}  // namespace kvp
