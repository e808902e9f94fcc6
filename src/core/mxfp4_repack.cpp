#include "core/mxfp4_repack.h"

#include <string>

#include "core/error.h"

namespace kvp {

void repack_hf_mxfp4(const uint8_t* blocks, const uint8_t* scales, size_t rows, size_t k, uint8_t* out_ggml,
                     std::string_view tensor) {
  if (k % 32 != 0)
    fail("{}: rows of {} values are not a whole number of 32-value MXFP4 blocks",
         tensor.empty() ? std::string("MXFP4 repack") : "MXFP4 repack of tensor '" + std::string(tensor) + "'", k);
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

}  // namespace kvp
