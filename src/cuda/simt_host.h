#pragma once
// Host stand-ins for the CUDA built-ins the fixed-order kernels use, so that the CPU suite can run
// those kernels' own source (tests/test_cuda_kernels_on_cpu.cpp) on machines without a GPU: every
// CUDA thread of a block is a fiber, __syncthreads and __syncwarp are barriers, a warp shuffle is
// an exchange through the warp's slots between two barriers, a cp.async copy lands at its issue
// or only at its wait (three schedules, below, that expose missing barriers and waits), and
// blocks run one after the other (so a kernel's __shared__ arrays can be function statics). The
// arithmetic is the host's IEEE arithmetic; portable_scalar.h's functions pick their host branch.
// Only what the kernels use is here, and only for convergent code: every lane of a warp reaches
// each shuffle, every thread of a block each __syncthreads (a warp that returns early returns
// whole). wgmma, mbarriers and TMA are simt_host_hopper.h's, included from here.
// Never included by nvcc (cuda_device_api.cuh includes the real headers there).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"

// Fibers switch through Boost.Context's fcontext, which saves the callee-saved registers and
// nothing else (glibc's swapcontext also makes a sigprocmask system call per switch: 85% of the
// emulation's time). Under AddressSanitizer each switch is announced to it (FiberContext).
#include <boost/context/fiber.hpp>
#if defined(__SANITIZE_ADDRESS__)
#define KVP_SIMT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVP_SIMT_ASAN 1
#endif
#endif
#ifdef KVP_SIMT_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3() = default;
  dim3(unsigned a, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint2 {
  unsigned x, y;
};
struct uint4 {
  unsigned x, y, z, w;
};
struct float2 {
  float x, y;
};
struct float4 {
  float x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }

struct __half {
  uint16_t bits;
};
struct __nv_bfloat16 {
  uint16_t bits;
};
inline float __half2float(__half h) { return kvp::f16_to_f32(h.bits); }
inline __half __float2half_rn(float f) { return {kvp::f32_to_f16(f)}; }
inline __half __ushort_as_half(unsigned short u) { return {u}; }
inline float __bfloat162float(__nv_bfloat16 h) { return kvp::bf16_to_f32(h.bits); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return {kvp::f32_to_bf16(f)}; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return {u}; }
inline unsigned short __half_as_ushort(__half h) { return h.bits; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.bits; }

namespace kvp::simt {

// One fiber's execution context on a stack it is given (kept from launch to launch): start() makes
// it run fn(arg) at the next enter(); enter() runs it until it calls leave() or fn returns.
// Under ASan every switch is bracketed by __sanitizer_start/finish_switch_fiber, which tell it the
// stack the thread moves to (otherwise it takes the fiber's frames for the scheduler's, and back).
class FiberContext {
 public:
  void start(char* stack, size_t size, void (*fn)(void*), void* arg) {
    self_ = {};  // a fiber left suspended (a launch that threw) unwinds before its stack is reused
    stack_ = stack, size_ = size;
    self_ = boost::context::fiber(std::allocator_arg, GivenStack{stack, size},
                                  [this, fn, arg](boost::context::fiber&& scheduler) {
                                    finish_switch(nullptr, &scheduler_stack_, &scheduler_size_);
                                    scheduler_ = std::move(scheduler);
                                    fn(arg);
                                    start_switch(nullptr, scheduler_stack_, scheduler_size_);  // for good
                                    return std::move(scheduler_);
                                  });
  }
  void enter() {
    void* fake = nullptr;
    start_switch(&fake, stack_, size_);
    self_ = std::move(self_).resume();
    finish_switch(fake, nullptr, nullptr);
  }
  void leave() {
    void* fake = nullptr;
    start_switch(&fake, scheduler_stack_, scheduler_size_);
    scheduler_ = std::move(scheduler_).resume();
    finish_switch(fake, &scheduler_stack_, &scheduler_size_);
  }

 private:
  // Boost.Context's stack allocator concept over a stack the caller owns.
  struct GivenStack {
    char* base;
    size_t size;
    boost::context::stack_context allocate() {
      boost::context::stack_context sc;
      sc.size = size;
      sc.sp = base + size;  // the top: the stack grows down
      return sc;
    }
    void deallocate(boost::context::stack_context&) noexcept {}
  };
#ifdef KVP_SIMT_ASAN
  static void start_switch(void** fake, const void* bottom, size_t size) {
    __sanitizer_start_switch_fiber(fake, bottom, size);
  }
  static void finish_switch(void* fake, const void** bottom, size_t* size) {
    __sanitizer_finish_switch_fiber(fake, bottom, size);
  }
#else
  static void start_switch(void**, const void*, size_t) {}
  static void finish_switch(void*, const void**, size_t*) {}
#endif
  boost::context::fiber self_;       // this fiber, while the scheduler runs
  boost::context::fiber scheduler_;  // the scheduler, while this fiber runs
  const void* stack_ = nullptr;      // this fiber's stack (its lowest address) and size
  size_t size_ = 0;
  const void* scheduler_stack_ = nullptr;  // the scheduler's, as ASan last reported it
  size_t scheduler_size_ = 0;
};

// A block's threads are fibers run by one OS thread: each runs until it waits at a
// barrier (a __syncthreads, a __syncwarp, either half of a shuffle or of an mma exchange) or ends;
// a barrier opens when every thread of its warp (or block) that has not ended waits there. Blocks
// run one after another. Deterministic, and cheap enough for the CPU suite.
struct Warp {
  uint64_t slot[32] = {};
  uint32_t frag[32][6] = {};  // mma fragments
};

// Spin: a thread that polled an mbarrier in vain; it runs again after the others have run.
enum class Wait { None, Warp, Block, Spin, Done };

// A cp.async copy issued and not yet landed: the 16 bytes as read at issue (a kernel's global
// inputs do not change while it runs), and the commit group it belongs to.
struct PendingCopy {
  void* dst;
  unsigned char bytes[16];
  unsigned group;
};

// A wgmma.mma_async issued and not yet run: the accumulators it adds to, its shared-memory
// operands (descriptors) and the wgmma commit group it belongs to.
struct PendingWgmma {
  float* d;
  int n;
  bool bf16;
  uint64_t a, b;
  unsigned group;
};

struct Fiber {
  std::unique_ptr<char[]> stack;
  FiberContext ctx;  // after the stack: destroyed first, while a suspended fiber's stack still exists
  Wait wait = Wait::None;
  std::vector<PendingCopy> copies;
  unsigned committed = 0;  // commit groups closed so far
  std::vector<PendingWgmma> mmas;
  unsigned mma_committed = 0;
};

// Three schedules, rotating from block to block and launch to launch, so that a missing barrier
// or wait shows as wrong bits in the CPU suite instead of passing by luck of the order.
//  - Lockstep: every thread in increasing order up to its next barrier, then the barriers open;
//    a cp.async copy lands at its issue.
//  - Drift: warps drift as far apart as a block barrier allows (the last warp runs up to its next
//    __syncthreads, then the one before it, ..., threads in decreasing order), and a copy lands
//    only at the cp.async.wait_group that must cover it: a read before the wait or the barrier
//    that should order it reads stale data.
//  - DriftEager: warps drift, and copies land at their issue: a warp that refills a stage other
//    warps still read (a refill before the barrier that says they are done) overwrites it.
enum class Schedule { Lockstep, Drift, DriftEager };
// An mbarrier (by its shared-memory address): arrivals still expected in this phase, the count
// it starts each phase with, transaction bytes still expected, phases completed.
struct Mbarrier {
  unsigned pending = 0, count = 0, phases = 0;
  long long tx = 0;
};

struct Block {
  std::unordered_map<size_t, Mbarrier> mbarriers;  // this block's, made by mbarrier.init
  unsigned threads = 0;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  unsigned current = 0;
  Schedule schedule = Schedule::Lockstep;
};

struct ThreadState {
  dim3 thread, block, block_dim, grid_dim;
  Block* blk = nullptr;
};
inline ThreadState tls;  // the running fiber's (one OS thread runs them all)
inline unsigned launches = 0;  // kernels launched so far (picks the first block's schedule)
// The running launch's dynamic shared memory (launch_with_smem): the bytes it asked for, refilled
// with NaNs for every block (a block never sees another's data), then a guard up to the most a
// block may have, which must stay untouched (and reads as garbage).
constexpr size_t kDynamicSharedBytes = size_t(227) << 10;  // what a block of an sm_90 GPU may have
constexpr size_t kDynamicGuard = kDynamicSharedBytes;
inline std::vector<uint64_t> dynamic_buffer;  // 8-byte words; its data is 16-byte aligned (new)
inline size_t dynamic_bytes = 0;

// Waits at the warp's (or the block's) barrier: back to the scheduler until it opens.
inline void wait_at(Wait w) {
  Block& b = *tls.blk;
  Fiber& f = b.fibers[b.current];
  f.wait = w;
  f.ctx.leave();
}

// Lane `src`'s value of v, as every lane of the warp reads it at once.
template <class T>
T exchange(T v, int src) {
  static_assert(sizeof(T) <= 8, "a register-sized value");
  Warp& w = tls.blk->warps[tls.thread.x / 32];
  const int lane = int(tls.thread.x % 32);
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof(T));
  w.slot[lane] = u;
  wait_at(Wait::Warp);
  const uint64_t r = w.slot[src];
  wait_at(Wait::Warp);
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}

// Opens the barrier every live thread of the warp starting at thread w0 waits at (false: none).
inline bool open_warp(Block& b, unsigned w0) {
  const unsigned end = std::min(w0 + 32, b.threads);
  bool all = true, some = false;
  for (unsigned t = w0; t < end; ++t) {
    if (b.fibers[t].wait == Wait::Done) continue;
    some = true;
    all = all && b.fibers[t].wait == Wait::Warp;
  }
  if (!some || !all) return false;
  for (unsigned t = w0; t < end; ++t)
    if (b.fibers[t].wait == Wait::Warp) b.fibers[t].wait = Wait::None;
  return true;
}

// Opens the barriers every live thread of a group waits at; false when nothing can run (a
// barrier some live thread never reaches: divergent code, which the kernels must not have).
inline bool release(Block& b) {
  bool any = false;
  for (unsigned w0 = 0; w0 < b.threads; w0 += 32) any = open_warp(b, w0) || any;
  bool all = true, some = false;
  for (const Fiber& f : b.fibers) {
    if (f.wait == Wait::Done) continue;
    some = true;
    all = all && f.wait == Wait::Block;
  }
  if (some && all) {
    for (Fiber& f : b.fibers) f.wait = Wait::None;
    any = true;
  }
  for (Fiber& f : b.fibers)
    if (f.wait == Wait::Spin) {
      f.wait = Wait::None;
      any = true;
    }
  return any;
}

template <class Body>
void fiber_entry(void* body) {
  (*static_cast<const Body*>(body))();
  Block& b = *tls.blk;
  b.fibers[b.current].wait = Wait::Done;
}

// Runs one block's fibers (entry(arg) each) until every one has ended.
inline void run_block(Block& b, dim3 block, void (*entry)(void*), void* arg) {
  constexpr size_t kStack = size_t(64) << 10;  // the kernels' frames are a few KB
  b.mbarriers.clear();
  for (unsigned t = 0; t < b.threads; ++t) {
    Fiber& f = b.fibers[t];
    if (!f.stack) f.stack.reset(new char[kStack]);
    f.wait = Wait::None;
    f.copies.clear();
    f.committed = 0;
    f.mmas.clear();
    f.mma_committed = 0;
    f.ctx.start(f.stack.get(), kStack, entry, arg);
  }
  auto run = [&](unsigned t) {
    if (b.fibers[t].wait != Wait::None) return false;
    b.current = t;
    tls.thread = dim3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
    b.fibers[t].ctx.enter();
    return true;
  };
  for (;;) {
    bool ran = false;
    if (b.schedule == Schedule::Lockstep) {
      for (unsigned t = 0; t < b.threads; ++t) ran = run(t) || ran;
    } else {
      for (unsigned w0 = (b.threads - 1) / 32 * 32 + 32; w0 > 0;) {
        w0 -= 32;
        for (;;) {  // this warp, as far as it goes before a block barrier
          bool any = false;
          for (unsigned t = std::min(w0 + 32, b.threads); t > w0;) any = run(--t) || any;
          ran = ran || any;
          if (!any && !open_warp(b, w0)) break;
        }
      }
    }
    if (!ran && !release(b)) break;
  }
  for (const Fiber& f : b.fibers)
    if (f.wait != Wait::Done) throw std::logic_error("simt: a thread waits at a barrier the others never reach");
}

// Runs kernel(args...) over grid x block.
template <class Kernel, class... Args>
void launch(dim3 grid, dim3 block, Kernel kernel, Args... args) {
  Block b;
  b.threads = block.x * block.y * block.z;
  b.fibers.resize(b.threads);
  b.warps.resize((b.threads + 31) / 32);
  tls.block_dim = block;
  tls.grid_dim = grid;
  tls.blk = &b;
  auto body = [&] { kernel(args...); };
  ++launches;
  // The GPU runs a grid's blocks in no set order, so neither does this from launch to launch:
  // increasing, decreasing, or the even ones then the odd ones. A kernel whose blocks hand work
  // to whichever finishes last (a counter) has a different last block in each.
  const size_t total = size_t(grid.x) * grid.y * grid.z;
  const unsigned order = launches % 3;
  for (size_t i = 0; i < total; ++i) {
    size_t k = order == 0 ? i : order == 1 ? total - 1 - i : (2 * i < total ? 2 * i : 2 * i - total + (total % 2 == 0));
    const unsigned bx = unsigned(k % grid.x), by = unsigned(k / grid.x % grid.y), bz = unsigned(k / grid.x / grid.y);
    tls.block = dim3(bx, by, bz);
    b.schedule = Schedule((launches + bx + by + bz) % 3);
    if (dynamic_bytes > 0) std::memset(dynamic_buffer.data(), 0xff, dynamic_bytes);
    run_block(b, block, &fiber_entry<decltype(body)>, &body);
  }
}

// cp.async.cg.shared.global of 16 bytes (zeros when !valid), cp.async.commit_group and
// cp.async.wait_group n (every group of the thread but its newest n has landed), per the schedule
// of the block (above).
inline void async_copy16(void* dst, const void* src, bool valid) {
  if (uintptr_t(dst) % 16 != 0 || (valid && uintptr_t(src) % 16 != 0)) {
    std::fprintf(stderr, "simt: cp.async of 16 bytes between addresses not 16-byte aligned\n");
    std::abort();  // the GPU faults; not a throw: this runs on a fiber's stack
  }
  Block& b = *tls.blk;
  Fiber& f = b.fibers[b.current];
  PendingCopy c{dst, {}, f.committed};
  if (valid) std::memcpy(c.bytes, src, 16);
  if (b.schedule != Schedule::Drift)
    std::memcpy(dst, c.bytes, 16);
  else
    f.copies.push_back(c);
}
inline void async_commit() { ++tls.blk->fibers[tls.blk->current].committed; }
inline void async_wait(unsigned newest_left) {
  Fiber& f = tls.blk->fibers[tls.blk->current];
  std::erase_if(f.copies, [&](const PendingCopy& c) {
    const bool lands = c.group + newest_left < f.committed;
    if (lands) std::memcpy(c.dst, c.bytes, 16);
    return lands;
  });
}

// A kernel's dynamic shared memory (KVP_DYNAMIC_SHARED): the running launch_with_smem's buffer.
template <class T>
T* dynamic_shared() {
  if (dynamic_buffer.empty()) {
    std::fprintf(stderr, "simt: a kernel uses dynamic shared memory it was not launched with\n");
    std::abort();  // not a throw: this runs on a fiber's stack
  }
  return reinterpret_cast<T*>(dynamic_buffer.data());
}

// Runs kernel(args...) over grid x block with `bytes` of dynamic shared memory; throws if a block
// wrote past them.
template <class Kernel, class... Args>
void launch_with_smem(size_t bytes, dim3 grid, dim3 block, Kernel kernel, Args... args) {
  if (bytes > kDynamicSharedBytes) throw std::logic_error("simt: more dynamic shared memory than a block may have");
  dynamic_buffer.assign((bytes + kDynamicGuard + 7) / 8, 0);
  dynamic_bytes = bytes;
  auto* raw = reinterpret_cast<unsigned char*>(dynamic_buffer.data());
  const size_t total = dynamic_buffer.size() * 8;
  std::memset(raw + bytes, 0xa5, total - bytes);
  launch(grid, block, kernel, args...);
  bool intact = true;
  for (size_t i = bytes; i < total; ++i) intact = intact && raw[i] == 0xa5;
  dynamic_buffer.clear();
  dynamic_bytes = 0;
  if (!intact) throw std::logic_error("simt: a kernel wrote past its dynamic shared memory");
}

// One mma.sync.aligned.m16n8k16.row.col with fp32 accumulation, from the PTX ISA's fragment
// layout: lane (g = lane / 4, t = lane % 4) holds A rows g and g + 8 at columns 2t, 2t+1 (a0, a1)
// and 2t+8, 2t+9 (a2, a3); B column g at rows 2t, 2t+1 (b0) and 2t+8, 2t+9 (b1); C and D rows g,
// g + 8 at columns 2t, 2t+1 (c0..c3); the low half of a register is the lower column (row of B).
// Each element sums its 16 products in k order with fp32 fma: a stand-in for the tensor core's
// own order, with which the CPU suite checks the kernels' fragment plumbing, not the GPU's bits.
inline void mma16816(bool bf16, float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                     uint32_t b1) {
  Warp& w = tls.blk->warps[tls.thread.x / 32];
  const int lane = int(tls.thread.x % 32);
  const uint32_t mine[6] = {a0, a1, a2, a3, b0, b1};
  std::memcpy(w.frag[lane], mine, sizeof mine);
  wait_at(Wait::Warp);
  auto h = [&](uint32_t word, int hi) {
    const auto v = uint16_t(hi ? word >> 16 : word & 0xffffu);
    return bf16 ? bf16_to_f32(v) : f16_to_f32(v);
  };
  // This lane's A rows g, g + 8 and B columns 2t, 2t + 1, from the lanes that hold them: element k
  // of a row (column) is in lane q = k % 8 / 2 of the row's (column's) group of four, half k % 2,
  // of the register for k < 8 or of the one after it for k >= 8.
  const int g = lane / 4, t = lane % 4;
  float A[2][16], B[2][16];
  for (int k = 0; k < 16; ++k) {
    const int q = k % 8 / 2, e = k % 2, hi = k / 8;
    A[0][k] = h(w.frag[4 * g + q][hi ? 2 : 0], e);
    A[1][k] = h(w.frag[4 * g + q][hi ? 3 : 1], e);
    for (int n = 0; n < 2; ++n) B[n][k] = h(w.frag[4 * (2 * t + n) + q][hi ? 5 : 4], e);
  }
  wait_at(Wait::Warp);
  for (int i = 0; i < 4; ++i) {  // c[i]: row g + 8 (i / 2), column 2t + i % 2
    float acc = c[i];
    for (int k = 0; k < 16; ++k) acc = std::fma(A[i / 2][k], B[i % 2][k], acc);
    c[i] = acc;
  }
}

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lanes 8i .. 8i + 7 give the addresses of the 8
// rows (16 bytes each) of matrix i; without trans lane l receives, from each matrix, row l / 4's
// elements 2(l % 4) and 2(l % 4) + 1 (the lower in the low half); with trans, rows 2(l % 4) and
// 2(l % 4) + 1 of column l / 4: an mma's A or col-major B fragment, read from row-major tiles.
// Each row address must be 16-byte aligned and lie in the launch's dynamic shared memory (the
// hardware faults on a misaligned one): checked, so that a padded layout that breaks it fails here.
inline void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* row, bool trans) {
  const int lane = int(tls.thread.x % 32), g = lane / 4, t = lane % 4;
  const auto base = reinterpret_cast<uintptr_t>(dynamic_buffer.data()), at = reinterpret_cast<uintptr_t>(row);
  if (at < base || at + 16 > base + dynamic_bytes || (at - base) % 16 != 0) {
    std::fprintf(stderr, "simt: ldmatrix row address %zu bytes into the dynamic shared memory of %zu: %s\n",
                 size_t(at - base), dynamic_bytes, at < base ? "outside it" : "misaligned or past its end");
    std::abort();  // not a throw: this runs on a fiber's stack
  }
  for (int i = 0; i < 4; ++i) {
    if (!trans) {
      const uint16_t* src = exchange(row, 8 * i + g);
      r[i] = uint32_t(src[2 * t]) | uint32_t(src[2 * t + 1]) << 16;
    } else {
      const uint16_t* lo = exchange(row, 8 * i + 2 * t);
      const uint16_t* hi = exchange(row, 8 * i + 2 * t + 1);
      r[i] = uint32_t(lo[g]) | uint32_t(hi[g]) << 16;
    }
  }
}

}  // namespace kvp::simt

