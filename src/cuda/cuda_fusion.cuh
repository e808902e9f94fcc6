#pragma once
// Fewer launches for the same bits. A replayed decode step is bound by its graph's node count
// (about 3 us a kernel node on an H100), and most of its nodes were rounding points and 16-bit
// copies of cuBLAS inputs, each a kernel of its own. Three things are therefore launched late,
// by the next call that decides whether it can take them into its own kernel:
//  - the held operation: the last element-wise operation (or attention launch) that rounds
//    its own output. Its rounding point (the next round_check of that output) becomes its check,
//    and a following converted() of that output its OutCopy;
//  - pending rounds: a rounding point of a buffer no held operation produced (cuBLAS outputs,
//    the attention output). The next kernel that reads the buffer may round it as it reads it
//    (InRound: RoPE, the residual add, the gated activation, the cache write), a converted() of
//    it makes the round write the 16-bit copy; anything else that touches the buffer first
//    launches it (several buffers in one launch). A cuBLAS output written in 16 bits
//    (Kernels::rounded_output) is pending from its GEMM on, its values in that source: its
//    rounding point, when it comes, only attaches the check (check_source);
//  - the held launch can also be joined by the next call's (CudaKernels: the rotation of q by k's,
//    the rotation of both by the cache write of K and that by V's, the residual add by the RMSNorm
//    of its output), one launch.
// Launch order between different rounding points does not matter (each reports into its own
// slot, read at the end of the pass), only that each is launched before anything else reads or
// writes its buffer, which the callers ensure: every operation settles the pending rounds of what
// it touches and releases the held launch unless it takes it. Not while operations are timed
// (one_by_one): then everything launches at once, as it was.
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "cuda/cuda_ops.h"
#include "cuda/cuda_signature_mix.h"

namespace kvp::cuda {

// Whether [a, a + na) and [b, b + nb) (counted in floats) share a byte.
inline bool overlap(const void* a, size_t na, const void* b, size_t nb) {
  const auto *x = static_cast<const char*>(a), *y = static_cast<const char*>(b);
  return x < y + nb * sizeof(float) && y < x + na * sizeof(float);
}

// What CudaKernels keeps of a held launch that the next call can join.
// The rotation of q (Fusion::hold, tag kRopeHeld), which k's joins; the two (tag kRopePairHeld),
// which the cache write of k's rows takes over.
constexpr int kRopeHeld = 2;
constexpr int kRopePairHeld = 4;
struct RopeHeld {
  RopeJob job{};
  const int* pos = nullptr;
  const float *cs = nullptr, *sn = nullptr;
  int M = 0, hd = 0, rd = 0, act = 0;  // rd: the rotated dimensions of a head
  bool adjacent = false;
  bool once = false;  // RopeRounding::Once
  bool joins(const RopeHeld& o, size_t n) const {  // o rotates n values of another buffer
    return pos == o.pos && cs == o.cs && sn == o.sn && M == o.M && hd == o.hd && rd == o.rd && act == o.act &&
           adjacent == o.adjacent && once == o.once && !overlap(job.x, size_t(M) * job.n_heads * hd, o.job.x, n);
  }
};
// The residual add x += y (Fusion::hold, tag kAddHeld), which the RMSNorm of x takes over.
constexpr int kAddHeld = 3;
struct AddHeld {
  float* x = nullptr;
  float* y = nullptr;
  size_t n = 0;
  int act = 0;
  InRound in{};
  bool joins(const float* nx, size_t nn, const float* out) const {  // RMSNorm of nx[nn] into out[nn]
    return nx == x && nn == n && n > 0 && !overlap(out, n, x, n) && !overlap(out, n, y, n);
  }
};
// The cache write of K (Fusion::hold_other, tag kKvHeld), which V's joins; with_rope: launched by
// the rotation of q (rope_q) and k (rope) it took over. With V's joined to a rotation (tag
// kKvRopeHeld) it is held once more, for the attention that reads q next to take q's 16-bit copy
// over (AttnDesc::q16).
constexpr int kKvHeld = 1;
constexpr int kKvRopeHeld = 5;
struct KvHeld {
  std::vector<KvWriteDesc> d;
  int max_rows = 0, heads = 0, hd = 0, store = 0;
  bool with_rope = false;
  RopeJob rope_q{};
  RopeHeld rope{};
  std::vector<int> rope_pos;  // the rotation's positions on the host: uploaded again at its launch
  // Whether V's slices v can ride in the rotation launch: slice s's rows as many as K's slice s's.
  bool takes_v(const std::vector<KvWriteDesc>& v) const {
    if (v.size() != d.size()) return false;
    for (size_t s = 0; s < v.size(); ++s)
      if (v[s].n_rows != d[s].n_rows) return false;
    return true;
  }
};

class Fusion {
 public:
  // submit(signature, launch): PassGraphs::submit; rounds(jobs, n): launch_round_checks.
  using Submit = std::function<void(uint64_t, std::function<void()>)>;
  using Rounds = void (*)(const RoundJob*, int);
  using HeldLaunch = std::function<void(NonFiniteSlot, OutCopy)>;

