#pragma once
// The host-side face of the CUDA backend: plain C++ (no CUDA headers), so that the rest of the
// program compiles the same with or without CUDA. With KVPARITY_CUDA off these are defined by
// no_cuda.cpp (built() is false; the rest throw "built without CUDA").
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kvp {
class Kernels;
class ThreadPool;
enum class KernelPolicy;
}  // namespace kvp

namespace kvp::cuda {

bool built();
// Opens the GPU once per process (device 0 or $CUDA_VISIBLE_DEVICES' first); throws an Error
// naming the CUDA error when there is none usable.
void open();
// Why open() would throw, without the option's name ("" when a GPU is usable): for callers that
// name the option their own way (Python's device=).
std::string why_unusable();
std::string describe();
void* alloc(size_t bytes);
void release(void* p) noexcept;
void to_host(void* dst, const void* src, size_t bytes);
void to_device(void* dst, const void* src, size_t bytes);
// What to_device has copied in this process and the wall time it took (the weights' upload, which
// bench reports); and its copies of 4 MiB or more through two pinned buffers filled by host threads
// (cuda_upload.cu; on by default, $KVPARITY_CUDA_STAGED_UPLOAD=0 off: the same bytes as the
// driver's own staging of pageable memory, 2.6-12x faster on an H100 host).
struct UploadTotals {
  size_t bytes = 0;
  double seconds = 0;
};
UploadTotals upload_totals();
void set_staged_upload(bool on);
// Whether copies are staged: switched on and the host pinned the buffers (once asked).
bool staged_upload_on();
// Peak device memory allocated through alloc() since the last reset, in bytes.
size_t peak_allocated();
void reset_peak_allocated();
// HBM read bandwidth in bytes/s, streaming `bytes` once per repeat (best of `repeats`).
double read_bandwidth(size_t bytes, int repeats);

// GPU time per kernel operation (`bench --op-times`): while on, every operation is timed with
// events and passes are not replayed as graphs. Spans are summed per (phase, operation).
struct OpTime {
  std::string phase, op;
  double ms = 0;
  long count = 0;
};
void set_op_timing(bool on);
void op_timing_phase(const std::string& phase);
// The GPU work from here on belongs to `phase` (spaces become '-'), as an NVTX range a profiler
// can filter on; "-" ends it (cuda_profile_ranges.cu). Free without a profiler attached.
void profile_phase(const std::string& phase);
std::vector<OpTime> op_times();  // by phase, then by time, longest first
void reset_op_times();

// Replay of repeated passes as CUDA graphs (cuda_pass_graphs.cuh), on by default; read when
// kernels are made. pass_graph_replays(): passes replayed so far in this process.
void set_pass_graphs(bool on);
size_t pass_graph_replays();
// The nodes of the pass graph replayed most since the last reset_busiest_pass_graph() (or in this
// process): what a replay costs is mostly its kernel nodes. Zero before any replay. A benchmark
// resets it before each configuration's decode steps, so that a row names its own step's graph.
struct GraphNodes {
  size_t kernels = 0, total = 0;
  std::string kernel_names;  // "name xN, ..." (cuda/kernel_names.h), the most frequent first
};
GraphNodes busiest_pass_graph_nodes();
void reset_busiest_pass_graph();
// Rounding points and cuBLAS input conversions folded into neighbouring kernels (cuda_fusion.cuh),
// on by default; $KVPARITY_CUDA_FUSION=0 starts with it off (the same bits, one launch per
// operation: for measuring what the folding saves). Read when kernels are made.
void set_launch_fusion(bool on);
bool launch_fusion_on();
// A layer's q/k/v projections, and its gate/up ones, as one GEMM launch each over their weights
// side by side (Kernels::matmul_group; the weights are uploaded that way on first use): on by
// default; $KVPARITY_CUDA_GROUP=0 starts with it off. Under `invariant` the same bits either way;
// under `standard` cuBLAS picks its algorithm for the wider shape. Read at every group.
void set_group_launches(bool on);
bool group_launches_on();
// Rounded inputs not written back, and fp32 outputs not stored where their 16-bit copy is all
// that is read, where nothing reads them again (Kernels::last_read, InRound::write_back,
// OutCopy::only): on by default; $KVPARITY_CUDA_SKIP_DEAD_WRITES=0 starts with every one stored,
// as before 2026-11-27 evening (the same bits; for timing both). Read at every call.
void set_skip_dead_writes(bool on);
bool skip_dead_writes_on();
// `standard`'s cuBLAS GEMMs of a 16-bit pass writing their outputs in that dtype where the pass
// rounds them next (Kernels::rounded_output), as PyTorch's run, instead of fp32 rounded by a
// kernel after: half the bytes of every projection written and read (~2.2 GB a layer of the
// GSM8K study's 7B cache-OFF step). Other bits than the fp32 outputs' (cuBLAS picks its
// algorithm by output type too). Off by default until timed on a GPU; $KVPARITY_CUDA_GEMM_OUT16=1.
// Read at every matmul (a graph replays the choice it was captured with).
void set_gemm_out16(bool on);
bool gemm_out16_on();
// GEMMs given 16-bit outputs so far in this process (every pass's, replayed as a graph or not):
// what says that a run took them.
size_t gemm_out16_queued();
// The room of the pinned ring that a pass's small uploads go through (cuda_upload_ring.cuh), for
// kernels made from now on: 0, the default 4 MiB. A full ring waits for the GPU and starts over
// mid-pass, which only large batches of deep models meet; tests make it small to meet it often.
void set_upload_ring_bytes(size_t bytes);
size_t upload_ring_bytes();
// The fewest keys a split of `standard`'s decode attention holds (cuda_attention_plan.h): 32, or
// $KVPARITY_CUDA_SPLIT_KEYS (16 to 4096). Standard's decode bits follow it, as a GPU stack's
// follow its split heuristic. Read at every attention call.
void set_decode_split_keys(int keys);
int decode_split_keys();
// Whether `standard`'s decode attention loads a lane's whole K row and its share of a chunk's V
// rows at once where K/V are 16-bit and head_dim is 32, 64 or 128 (on by default), or eight loads a
// round as elsewhere ($KVPARITY_CUDA_DECODE_WHOLE=0): the same bits, for timing the two. Read at
// every launch (a graph replays the path it was captured with, which gives the same bits).
void set_decode_whole_rows(bool on);
bool decode_whole_rows();

// Programmatic dependent launch (sm_90 and later): each kernel may be scheduled while the one
// before it in the stream finishes, and waits for it at its first statement (pdl_entry), so the
// gaps between the short kernels of a decode step shrink; the bits are the same. Off unless
// $KVPARITY_CUDA_PDL=1 (not yet measured on a GPU). Read at every launch and when a pass begins
// (a pass replayed as a graph keeps the setting it was captured with). Available only where the
// kernels' sm_90 code runs on an sm_90 GPU; elsewhere, and while operations are timed, kernels
// launch the ordinary way.
void set_programmatic_launch(bool on);
bool programmatic_launch_on();
// `standard`'s decode GEMMs (up to 4 rows) on kvparity's own GEMV kernel instead of cuBLAS
// (cuda_gemv_kernel.cuh: a warp a row of W, many 16-byte loads in flight); off by default, or
// $KVPARITY_CUDA_GEMV=1. Other bits than cuBLAS's, as cuBLAS's own change with M.
void set_standard_gemv(bool on);
bool standard_gemv_on();
bool programmatic_launch_available();

// The `invariant` policy's tensor-core GEMM kernel: "auto" (on an H100 or H200 the wgmma family's
// "wgmma-tma+mma16b", elsewhere "mma"), "mma" (the mma.sync family, chosen by M) or one of that
// family forced for every M ("ring", "registers", "pipelined", "tiles64x128", "tiles128x128",
// "tiles128x256", "tiles128x128k64"); each gives the mma.sync family's bits, so this changes speed
// only (kvparity_bench's cuda_matmul rows measure them). The wgmma family ("wgmma", chosen by M, or "wgmma64x32",
// "wgmma64x128", "wgmma128x128", "wgmma128x256" forced; "wgmma-tma", "wgmma-tma64x32", ... fed by
// TMA) gives bits of its own, the same for every M and tile of it: choose it for a whole run, never
// between the passes compared. "wgmma-mma16", "wgmma-mma16b" and "wgmma-mma16x" (mma.sync fed the
// wgmma family's groups of 16 k; "wgmma-tma+mma16(b|x)": those up to 16 rows, wgmma-tma above;
// "-deep" after mma16b: 16 chunks of W in flight a stretch at decode-sized M instead of 8)
// belong to that family where the hardware sums both instructions alike, as an H100 does (the CUDA
// suite checks it). The first read takes $KVPARITY_CUDA_GEMM; an unknown name is refused (exit 2)
// naming where it came from.
void set_invariant_gemm_kernel(const std::string& name);
// How many tile rows of x the tiled GEMMs' blocks take W's tile columns together in
// (cuda_tile_order.cuh): 8, or $KVPARITY_CUDA_TILE_GROUP (1 to 64; 1: one tile row after another,
// as before 2026-11-26). Which block computes which tile: the same bits either way.
int gemm_tile_group();
std::string invariant_gemm_kernel();
// The kernel the chosen one stands for here ("auto" resolved on this GPU; others as they are).
std::string invariant_gemm_kernel_here();
std::vector<std::string> invariant_gemm_kernels();
// Whether the wgmma family ("wgmma", "wgmma64x32", ...: bits of its own, the same for every M)
// can run here: sm_90a code on a compute capability 9.0 GPU. Forcing it elsewhere is refused at
// the first matmul.
bool wgmma_kernels_available();

// What besides a side's SPEC decides the bits of `policy`'s passes on this GPU, as (key, value)
// pairs for a results folder's settings (lab/numerics_identity.h), so that a run resumed on
// another card or under another switch is refused instead of mixing two numerics in one study.
// standard: the card ("NVIDIA H100 80GB HBM3, sm_90, 132 SMs": cuBLAS's choice of algorithm and the
// decode split follow the card), cuBLAS's version, and the switches above that change its bits
// (the GEMV, the split's fewest keys, group launches, 16-bit GEMM outputs); invariant: the
// architecture (the instructions' sums; not the SM count, which no split follows) and the GEMM
// kernel family. Nothing for portable. A switch that changes bits belongs here. Opens the GPU.
std::vector<std::pair<std::string, std::string>> numerics_identity(KernelPolicy policy);

// The kernels of `policy` on the GPU (kernels.h). Throws for a policy not available on CUDA.
// Kernels made for one owner share the device copies of its weights (kvp::make_kernels).
std::unique_ptr<Kernels> make_kernels(KernelPolicy policy, const void* owner = nullptr);

}  // namespace kvp::cuda
