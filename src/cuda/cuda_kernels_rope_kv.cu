// CudaKernels' rotations of q and k and its cache writes (cuda_kernels.cuh), folded together where
// the pass allows: the rotation of k joins q's, the cache write of K takes both over (the rows it
// writes are the ones just rotated, rounded and checked) and V's joins that, one launch a layer
// (cuda_fusion.cuh has when; cuda_elementwise_kernels.cuh's rope_kernel does it).
#include "cuda/cuda_kernels.cuh"

namespace kvp::cuda {

void CudaKernels::rope(float* x, int M, int n_heads, const int* row_pos, const RopeTable& table, DType act,
                       RopePairs pairs) {
  OpSpan span("rope");
  if (M <= 0) return release_held();
  // row_pos: the table's rows (longrope's long set past the positions: RopeTable::rows)
  const int max_row = *std::max_element(row_pos, row_pos + M);
  if (max_row >= table.rows())
    fail_input("RoPE position " + std::to_string(max_row - table.long_rows()) + " beyond the model's context " +
               std::to_string(table.max_positions()));
  const RopeTable& t = portable() ? table.portable() : table;  // the libm-free twin: cos/sin bits
  // A held rotation reads the table that ensure() would replace.
  if (!rope_table_.holds(t)) release_held();
  const float* cs = rope_table_.ensure(t, [this] { end_collecting(true); });
  const int half = t.head_dim() / 2, hd = t.head_dim(), rd = t.rotary_dim(), a = store_of(act);
  const bool adjacent = pairs == RopePairs::AdjacentPairs, once = t.rounding() == RopeRounding::Once;
  const float* sn = cs + size_t(t.rows()) * half;
  const int* pos = upload(kPositions, row_pos, size_t(M));
  rope_pos_.assign(row_pos, row_pos + M);
  const size_t n = size_t(M) * n_heads * hd;
  // The held rotation of q, its check attached, joins this one (k's: the same rows, positions
  // and table; another buffer), one launch for both.
  const RopeHeld mine{{x, n_heads, {}, {}}, pos, cs, sn, M, hd, rd, a, adjacent, once};
  RopeJob jobs[2] = {};
  int nj = 0;
  if (rope_held_.joins(mine, n) && fusion_.take_checked(kRopeHeld, &rope_held_.job.chk)) jobs[nj++] = rope_held_.job;
  release_held();
  // x's pending rounding point (a q/k projection's): rounded as the kernel reads it. The pairs
  // must cover every element of a head for that (hd even).
  InRound in = hd % 2 == 0 ? fusion_.take(x, n, a) : InRound{};
  in.write_back = !skip_dead_writes_on();  // else the rotated pairs are stored over every value of x
  fusion_.settle(x, n);
  wrote(x, n);
  rope_held_ = mine;
  rope_held_.job.in = in;
  rope_q_ = jobs[0];  // when k's joins: q's job, its check attached
  jobs[nj++] = rope_held_.job;
  uint64_t sig = signature(kRope, M, hd, rd, pos, cs, sn, a, adjacent, once);
  for (int j = 0; j < nj; ++j)
    sig = mix_in(PassGraphs::mix(sig, signature(kRope, jobs[j].x, jobs[j].n_heads, jobs[j].chk.hits, jobs[j].chk.slot,
                                                jobs[j].chk.any)),
                 jobs[j].in);
  fusion_.hold(
      x, n, a, sig,
      [=](NonFiniteSlot c, OutCopy) {
        RopeJob js[2] = {jobs[0], jobs[1]};
        js[nj - 1].chk = c;
        launch_rope(js, nj, M, hd, rd, pos, cs, sn, a, adjacent, once);
      },
      false, nj == 1 ? kRopeHeld : kRopePairHeld);
}

void CudaKernels::kv_write(const KvWrite* w, int n) {
  OpSpan span("kv_write");
  std::vector<KvWriteDesc> d;
  int max_rows = 0;
  for (int i = 0; i < n; ++i) {
    if (w[i].n_rows <= 0) continue;
    d.push_back(KvWriteDesc{w[i].cache, w[i].rows, w[i].n_rows, w[i].start_pos, w[i].capacity});
    max_rows = std::max(max_rows, w[i].n_rows);
  }
  if (d.empty()) return release_held();
  const int heads = w[0].n_kv_heads, hd = w[0].head_dim, store = kv_store(w[0].kv);
  const size_t width = size_t(heads) * hd;
  // The held write of K joins this one (V's: the same shape, rows apart), one launch for both.
  KvHeld k;
  bool joins = fusion_.holding_other(kKvHeld) && kv_held_.heads == heads && kv_held_.hd == hd &&
               kv_held_.store == store && (!kv_held_.with_rope || kv_held_.takes_v(d));
  for (const KvWriteDesc& h : kv_held_.d)
    for (const KvWriteDesc& x : d)
      joins = joins && !overlap(h.rows, size_t(h.n_rows) * width, x.rows, size_t(x.n_rows) * width);
  if (!joins && takes_rope(d, heads, hd)) {  // K's rows, just rotated: written by that launch
    kv_held_ = KvHeld{std::move(d), max_rows, heads, hd, store, true, rope_q_, rope_held_, rope_pos_};
    // K's rows live on only in the cache (last_read): the launch stores them there alone.
    RopeJob& kj = kv_held_.rope.job;
    if (last_read_of(kj.x, size_t(kv_held_.rope.M) * width)) kj.store = false;
    return fusion_.hold_other(kKvHeld, [this] { launch_kv(kv_held_, InRound{}, nullptr, 0); });
  }
  if (joins) {
    k = std::move(kv_held_);
    fusion_.drop_other();
  } else {
    release_held();
  }
  // The rows' pending rounding point (V's projection) rounds them as the kernel reads them, when
  // the slices' rows are exactly its buffer.
  std::vector<const KvWriteDesc*> by_row;
  for (const KvWriteDesc& x : d) by_row.push_back(&x);
  std::sort(by_row.begin(), by_row.end(), [](auto* a, auto* b) { return a->rows < b->rows; });
  const float* base = by_row[0]->rows;
  size_t total = 0;
  bool contiguous = true;
  for (const KvWriteDesc* x : by_row) {
    contiguous = contiguous && x->rows == base + total;
    total += size_t(x->n_rows) * width;
  }
  const InRound in = contiguous ? take_input(base, total, -1) : InRound{};
  for (const KvWriteDesc& x : d) fusion_.settle(x.rows, size_t(x.n_rows) * width);
  const int first = int(k.d.size());
  k.d.insert(k.d.end(), d.begin(), d.end());
  k.max_rows = std::max(k.max_rows, max_rows);
  k.heads = heads, k.hd = hd, k.store = store;
  kv_held_ = std::move(k);
  if (first == 0 && in.act < 0)
    return fusion_.hold_other(kKvHeld, [this] { launch_kv(kv_held_, InRound{}, nullptr, 0); });
  if (kv_held_.with_rope && first > 0)  // q's rotation in it: the attention may take q's copy over
    return fusion_.hold_other(
        kKvRopeHeld, [this, in, vb = in.act < 0 ? nullptr : base, first] { launch_kv(kv_held_, in, vb, first); });
  launch_kv(kv_held_, in, in.act < 0 ? nullptr : base, first);
}

// q's rows for the tensor-core prefill kernel's slices `rows` (the whole attention call) in the
// K/V storage type, written by the held rotation instead of its fp32 rows (RopeJob::copy, store =
// false) where q is read by nothing else (last_read), each slice's rows within the rotated ones:
// then each slice's AttnDesc::q16 set, true.
bool CudaKernels::take_q16(std::vector<AttnDesc>& rows, const AttnShape& s) {
  if (rows.empty() || !fusion_.holding_other(kKvRopeHeld)) return false;
  RopeJob& q = kv_held_.rope_q;
  if (q.x == nullptr || !q.store || q.n_heads != s.n_heads || kv_held_.rope.hd != s.head_dim) return false;
  const size_t width = size_t(s.n_heads) * s.head_dim, total = size_t(kv_held_.rope.M) * width;
  for (const AttnDesc& d : rows)
    if (d.q < q.x || d.q + size_t(d.n_rows) * width > q.x + total) return false;
  if (!last_read_of(q.x, total)) return false;
  auto* q16 = static_cast<uint16_t*>(q16_.ensure(total * sizeof(uint16_t)));
  q.copy = OutCopy{q16, s.kv_store, false};
  q.store = false;
  for (AttnDesc& d : rows) d.q16 = q16 + (d.q - q.x);
  return true;
}

// Whether the cache write of K's slices d takes over the held rotation of q and k (its check
// attached, then taken): d's rows are k's rows, all of them, slice after slice (rope_kernel looks a
// row's slice up by a binary search), and nothing is pending on them.
bool CudaKernels::takes_rope(const std::vector<KvWriteDesc>& d, int heads, int hd) {
  const RopeHeld& r = rope_held_;
  if (r.job.n_heads != heads || r.hd != hd || hd % 2 != 0) return false;
  const size_t width = size_t(heads) * hd;
  size_t rows = 0;
  for (const KvWriteDesc& x : d) {
    if (x.rows != r.job.x + rows * width) return false;
    rows += size_t(x.n_rows);
  }
  if (rows != size_t(r.M) || fusion_.pending_over(r.job.x, rows * width)) return false;
  return fusion_.take_checked(kRopePairHeld, &rope_held_.job.chk);
}

// Slices [first, ...) read their rows through `in` (rows of the buffer at base).
void CudaKernels::launch_kv(const KvHeld& k, InRound in, const float* base, int first) {
  if (k.with_rope) return launch_rope_kv(k, in, base, first);
  const KvWriteDesc* descs = upload(kKvDescs, k.d.data(), k.d.size());
  const int nd = int(k.d.size()), max_rows = k.max_rows, heads = k.heads, hd = k.hd, store = k.store;
  graphs_.submit(mix_in(signature(kKvWrite, descs, nd, max_rows, heads, hd, store, base, first), in),
                 [=] { launch_kv_write(descs, nd, max_rows, heads, hd, store, in, base, first); });
}

// The held rotation of q and k with the cache write of K's slices and, from `first` on (0: none),
// V's, read through `in` (rows of the buffer at base): one launch.
void CudaKernels::launch_rope_kv(const KvHeld& k, InRound in, const float* base, int first) {
  RopeHeld r = k.rope;
  // The rotation was taken out of Fusion, so a ring restart by the descriptors' upload would not
  // launch it first: its positions are uploaded again (the earlier copy, unless the ring started
  // over), both until neither upload started it over.
  const KvWriteDesc* descs = nullptr;
  for (size_t restarts = ~size_t(0); restarts != ring_.restarts();) {
    restarts = ring_.restarts();
    descs = upload(kKvDescs, k.d.data(), k.d.size());
    r.pos = upload(kPositions, k.rope_pos.data(), k.rope_pos.size());
  }
  const bool with_v = first > 0;
  const RopeKv kv{descs, with_v ? first : int(k.d.size()), k.store, with_v, in, base};
  const std::array<RopeJob, 2> jobs{k.rope_q, r.job};
  uint64_t sig = signature(kRope, r.M, r.hd, r.rd, r.pos, r.cs, r.sn, r.act, r.adjacent, r.once);
  for (const RopeJob& j : jobs)
    sig = mix_in(PassGraphs::mix(sig, signature(kRope, j.x, j.n_heads, j.chk.hits, j.chk.slot, j.chk.any, j.store,
                                                j.copy.dst, j.copy.store)),
                 j.in);
  sig = mix_in(PassGraphs::mix(sig, signature(kKvWrite, descs, kv.n, kv.store, with_v, base)), in);
  graphs_.submit(
      sig, [=] { launch_rope(jobs.data(), 2, r.M, r.hd, r.rd, r.pos, r.cs, r.sn, r.act, r.adjacent, r.once, kv); });
}

}  // namespace kvp::cuda
