// The wgmma family of the invariant GEMM (src/cuda/cuda_wgmma_gemm_kernel.cuh and the TMA-fed
// cuda_wgmma_tma_gemm_kernel.cuh), its own source run on the CPU: simt_host.h emulates each wgmma.mma_async from the shared-memory layout the PTX ISA
// defines for a K-major operand in the 128-byte swizzle (descriptor fields, address-bit XOR, the
// accumulators' thread layout), and runs it at its wait_group under one of the schedules, so that a
// stage refilled before the wgmma that read it are done shows as wrong bits. The emulated
// instruction sums its 16 products in k order with fp32 fma, so the family's promise reads, on
// the host: every output is C = 0, then one fma per k in increasing order, K zero-padded to whole
// 64-k stages — for every tile and every M, bit for bit. A wrong swizzle, descriptor, stage offset
// or accumulator mapping fails that (it multiplies other elements). What the host cannot check is
// the hardware itself: the CUDA suite runs the kernel on an H100 (CudaInvariant.Wgmma*).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "checking_build.h"
#include "core/dtype.h"
#include "test_util.h"
// The kernels' source, built for the host (after every other header: simt_host.h defines the CUDA
// keywords as macros).
#include "cuda/cuda_invariant_gemm_kernel.cuh"
#include "cuda/cuda_tile_order.cuh"
#include "cuda/cuda_wgmma_gemm_kernel.cuh"
#include "cuda/cuda_wgmma_tma_gemm_kernel.cuh"
#include "cuda_on_cpu.h"

namespace kvp {
namespace {

using test::HostLaunch;

// Where the emulated instruction's slot s takes its k from, within a group of 16.
using SlotK = std::array<int, 16>;
constexpr SlotK kSlotIsK = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// The family's order by definition: per output, fma over k = 0, 1, ... up to K rounded up to 64,
// zeros past K (within each group of 16, in slot order: slot s holds k slot_k[s]).
std::vector<float> k16_order(const std::vector<uint8_t>& x, const std::vector<uint8_t>& w, DType t, int M, int K, int N,
                             const SlotK& slot_k = kSlotIsK) {
  const int padded = (K + 63) / 64 * 64;
  std::vector<float> xf(size_t(M) * K), wf(size_t(N) * K), y(size_t(M) * N);
  to_f32(t, x.data(), xf.data(), xf.size());
  to_f32(t, w.data(), wf.data(), wf.size());
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int s = 0; s < padded; ++s) {
        const int k = s / 16 * 16 + slot_k[size_t(s % 16)];
        acc = std::fma(k < K ? xf[size_t(m) * K + k] : 0.0f, k < K ? wf[size_t(n) * K + k] : 0.0f, acc);
      }
      y[size_t(m) * N + n] = acc;
    }
  return y;
}

// Runs kernel(t, x rows from m0, rows, W, K, N, y) for every case — a partial last stage (K = 200:
// three whole 64-k stages and 8 k) and, at K = 1000, 16 stages, past every ring of stages twice; N
// past a whole 32-, 128- and 256-column block, M past a 64- and a 128-row one; the whole call, a
// single row (decode) and a slice that starts mid-tile — against the family's order. M = 1100: more
// 128-row tiles than one group of tile_of_block takes.
template <class Kernel>
void expect_k16_order(std::mt19937& rng, const std::string& name, const Kernel& kernel,
                      const SlotK& slot_k = kSlotIsK) {
  const DType types[] = {DType::F16, DType::BF16};
  const std::tuple<int, int, int> shapes[] = {{130, 200, 270}, {67, 1000, 40}, {1100, 64, 40}};
  for (size_t ti = 0; ti < 2; ++ti)
    for (size_t si = 0; si < 3; ++si) {
      if (!test::runs_grid_point(ti, si, 2)) continue;  // sanitizer build: each shape in one dtype
      const DType t = types[ti];
      const auto [M, K, N] = shapes[si];
      const auto xf = test::normals(size_t(M) * K, rng, t);
      const auto wf = test::normals(size_t(N) * K, rng, t);
      std::vector<uint8_t> xb(xf.size() * 2), wb(wf.size() * 2);
      from_f32(t, xf.data(), xb.data(), xf.size());
      from_f32(t, wf.data(), wb.data(), wf.size());
      const auto want = k16_order(xb, wb, t, M, K, N, slot_k);
      const auto* x16 = reinterpret_cast<const uint16_t*>(xb.data());
      const auto* w16 = reinterpret_cast<const uint16_t*>(wb.data());
      for (auto [m0, rows] : {std::pair{0, M}, std::pair{M - 1, 1}, std::pair{3, M - 3}}) {
        std::vector<float> y(size_t(rows) * N, NAN);
        kernel(cuda::store_of(t), x16 + size_t(m0) * K, rows, w16, K, N, y.data());
        const std::vector<float> part(want.begin() + long(m0) * N, want.begin() + long(m0 + rows) * N);
        EXPECT_SAME_BITS(y, part,
                         std::string(dtype_name(t)) + " M " + std::to_string(M) + " K " + std::to_string(K) + " N " +
                             std::to_string(N) + " rows " + std::to_string(m0) + "+" + std::to_string(rows) + " (" +
                             name + ")");
      }
    }
}

