#pragma once
// Host stand-ins for Hopper's asynchronous units, for the CPU suite's runs of the wgmma and TMA
// kernels: wgmma.mma_async from the shared-memory layout its descriptors define, the mbarriers
// that order it, and cp.async.bulk.tensor boxes in the 128-byte swizzle. Part of simt_host.h (which
// includes it, and whose fibers, schedules and dynamic shared memory it uses); never included alone.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kvp::simt {

// wgmma.mma_async.m64nNk16 with fp32 accumulation, both operands K-major in shared memory, from
// the PTX ISA's definitions: a descriptor's start address (bits 0-13, in 16 bytes), stride between
// 8-row groups (bits 32-45) and swizzle (bits 62-63; only 1, the 128-byte swizzle, with base offset
// 0, is emulated: row r of a group at r x 128 bytes, and the 16-byte piece of address bits 4-6
// XORed with bits 7-9); the accumulators of thread t of the warpgroup (warp w = t / 32): element 4j
// + 2h + e is row 16w + lane / 4 + 8h, column 8j + 2 (lane % 4) + e. Each element sums its 16
// products in k order with fp32 fma (a stand-in for the tensor core's order, as mma16816's).
// Under the DriftEager schedule, where copies land at their issue, an instruction runs only at the
// wgmma.wait_group that retires its group (so a stage refilled before that wait is read refilled);
// else at its issue (so under Drift, where copies land only at their wait, an operand read before
// its copies' wait and barrier is read stale).
// Where the 128-byte swizzle puts the byte at linear shared address a: its 16-byte piece (address
// bits 4-6) XORed with its row within the 1024-byte atom (bits 7-9); what wgmma reads and TMA writes.
inline size_t swizzled128(size_t a) { return a ^ (((a >> 7) & 7) << 4); }
inline float wgmma_operand(uint64_t desc, int row, int k, bool bf16) {
  const size_t start = size_t(desc & 0x3FFF) << 4, stride = size_t((desc >> 32) & 0x3FFF) << 4;
  if ((desc >> 62) != 1 || ((desc >> 49) & 7) != 0) {
    std::fprintf(stderr, "simt: a wgmma descriptor other than K-major with the 128-byte swizzle\n");
    std::abort();  // not a throw: this runs on a fiber's stack
  }
  const size_t addr = start + size_t(row / 8) * stride + size_t(row % 8) * 128 + size_t(k) * 2;
  const size_t at = swizzled128(addr);
  if (at + 2 > dynamic_bytes) {
    std::fprintf(stderr, "simt: a wgmma operand past the block's dynamic shared memory\n");
    std::abort();
  }
  uint16_t v;
  std::memcpy(&v, reinterpret_cast<const unsigned char*>(dynamic_buffer.data()) + at, 2);
  return bf16 ? bf16_to_f32(v) : f16_to_f32(v);
}
// Each operand value is read once (a thread's two A rows, then each B column for both rows).
inline void wgmma_run(const PendingWgmma& p) {
  const int t = int(tls.thread.x % 128), w = t / 32, lane = t % 32;
  float a[2][16], b[16];
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 16; ++k) a[h][k] = wgmma_operand(p.a, 16 * w + lane / 4 + 8 * h, k, p.bf16);
  for (int j = 0; j < p.n / 8; ++j)
    for (int e = 0; e < 2; ++e) {
      for (int k = 0; k < 16; ++k) b[k] = wgmma_operand(p.b, 8 * j + 2 * (lane % 4) + e, k, p.bf16);
      for (int h = 0; h < 2; ++h) {
        float& d = p.d[4 * j + 2 * h + e];
        float acc = d;
        for (int k = 0; k < 16; ++k) acc = std::fma(a[h][k], b[k], acc);
        d = acc;
      }
    }
}
inline void wgmma_issue(bool bf16, float* d, int n, uint64_t a, uint64_t b) {
  Block& blk = *tls.blk;
  Fiber& f = blk.fibers[blk.current];
  const PendingWgmma p{d, n, bf16, a, b, f.mma_committed};
  if (blk.schedule == Schedule::DriftEager)
    f.mmas.push_back(p);
  else
    wgmma_run(p);
}
inline void wgmma_commit() { ++tls.blk->fibers[tls.blk->current].mma_committed; }
inline void wgmma_wait(int newest_left) {
  Fiber& f = tls.blk->fibers[tls.blk->current];
  std::erase_if(f.mmas, [&](const PendingWgmma& p) {  // in issue order
    const bool runs = p.group + unsigned(newest_left) < f.mma_committed;
    if (runs) wgmma_run(p);
    return runs;
  });
}

