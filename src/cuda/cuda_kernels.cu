// The Kernels interface on a CUDA GPU, `standard` policy (DESIGN.md §4a): what GPU stacks do.
//  matmul     cuBLAS GemmEx, fp32 accumulation (CUBLAS_COMPUTE_32F; fp32 weights stay IEEE fp32,
//             no TF32), cuBLAS's own shape-dependent choice of algorithm (split-K included).
//  attention  FlashAttention-style prefill and length-dependent split-KV decode (cuda_attention.cu).
//  the rest   element-wise kernels with the CPU's rounding points (cuda_elementwise.cu).
// Weights are uploaded once, on first use, in the dtype the model holds them in (the compute
// dtype; quantised matrices as their exact fp32 values, as the CPU computes with them). Small
// per-call data (token ids, positions, per-sequence descriptors) goes through a pinned staging
// ring, so a pass never waits for the GPU until its logits are copied back.
#include <cublas_v2.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "cuda/cuda_common.cuh"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_runtime_api.h"

namespace kvp::cuda {
namespace {

void cublas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    fail_input(std::string("cuBLAS error in ") + what + ": " + cublasGetStatusName(s) + " (" + cublasGetStatusString(s) +
               ")");
}

cudaDataType cuda_type(int store) {
  return store == kF32 ? CUDA_R_32F : store == kF16 ? CUDA_R_16F : CUDA_R_16BF;
}

// Device memory owned by the kernels; replacing it frees the old block, which waits for the work
// queued on it (cudaFree synchronises).
struct Block {
  void* p = nullptr;
  size_t bytes = 0;
  Block() = default;
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  ~Block() { release(p); }
  void* ensure(size_t n) {
    if (n > bytes) {
      release(p);
      p = nullptr;
      bytes = 0;
      p = alloc(n);
      bytes = n;
    }
    return p;
  }
};

struct Weight {
  Block mem;
  int store = kF32;
};

class CudaKernels final : public Kernels {
 public:
  CudaKernels() {
    cublas_check(cublasCreate(&blas_), "cublasCreate");
    cublas_check(cublasSetStream(blas_, stream()), "cublasSetStream");
    // Default math: fp32 GEMMs in IEEE fp32 (TF32 only when asked for, and it never is).
    cublas_check(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    KVP_CUDA_CHECK(cudaMallocHost(&flag_host_, sizeof(int)));
  }
  ~CudaKernels() override {
    cudaStreamSynchronize(stream());
    if (ring_host_ != nullptr) cudaFreeHost(ring_host_);
    if (flag_host_ != nullptr) cudaFreeHost(flag_host_);
    cublasDestroy(blas_);
  }

  KernelPolicy policy() const override { return KernelPolicy::Standard; }
  Device device() const override { return Device::Cuda; }

  void matmul(const float* x, int M, const TensorView& W, float* y) override {
    const int N = int(W.rows()), K = int(W.cols());
    if (M <= 0 || N <= 0) return;
    if (K == 0) {
      KVP_CUDA_CHECK(cudaMemsetAsync(y, 0, size_t(M) * N * sizeof(float), stream()));
      return;
    }
    const Weight& w = weight(W);
    const void* xa = x;
    if (w.store != kF32) {
      // Activations hold values of the compute dtype in fp32 storage: the conversion is exact.
      void* xs = xconv_.ensure(size_t(M) * K * 2);
      launch_to_storage(x, size_t(M) * K, xs, w.store);
      xa = xs;
    }
    const float one = 1.0f, zero = 0.0f;
    // Row-major y[M, N] = x[M, K] W[N, K]^T is column-major y^T[N, M] = W^T x^T.
    cublas_check(cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, w.mem.p, cuda_type(w.store), K, xa,
                              cuda_type(w.store), K, &zero, y, CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  }

  void attention(const AttentionParams& p) override { attention_batch(&p, 1); }

  void attention_batch(const AttentionParams* p, int n) override {
    if (n <= 0) return;
    const AttentionParams& a = p[0];
    if (a.n_heads <= 0 || a.n_kv_heads <= 0 || a.n_heads % a.n_kv_heads != 0 || a.head_dim <= 0)
      fail_input("attention: " + std::to_string(a.n_heads) + " query heads cannot share " + std::to_string(a.n_kv_heads) +
                 " KV heads (head_dim " + std::to_string(a.head_dim) + ")");
    if (a.head_dim > 256)
      fail_input("attention on CUDA: head_dim " + std::to_string(a.head_dim) + " is above the supported 256");
    AttnShape s{a.n_heads, a.n_kv_heads, a.head_dim, a.score_divisor, a.score_scale, a.softcap, a.sliding_window,
                store_of(a.act), kv_store(a.kv)};
    std::vector<AttnDesc> prefill, decode;
    int max_rows = 0, max_splits = 0, parts = 0;
    // Enough (head, split) warps to give every multiprocessor a few, however many sequences.
    const int decoders = int(std::count_if(p, p + n, [](const AttentionParams& x) { return x.n_rows == 1; }));
    const int want_splits = std::max(1, 8 * sm_count() / std::max(1, decoders * a.n_heads));
    for (int i = 0; i < n; ++i) {
      const AttentionParams& x = p[i];
      if (x.n_rows <= 0) continue;
      AttnDesc d{x.q, x.out, x.k_cache, x.v_cache, x.n_rows, x.start_pos, x.capacity, 1, 0, 0};
      if (x.n_rows > 1) {
        max_rows = std::max(max_rows, x.n_rows);
        prefill.push_back(d);
        continue;
      }
      const int first = x.sliding_window > 0 ? std::max(0, x.start_pos - x.sliding_window + 1) : 0;
      const int keys = x.start_pos - first + 1;
      // The split length follows the number of cached keys: splits of at least 64 keys, no more
      // splits than the GPU needs.
      const int splits = std::clamp((keys + 63) / 64, 1, want_splits);
      d.split_len = (keys + splits - 1) / splits;
      d.n_splits = (keys + d.split_len - 1) / d.split_len;
      d.part0 = parts;
      parts += x.n_heads * d.n_splits;
      max_splits = std::max(max_splits, d.n_splits);
      decode.push_back(d);
    }
    if (!prefill.empty())
      launch_attention_prefill(upload(prefill.data(), prefill.size()), int(prefill.size()), max_rows, s);
    if (!decode.empty()) {
      auto* part_mem = static_cast<float*>(parts_.ensure(size_t(parts) * (a.head_dim + 2) * sizeof(float)));
      launch_attention_decode(upload(decode.data(), decode.size()), int(decode.size()), max_splits, s, part_mem);
    }
  }

  void rmsnorm(const float* x, int M, int dim, const float* w, float eps, DType act, float* y) override {
    if (M > 0) launch_rmsnorm(x, M, dim, gains(w, dim), eps, store_of(act), false, y);
  }
  void rmsnorm_fp32_gain(const float* x, int M, int dim, const float* g, float eps, DType act, float* y) override {
    if (M > 0) launch_rmsnorm(x, M, dim, gains(g, dim), eps, store_of(act), true, y);
  }

  void embed(const TensorView& table, const int* tokens, int M, float* x) override {
    const Weight& w = weight(table);
    launch_embed(w.mem.p, w.store, upload(tokens, size_t(M)), M, int(table.cols()), x);
  }

  void add_bias(float* y, int M, const TensorView& b) override {
    const Weight& w = weight(b);
    if (w.store != kF32) fail_input("bias '" + b.name + "' is not stored as fp32");
    launch_add_bias(y, M, int(b.numel()), static_cast<const float*>(w.mem.p));
  }

  void rope(float* x, int M, int n_heads, const int* row_pos, const RopeTable& table, DType act,
            RopePairs pairs) override {
    if (M <= 0) return;
    const int max_pos = *std::max_element(row_pos, row_pos + M);
    ensure_rope(table, max_pos + 1);
    const int half = table.head_dim() / 2;
    auto* cs = static_cast<const float*>(rope_mem_.p);
    launch_rope(x, M, n_heads, table.head_dim(), upload(row_pos, size_t(M)), cs, cs + size_t(rope_rows_) * half,
                store_of(act), pairs == RopePairs::AdjacentPairs);
  }

  void silu_mul(float* gate, const float* up, size_t n, DType act) override {
    if (n) launch_gated(gate, up, n, store_of(act), false);
  }
  void gelu_tanh_mul(float* gate, const float* up, size_t n, DType act) override {
    if (n) launch_gated(gate, up, n, store_of(act), true);
  }
  void softcap(float* x, size_t n, float cap, DType act) override {
    if (n) launch_softcap(x, n, cap, store_of(act));
  }
  void scale(float* x, size_t n, float s, DType act) override {
    if (n) launch_scale(x, n, round_to(act, s), store_of(act));
  }
  void add(float* x, const float* y, size_t n, DType act) override {
    if (n) launch_add(x, y, n, store_of(act));
  }
  void copy(float* dst, const float* src, size_t n) override {
    if (n) KVP_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream()));
  }

