#pragma once
// Attention test cases shared by the CPU and CUDA suites' fixed-order kernel tests.
#include <cmath>

#include "core/dtype.h"
#include "core/kv_type.h"
#include "kernels/kernels.h"

namespace kvp::test {

struct AttnCase {
  const char* name;
  DType act, kv;
  int hd, heads, kv_heads, start_pos, rows, window;
  bool gemma;  // Gemma-2's score scale and soft cap instead of the divisor
};

// The case's parameters (no buffers), over a static cache `unwritten` slots longer than needed.
inline AttentionParams attn_params(const AttnCase& c, int unwritten) {
  AttentionParams p;
  p.n_rows = c.rows;
  p.start_pos = c.start_pos;
  p.n_heads = c.heads;
  p.n_kv_heads = c.kv_heads;
  p.head_dim = c.hd;
  p.capacity = c.start_pos + c.rows + unwritten;
  p.kv = KvType::of(c.kv);
  p.act = c.act;
  p.sliding_window = c.window;
  if (c.gemma) {
    p.score_scale = 1.0f / std::sqrt(float(c.hd));
    p.softcap = 50.0f;
  } else {
    p.score_divisor = std::sqrt(float(c.hd));
  }
  return p;
}

}  // namespace kvp::test
