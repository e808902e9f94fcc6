// A matmul_group on the invariant tensor-core GEMM (src/cuda/cuda_gemm_out.cuh): one launch over
// the members' weights side by side, each member's columns stored into its own matrix. Run on the
// CPU from the kernels' own source (simt_host.h), every kernel of both families: each member's
// outputs are the bits it gets alone, and nothing outside the members' matrices is written — over
// member boundaries inside a tile, odd widths (no paired stores) and one row (a decode step).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "test_util.h"
// The kernels' source, built for the host (after every other header: simt_host.h defines the CUDA
// keywords as macros).
#include "cuda/cuda_invariant_gemm_kernel.cuh"
#include "cuda/cuda_wgmma_gemm_kernel.cuh"
#include "cuda/cuda_wgmma_tma_gemm_kernel.cuh"
#include "cuda_on_cpu.h"

namespace kvp {
namespace {

using test::HostLaunch;

// gemm(x, M, W, K, N, out) for two or three members of widths n (rows of W side by side), against
// each member alone. The members' matrices lie in one buffer with gap floats before each (and one
// gap after), NaN, which must stay NaN; an odd gap leaves the next member 8-byte misaligned, so
// the kernels store one float at a time.
template <class Gemm>
void expect_members_alone(std::mt19937& rng, const std::string& name, DType t, int M, int K, const std::vector<int>& n,
                          const Gemm& gemm, size_t gap1 = 6) {
  const std::string what = name + " " + std::string(dtype_name(t)) + " M " + std::to_string(M) + " widths " +
                           std::to_string(n[0]) + "," + std::to_string(n[1]) +
                           (n.size() > 2 ? "," + std::to_string(n[2]) : std::string()) + " gap " + std::to_string(gap1);
  int N = 0;
  for (int w : n) N += w;
  const auto xf = test::normals(size_t(M) * K, rng, t);
  const auto wf = test::normals(size_t(N) * K, rng, t);
  std::vector<uint16_t> x(xf.size()), W(wf.size());
  from_f32(t, xf.data(), x.data(), xf.size());
  from_f32(t, wf.data(), W.data(), wf.size());
  std::vector<size_t> gaps(n.size() + 1, 6);
  gaps[1] = gap1;
  std::vector<float> out(size_t(M) * N + 6 * gaps.size() + gap1, NAN);
  std::vector<float*> at;
  size_t off = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    off += gaps[i];
    at.push_back(out.data() + off);
    off += size_t(M) * n[i];
  }
  cuda::GemmOut y(at[0]);
  y.end0 = n[0];
  y.y1 = at[1];
  if (n.size() > 2) y.end1 = n[0] + n[1], y.y2 = at[2];
  gemm(x.data(), M, W.data(), K, N, y);
  int row0 = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    std::vector<float> alone(size_t(M) * n[i], NAN);
    gemm(x.data(), M, W.data() + size_t(row0) * K, K, n[i], cuda::GemmOut(alone.data()));
    const std::vector<float> got(at[i], at[i] + alone.size());
    EXPECT_SAME_BITS(got, alone, what + ": member " + std::to_string(i));
    row0 += n[i];
  }
  size_t written_outside = 0;
  off = 0;
  for (size_t i = 0; i <= n.size(); ++i) {
    for (size_t j = 0; j < gaps[i]; ++j) written_outside += !std::isnan(out[off + j]);
    if (i < n.size()) off += gaps[i] + size_t(M) * n[i];
  }
  EXPECT_EQ(written_outside, 0u) << what << ": a store outside the members";
}

// q/k/v-like widths: boundaries inside a 32-, 128- and 256-column tile; odd ones (element stores);
// gate/up-like, two members.
const std::vector<int> kEven{72, 40, 24};
const std::vector<int> kOdd{37, 19, 45};
const std::vector<int> kTwo{88, 56};

TEST(CudaGemmGroupOnCpu, MmaSyncKernelsStoreEachMemberAsAlone) {
  std::mt19937 rng(38);
  using cuda::invariant::GemmKernel;
  constexpr auto& kernels = test::kMmaSyncGemmKernels;
  // Widths: even (paired stores), odd (rows without 16-byte loads too, K = 77), two members, and
  // even widths with the second member misaligned.
  struct Case {
    const std::vector<int>* n;
    int K;
    size_t gap1;
  };
  const Case cases[] = {{&kEven, 96, 6}, {&kOdd, 77, 6}, {&kTwo, 96, 6}, {&kEven, 96, 5}};
  for (auto [pick, name] : kernels)
    for (int M : {1, 17})
      for (const Case& c : cases) {
        const DType t = M == 1 ? DType::F16 : DType::BF16;
        expect_members_alone(
            rng, name, t, M, c.K, *c.n,
            [&, pick = pick](const uint16_t* x, int M_, const uint16_t* W, int K_, int N, cuda::GemmOut y) {
              cuda::invariant::gemm(HostLaunch{}, x, M_, W, cuda::store_of(t), K_, N, y, pick);
            },
            c.gap1);
      }
}

TEST(CudaGemmGroupOnCpu, WgmmaKernelsStoreEachMemberAsAlone) {
  std::mt19937 rng(39);
  using cuda::WgmmaTile;
  constexpr std::pair<WgmmaTile, const char*> tiles[] = {
      {WgmmaTile::T64x32, "64x32"},
      {WgmmaTile::T64x128, "64x128"},
      {WgmmaTile::T128x128, "128x128"},
      {WgmmaTile::T128x256, "128x256"},
  };
  struct Case {
    const std::vector<int>* n;
    size_t gap1;
  };
  const Case cases[] = {{&kEven, 6}, {&kOdd, 6}, {&kTwo, 6}, {&kEven, 5}};
  for (auto [tile, name] : tiles)
    for (const Case& c : cases)
      for (int M : {1, 70}) {
        const DType t = M == 1 ? DType::BF16 : DType::F16;
        expect_members_alone(
            rng, name, t, M, 128, *c.n,
            [&, tile = tile](const uint16_t* x, int M_, const uint16_t* W, int K, int N, cuda::GemmOut y) {
              if (t == DType::F16)
                cuda::wgmma::gemm_as<cuda::kF16>(HostLaunch{}, x, M_, W, K, N, y, tile);
              else
                cuda::wgmma::gemm_as<cuda::kBF16>(HostLaunch{}, x, M_, W, K, N, y, tile);
            },
            c.gap1);
      }
  auto make_map = [](const void* base, int rows, int K, int box_rows) {
    return simt::TensorMap2d{static_cast<const uint16_t*>(base), rows, K, box_rows, 64};
  };
  for (auto [tile, name] : {std::pair{cuda::WgmmaTile::Tma64x32, "tma 64x32"},
                             std::pair{cuda::WgmmaTile::Tma64x64, "tma 64x64"},
                             std::pair{cuda::WgmmaTile::Tma128x128, "tma 128x128"},
                             std::pair{cuda::WgmmaTile::Tma128x256, "tma 128x256"}})
    for (const auto* n : {&kEven, &kOdd})
      expect_members_alone(rng, name, DType::F16, 3, 128, *n,
                           [&, tile = tile](const uint16_t* x, int M, const uint16_t* W, int K, int N, cuda::GemmOut y) {
                             cuda::wgmma::tma_gemm_as<cuda::kF16>(HostLaunch{}, make_map, x, M, W, K, N, y, tile);
                           });
}

}  // namespace
}  // namespace kvp
