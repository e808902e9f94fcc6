// The MLP blocks of the forward pass (forward_pass.h): the dense gated MLP, which a sparse layer's
// experts reuse, and the sparse layer itself with its routing.
#include <algorithm>
#include <cmath>

#include "kernels/portable_math.h"
#include "model/forward_pass.h"
#include "model/moe_routing.h"

namespace kvp::detail {

void Pass::gated_mlp(const float* x, int rows, const ExpertWeights& w, float* gu, float* y, const char* const names[4],
                     int layer, const int* row_pos, bool x_read_after) {
  const TensorView &w_gate = w.gate, &w_up = w.up, &w_down = w.down;
  const bool biased = w.gate_bias.valid();
  const int h = int(w_gate.rows()), dim = c_.dim;
  const size_t n = size_t(rows) * h;
  float* g = gu;
  float* u = gu + n;
  const MatmulOut outs[] = {{&w_gate, g}, {&w_up, u}};
  if (!x_read_after) kn_.last_read(x, size_t(rows) * dim);
  kn_.rounded_output(g, n);
  kn_.rounded_output(u, n);
  kn_.matmul_group(x, rows, outs, 2, P_);
  materialise(g, rows, h, names[0], layer, row_pos);
  materialise(u, rows, h, names[1], layer, row_pos);
  if (biased) {
    kn_.add_bias(g, rows, w.gate_bias);
    materialise(g, rows, h, "expert_gate_bias", layer, row_pos);
    kn_.add_bias(u, rows, w.up_bias);
    materialise(u, rows, h, "expert_up_bias", layer, row_pos);
  }
  kn_.last_read(u, n);
  if (c_.moe.swiglu_limit > 0.0f)  // GPT-OSS, whose every MLP is an expert
    kn_.clamped_swiglu(g, u, n, c_.moe.swiglu_alpha, c_.moe.swiglu_limit, P_);
  else if (gemma_)
    kn_.gelu_tanh_mul(g, u, n, P_);
  else
    kn_.silu_mul(g, u, n, P_);
  materialise(g, rows, h, names[2], layer, row_pos);
  kn_.last_read(g, n);
  kn_.rounded_output(y, size_t(rows) * dim);
  kn_.matmul(g, rows, w_down, P_, y);
  materialise(y, rows, dim, names[3], layer, row_pos);
  if (biased) {
    kn_.add_bias(y, rows, w.down_bias);
    materialise(y, rows, dim, "expert_out_bias", layer, row_pos);
  }
}

void Pass::sparse_mlp(const LayerWeights& L, int l) {
  static const char* const expert_points[4] = {"expert_gate", "expert_up", "expert_act", "expert_out"};
  static const char* const shared_points[4] = {"shared_gate_proj", "shared_up_proj", "shared_act", "shared_out"};
  const MoeConfig& moe = c_.moe;
  const int dim = c_.dim, E = moe.n_experts;
  const size_t M = size_t(M_);
  a_.router.ensure(dev_, M * E);
  linear(a_.xb.data(), L.router, a_.router.data(), "router_logits", l, &L.router_bias);
  hook(HookPoint::RouterLogits, l, a_.router.data(), E);
  const float* logits = on_host(a_.router.data(), M * E, router_host_);
  routable(logits, E, l);
  const ExpertRouting route = route_experts(logits, M_, moe, P_);
  const size_t k = size_t(moe.n_used);
  for (size_t s = 0; s < slices_.size(); ++s) {
    const size_t last = size_t(row0_[s] + slices_[s].n_tokens - 1);
    std::copy_n(route.expert.begin() + std::ptrdiff_t(last * k), k,
                a_.last_row_experts.begin() + std::ptrdiff_t((s * size_t(c_.n_layers) + size_t(l)) * k));
  }
  a_.moe_x.ensure(dev_, M * dim);
  a_.moe_y.ensure(dev_, M * dim);
  a_.moe_gate_up.ensure(dev_, 2 * M * size_t(std::max(moe.expert_hidden_dim, moe.shared_hidden_dim)));
  float* const out = a_.proj.data();
  std::vector<char> written(M, 0);
  // Mixtral's index_add_ rounds each partial sum to P; GPT-OSS sums its weighted experts with
  // .sum(dim=0), in fp32, rounded once at mlp_out.
  const DType sum_in = c_.arch == Arch::GptOss ? DType::F32 : P_;
  for (int e = 0; e < E; ++e) {
    const std::vector<int>& rows = route.rows_of[size_t(e)];
    if (rows.empty()) continue;
    const int n = int(rows.size());
    std::vector<int>& pos = row_positions_.emplace_back();
    for (int i = 0; i < n; ++i) {
      kn_.copy(a_.moe_x.data() + size_t(i) * dim, a_.xb.data() + size_t(rows[size_t(i)]) * dim, size_t(dim));
      pos.push_back(pos_of_row_[size_t(rows[size_t(i)])]);
    }
    gated_mlp(a_.moe_x.data(), n, L.experts[size_t(e)], a_.moe_gate_up.data(), a_.moe_y.data(), expert_points, l,
              pos.data(), false);
    for (int i = 0; i < n; ++i) {
      float* y = a_.moe_y.data() + size_t(i) * dim;
      float* o = out + size_t(rows[size_t(i)]) * dim;
      kn_.scale(y, size_t(dim), route.weight_of[size_t(e)][size_t(i)], P_, ScaleBy::Act);
      if (written[size_t(rows[size_t(i)])]++ == 0)
        kn_.copy(o, y, size_t(dim));  // P(0 + y) = y
      else
        kn_.add(o, y, size_t(dim), sum_in);
    }
  }
  if (moe.shared_hidden_dim > 0) {
    gated_mlp(a_.xb.data(), M_, L.shared, a_.moe_gate_up.data(), a_.moe_y.data(), shared_points, l, nullptr,
              true);  // x is the shared gate's input next
    float* gate = a_.router.data();  // the routing is done with the router's logits
    linear(a_.xb.data(), L.shared_gate, gate, "shared_expert_gate", l);
    const float* g = on_host(gate, M, router_host_);
    for (int m = 0; m < M_; ++m) {
      const float s = round_to(P_, 1.0f / (1.0f + pmath::expf_rounded(-g[m])));
      kn_.scale(a_.moe_y.data() + size_t(m) * dim, size_t(dim), s, P_, ScaleBy::Act);
    }
    kn_.add(out, a_.moe_y.data(), M * dim, P_);
  }
  materialise(out, M_, dim, "mlp_out", l);
}

void Pass::routable(const float* logits, int E, int layer) {
  if (dev_ != Device::Cpu)
    for (const NonFiniteHit& h : kn_.pending_nonfinite()) nonfinite(h.slot, h.index, h.value);
  for (size_t i = 0; i < size_t(M_) * E; ++i)
    if (!std::isfinite(logits[i]))
      throw Error(ErrorKind::Numeric,
                  NonFiniteEvent{"router_logits", layer, pos_of_row_[i / size_t(E)], int(i % size_t(E)), logits[i]}
                          .describe() +
                      ": the experts cannot be chosen");
}

}  // namespace kvp::detail