  void kv_write(const KvWrite* w, int n) override {
    if (n <= 0) return;
    std::vector<KvWriteDesc> d;
    int max_rows = 0;
    for (int i = 0; i < n; ++i) {
      if (w[i].n_rows <= 0) continue;
      d.push_back(KvWriteDesc{w[i].cache, w[i].rows, w[i].n_rows, w[i].start_pos, w[i].capacity});
      max_rows = std::max(max_rows, w[i].n_rows);
    }
    if (d.empty()) return;
    launch_kv_write(upload(d.data(), d.size()), int(d.size()), max_rows, w[0].n_kv_heads, w[0].head_dim,
                    kv_store(w[0].kv));
  }

  long round_check(DType t, float* x, size_t n, int slot) override {
    if (n == 0) return -1;
    if (size_t(slot) >= hit_slots_) grow_hits(size_t(slot) + 1);
    max_slot_ = std::max(max_slot_, slot);
    auto* hits = static_cast<unsigned long long*>(hits_.p);
    launch_round_check(x, n, store_of(t), hits, slot, reinterpret_cast<int*>(hits + hit_slots_));
    return -1;
  }

  std::vector<NonFiniteHit> pending_nonfinite() override {
    std::vector<NonFiniteHit> out;
    if (hits_.p == nullptr) return out;
    auto* hits = static_cast<unsigned long long*>(hits_.p);
    KVP_CUDA_CHECK(cudaMemcpyAsync(flag_host_, hits + hit_slots_, sizeof(int), cudaMemcpyDeviceToHost, stream()));
    KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
    if (*flag_host_ == 0) return out;
    std::vector<unsigned long long> h(size_t(max_slot_) + 1);
    KVP_CUDA_CHECK(cudaMemcpy(h.data(), hits, h.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < h.size(); ++i) {
      if (h[i] == ~0ull) continue;
      const unsigned kind = unsigned(h[i] & 3u);
      const float v = kind == 0 ? NAN : (kind == 1 ? INFINITY : -INFINITY);
      out.push_back(NonFiniteHit{int(i), long(h[i] >> 2), v});
    }
    reset_hits();
    return out;
  }

  void to_host(void* host_dst, const void* src, size_t bytes) override {
    KVP_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream()));
    KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
    ring_off_ = 0;  // every upload queued so far has been consumed
  }
  void to_device(void* dst, const void* host_src, size_t bytes) override {
    KVP_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream()));
    KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
  }

 private:
  static int kv_store(const KvType& kv) {
    if (!kv.is_dtype())
      fail_input("--kv-dtype " + kv.name() +
                 ": quantised KV caches are not available on CUDA yet (use fp32, fp16 or bf16, or --device cpu)");
    return store_of(kv.dtype());
  }

  // The device copy of a weight tensor, made on first use.
  const Weight& weight(const TensorView& W) {
    auto it = weights_.find(W.data);
    if (it != weights_.end()) return it->second;
    Weight& w = weights_[W.data];
    if (W.quantized()) {
      std::vector<float> f(size_t(W.numel()));
      view_to_f32(W, 0, f.size(), f.data());
      w.mem.ensure(f.size() * sizeof(float));
      kvp::cuda::to_device(w.mem.p, f.data(), f.size() * sizeof(float));
      w.store = kF32;
    } else {
      w.mem.ensure(W.nbytes());
      kvp::cuda::to_device(w.mem.p, W.data, W.nbytes());
      w.store = store_of(W.dtype);
    }
    return w;
  }

  const float* gains(const float* host, int n) {
    auto it = weights_.find(host);
    if (it == weights_.end()) {
      Weight& w = weights_[host];
      w.mem.ensure(size_t(n) * sizeof(float));
      kvp::cuda::to_device(w.mem.p, host, size_t(n) * sizeof(float));
      it = weights_.find(host);
    }
    return static_cast<const float*>(it->second.mem.p);
  }

  // Small host data for the next kernels: copied into the pinned ring and queued for upload. A
  // full ring waits for the GPU once, then starts over.
  template <typename T>
  const T* upload(const T* host, size_t n) {
    const size_t bytes = (n * sizeof(T) + 255) / 256 * 256;
    if (ring_off_ + bytes > ring_bytes_) {
      KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
      ring_off_ = 0;
      if (bytes > ring_bytes_) {
        const size_t cap = std::max(bytes, size_t(4) << 20);
        if (ring_host_ != nullptr) cudaFreeHost(ring_host_);
        ring_host_ = nullptr;
        KVP_CUDA_CHECK(cudaMallocHost(&ring_host_, cap));
        ring_dev_.ensure(cap);
        ring_bytes_ = cap;
      }
    }
    char* h = static_cast<char*>(ring_host_) + ring_off_;
    char* d = static_cast<char*>(ring_dev_.p) + ring_off_;
    std::memcpy(h, host, n * sizeof(T));
    KVP_CUDA_CHECK(cudaMemcpyAsync(d, h, n * sizeof(T), cudaMemcpyHostToDevice, stream()));
    ring_off_ += bytes;
    return reinterpret_cast<const T*>(d);
  }

  // cos/sin rows [0, rows) of the model's table (computed on the host, where the CPU reads them).
  void ensure_rope(const RopeTable& table, int rows) {
    if (&table == rope_table_ && rows <= rope_rows_) return;
    if (rows > table.max_positions())
      fail_input("RoPE position " + std::to_string(rows - 1) + " beyond the model's context " +
                 std::to_string(table.max_positions()));
    const int n = std::min(table.max_positions(), std::max({rows, 2 * rope_rows_, 256}));
    const size_t half = size_t(table.head_dim() / 2);
    std::vector<float> cs(2 * size_t(n) * half);
    for (int pos = 0; pos < n; ++pos) {
      std::memcpy(cs.data() + size_t(pos) * half, table.cos_row(pos), half * sizeof(float));
      std::memcpy(cs.data() + (size_t(n) + pos) * half, table.sin_row(pos), half * sizeof(float));
    }
    KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
    rope_mem_.ensure(cs.size() * sizeof(float));
    kvp::cuda::to_device(rope_mem_.p, cs.data(), cs.size() * sizeof(float));
    rope_table_ = &table;
    rope_rows_ = n;
  }

  // hits_: one 64-bit slot per rounding point, then the "any" flag.
  void grow_hits(size_t slots) {
    const size_t n = std::max(slots, size_t(4096));
    KVP_CUDA_CHECK(cudaStreamSynchronize(stream()));
    std::vector<unsigned long long> old(hit_slots_ + (hit_slots_ ? 1 : 0));
    if (!old.empty()) KVP_CUDA_CHECK(cudaMemcpy(old.data(), hits_.p, old.size() * 8, cudaMemcpyDeviceToHost));
    hits_.ensure((n + 1) * 8);
    std::vector<unsigned long long> fresh(n + 1, ~0ull);
    fresh[n] = 0;
    for (size_t i = 0; i < hit_slots_; ++i) fresh[i] = old[i];
    if (!old.empty()) fresh[n] = old[hit_slots_];
    KVP_CUDA_CHECK(cudaMemcpy(hits_.p, fresh.data(), fresh.size() * 8, cudaMemcpyHostToDevice));
    hit_slots_ = n;
  }
  void reset_hits() {
    KVP_CUDA_CHECK(cudaMemsetAsync(hits_.p, 0xff, hit_slots_ * 8, stream()));
    KVP_CUDA_CHECK(cudaMemsetAsync(static_cast<unsigned long long*>(hits_.p) + hit_slots_, 0, 8, stream()));
    max_slot_ = 0;
  }

  cublasHandle_t blas_ = nullptr;
  std::unordered_map<const void*, Weight> weights_;
  Block xconv_, parts_, rope_mem_, hits_, ring_dev_;
  void* ring_host_ = nullptr;
  size_t ring_bytes_ = 0, ring_off_ = 0;
  int* flag_host_ = nullptr;
  const RopeTable* rope_table_ = nullptr;
  int rope_rows_ = 0;
  size_t hit_slots_ = 0;
  int max_slot_ = 0;
};

}  // namespace

std::unique_ptr<Kernels> make_kernels(KernelPolicy policy) {
  open();
  if (policy != KernelPolicy::Standard)
    fail_input("--kernels " + policy_name(policy) +
               " --device cuda: the CUDA backend has the standard kernels only so far (use --kernels standard, or "
               "--device cpu)");
  return std::make_unique<CudaKernels>();
}

}  // namespace kvp::cuda
