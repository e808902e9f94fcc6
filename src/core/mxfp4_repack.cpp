#include "core/mxfp4_repack.h"

#include <string>

#include "core/error.h"

namespace kvp {

namespace {

void require_whole_blocks(size_t k, std::string_view tensor) {
  if (k % 32 != 0)
    fail("{}: rows of {} values are not a whole number of 32-value MXFP4 blocks",
         tensor.empty() ? std::string("MXFP4 repack") : "MXFP4 repack of tensor '" + std::string(tensor) + "'", k);
}

}  // namespace

void repack_hf_mxfp4(const uint8_t* blocks, const uint8_t* scales, size_t rows, size_t k, uint8_t* out_ggml,
                     std::string_view tensor) {
  require_whole_blocks(k, tensor);
  const size_t groups = rows * (k / 32);
  for (size_t g = 0; g < groups; ++g) {
    const uint8_t* src = blocks + 16 * g;
    uint8_t* dst = out_ggml + 17 * g;
    dst[0] = scales[g];
    // HF code of weight i: nibble i % 2 of byte i / 2. ggml's byte j: weight j low, j + 16 high.
    const auto code = [src](size_t i) { return uint8_t((src[i / 2] >> (4 * (i % 2))) & 0x0F); };
    for (size_t j = 0; j < 16; ++j) dst[1 + j] = uint8_t(code(j) | (code(j + 16) << 4));
  }
}

void repack_ggml_mxfp4_to_hf(const uint8_t* ggml, size_t rows, size_t k, uint8_t* blocks, uint8_t* scales,
                             std::string_view tensor) {
  require_whole_blocks(k, tensor);
  const size_t groups = rows * (k / 32);
  for (size_t g = 0; g < groups; ++g) {
    const uint8_t* src = ggml + 17 * g;
    if (scales != nullptr) scales[g] = src[0];
    if (blocks == nullptr) continue;
    // ggml's code of weight i: the low nibble of byte i for i < 16, the high one of byte i - 16.
    const auto code = [src](size_t i) { return uint8_t(i < 16 ? src[1 + i] & 0x0F : src[1 + i - 16] >> 4); };
    uint8_t* dst = blocks + 16 * g;
    for (size_t b = 0; b < 16; ++b) dst[b] = uint8_t(code(2 * b) | (code(2 * b + 1) << 4));
  }
}

}  // namespace kvp