TEST(CudaWgmmaOnCpu, EveryTileAndMIsTheK16OrderBitForBit) {
  std::mt19937 rng(36);
  using cuda::WgmmaTile;
  constexpr std::pair<WgmmaTile, const char*> tiles[] = {
      {WgmmaTile::Auto, "auto"},         {WgmmaTile::T64x32, "64x32"},     {WgmmaTile::T64x128, "64x128"},
      {WgmmaTile::T128x128, "128x128"}, {WgmmaTile::T128x256, "128x256"},
  };
  for (auto [tile, name] : tiles)
    expect_k16_order(rng, name, [tile = tile](int store, const uint16_t* x, int M, const uint16_t* W, int K, int N,
                                              float* y) {
      if (store == cuda::kF16)
        cuda::wgmma::gemm_as<cuda::kF16>(HostLaunch{}, x, M, W, K, N, y, tile);
      else
        cuda::wgmma::gemm_as<cuda::kBF16>(HostLaunch{}, x, M, W, K, N, y, tile);
    });
}

// The TMA-fed kernel (one producer thread, one or two consumer warpgroups, "full" and "empty" mbarriers;
// simt_host.h's TMA writes the box in the 128-byte swizzle at once and completes the barrier's
// transaction): the same bits. Under the eager-copy schedule a consumer's wgmma runs only at the
// wait that retires it, so a stage handed back to the producer too early is refilled under it.
TEST(CudaWgmmaOnCpu, TmaKernelIsTheK16OrderBitForBit) {
  std::mt19937 rng(37);
  auto make_map = [](const void* base, int rows, int K, int box_rows) {
    return simt::TensorMap2d{static_cast<const uint16_t*>(base), rows, K, box_rows, 64};
  };
  using cuda::WgmmaTile;
  // The persistent kernel on 2 blocks: each walks several tiles through one ring of stages (at M =
  // 1100, 9 tile rows: past a group of tile_of_block too).
  constexpr int kBlocks = 2;
  constexpr std::pair<WgmmaTile, const char*> tiles[] = {
      {WgmmaTile::Tma64x32, "tma 64x32"},
      {WgmmaTile::Tma64x64, "tma 64x64"},
      {WgmmaTile::Tma128x128, "tma 128x128"},
      {WgmmaTile::Tma128x256, "tma 128x256"},
      {WgmmaTile::TmaAuto, "tma auto"},
      {WgmmaTile::TmaPersistent128x128, "tma persistent 128x128"},
      {WgmmaTile::TmaPersistent128x256, "tma persistent 128x256"},
      {WgmmaTile::TmaPersistentAuto, "tma persistent auto"},
  };
  for (auto [tile, name] : tiles)
    expect_k16_order(rng, name, [&, tile = tile](int store, const uint16_t* x, int M, const uint16_t* W, int K, int N,
                                                 float* y) {
      if (store == cuda::kF16)
        cuda::wgmma::tma_gemm_as<cuda::kF16>(HostLaunch{}, make_map, x, M, W, K, N, y, tile, cuda::kTileGroup, kBlocks);
      else
        cuda::wgmma::tma_gemm_as<cuda::kBF16>(HostLaunch{}, make_map, x, M, W, K, N, y, tile, cuda::kTileGroup,
                                              kBlocks);
    });
}

