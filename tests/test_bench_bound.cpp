// The bandwidth bound `bench` compares decode with counts the KV cache a step reads beside the
// weights: every layer reads K and V of each position up to its own, a windowed layer its window's.
#include <gtest/gtest.h>

#include "lab/bench.h"
#include "model/synthetic.h"

namespace kvp {
namespace {

TEST(BenchBound, KvBytesOfADecodeStepAreEveryLayersCachedPositions) {
  const ModelConfig l7 = synthetic_config("llama", "llama2-7b");  // 32 layers, 32 KV heads of 128
  // One step at position 512 reads 513 positions: K and V, 32 heads x 128 fp16 each, in 32 layers.
  EXPECT_DOUBLE_EQ(kv_bytes_per_decode_step(l7, KvType(DType::F16), 512, 1), 513.0 * 2 * 32 * 128 * 2 * 32);
  // Steps at 512..515 read 513..516 positions: the mean, 514.5.
  EXPECT_DOUBLE_EQ(kv_bytes_per_decode_step(l7, KvType(DType::F16), 512, 4), 514.5 * 2 * 32 * 128 * 2 * 32);
  // A q8_0 cache: 34 bytes a block of 32.
  EXPECT_DOUBLE_EQ(kv_bytes_per_decode_step(l7, KvType(KvFormat::Q8_0), 0, 1), 1.0 * 2 * 32 * (128 / 32 * 34) * 32);
  EXPECT_EQ(kv_bytes_per_decode_step(l7, KvType(DType::F16), 512, 0), 0.0);

  // Gemma-2: a 4096 window on every other layer; at position 9999 those layers read 4096 positions.
  const ModelConfig g2 = synthetic_config("gemma2", "gemma2-2b");
  ASSERT_GT(g2.sliding_window, 0);
  double positions = 0;
  for (int l = 0; l < g2.n_layers; ++l) positions += g2.window_for_layer(l) > 0 ? g2.sliding_window : 10000;
  EXPECT_DOUBLE_EQ(kv_bytes_per_decode_step(g2, KvType(DType::BF16), 9999, 1),
                   positions * 2 * g2.n_kv_heads * g2.head_dim * 2);
  EXPECT_LT(kv_bytes_per_decode_step(g2, KvType(DType::BF16), 9999, 1),
            10000.0 * 2 * g2.n_kv_heads * g2.head_dim * 2 * g2.n_layers);
}

}  // namespace
}  // namespace kvp
