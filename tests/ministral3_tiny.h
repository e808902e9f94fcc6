#pragma once
// The tiny Ministral 3 the tests share: the tiny Mistral without its window, YaRN x4 over 8
// positions (attention factor 1: mscale = mscale_all_dim) and the query temperature at C = 8
// (beta 0 leaves it out), so a 40-token prompt crosses both.
#include "model/config.h"
#include "model/synthetic.h"

namespace kvp::test {

inline ModelConfig tiny_ministral3(float beta) {
  ModelConfig c = synthetic_config("mistral", "tiny");
  c.sliding_window = 0;
  c.rope_theta = 1000000.0f;
  c.rope_scaling = ModelConfig::RopeScaling::Yarn;
  c.rope_factor = 4.0f;
  c.rope_original_max_pos = 8;
  c.rope_attention_factor = 1.0;
  c.query_temperature_beta = beta;
  c.query_temperature_context = beta > 0 ? 8 : 0;
  return c;
}

}  // namespace kvp::test