// mbarrier.init / arrive / arrive.expect_tx / try_wait.parity on the barrier at shared address bar
// (the PTX ISA's phases: a phase completes when its arrivals and its transaction bytes are all in,
// and try_wait.parity p succeeds once the phase of parity p has completed). A thread whose wait
// fails yields to the others (Wait::Spin); one that never succeeds is a deadlock, reported.
inline Mbarrier& mbarrier_at(size_t bar) {
  auto& m = tls.blk->mbarriers;
  const auto it = m.find(bar);
  if (it == m.end()) {
    std::fprintf(stderr, "simt: an mbarrier used before its init\n");
    std::abort();  // not a throw: this runs on a fiber's stack
  }
  return it->second;
}
inline void mbarrier_complete_if_done(Mbarrier& m) {
  if (m.pending == 0 && m.tx == 0) {
    ++m.phases;
    m.pending = m.count;
  }
}
inline void mbarrier_init(size_t bar, unsigned count) { tls.blk->mbarriers[bar] = Mbarrier{count, count, 0, 0}; }
inline void mbarrier_arrive(size_t bar, unsigned expect_bytes = 0) {
  Mbarrier& m = mbarrier_at(bar);
  m.tx += expect_bytes;
  if (m.pending == 0) {
    std::fprintf(stderr, "simt: more arrivals at an mbarrier than its count\n");
    std::abort();
  }
  --m.pending;
  mbarrier_complete_if_done(m);
}
inline void mbarrier_wait(size_t bar, unsigned parity) {
  for (long tries = 0;; ++tries) {
    if ((mbarrier_at(bar).phases & 1u) != (parity & 1u)) return;
    if (tries > (1l << 20)) {
      std::fprintf(stderr, "simt: an mbarrier wait that never ends (a deadlock)\n");
      std::abort();
    }
    wait_at(Wait::Spin);
  }
}

// A 2-D tensor of 16-bit values as cp.async.bulk.tensor reads it (the host's CUtensorMap):
// row-major rows x cols, boxes of box_rows x box_cols, written to shared memory in the 128-byte
// swizzle (box_cols x 2 = 128 bytes a row), zeros past the rows and columns.
struct TensorMap2d {
  const uint16_t* base = nullptr;
  int rows = 0, cols = 0, box_rows = 0, box_cols = 0;
};
// The box at (col, row) into shared memory at dst, at once; its bytes complete bar's transaction.
inline void tma_load(size_t dst, const TensorMap2d& t, int col, int row, size_t bar) {
  if (t.box_cols * 2 != 128 || dst % 1024 != 0) {
    std::fprintf(stderr, "simt: a TMA box other than 128-byte rows into a 1024-byte-aligned tile\n");
    std::abort();
  }
  auto* smem = reinterpret_cast<unsigned char*>(dynamic_buffer.data());
  for (int r = 0; r < t.box_rows; ++r)
    for (int c = 0; c < t.box_cols; ++c) {
      const int gr = row + r, gc = col + c;
      const uint16_t v = gr < t.rows && gc < t.cols ? t.base[size_t(gr) * t.cols + gc] : uint16_t(0);
      const size_t at = swizzled128(dst + size_t(r) * 128 + size_t(c) * 2);
      if (at + 2 > dynamic_bytes) {
        std::fprintf(stderr, "simt: a TMA box past the block's dynamic shared memory\n");
        std::abort();
      }
      std::memcpy(smem + at, &v, 2);
    }
  Mbarrier& m = mbarrier_at(bar);
  m.tx -= 2ll * t.box_rows * t.box_cols;
  mbarrier_complete_if_done(m);
}

}  // namespace kvp::simt