#include "cuda/simt_host_hopper.h"  // IWYU pragma: export

// The shared-memory address of p: its offset in the launch's dynamic shared memory (the only
// shared memory the kernels that ask for addresses use).
inline size_t __cvta_generic_to_shared(const void* p) {
  const auto base = reinterpret_cast<uintptr_t>(kvp::simt::dynamic_buffer.data()), q = reinterpret_cast<uintptr_t>(p);
  if (q < base || q >= base + kvp::simt::dynamic_bytes) {
    std::fprintf(stderr, "simt: a shared-memory address outside the dynamic shared memory\n");
    std::abort();
  }
  return q - base;
}
[[noreturn]] inline void __trap() { std::abort(); }

#define threadIdx (::kvp::simt::tls.thread)
#define blockIdx (::kvp::simt::tls.block)
#define blockDim (::kvp::simt::tls.block_dim)
#define gridDim (::kvp::simt::tls.grid_dim)

inline void __syncthreads() { kvp::simt::wait_at(kvp::simt::Wait::Block); }
inline void __syncwarp(unsigned = 0xffffffffu) { kvp::simt::wait_at(kvp::simt::Wait::Warp); }
template <class T>
T __shfl_sync(unsigned, T v, int src, int width = 32) {
  const int lane = int(kvp::simt::tls.thread.x % 32), seg = lane / width * width;
  return kvp::simt::exchange(v, seg + src % width);
}
template <class T>
T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
  const int lane = int(kvp::simt::tls.thread.x % 32), seg = lane / width * width;
  const int src = lane + int(delta);
  return kvp::simt::exchange(v, src < seg + width ? src : lane);
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
  const int lane = int(kvp::simt::tls.thread.x % 32), seg = lane / width * width;
  const int src = lane ^ mask;
  return kvp::simt::exchange(v, src < seg + width ? src : lane);
}
// One OS thread runs every fiber, and a fiber runs until a barrier: no other thread can interleave.
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  const unsigned long long old = *p;
  *p = std::min(old, v);
  return old;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p = old + v;
  return old;
}
// Blocks run one after the other here: every write is seen at once, no fence or L1 to bypass.
inline void __threadfence() {}
inline float __ldcg(const float* p) { return *p; }
using std::fmaxf;
using std::isfinite;
using std::isnan;
using std::max;
using std::min;
