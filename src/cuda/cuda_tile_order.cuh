#pragma once
// Which output tile a block of a tiled GEMM computes. Blocks start roughly in index order, and a
// multiprocessor's worth of them run at once; taken row of tiles by row of tiles, the ~132 blocks
// of a wave cover one or two tile rows of x and every tile of W, so at a large M each wave reads
// all of W from HBM again (Llama-2-7B's gate/up: 180 MB, more than L2 holds). Taken in groups of
// kTileGroup tile rows that sweep the tile columns together, the blocks running at once share a
// few W tiles and a few x tiles through L2. Only which block computes which tile changes: every
// output's instruction sequence, and so its bits, stay as they are.
#include "cuda/cuda_device_api.cuh"

namespace kvp::cuda {

constexpr int kTileGroup = 8;

struct TileIndex {
  int m, n;  // tile row (along M) and tile column (along N)
};

// Block b of a grid of m_tiles x n_tiles blocks: groups of `group` tile rows (the last group
// what is left), each swept column by column, its tile rows side by side.
__host__ __device__ __forceinline__ constexpr TileIndex tile_of_block(int b, int m_tiles, int n_tiles,
                                                                      int group = kTileGroup) {
  const int per_group = group * n_tiles;
  const int first = b / per_group * group;
  const int rows = m_tiles - first < group ? m_tiles - first : group;
  const int r = b % per_group;
  return {first + r % rows, r / rows};
}

}  // namespace kvp::cuda