  Fusion(Submit submit, Rounds rounds) : submit_(std::move(submit)), rounds_(rounds) {}

  void set_one_by_one(bool on) { one_by_one_ = on; }
  bool one_by_one() const { return one_by_one_; }

  // Holds an element-wise operation whose output [out, out + n) it rounds to act. copies: its
  // launch can write an OutCopy; tag: the caller's, for take_checked.
  void hold(const float* out, size_t n, int act, uint64_t sig, HeldLaunch f, bool copies, int tag = 0) {
    release();
    held_ = Held{std::move(f), nullptr, out, n, act, sig, NonFiniteSlot{}, OutCopy{}, false, copies, tag};
    if (one_by_one_) release();
  }
  // The held operation of `tag`, its rounding point attached, taken over by the caller (who kept
  // its arguments and launches it with its own): its check, or false (nothing taken).
  bool take_checked(int tag, NonFiniteSlot* chk) {
    if (!held_.launch || held_.tag != tag || !held_.checked || held_.copy.dst != nullptr) return false;
    *chk = held_.chk;
    held_ = Held{};
    return true;
  }
  // Holds a launch of another kind (tag: its caller's, who keeps its arguments).
  void hold_other(int tag, std::function<void()> f) {
    release();
    held_ = Held{};
    held_.other = std::move(f);
    held_.tag = tag;
    if (one_by_one_) release();
  }
  bool holding_other(int tag) const { return held_.other && held_.tag == tag; }
  // The held launch of another kind is taken over by the caller: forgotten.
  void drop_other() { held_ = Held{}; }

  // The rounding point (x, n, act) -> chk is the held operation's output: it becomes its check.
  bool fuse_check(const float* x, size_t n, int act, NonFiniteSlot chk) {
    if (!held_.launch || held_.checked || held_.out != x || held_.n != n || held_.act != act) return false;
    held_.chk = chk;
    held_.checked = true;
    return true;
  }

  // Launches the held operation (as it is: with its check if it has one).
  void release() {
    if (held_.other) {
      auto f = std::move(held_.other);
      held_ = Held{};
      f();
      return;
    }
    if (!held_.launch) return;
    Held h = std::move(held_);
    held_ = Held{};
    uint64_t sig = h.sig;
    if (h.checked)
      for (uint64_t v : {uint64_t(0x5e7c), uint64_t(h.chk.hits), uint64_t(h.chk.slot), uint64_t(h.chk.any)})
        sig = signature_mix(sig, v);
    if (h.copy.dst != nullptr)
      for (uint64_t v : {uint64_t(0xc0b7), uint64_t(h.copy.dst), uint64_t(h.copy.store), uint64_t(h.copy.only)})
        sig = signature_mix(sig, v);
    submit_(sig, [f = std::move(h.launch), chk = h.chk, copy = h.copy] { f(chk, copy); });
  }

  // A rounding point no held operation produced: launched later (or at once, one by one). The
  // caller has settled what overlaps x.
  void defer_round(float* x, size_t n, int act, NonFiniteSlot chk) {
    pending_.push_back(RoundJob{x, n, act, chk, OutCopy{}});
    if (one_by_one_) settle_all();
  }
  // x's values, a GEMM's output, lie in the 16-bit src of type act, already rounded: pending as a
  // round without a check (launched, it widens src into x), until x's rounding point attaches one.
  void defer_source(float* x, size_t n, int act, const void* src) {
    pending_.push_back(RoundJob{x, n, act, NonFiniteSlot{}, OutCopy{}, src});
    if (one_by_one_) settle_all();
  }
  // The rounding point (x, n, act) -> chk of a buffer pending in a 16-bit source: its check.
  bool check_source(const float* x, size_t n, int act, NonFiniteSlot chk) {
    for (RoundJob& j : pending_)
      if (j.src != nullptr && j.x == x && j.n == n && j.act == act && j.chk.hits == nullptr) {
        j.chk = chk;
        return true;
      }
    return false;
  }
  // Whether a pending round reads a 16-bit source that shares a byte with [p, p + bytes).
  bool source_over(const void* p, size_t bytes) const {
    for (const RoundJob& j : pending_)
      if (reads_source(j, p, bytes)) return true;
    return false;
  }
  // Launches the pending rounds whose 16-bit source shares a byte with [p, p + bytes).
  void settle_source(const void* p, size_t bytes) {
    settle_where([&](const RoundJob& j) { return reads_source(j, p, bytes); });
  }

