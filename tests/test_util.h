#pragma once
// Shared helpers for tests: where ../shared lives, temp dirs, random inputs, SIMD targets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/aligned_allocator.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/quant.h"
#include "core/quantize.h"
#include "core/tensor.h"
#include "io/checkpoint.h"
#include "kernels/simd_target.h"

// Expects float vectors `got` and `want` bitwise equal, naming `what` and the first difference.
#define EXPECT_SAME_BITS(got, want, what)                                                                   \
  do {                                                                                                       \
    const long at_ = ::kvp::test::first_difference(got, want);                                              \
    EXPECT_EQ(at_, -1) << (what) << ": first difference at " << at_ << ": "                                  \
                       << (at_ >= 0 ? (got)[size_t(at_)] : 0.0f) << " vs " << (at_ >= 0 ? (want)[size_t(at_)] : 0.0f); \
  } while (0)

namespace kvp::test {

// Path of the shared data directory (models, references), from $KVPARITY_SHARED.
// Returns "" and records a test failure naming what is missing, so a missing tree never passes silently.
inline std::string shared_dir() {
  const char* env = std::getenv("KVPARITY_SHARED");
  if (env == nullptr || !std::filesystem::is_directory(env)) {
    ADD_FAILURE() << "shared test data not found: set KVPARITY_SHARED to the shared/ directory (models/, reference/)"
                  << " — got " << (env ? env : "<unset>");
    return "";
  }
  return env;
}

// Full path of a file under shared/, failing the test (with the path) if it does not exist.
inline std::string shared_file(const std::string& rel) {
  std::string root = shared_dir();
  if (root.empty()) return "";
  std::string p = root + "/" + rel;
  if (!std::filesystem::exists(p)) {
    ADD_FAILURE() << "missing shared test file: " << p;
    return "";
  }
  return p;
}

// A family's transformers outputs: ../shared/reference/<family> for the four families the shared
// data holds, tests/data/reference/<family> for the others (Qwen3, Gemma-3, OLMo-2, OLMoE, Mixtral, Qwen2-MoE,
// Qwen3-MoE), which the project produced with transformers' own code (tests/data/reference/README.md).
// "" and a test failure when missing.
inline std::string reference_dir(const std::string& family) {
  if (family == "llama" || family == "mistral" || family == "gemma2" || family == "qwen2")
    return shared_file("reference/" + family);
  const std::string d = std::string(KVPARITY_SOURCE_DIR) + "/tests/data/reference/" + family;
  if (!std::filesystem::is_directory(d)) {
    ADD_FAILURE() << "missing reference outputs: " << d;
    return "";
  }
  return d;
}

#define KVP_REQUIRE_REFERENCE(var, family)               \
  std::string var = ::kvp::test::reference_dir(family); \
  if (var.empty()) return

#define KVP_REQUIRE_SHARED(var, rel)          \
  std::string var = ::kvp::test::shared_file(rel); \
  if (var.empty()) return

// A fresh temporary directory removed at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kvparity-test-XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    path_ = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The message of what f throws ("" when it throws nothing): for checking an error names what it should.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// Every file under `dir` with its bytes: what a refused run must leave unchanged.
inline std::map<std::string, std::string> folder_snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    out[e.path().string()] = std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return out;
}

// The first index where a and b differ bitwise, or -1 (0 when their sizes differ).
inline long first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0) return long(i);
  return -1;
}

// The rows of w ([N, K] floats) quantised to q, row after row (ggml blocks).
// The largest |a[i] - b[i]| (same sizes).
inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  return worst;
}

inline std::vector<uint8_t> quantized_rows(QuantType q, const std::vector<float>& w, int64_t N, int64_t K) {
  std::vector<uint8_t> out(size_t(N) * quant_row_bytes(q, size_t(K)));
  for (int64_t n = 0; n < N; ++n)
    quantize_row(q, w.data() + size_t(n * K), size_t(K), out.data() + size_t(n) * quant_row_bytes(q, size_t(K)));
  return out;
}

// A host view named "w" of an [N, K] matrix stored in `t` at `bytes`.
inline TensorView weight_view(const std::vector<uint8_t>& bytes, DType t, int64_t N, int64_t K) {
  TensorView v;
  v.name = "w";
  v.dtype = t;
  v.shape = {N, K};
  v.data = bytes.data();
  return v;
}

// n normal values (mean 0, standard deviation `scale`), each representable in `act`.
inline std::vector<float> normals(size_t n, std::mt19937& rng, DType act = DType::F32, float scale = 1.0f) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> x(n);
  for (auto& v : x) v = round_to(act, nd(rng));
  return x;
}

// The --simd targets this build and CPU can run, best first (the scalar fallback always).
inline std::vector<SimdTarget> simd_targets_here() {
  std::vector<SimdTarget> out;
  for (SimdTarget t : {SimdTarget::Avx512, SimdTarget::Avx2, SimdTarget::Scalar}) {
    try {
      require_simd(t);
      out.push_back(t);
    } catch (const Error&) {
    }
  }
  return out;
}

// The checkpoint with every fp16/bf16 tensor replaced by an fp32 copy of the same values: what the
// loader held for an fp32 run before it kept such files' bytes (model/weights.cpp).
inline Checkpoint widened_to_f32(const Checkpoint& narrow) {
  Checkpoint wide = narrow;
  for (auto& [name, t] : wide.tensors) {
    if (t.quantized() || t.dtype == DType::F32) continue;
    auto buf = std::make_shared<AlignedBuffer>(size_t(t.numel()) * sizeof(float));
    view_to_f32(t, 0, size_t(t.numel()), buf->as<float>());
    t.dtype = DType::F32;
    t.data = buf->data();
    wide.keepalive.push_back(buf);
  }
  return wide;
}

}  // namespace kvp::test
