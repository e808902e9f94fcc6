#pragma once
// Launchers of the backend's kernels (queued on cuda::stream(), never waiting). Pointers are
// device pointers; `act` and storage types are StoreT codes (cuda_common.cuh). Each mirrors the
// CPU operation named in its comment, rounding at the same points.
#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"

namespace kvp::cuda {

struct GemmOut;  // cuda_gemm_out.cuh (not included here: outside nvcc it brings simt_host.h's macros)

// Where a rounding point reports its first NaN/Inf (launch_round_check). An operation that rounds
// its own output can take one and be that rounding point too (hits == nullptr: no check).
struct NonFiniteSlot {
  unsigned long long* hits = nullptr;
  int slot = 0;
  int* any = nullptr;
};

// A rounding point not yet launched (cuda_fusion.cuh), folded into the kernel that reads its
// buffer next: that kernel rounds each value of the buffer as it reads it, writes it back and
// reports it into chk, exactly as launch_round_checks would have (act < 0: the input is read as is).
// write_back = false: not written back, where nothing reads the buffer before it is written again
// (Kernels::last_read) or the kernel stores its own output over it.
// src: the buffer's values are not in it but in a 16-bit GEMM output of type act (cuBLAS rounded
// them there, RNE, as the rounding point would have: Kernels::rounded_output), the value of flat
// index `at` at src[at]; read widened (exact), written back as fp32 where write_back says.
struct InRound {
  int act = -1;
  NonFiniteSlot chk{};
  bool write_back = true;
  const void* src = nullptr;
};
// The 16-bit copy of a kernel's rounded output (a cuBLAS input), written by that kernel from the
// value it stores (dst == nullptr: none). The same conversion as launch_to_storage's.
// only: the copy is all that is read of the output (Kernels::last_read), so the kernel leaves the
// fp32 store out.
struct OutCopy {
  void* dst = nullptr;
  int store = 0;
  bool only = false;
};
// The residual add x = round(x + y) (y read through y_in), reported into chk, that the RMSNorm of
// x takes over: each row added before it is normalised (y == nullptr: none).
struct AddIn {
  float* y = nullptr;
  int act = 0;
  NonFiniteSlot chk{};
  InRound y_in{};
};
// One buffer of launch_round_checks. src: x's values are in that 16-bit GEMM output (InRound::src),
// widened into x (and checked where chk says).
struct RoundJob {
  float* x;
  size_t n;
  int act;
  NonFiniteSlot chk;
  OutCopy copy;
  const void* src = nullptr;
};

// x[m] = table row tokens[m] as fp32 (CpuKernels::embed).
void launch_embed(const void* table, int table_t, const int* tokens, int M, int dim, float* x);
// y[m, n] += b[n].
void launch_add_bias(float* y, int M, int N, const float* b);
// The kernels below are cuda_elementwise_kernels.cuh's (their arguments are explained there).
// apply_rope to each job's rows x[M, n_heads*hd], row m at position pos[m]; cos/sin tables
// [positions][hd/2].
// store = false: the rotated values are not stored back into x, which nothing reads again
// (Kernels::last_read); they are checked and go only to the cache (RopeKv: K, the last job) or to
// copy (q's 16-bit rows for the attention, AttnDesc::q16).
struct RopeJob {
  float* x;
  int n_heads;
  NonFiniteSlot chk;
  InRound in;
  bool store = true;
  OutCopy copy{};
};
// The cache writes a rotation launch can do too (one graph node fewer a layer): the rotated rows
// of the last job (K) into the caches of descs[0, n) as they are stored, and, if with_v, the rows
// of descs[n, 2n) (V: slice s's rows written as slice s's K rows) read through v_in (their pending
// rounding point, of the buffer at v_base). Slice s holds the K rows at descs[s].rows, the slices
// in increasing order of rows; n == 0: none.
struct KvWriteDesc;
struct RopeKv {
  const KvWriteDesc* descs = nullptr;
  int n = 0, store = 0;
  bool with_v = false;
  InRound v_in{};
  const float* v_base = nullptr;
};
void launch_rope(const RopeJob* jobs, int n, int M, int hd, int rd, const int* pos, const float* cos_t,
                 const float* sin_t, int act, bool adjacent_pairs, bool once, const RopeKv& kv = {});
// The element-wise part of a gated MLP: SiLU or GELU-tanh (gate = round(round(act(gate)) * up)),
// or GPT-OSS's clamped SwiGLU with its alpha and limit (clamped_swiglu in elementwise.h, its
// rounding points). Trivially copyable, without padding: part of the launch signatures.
struct GatedAct {
  enum Kind : int { kSilu, kGeluTanh, kClampedSwiglu };
  int kind = kSilu;
  float alpha = 0.0f, limit = 0.0f;
};
// gate = the activation of (gate, up), each read through its pending rounding point.
void launch_gated(float* gate, float* up, size_t n, int act, GatedAct how, NonFiniteSlot chk, InRound gate_in,
                  InRound up_in, OutCopy copy);
void launch_softcap(float* x, size_t n, float cap, int act);
// x = round(x * s), s already rounded to act.
void launch_scale(float* x, size_t n, float s, int act);
void launch_add(float* x, float* y, size_t n, int act, NonFiniteSlot chk, InRound y_in);
// dst = x in storage type `store` (values already representable there: an exact conversion).
void launch_to_storage(const float* x, size_t n, void* dst, int store);
// Rounds each job's x to its act; the first NaN/Inf (smallest index) is recorded in hits[slot] as
// (index << 2 | kind), kind 0 NaN, 1 +Inf, 2 -Inf, and *any set to 1.
void launch_round_checks(const RoundJob* jobs, int n);
// RMSNorm of M rows (kernels.h): fp32 gain with one rounding when fp32_gain, else HF Llama's two.
void launch_rmsnorm(const float* x, int M, int dim, const float* w, float eps, int act, bool fp32_gain, float* y,
                    NonFiniteSlot chk, OutCopy copy, AddIn add);

// One slice of a cache write, as uploaded for launch_kv_write.
struct KvWriteDesc {
  void* cache;
  const float* rows;
  int n_rows, start_pos, capacity;
};
// Slices [in_first, n) read their rows through `in` (rows of the buffer that starts at in_base).
void launch_kv_write(const KvWriteDesc* descs, int n, int max_rows, int n_kv_heads, int head_dim, int store,
                     InRound in, const float* in_base, int in_first);

// One slice of an attention call, as uploaded for the attention launchers.
struct AttnDesc {
  const float* q;
  float* out;
  const void* k;
  const void* v;
  int n_rows, start_pos, capacity;
  int n_splits, split_len;  // decode only: keys [first + c*split_len, ...) per split c
  int part0;                // decode only: first partial-state slot of this slice
  // q's rows in the K/V storage type (laid out as q's; the rotation's copy of them, RopeJob::copy),
  // which the tensor-core prefill kernel reads instead of q, whose fp32 rows are then not stored:
  // the same values, as it packs q's to that type itself. Others read q.
  const void* q16 = nullptr;
};
struct AttnShape {
  int n_heads, n_kv_heads, head_dim;
  float score_divisor, score_scale, softcap;
  int sliding_window, act, kv_store;
  int zero = 0;  // no padding before the pointer: the launch signatures hash the shape's bytes
  // The layer's attention sinks (AttentionParams::sinks) in device memory, [n_heads] values of
  // act, or null: where each kernel's softmax state starts (cuda_attention_sinks.cuh). Uploaded
  // once a layer, so that a replayed graph reads what its capture read.
  const float* sinks = nullptr;
};
static_assert(sizeof(AttnShape) == 10 * 4 + sizeof(const float*), "launch signatures hash AttnShape's bytes");
// How a decode launch stores its output rows: as computed, or as the attention output's rounding
// point leaves them (cuda_fusion.cuh's held operation): rounded to act (act < 0: not), reported
// into chk and copied (OutCopy) at each value's flat index from base, the first row of that point.
struct AttnStore {
  int act = -1;
  NonFiniteSlot chk{};
  OutCopy copy{};
  const float* base = nullptr;
};
// Tiled online-softmax attention of every row of every slice (FlashAttention-2 style). store: the
// output's rounding point, report and copy, as the decode launches take it (below).
void launch_attention_prefill(const AttnDesc* descs, int n, int max_rows, const AttnShape& s,
                              const AttnStore& store = {});
// The same on tensor cores where it applies (fp16/bf16 compute and KV, head_dim 32/64/96/128);
// false (nothing launched) elsewhere. launch_attention_prefill tries it first. chunked: the
// `invariant` policy's per-chunk states merged in order (cuda_attention_mma_kernel.cuh), the bits
// launch_attention_split_decode_mma gives a decode row (cuda_attention_split_kernel.cuh).
bool launch_attention_prefill_mma(const AttnDesc* descs, int n, int max_rows, const AttnShape& s, bool chunked = false,
                                  const AttnStore& store = {});
// $KVPARITY_CUDA_ATTN_STAGES (1 or 2: K/V stages of every tensor-core attention launch; 0 unset).
int forced_attention_stages();
// The decode launches below are one kernel each: every block (standard: every warp) writes its
// partial state to `parts`, and the last of a (slice i, head h) to arrive, counted at
// counts[i x n_heads + h], merges them in their fixed order and sets the count back to 0. So
// counts holds n x n_heads zeros before a launch and after it.
// `invariant` decode steps (one row per slice, desc i's part0 = i x n_heads): each chunk of keys
// in a block of its own, then merged in order; parts holds n x n_heads x slots x (head_dim + 2)
// floats, slots = attention_split_slots(the largest start_pos). False where the kernel does not apply.
// $KVPARITY_CUDA_SPLIT_WARPS: 1 or 4 (the default) warps a decode block, the same bits.
bool attention_mma_applies(const AttnShape& s);
int attention_mma_max_rows();  // rows of one slice the tensor-core prefill launch holds
int attention_split_slots(int max_pos);
bool launch_attention_split_decode_mma(const AttnDesc* descs, int n, const AttnShape& s, float* parts, int slots,
                                       unsigned* counts, const AttnStore& store);
// Split-KV decode (one row per slice): partial states into `parts`, then merged in split order.
void launch_attention_decode(const AttnDesc* descs, int n, int max_splits, const AttnShape& s, float* parts,
                             unsigned* counts, const AttnStore& store);

// --- The `portable` policy (cuda_portable.cu, cuda_portable_attention.cu): the CPU portable
// kernels' bits (portable_simd.h), whatever M, batch or launch shape. ---
// y[M, N] = x[M, K] . W[N, K]^T, W in storage type `store`, every output in the 16-lane order.
void launch_portable_matmul(const float* x, int M, const void* W, int store, int K, int N, float* y);
// Every row of every slice, prefill and decode alike (attention row of portable_attention.cpp).
void launch_portable_attention(const AttnDesc* descs, int n, int max_rows, const AttnShape& s);
void launch_portable_rmsnorm(const float* x, int M, int dim, const float* w, float eps, int act, bool fp32_gain,
                             float* y, NonFiniteSlot chk = {});
void launch_portable_gated(float* gate, const float* up, size_t n, int act, GatedAct how, NonFiniteSlot chk = {});
void launch_portable_softcap(float* x, size_t n, float cap, int act);

// --- The `invariant` policy (cuda_invariant_gemm.cu): the portable policy's reductions, but matmuls
// of fp16/bf16 passes with weights of that dtype on tensor cores, in one order that depends on K
// alone. xh: x converted to `store` (exact).
void launch_invariant_gemm(const void* xh, int M, const void* W, int store, int K, int N, const GemmOut& y);
// Whether `standard`'s decode GEMM (cuda_gemv_kernel.cuh) takes a call: switched on
// (set_standard_gemv) and a few rows of 16-bit operands that load as 16-byte pieces (else cuBLAS).
bool standard_gemv_takes(const void* x, int M, const void* W, int store, int K);
// It, into the plain y[M, N].
void launch_standard_gemv(const void* x, int M, const void* W, int store, int K, int N, float* y);
// The kernel choice launch_invariant_gemm follows now (set_invariant_gemm_kernel), for launch
// signatures: a pass replayed as a graph must not keep the kernel of another choice.
int invariant_gemm_choice();

// The wgmma family of that GEMM (cuda_wgmma_gemm.cu): its own bits, the same for every M and tile;
// sm_90a code on a compute capability 9.0 GPU only (wgmma_kernels_available). Applies where rows
// load as 16-byte pieces. Tma*: the producer/consumer kernel fed by TMA (cuda_wgmma_tma_gemm.cu),
// the same bits; TmaAuto its tile by M.
enum class WgmmaTile : int {
  Auto,
  T64x32,
  T64x128,
  T128x128,
  T128x256,
  Tma64x32,
  Tma128x128,
  Tma128x256,
  TmaAuto,
  TmaPersistent128x128,
  TmaPersistent128x256,
  TmaPersistentAuto,
  Tma64x64,
};
constexpr bool is_tma(WgmmaTile t) { return int(t) >= int(WgmmaTile::Tma64x32); }
void launch_wgmma_gemm(const void* xh, int M, const void* W, int store, int K, int N, const GemmOut& y, WgmmaTile tile);
void launch_wgmma_tma_gemm(const void* xh, int M, const void* W, int store, int K, int N, const GemmOut& y,
                           WgmmaTile tile);

}  // namespace kvp::cuda