  // The 16-bit copy of [x, x + n) into dst, written by the launch still to come that rounds x last
  // (the held operation's, or x's pending round, then launched): true if there was one. only: the
  // copy is all that will be read of x (OutCopy::only).
  bool fuse_copy(const float* x, size_t n, int store, void* dst, bool only = false) {
    if (held_.launch && held_.copies && held_.out == x && held_.n == n) {
      held_.copy = OutCopy{dst, store, only};
      release();
      return true;
    }
    for (size_t i = 0; i < pending_.size(); ++i)
      if (pending_[i].x == x && pending_[i].n == n) {
        RoundJob j = pending_[i];
        pending_.erase(pending_.begin() + long(i));
        j.copy = OutCopy{dst, store, only};
        launch({j});
        return true;
      }
    return false;
  }

  // x's pending round, exactly [x, x + n) at act (any act: act < 0), taken over by the caller's
  // kernel (InRound): act < 0 when there is none.
  InRound take(const float* x, size_t n, int act) {
    for (size_t i = 0; i < pending_.size(); ++i)
      if (pending_[i].x == x && pending_[i].n == n && (act < 0 || pending_[i].act == act)) {
        const InRound in{pending_[i].act, pending_[i].chk, true, pending_[i].src};
        pending_.erase(pending_.begin() + long(i));
        return in;
      }
    return InRound{};
  }

  // Whether a pending round overlaps [p, p + n_floats).
  bool pending_over(const void* p, size_t n_floats) const {
    for (const RoundJob& j : pending_)
      if (overlap(j.x, j.n, p, n_floats)) return true;
    return false;
  }
  // Launches the pending rounds of buffers that overlap [p, p + n_floats).
  void settle(const void* p, size_t n_floats) {
    settle_where([&](const RoundJob& j) { return overlap(j.x, j.n, p, n_floats); });
  }
  void settle_all() {
    if (pending_.empty()) return;
    std::vector<RoundJob> now;
    now.swap(pending_);
    launch(std::move(now));
  }
  // Everything still to be launched, launched.
  void flush() {
    release();
    settle_all();
  }

 private:
  struct Held {
    HeldLaunch launch;
    std::function<void()> other;
    const float* out = nullptr;
    size_t n = 0;
    int act = 0;
    uint64_t sig = 0;
    NonFiniteSlot chk{};
    OutCopy copy{};
    bool checked = false, copies = false;
    int tag = 0;
  };

  // Whether j's 16-bit source (j.n values) shares a byte with [p, p + bytes).
  static bool reads_source(const RoundJob& j, const void* p, size_t bytes) {
    return j.src != nullptr && overlap(j.src, (j.n + 1) / 2, p, (bytes + 3) / 4);
  }
  // Launches the pending rounds that `which` picks, together, in their order.
  template <class Which>
  void settle_where(Which which) {
    std::vector<RoundJob> now;
    for (size_t i = 0; i < pending_.size();) {
      if (which(pending_[i])) {
        now.push_back(pending_[i]);
        pending_.erase(pending_.begin() + long(i));
      } else {
        ++i;
      }
    }
    if (!now.empty()) launch(std::move(now));
  }

  void launch(std::vector<RoundJob> jobs) {
    uint64_t sig = 0x70d5;
    for (const RoundJob& j : jobs)
      for (uint64_t v :
           {uint64_t(j.x), uint64_t(j.n), uint64_t(j.act), uint64_t(j.chk.hits), uint64_t(j.chk.slot),
            uint64_t(j.chk.any), uint64_t(j.copy.dst), uint64_t(j.copy.store), uint64_t(j.copy.only), uint64_t(j.src)})
        sig = signature_mix(sig, v);
    Rounds r = rounds_;
    submit_(sig, [r, jobs = std::move(jobs)] { r(jobs.data(), int(jobs.size())); });
  }

  Submit submit_;
  Rounds rounds_;
  Held held_;
  std::vector<RoundJob> pending_;
  bool one_by_one_ = false;
};

}  // namespace kvp::cuda