// The mma.sync register kernel fed the wgmma family's groups of 16 k (cuda_invariant_gemm_kernel.cuh,
// KMap), on the register prefetch's three warp shapes (1, 64 and 127 rows and more): Slots16 puts k
// 16g + s in slot s, as the wgmma does, so on the host, where both instructions sum their slots in
// order, it is the family's bits exactly; Blocks16 feeds each lane 4 consecutive k (slot 2t + e: k
// 4t + e, slot 2t + 8 + e: k 4t + 2 + e), the same 16 products of each group in another slot order;
// Exchange16 loads as the mma.sync family does (lane t: k 8t .. 8t + 7) and trades halves between
// lanes t and t ^ 2 (a shuffle), a third order. An H100 sums Slots16's and Blocks16's groups to the
// wgmma's bits (the CUDA suite, 2026-11-26: CudaInvariant.Wgmma*, every M, fp16 and bf16).
TEST(CudaWgmmaOnCpu, MmaSyncInTheWgmmaFamilysGroupsIsItsOrder) {
  std::mt19937 rng(38);
  using cuda::invariant::KMap;
  constexpr SlotK kBlocks16 = {0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15};
  constexpr SlotK kExchange16 = {0, 1, 8, 9, 4, 5, 12, 13, 2, 3, 10, 11, 6, 7, 14, 15};
  for (auto [map, name, slot_k, deep] :
       {std::tuple{KMap::Slots16, "mma16", kSlotIsK, false}, std::tuple{KMap::Blocks16, "mma16b", kBlocks16, false},
        std::tuple{KMap::Blocks16, "mma16b-deep", kBlocks16, true},
        std::tuple{KMap::Exchange16, "mma16x", kExchange16, false}})
    expect_k16_order(
        rng, name,
        [map = map, deep = deep](int store, const uint16_t* x, int M, const uint16_t* W, int K, int N, float* y) {
          cuda::invariant::gemm_in_wgmma_order(HostLaunch{}, x, M, W, store, K, N, y, map, deep);
        },
        slot_k);
  // The dispatch: the register kernel for every M, or up to kMmaRows beside the TMA kernel.
  using cuda::invariant::GemmKernel;
  using cuda::invariant::wgmma_order_map;
  EXPECT_EQ(wgmma_order_map(GemmKernel::WgmmaMma16, 4096), KMap::Slots16);
  EXPECT_EQ(wgmma_order_map(GemmKernel::WgmmaMma16b, 1), KMap::Blocks16);
  EXPECT_EQ(wgmma_order_map(GemmKernel::WgmmaTmaMma16, cuda::invariant::kMmaRows), KMap::Slots16);
  EXPECT_EQ(wgmma_order_map(GemmKernel::WgmmaTmaMma16b, cuda::invariant::kMmaRows + 1), KMap::Pairs);
  EXPECT_EQ(wgmma_order_map(GemmKernel::WgmmaMma16x, 4096), KMap::Exchange16);
  EXPECT_EQ(wgmma_order_map(GemmKernel::WgmmaTmaMma16x, 1), KMap::Exchange16);
  EXPECT_EQ(wgmma_order_map(GemmKernel::WgmmaTmaMma16x, cuda::invariant::kMmaRows + 1), KMap::Pairs);
  EXPECT_EQ(wgmma_order_map(GemmKernel::WgmmaTma, 1), KMap::Pairs);
  EXPECT_EQ(wgmma_order_map(GemmKernel::WgmmaTmaMma16bDeep, 1), KMap::Blocks16);
  EXPECT_EQ(wgmma_order_map(GemmKernel::WgmmaTmaMma16bDeep, cuda::invariant::kMmaRows + 1), KMap::Pairs);
  EXPECT_TRUE(cuda::invariant::deep_prefetch(GemmKernel::WgmmaTmaMma16bDeep));
  EXPECT_FALSE(cuda::invariant::deep_prefetch(GemmKernel::WgmmaTmaMma16b));
  // Auto's per-shape choice: single rows with K >= N; a kernel named is streamed as named.
  using cuda::invariant::deep_prefetch_for;
  const GemmKernel a = GemmKernel::Auto, t = GemmKernel::WgmmaTmaMma16b, d = GemmKernel::WgmmaTmaMma16bDeep;
  EXPECT_TRUE(deep_prefetch_for(a, t, 1, 11008, 4096));
  EXPECT_TRUE(deep_prefetch_for(a, t, 1, 4096, 4096));
  EXPECT_FALSE(deep_prefetch_for(a, t, 1, 4096, 11008));
  EXPECT_FALSE(deep_prefetch_for(a, t, 2, 11008, 4096));
  EXPECT_FALSE(deep_prefetch_for(t, t, 1, 11008, 4096));
  EXPECT_TRUE(deep_prefetch_for(d, d, 16, 4096, 11008));
  EXPECT_FALSE(deep_prefetch_for(a, GemmKernel::Mma, 1, 11008, 4096));
}

// tile_of_block (cuda_tile_order.cuh), the order the tiled GEMMs' blocks take their tiles in:
// every tile of the grid exactly once, whatever the grid's shape against the group, and blocks in
// index order walk a group's tile rows, then its next tile column.
TEST(CudaWgmmaOnCpu, BlocksTakeEveryTileOnceInGroupsOfTileRows) {
  for (int m_tiles : {1, 2, 7, 8, 9, 17, 100})
    for (int n_tiles : {1, 3, 86})
      for (int group : {1, 4, cuda::kTileGroup}) {
        std::vector<int> seen(size_t(m_tiles) * size_t(n_tiles), 0);
        for (int b = 0; b < m_tiles * n_tiles; ++b) {
          const cuda::TileIndex t = cuda::tile_of_block(b, m_tiles, n_tiles, group);
          ASSERT_TRUE(t.m >= 0 && t.m < m_tiles && t.n >= 0 && t.n < n_tiles)
              << "block " << b << " of " << m_tiles << " x " << n_tiles << ": tile " << t.m << ", " << t.n;
          ++seen[size_t(t.m) * size_t(n_tiles) + size_t(t.n)];
          EXPECT_EQ(t.m / group, b / (group * n_tiles)) << "block " << b << ": outside its group";
        }
        for (size_t i = 0; i < seen.size(); ++i)
          EXPECT_EQ(seen[i], 1) << m_tiles << " x " << n_tiles << " tiles, groups of " << group << ": tile " << i;
      }
  // 3 x 2 tiles in groups of 2 rows: the first group column by column, then the last row alone.
  const std::pair<int, int> want[] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}, {2, 0}, {2, 1}};
  for (int b = 0; b < 6; ++b) {
    const cuda::TileIndex t = cuda::tile_of_block(b, 3, 2, 2);
    EXPECT_EQ(std::pair(t.m, t.n), want[b]) << "block " << b;
  }
}

}  // namespace
}  // namespace kvp
