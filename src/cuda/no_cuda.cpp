// The CUDA backend's entry points in a build without CUDA: every one but built() refuses.
#include "core/error.h"
#include "cuda/cuda_runtime_api.h"
#include "kernels/kernels.h"

namespace kvp::cuda {
namespace {
[[noreturn]] void refuse() {
  fail("--device cuda: this kvparity was built without CUDA (configure with -DKVPARITY_CUDA=ON on a machine "
       "with nvcc); use --device cpu");
}
}  // namespace

bool built() { return false; }
void open() { refuse(); }
std::string why_unusable() { return "this kvparity was built without CUDA"; }
std::string describe() { refuse(); }
std::vector<std::pair<std::string, std::string>> numerics_identity(KernelPolicy) { refuse(); }
void* alloc(size_t) { refuse(); }
void release(void*) noexcept {}
void to_host(void*, const void*, size_t) { refuse(); }
void to_device(void*, const void*, size_t) { refuse(); }
UploadTotals upload_totals() { return {}; }
void set_staged_upload(bool) {}
bool staged_upload_on() { return false; }
size_t peak_allocated() { return 0; }
void reset_peak_allocated() {}
double read_bandwidth(size_t, int) { refuse(); }
void set_op_timing(bool) {}
void op_timing_phase(const std::string&) {}
void profile_phase(const std::string&) {}
void set_decode_whole_rows(bool) {}
bool decode_whole_rows() { return true; }
std::vector<OpTime> op_times() { return {}; }
void reset_op_times() {}
void set_pass_graphs(bool) {}
void set_launch_fusion(bool) {}
bool launch_fusion_on() { return false; }
void set_group_launches(bool) {}
bool group_launches_on() { return false; }
void set_skip_dead_writes(bool) {}
bool skip_dead_writes_on() { return false; }
void set_gemm_out16(bool) {}
bool gemm_out16_on() { return false; }
size_t gemm_out16_queued() { return 0; }
void set_upload_ring_bytes(size_t) {}
size_t upload_ring_bytes() { return 0; }
void set_decode_split_keys(int) {}
int decode_split_keys() { return 32; }
int gemm_tile_group() { return 8; }
size_t pass_graph_replays() { return 0; }
GraphNodes busiest_pass_graph_nodes() { return {}; }
void reset_busiest_pass_graph() {}
void set_programmatic_launch(bool) {}
void set_standard_gemv(bool) {}
bool standard_gemv_on() { return false; }
bool programmatic_launch_on() { return false; }
bool programmatic_launch_available() { return false; }
void set_invariant_gemm_kernel(const std::string&) { refuse(); }
std::string invariant_gemm_kernel() { return "auto"; }
std::string invariant_gemm_kernel_here() { return "auto"; }
std::vector<std::string> invariant_gemm_kernels() { return {}; }
bool wgmma_kernels_available() { return false; }
std::unique_ptr<Kernels> make_kernels(KernelPolicy, const void*) { refuse(); }

}  // namespace kvp::cuda
