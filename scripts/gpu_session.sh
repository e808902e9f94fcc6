#!/usr/bin/env bash
# One call on a lent GPU machine (README, "GPU (CUDA)"): run from the repository root
# after ../shared/tools/device-pack libssl-dev libssl3 filled .devkit/, carrying .devkit and, to
# skip the build there, .devbin/ (kvparity, kvparity_cuda_tests, kvparity_bench built here with
# nvcc; see `make_devbin` below). Stages are named on the command line, each optionally followed
# by its argument (any word that is not a stage name):
#   scripts/gpu_session.sh tests 'CudaInvariant*' gemm bench7b ...
# Stages: info, build (native build into build-cuda, used when .devbin's binaries do not run),
#   tests [gtest filter], moe, gemm [benchmark filter], wgmma, tiles, gemv, out16, whole, workspace, ncu, attention [benchmark filter], bench11b, bench7b,
#   fusion7b, group, split, pdl, ring7b, attn7b, ops11b, ops7b, batch7b, study7b, policies11b, policies7b, compare7b,
#   gsm8k, upload, sanitize [gtest filter].
#   Every name is checked before anything runs. moe: the mixtures of experts' CUDA tests alone
#   (untried on a GPU when written), then OLMoE-1B-7B's bench; a `tests` run can leave them to it:
#   tests '-*mixtral*:*qwen2_moe*:*qwen3_moe*:*olmoe*:*MixtureOfExperts*' moe
# Env: BUDGET_S (seconds the whole call may take, default 560: every command's timeout is cut to
#   what is left, less 15 s for packing, and a command with under 20 s left is skipped),
#   GSM8K_KERNELS (default standard; issue 14's pair is standard,invariant), GSM8K_LIMIT, GSM8K_BATCH,
#   GSM8K_FLIPS (0: --no-flips),
#   OPS_KERNELS (ops stages; e.g. standard,invariant), COMPARE_PROMPTS / COMPARE_TOKENS /
#   COMPARE_BATCH / COMPARE_KERNELS (compare7b: 64, 128, 16, standard,invariant), WGMMA_GEMMS (the
#   wgmma stage's 7B runs: default "auto wgmma-tma+mma16b", Auto's choice against the kernel named
#   without the deep stretch of single rows; mma: the mma.sync family).
# The device returns at most 8 files from $OUT: every log goes to $OUT/logs.tgz (rewritten after
#   each stage and on exit, so a call cut short still returns what finished) and the console to
#   $OUT/session.txt.
# A session has 15 minutes of device time, the machine's start included, and a machine left idle
#   for 30 s goes back. On 2026-11-26 an H200 started in ~30 s and `info tests gemm attention
#   policies7b bench11b` took 157 s, so one call (timeout_s 590) fits the suite, the speed of every
#   kernel and policy and most of issue 14's comparison:
#     BUDGET_S=570 scripts/gpu_session.sh info wgmma tests '-CudaInvariant.Wgmma*' group policies7b attention gemm compare7b
#   (the wgmma stage first, in a process of its own: a fault in an untried kernel ends its CUDA
#   context, and the tests stage then leaves those tests out)
#   then at once, on the warm machine, the rest (compare7b resumes where the first call stopped;
#   gsm8k, resumable too, with what is left). Late on 2026-11-26 an H100 ran `info wgmma tiles
#   tests '-CudaInvariant.Wgmma*' attention bench7b` in 302 s. What was written after that call
#   (mma16x, the 64 x 64 TMA tile, standard's GEMV, ldmatrix in the flash kernel, study7b) takes:
#     BUDGET_S=560 scripts/gpu_session.sh info wgmma tests '-CudaInvariant.Wgmma*' gemv attention study7b bench7b
#   (since 2026-11-27 the gsm8k stage's folder also holds timing.jsonl: each batch's time by side,
#   pass time against the host's loop, rows per second)
#   (since 2026-11-27 invariant's decode attention runs four warps a chunk; the attention stage
#   also times the one-warp block, KVPARITY_CUDA_SPLIT_WARPS=1, for the choice of default)
#   On 2026-11-27 an H100 ran that call in 292 s, then on the warm machine `GSM8K_KERNELS=
#   standard,invariant GSM8K_LIMIT=128 GSM8K_BATCH=64 BUDGET_S=500 ... gsm8k compare7b` (487 s: the
#   standard half's two batches of 64 only). Since then invariant's auto on sm_90 is the wgmma
#   family (wgmma-tma+mma16b; KVPARITY_CUDA_GEMM=mma the mma.sync family). Late on 2026-11-27 an
#   H100 ran `info tests whole workspace study7b wgmma ncu` in 506 s (all 50 tests passed), then
#   on the warm machine `GSM8K_KERNELS=standard GSM8K_FLIPS=0 GSM8K_LIMIT=128 GSM8K_BATCH=64
#   BUDGET_S=285 ... gsm8k` in 244 s. In the fifth session (2026-11-27, 900 s of H100 time) the
#   binaries of fb57d6a ran `BUDGET_S=540 ... info tests wgmma study7b ncu` in 334 s (51 of 52
#   tests; the 52nd a stale kernel-name check, since fixed), then on the warm machine
#   `GSM8K_KERNELS=standard GSM8K_FLIPS=0 GSM8K_LIMIT=128 GSM8K_BATCH=64 BUDGET_S=465 ... gsm8k`
#   in 224 s (37.8 a minute), then, after a kernel change that came out slower and was reverted,
#   `WGMMA_GEMMS=auto BUDGET_S=228 ... info tests study7b wgmma` in 189 s (docs/performance.md).
#   In the sixth session (2026-11-28, 900 s of H100 time) the binaries of 1c6430a ran
#   `BUDGET_S=560 ... info tests upload gsm8k` in 538 s (53 of 53 tests; the 7B upload 0.75 s
#   through the pinned buffers against 8.8 s through the driver, so staging is now the default;
#   the gsm8k stage ran with its defaults, batch 16 with flips, by mistake), then on the warm machine
#   `KVPARITY_CUDA_STAGED_UPLOAD=1 GSM8K_KERNELS=standard GSM8K_FLIPS=0 GSM8K_LIMIT=128
#   GSM8K_BATCH=64 BUDGET_S=290 ... gsm8k` in 202 s (38.6 a minute). Written after those calls,
#   untimed: K's rotated rows to the cache alone and q to the attention in 16 bits (study7b times
#   them against KVPARITY_CUDA_SKIP_DEAD_WRITES=0); on 2026-11-28 (no GPU lent) standard's GEMM
#   outputs in 16 bits, off by default (KVPARITY_CUDA_GEMM_OUT16=1; study7b times it, the tests
#   stage checks it: CudaFusion.*; the out16 stage times decode and prefill both ways). Next (issue 14's compare at 64 x 256 resumes across calls;
#   name every GSM8K_* setting on the command line):
#     BUDGET_S=420 scripts/gpu_session.sh info tests study7b out16
#   then on the warm machine, with the 16-bit outputs if study7b found them faster:
#     KVPARITY_CUDA_GEMM_OUT16=1 GSM8K_KERNELS=standard GSM8K_FLIPS=0 GSM8K_LIMIT=128 GSM8K_BATCH=64 \
#       BUDGET_S=260 scripts/gpu_session.sh gsm8k
#   then COMPARE_TOKENS=256 COMPARE_BATCH=16 BUDGET_S=... scripts/gpu_session.sh compare7b
#   and, after any kernel change, the pair above (tests study7b wgmma, then gsm8k).
# The binaries travel compressed (the tree's 64 MiB limit): here, make_devbin then
#   mkdir -p .devbinz && tar cJf .devbinz/bins.tar.xz -C .devbin .   (/.devbinz/ in .git/info/exclude)
#   and every call's command starts with: mkdir -p .devbin && tar xJf .devbinz/bins.tar.xz -C .devbin &&
#   (a second call on a warm machine too: its tree is copied afresh, and without the binaries the
#   script builds for ~70 s first, which cost the 2026-11-26 H100 call its GSM8K batch)
# Here:  make_devbin:  ninja -C build kvparity kvparity_cuda_tests kvparity_bench &&
#                      mkdir -p .devbin && cp build/kvparity build/kvparity_cuda_tests build/kvparity_bench .devbin/
set -uo pipefail
STAGES=" info build tests moe gemm wgmma tiles gemv out16 whole workspace ncu attention bench11b bench7b fusion7b group split pdl ring7b attn7b ops11b ops7b batch7b study7b policies11b policies7b compare7b gsm8k upload sanitize "
WITH_ARG=" tests gemm attention sanitize "
# The command line as (stage, argument) pairs, all checked before anything runs.
plan=()
while [ $# -gt 0 ]; do
  s=$1; shift
  [[ $STAGES == *" $s "* ]] || { echo "unknown stage '$s' (stages:$STAGES)"; exit 2; }
  a=''
  if [[ $WITH_ARG == *" $s "* ]] && [ $# -gt 0 ] && [[ $STAGES != *" $1 "* ]]; then a=$1; shift; fi
  plan+=("$s" "$a")
done
OUT=${OUT:-/tmp/gpu_out}
T_END=$(($(date +%s) + ${BUDGET_S:-560}))
L=$(mktemp -d /tmp/kvp_logs.XXXX)  # every log; packed into $OUT/logs.tgz after each stage
mkdir -p "$OUT"
exec > >(tee -a "$OUT/session.txt") 2>&1
tee_pid=$!
pack() { tar czf "$OUT/logs.tgz.part" -C "$L" . 2>/dev/null && mv "$OUT/logs.tgz.part" "$OUT/logs.tgz"; }
finish() { pack; exec >&- 2>&-; wait "$tee_pid"; }
trap finish EXIT
# lim N: N seconds, or what is left of the budget less 15 s for packing, if that is less.
lim() { local left=$((T_END - $(date +%s) - 15)); echo $((left < $1 ? left : $1)); }
# tmo N CMD...: CMD under `timeout lim N`; skipped (rc 124) when under 20 s are left, since
# `timeout 0` would mean no limit at all.
tmo() {
  local t
  t=$(lim "$1"); shift
  if [ "$t" -lt 20 ]; then echo "skipped, the budget is spent: $1 ${2:-}"; return 124; fi
  timeout "$t" "$@"
}
source .devkit/setup.sh >/dev/null
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=$d:$LD_LIBRARY_PATH
done
BIN=.devbin
usable() { "$BIN/kvparity" --version >/dev/null 2>&1 && "$BIN/kvparity_cuda_tests" --gtest_list_tests >/dev/null 2>&1; }
native_build() {
  tmo 60 cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVPARITY_SHARED="$KVPARITY_SHARED" \
    -DKVPARITY_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DKVPARITY_PYTHON=OFF -DKVPARITY_CPU_SUITE=OFF >"$L/build.log" 2>&1 &&
    tmo 400 cmake --build build-cuda -j16 --target kvparity kvparity_cuda_tests kvparity_bench >>"$L/build.log" 2>&1
  local rc=$?
  tail -5 "$L/build.log"
  BIN=build-cuda
  return $rc
}
if ! usable; then
  echo "carried binaries do not run here:"; ldd "$BIN/kvparity" 2>&1 | grep -i "not found" | head
  native_build || { echo "native build failed"; exit 1; }
fi
K="$BIN/kvparity"
stage() { echo "== $1 ($(date +%T), $((T_END - $(date +%s))) s left)"; }
# ab VAR "VALUES" NAME TIMEOUT GREP BENCH-ARGS...: the fp16 bench (7B shape, or $AB_SYNTH) once per
# value of an environment switch that changes speed, not bits; each log in NAME_VALUE.log, its last
# lines (or GREP's).
ab() {
  local var=$1 values=$2 name=$3 limit=$4 pat=$5 v
  shift 5
  for v in $values; do
    echo "-- $var=$v"
    export "$var=$v"
    tmo "$limit" "$K" bench --device cuda --synth "${AB_SYNTH:-llama2-7b}" --dtype fp16 "$@" 2>&1 |
      tee "$L/${name}_$v.log" | if [ -n "$pat" ]; then grep -E "$pat"; else tail -4; fi
    unset "$var"
  done
}
# ab_decode VAR "VALUES" NAME: standard's decode after a 512-token prompt (issue 13's 450 and 160
# tok/s), at 1.1B then 7B shape, once per value of VAR (logs NAME11b_*, NAME7b_*).
ab_decode() {
  AB_SYNTH=tinyllama-1.1b ab "$1" "$2" "${3}11b" 120 "decode|standard" --kernels standard --prompt-tokens 512 \
    --decode-tokens 128 --cache-off-tokens 1 --repeats 3
  ab "$1" "$2" "${3}7b" 150 "decode|standard" --kernels standard --prompt-tokens 512 --decode-tokens 128 \
    --cache-off-tokens 1 --repeats 3
}
# The 7B-shape checkpoint on disk (compare7b, gsm8k), written once per machine (into a .part
# directory first, so that a cut write is never taken for a checkpoint).
synth7b() {
  [ -d /tmp/l7 ] && return 0
  local t0=$(date +%s)
  rm -rf /tmp/l7.part
  { tmo 300 "$K" synth --preset llama2-7b --dtype fp16 --out /tmp/l7.part >/dev/null 2>"$L/synth.log" &&
    mv /tmp/l7.part /tmp/l7; } ||
    { echo "synth failed:"; tail -3 "$L/synth.log"; rm -rf /tmp/l7.part; return 1; }
  echo "synth: $(($(date +%s) - t0)) s"
}
# The rows of a kvparity_bench log: name (without the run settings), time, unit and the counters.
bench_rows() {
  awk '/^cuda_/ { n = $1; sub(/\/min_time:[0-9.]+/, "", n); sub(/\/manual_time/, "", n)
                  printf "%-58s %10s %-3s %s %s\n", n, $2, $3, (NF > 6 ? $(NF-1) : ""), (NF > 5 ? $NF : "") }' "$1"
}
for ((i = 0; i < ${#plan[@]}; i += 2)); do
  s=${plan[i]} arg=${plan[i + 1]}
  if [ "$(lim 20)" -lt 20 ]; then echo "== $s skipped: the budget is spent"; continue; fi
  case $s in
    info)
      stage info
      nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv | tee "$L/info.log"
      "$K" --version | tee -a "$L/info.log"
      # cuBLAS is opened at the first GEMM (src/cuda/cuda_cublas.h): say now whether it opens here.
      "$BIN/kvparity_cuda_tests" --gtest_filter='CudaCublas.*' 2>&1 | grep -E "^\[  (FAILED|PASSED) |error|Failure" |
        tee -a "$L/info.log" ;;
    build) stage build; native_build; K="$BIN/kvparity" ;;
    tests)
      f=${arg:-'*'}
      stage "tests $f"
      [ "$f" = '*' ] && ran_all_tests=1
      tmo 400 "$BIN/kvparity_cuda_tests" --gtest_filter="$f" >"$L/tests.log" 2>&1
      echo "rc=$?"; grep -E "^\[  (FAILED|PASSED) |measured|Failure|error|Expected|Which is|actual" "$L/tests.log" | head -60 ;;
    sanitize)
      f=${arg:-'CudaBackend.Batch*'}
      stage "sanitize $f"
      tmo 300 compute-sanitizer --tool memcheck --print-limit 20 "$BIN/kvparity_cuda_tests" --gtest_filter="$f" \
        >"$L/sanitize.log" 2>&1
      echo "rc=$?"; grep -E "ERROR SUMMARY|Invalid|PASSED|FAILED" "$L/sanitize.log" | head -20 ;;
    gemm|attention)
      # Every GEMM the GPU runs at 7B shapes (bench/bench_cuda_matmul.cpp: cuBLAS, each invariant
      # kernel forced, portable; M = 1 .. 16384; time per call, TFLOPS, GBps), or every attention
      # (bench/bench_cuda_attention.cpp: decode over 512 .. 8192 keys, a batch of 64, a 512-row
      # prefill, each policy, at 7B and 1.1B geometry; time per call).
      # (The wgmma rows have a stage of their own, in a process of their own: see wgmma.)
      f=${arg:-'cuda_matmul/(standard|portable|invariant:[^w])'}; [ $s = attention ] && f=${arg:-cuda_attention/}
      stage "$s $f"
      tmo 240 "$BIN/kvparity_bench" --benchmark_filter="$f" --benchmark_out="$L/$s.json" \
        --benchmark_out_format=json >"$L/$s.log" 2>&1
      echo "rc=$?"
      bench_rows "$L/$s.log"
      if [ $s = attention ] && [ -z "$arg" ]; then
        # The invariant rows again with two K/V stages everywhere (by default decode steps take one:
        # half the shared memory, more of the one-warp blocks a multiprocessor; the same bits).
        echo "-- invariant, KVPARITY_CUDA_ATTN_STAGES=2"
        KVPARITY_CUDA_ATTN_STAGES=2 tmo 60 "$BIN/kvparity_bench" --benchmark_filter='cuda_attention/invariant/' \
          >"$L/attention_stages2.log" 2>&1
        bench_rows "$L/attention_stages2.log"
        # And with decode blocks of one warp (the kernel before 2026-11-27; by default four; the
        # same bits).
        echo "-- invariant, KVPARITY_CUDA_SPLIT_WARPS=1"
        KVPARITY_CUDA_SPLIT_WARPS=1 tmo 60 "$BIN/kvparity_bench" --benchmark_filter='cuda_attention/invariant/' \
          >"$L/attention_warps1.log" 2>&1
        bench_rows "$L/attention_warps1.log"
        # standard's decode with 16-bit K/V through the 8-loads-a-round path (before 2026-11-27's
        # whole-row loads; the same bits).
        echo "-- standard, KVPARITY_CUDA_DECODE_WHOLE=0"
        KVPARITY_CUDA_DECODE_WHOLE=0 tmo 60 "$BIN/kvparity_bench" --benchmark_filter='cuda_attention/standard/' \
          >"$L/attention_whole0.log" 2>&1
        bench_rows "$L/attention_whole0.log"
      fi ;;
    ncu)
      # Hardware counters (Nsight Compute; a Firecracker machine lets it read them, gVisor does not,
      # and then this says so and goes on) for the kernels whose time the wall-clock rows leave in
      # question: kvparity_bench's attention rows time eager calls, host planning and descriptor
      # uploads included, so "13.4 us a decode call" may be mostly host. Per kernel: duration, DRAM
      # and SM throughput, occupancy, registers, warp stalls; ncu_*.txt whole in the logs.
      # 1) attention alone, 7B geometry, standard and invariant: decode over 512 keys, a batch of
      #    64 steps, a 512-row prefill (the second launch of each: the first plans and uploads);
      # 2) decode GEMMs at one row (cuBLAS and invariant's auto; q and down are invariant's
      #    slowest against cuBLAS);
      # 3) every kernel of one 7B decode step, summed by name (issue 13's 160 tok/s: where a step's
      #    device time goes, against its wall time), and the kernels of a few layers of the batch-64
      #    cache-OFF step (the GSM8K study's), each alone: bench's phases are NVTX ranges.
      stage ncu
      if ! command -v ncu >/dev/null; then echo "no ncu here"; continue; fi
      NCU=(ncu --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy
        --section WarpStateStats --section MemoryWorkloadAnalysis)
      # Device time by kernel name over a whole report (ncu's text output), the longest first.
      ncu_sum() {
        python3 - "$1" <<'PY'
import collections, re, sys
def short(n):
    n = n.replace("(anonymous namespace)::", "")
    d = 0
    for i, c in enumerate(n):
        d += c == "<"
        d -= c == ">"
        if c == "(" and d == 0:
            n = n[:i]
            break
    d, start = 0, 0
    for i, c in enumerate(n):
        d += c == "<"
        d -= c == ">"
        if c == " " and d == 0:
            start = i + 1
    n = n[start:]
    lt = n.find("<")
    k = n.rfind("::", 0, lt if lt >= 0 else len(n))
    return (n[k + 2:] if k >= 0 else n)[:70]
tot, cnt, name = collections.defaultdict(float), collections.Counter(), None
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"  (\S.*) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\), Context", line)
    if m:
        name = short(m.group(1))
        continue
    m = re.match(r"\s+(?:Duration|gpu__time_duration.sum)\s+(\S+)\s+([\d.,]+)", line)
    if m and name:
        v = float(m.group(2).replace(",", ""))
        tot[name] += {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6}.get(m.group(1), 1.0) * v
        cnt[name] += 1
        name = None
print("%-70s %6s %11s %9s" % ("kernel", "calls", "total us", "mean us"))
for n, t in sorted(tot.items(), key=lambda x: -x[1]):
    print("%-70s %6d %11.1f %9.2f" % (n, cnt[n], t, t / cnt[n]))
print("%-70s %6d %11.1f" % ("all", sum(cnt.values()), sum(tot.values())))
PY
      }
      ncu_rows() {
        grep -E "Context [0-9]+, Stream|^ +Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per Thread|Warp Cycles Per Issued|being stalled|==ERROR==|==WARNING==" "$1" |
          sed -E 's/^ +//; s/\(([^()]|\([^()]*\))*\) \(/ (/; s/ {2,}/ /g' | cut -c1-150 | head -${2:-60}
      }
      for c in standard/fp16/7b/decode_512 invariant/fp16/7b/decode_512 standard/fp16/7b/batch64_decode_512 \
        invariant/fp16/7b/batch64_decode_512 standard/fp16/7b/prefill_512 invariant/fp16/7b/prefill_512; do
        f=$L/ncu_attention_${c//\//_}.txt
        echo "-- $c"
        tmo 60 "${NCU[@]}" -k 'regex:decode_kernel|prefill_mma_kernel' --launch-skip 1 --launch-count 1 \
          "$BIN/kvparity_bench" --benchmark_filter="^cuda_attention/$c/" >"$f" 2>&1
        ncu_rows "$f" 12
      done
      for c in standard/fp16/M1/7b_q invariant:auto/fp16/M1/7b_q standard/fp16/M1/7b_down invariant:auto/fp16/M1/7b_down \
        standard/fp16/M1/7b_gate; do
        f=$L/ncu_gemm_${c//[\/:]/_}.txt
        echo "-- $c"
        tmo 45 "${NCU[@]}" -k 'regex:gemm|gemv|mma|Kernel|nvjet' --launch-skip 2 --launch-count 1 "$BIN/kvparity_bench" \
          --benchmark_filter="^cuda_matmul/$c" >"$f" 2>&1
        ncu_rows "$f" 12
      done
      # (one metric, one replay a kernel: with the SpeedOfLight section, 10 each, the 2026-11-27
      # call's 150 s reached 117 of the step's 357 kernels)
      echo "-- one 7B decode step (standard, after a 512-token prompt), every kernel: device time by name"
      tmo 150 ncu --clock-control none --metrics gpu__time_duration.sum --nvtx --nvtx-include "decode/" "$K" bench --device cuda \
        --synth llama2-7b --dtype fp16 --kernels standard --prompt-tokens 512 --decode-tokens 1 --cache-off-tokens 1 \
        --repeats 1 >"$L/ncu_decode7b.txt" 2>&1
      ncu_sum "$L/ncu_decode7b.txt"
      echo "-- the batch-64 cache-OFF step at 7B (64 x 200 rows, the GSM8K study's), layers 4-6's kernels"
      tmo 200 "${NCU[@]}" --nvtx --nvtx-include "batch-cache-off/" --launch-skip 40 --launch-count 30 "$K" bench \
        --device cuda --synth llama2-7b --dtype fp16 --kernels standard --prompt-tokens 16 --decode-tokens 2 \
        --cache-off-tokens 200 --batch-size 64 --batch-cache-off --repeats 1 >"$L/ncu_study7b.txt" 2>&1
      ncu_sum "$L/ncu_study7b.txt"
      ncu_rows "$L/ncu_study7b.txt" 200 ;;
    workspace)
      # standard's decode step with cuBLAS's 32 MiB workspace (default, PyTorch's on Hopper) and with
      # none (KVPARITY_CUDA_BLAS_WORKSPACE_MB=0: no split-K, whose reductions are graph nodes of
      # their own): 7B decode after a 512-token prompt, each graph's kernel nodes by name.
      stage workspace
      ab KVPARITY_CUDA_BLAS_WORKSPACE_MB "32 0" workspace7b 150 "decode|graph" --kernels standard --prompt-tokens 512 \
        --decode-tokens 128 --cache-off-tokens 1 --repeats 3 ;;
    whole)
      # standard's decode attention: a lane's whole K row and its share of a chunk's 32 V rows in
      # one round trip (default since 2026-11-27, unmeasured) vs 8 loads a round
      # (KVPARITY_CUDA_DECODE_WHOLE=0); decode at 1.1B and 7B after a 512-token prompt (issue 13's
      # 450 and 160 tok/s; the attention stage has the per-call rows, batch 64 included). The same
      # bits either way.
      stage whole
      ab_decode KVPARITY_CUDA_DECODE_WHOLE "0 1" whole ;;
    wgmma)
      # The wgmma family (KVPARITY_CUDA_GEMM=wgmma; its own bits): its tests, each tile against
      # cuBLAS and both families' choices (auto: wgmma-tma+mma16b on sm_90; mma: the mma.sync
      # kernels') at 7B shapes, then 7B passes with each (standard beside).
      stage wgmma
      if [ -z "${ran_all_tests:-}" ]; then  # else the tests stage ran them
        tmo 200 "$BIN/kvparity_cuda_tests" --gtest_filter='CudaInvariant.GemmRow*:CudaInvariant.Wgmma*' \
          >"$L/wgmma_tests.log" 2>&1
        echo "tests rc=$?"; grep -E "^\[  (FAILED|PASSED) |measured|Failure|error" "$L/wgmma_tests.log" | head -40
      fi
      # (At one row on an H100, 2026-11-27: mma16b within 5-7% of the mma.sync family's register
      # kernel, mma16x 1.2-1.5x slower, mma16 1.3x; docs/performance.md.)
      tmo 150 "$BIN/kvparity_bench" \
        --benchmark_filter='cuda_matmul/(standard|invariant:(auto|mma)|invariant:wgmma-(tma|mma16b|mma16b-deep))/fp16/M(1|16|64)/' \
        >"$L/wgmma_gemm.log" 2>&1
      echo "bench rc=$?"; bench_rows "$L/wgmma_gemm.log"
      # Issue 14's ratios at batch 1 (decode, prefill, cache OFF) and batch 64 with each family's
      # choice (WGMMA_GEMMS: any KVPARITY_CUDA_GEMM names, e.g. wgmma-tma wgmma-tma+mma16x).
      for g in ${WGMMA_GEMMS:-auto wgmma-tma+mma16b}; do
        KVPARITY_CUDA_GEMM=$g tmo 150 "$K" bench --device cuda --synth llama2-7b --dtype fp16 \
          --kernels standard,invariant --prompt-tokens 512 --decode-tokens 64 --cache-off-tokens 512 --repeats 2 2>&1 |
          tee "$L/${g/+/_}_7b.log" | tail -6
        KVPARITY_CUDA_GEMM=$g tmo 150 "$K" bench --device cuda --synth llama2-7b --dtype fp16 \
          --kernels standard,invariant --prompt-tokens 128 --decode-tokens 64 --cache-off-tokens 1 --repeats 2 \
          --batch-size 64 2>&1 | tee "$L/${g/+/_}_7b_batch64.log" | tail -6
      done ;;
    moe)
      # Mixtures of experts on the GPU (written 2026-12-02 without one): their CUDA tests in a
      # process of their own (a fault there ends only that process's context), then OLMoE-1B-7B's
      # real shape (13.8 GB of fp16 weights; each sparse layer waits for its router logits, so no
      # CUDA graph), both policies, batch 1 and 16.
      stage moe
      tmo 200 "$BIN/kvparity_cuda_tests" \
        --gtest_filter='*mixtral*:*qwen2_moe*:*qwen3_moe*:*olmoe*:*MixtureOfExperts*:CudaPortable.GoldenDigests*' \
        >"$L/moe_tests.log" 2>&1
      echo "rc=$?"; grep -E "^\[  (FAILED|PASSED) |measured|Failure|error|Expected|Which is|actual" "$L/moe_tests.log" | head -40
      tmo 200 "$K" bench --device cuda --synth olmoe-1b-7b --dtype fp16 --kernels standard,invariant \
        --prompt-tokens 512 --decode-tokens 32 --cache-off-tokens 512 --repeats 1 2>&1 | tee "$L/moe_bench.log" | tail -6
      tmo 150 "$K" bench --device cuda --synth olmoe-1b-7b --dtype fp16 --kernels standard,invariant \
        --prompt-tokens 128 --decode-tokens 32 --cache-off-tokens 1 --repeats 1 --batch-size 16 2>&1 |
        tee "$L/moe_bench_batch16.log" | tail -6 ;;
    bench11b)
      stage bench11b
      tmo 300 "$K" bench --device cuda --synth tinyllama-1.1b --dtype fp16 --prompt-tokens 512 --decode-tokens 128 \
        --cache-off-tokens 512 --repeats 3 2>&1 | tee "$L/bench11b.log" | tail -8 ;;
    bench7b)
      stage bench7b
      tmo 400 "$K" bench --device cuda --synth llama2-7b --dtype fp16 --prompt-tokens 512 --decode-tokens 128 \
        --cache-off-tokens 512 --repeats 3 2>&1 | tee "$L/bench7b.log" | tail -8 ;;
    ops11b|ops7b)
      stage $s
      m=tinyllama-1.1b; [ $s = ops7b ] && m=llama2-7b
      tmo 400 "$K" bench --device cuda --synth $m --dtype fp16 --kernels "${OPS_KERNELS:-standard}" \
        --prompt-tokens 512 --decode-tokens 32 --cache-off-tokens 512 --repeats 1 --op-times 2>&1 |
        tee "$L/$s.log" | tail -90 ;;
    policies11b|policies7b)
      # standard vs the fixed-order policies (invariant: tensor-core GEMM; portable: CUDA cores),
      # batch 1, then standard vs invariant at batch 64.
      stage $s
      m=tinyllama-1.1b; [ $s = policies7b ] && m=llama2-7b
      tmo 300 "$K" bench --device cuda --synth $m --dtype fp16 --kernels standard,invariant,portable \
        --prompt-tokens 512 --decode-tokens 64 --cache-off-tokens 512 --repeats 2 2>&1 | tee "$L/$s.log" | tail -12
      tmo 200 "$K" bench --device cuda --synth $m --dtype fp16 --kernels standard,invariant \
        --prompt-tokens 128 --decode-tokens 64 --cache-off-tokens 1 --repeats 2 --batch-size 64 2>&1 |
        tee "$L/${s}_batch64.log" | tail -8 ;;
    compare7b)
      # Issue 14: standard fp16 diverges between cache ON and OFF at 7B shape, invariant never does:
      # the first COMPARE_PROMPTS GSM8K questions, both sides in batches of COMPARE_BATCH. Cache OFF
      # recomputes the whole sequence every step (and standard runs it twice: free, then forced along
      # the cache-ON tokens), so 64 x 256 tokens does not fit one call; batches of 16 land as they
      # finish in a folder kept on the machine, and the stage run again on the warm machine resumes.
      stage compare7b
      synth7b || continue
      n=${COMPARE_PROMPTS:-64} b=${COMPARE_BATCH:-16} cdir=/tmp/kvp_compare7b
      head -n "$n" "$KVPARITY_SHARED/data/gsm8k/test.jsonl" |
        python3 -c 'import json,sys
for i,l in enumerate(sys.stdin): print(json.dumps({"id":"gsm-%d"%i,"prompt":json.loads(l)["question"]}))' >"$L/prompts.jsonl"
      tmo 500 "$K" compare --model /tmp/l7 --tokenizer "$KVPARITY_SHARED/models/llama2-tokenizer" \
        --prompts "$L/prompts.jsonl" --device cuda --kernels "${COMPARE_KERNELS:-standard,invariant}" --dtype fp16 \
        --max-new-tokens "${COMPARE_TOKENS:-128}" --baseline "cache=off,batch-size=$b" \
        --candidate "cache=on,batch-size=$b" --out "$cdir" >>"$L/compare7b.log" 2>&1
      echo "rc=$?"; tail -3 "$L/compare7b.log"
      echo "records: $(cat "$cdir"/*.jsonl 2>/dev/null | wc -l) of $((n * 2)) (prompts x kernels)"
      cp -r "$cdir" "$L/compare7b"
      grep -E "^\| (condition|fp|bf)" "$cdir/summary.md" 2>/dev/null ;;
    fusion7b)
      # The decode step with the rounding points folded (default) and launched one by one
      # (KVPARITY_CUDA_FUSION=0): same bits, fewer graph nodes; the last line names the nodes.
      stage fusion7b
      ab KVPARITY_CUDA_FUSION "0 1" fusion7b 200 "decode|graph" --prompt-tokens 64 --decode-tokens 128 \
        --cache-off-tokens 64 --repeats 3 ;;
    group)
      # q/k/v and gate/up as one GEMM launch each (default) vs a launch per projection
      # (KVPARITY_CUDA_GROUP=0), decode at 1.1B and 7B shapes: invariant the same bits either way
      # (CudaGroup.*), 3 fewer graph nodes a layer; the last line of each names the nodes.
      stage group
      AB_SYNTH=tinyllama-1.1b ab KVPARITY_CUDA_GROUP "0 1" group11b 150 "decode|graph" --kernels standard,invariant \
        --prompt-tokens 64 --decode-tokens 128 --cache-off-tokens 1 --repeats 3
      ab KVPARITY_CUDA_GROUP "0 1" group7b 200 "decode|graph" --kernels standard,invariant --prompt-tokens 64 \
        --decode-tokens 128 --cache-off-tokens 1 --repeats 3 ;;
    split)
      # standard's decode attention with splits of at least 64 keys (before 2026-11-26) vs 32 (now):
      # more warps over a short cache; decode at 1.1B and 7B with a 512-token prompt (H100,
      # 2026-11-26: 427 -> 486 and 138 -> 144 tok/s).
      stage split
      ab_decode KVPARITY_CUDA_SPLIT_KEYS "64 32" split ;;
    tiles)
      # The tiled GEMMs' block order (cuda_tile_order.cuh, 2026-11-26 evening, unmeasured): one tile
      # row after another (KVPARITY_CUDA_TILE_GROUP=1, as before) vs groups of 8 tile rows sweeping
      # W's tile columns together; per GEMM at prefill / cache-OFF sizes (the persistent TMA kernel,
      # wgmma-tmap*, beside the plain one), then a 7B cache-OFF step and prefill with the wgmma-tma
      # kernel and with the persistent one. The same bits either way.
      stage tiles
      for v in 1 8; do
        echo "-- KVPARITY_CUDA_TILE_GROUP=$v"
        KVPARITY_CUDA_TILE_GROUP=$v tmo 90 "$BIN/kvparity_bench" \
          --benchmark_filter='cuda_matmul/(standard|invariant:auto|invariant:wgmma-tmap?128x(128|256))/fp16/M(512|2048|16384)/' \
          >"$L/tiles_gemm_$v.log" 2>&1
        bench_rows "$L/tiles_gemm_$v.log"
      done
      KVPARITY_CUDA_GEMM=wgmma-tma ab KVPARITY_CUDA_TILE_GROUP "1 8" tiles7b 120 "prefill|cache-off|invariant" \
        --kernels standard,invariant --prompt-tokens 512 --decode-tokens 8 --cache-off-tokens 512 --repeats 2
      KVPARITY_CUDA_GEMM=wgmma-tmap ab KVPARITY_CUDA_TILE_GROUP "8" tiles7b_persistent 120 "prefill|cache-off|invariant" \
        --kernels invariant --prompt-tokens 512 --decode-tokens 8 --cache-off-tokens 512 --repeats 2 ;;
    ring7b)
      # The invariant decode GEMM: shared-memory ring (auto) vs register prefetch, batch 1 and 64,
      # beside standard: the same bits either way (gemm measures each kernel alone).
      stage ring7b
      ab KVPARITY_CUDA_GEMM "registers auto" ring7b 280 "" --kernels standard,invariant --prompt-tokens 64 \
        --decode-tokens 64 --cache-off-tokens 64 --repeats 2 --batch-size 64 ;;
    pdl)
      # Programmatic dependent launch off (default) and on, decode at 1.1B and 7B shapes, standard
      # and invariant: the same bits (CudaBackend.ProgrammaticLaunches*), shorter gaps between kernels.
      stage pdl
      AB_SYNTH=tinyllama-1.1b ab KVPARITY_CUDA_PDL "0 1" pdl11b 150 "decode|graph" --kernels standard,invariant \
        --prompt-tokens 64 --decode-tokens 128 --cache-off-tokens 1 --repeats 3
      ab KVPARITY_CUDA_PDL "0 1" pdl7b 200 "decode|graph" --kernels standard,invariant --prompt-tokens 64 \
        --decode-tokens 128 --cache-off-tokens 1 --repeats 3 ;;
    attn7b)
      # The flash attention with the next K/V tile's copies overlapping this one (default) vs one
      # stage (KVPARITY_CUDA_ATTN_STAGES=1): prefill and cache-OFF over 512, standard and invariant.
      stage attn7b
      ab KVPARITY_CUDA_ATTN_STAGES "1 2" attn7b 250 "" --kernels standard,invariant --prompt-tokens 512 \
        --decode-tokens 32 --cache-off-tokens 512 --repeats 2 ;;
    batch7b)
      stage batch7b
      tmo 300 "$K" bench --device cuda --synth llama2-7b --dtype fp16 --prompt-tokens 512 --decode-tokens 128 \
        --cache-off-tokens 512 --repeats 2 --batch-size 64 2>&1 | tee "$L/batch7b.log" | tail -4 ;;
    gemv)
      # standard's own decode GEMV (KVPARITY_CUDA_GEMV=1; written 2026-11-26 late, not yet timed)
      # against cuBLAS: per GEMM at one row, then 7B and 1.1B decode both ways (issue 13's 160 and
      # 450 tok/s). Its tests run in the tests stage (CudaGemv.*).
      stage gemv
      tmo 60 "$BIN/kvparity_bench" --benchmark_filter='cuda_matmul/standard(-gemv)?/fp16/M1/' >"$L/gemv_gemm.log" 2>&1
      echo "bench rc=$?"; bench_rows "$L/gemv_gemm.log"
      ab_decode KVPARITY_CUDA_GEMV "0 1" gemv ;;
    out16)
      # standard's GEMM outputs in 16 bits (KVPARITY_CUDA_GEMM_OUT16=1; written 2026-11-28, not yet
      # timed) against fp32 outputs: 1.1B and 7B prefill and decode (issue 13's 160 and 450 tok/s
      # with it on); study7b times the study's cache-OFF step both ways.
      stage out16
      ab_decode KVPARITY_CUDA_GEMM_OUT16 "0 1" out16 ;;
    study7b)
      # One step of the GSM8K study's cache-OFF side at batch 64: 64 sequences of 200 tokens (the
      # 0-shot prompts' 72 plus half of the 256 new ones) from position 0 in one pass, both policies,
      # then the same with every operation timed. On 2026-11-26 a batch of 64 problems took ~213 s
      # (~0.83 s a step) where its GEMMs at cuBLAS's rate need ~0.29 s: this says where the rest goes.
      stage study7b
      tmo 200 "$K" bench --device cuda --synth llama2-7b --dtype fp16 --kernels standard,invariant \
        --prompt-tokens 128 --decode-tokens 8 --cache-off-tokens 200 --batch-size 64 --batch-cache-off --repeats 2 2>&1 |
        tee "$L/study7b.log" | tail -6
      tmo 200 "$K" bench --device cuda --synth llama2-7b --dtype fp16 --kernels standard,invariant \
        --prompt-tokens 128 --decode-tokens 8 --cache-off-tokens 200 --batch-size 64 --batch-cache-off --repeats 1 \
        --op-times 2>&1 | tee "$L/study7b_ops.log" | grep "batch cache-off" | head -60
      # standard's GEMM outputs in 16 bits (written 2026-11-28, not yet timed: cuBLAS rounds each
      # projection in its epilogue, the kernel that reads it takes the 16-bit values), standard only.
      echo "-- KVPARITY_CUDA_GEMM_OUT16=1"
      KVPARITY_CUDA_GEMM_OUT16=1 tmo 120 "$K" bench --device cuda --synth llama2-7b --dtype fp16 --kernels standard \
        --prompt-tokens 128 --decode-tokens 8 --cache-off-tokens 200 --batch-size 64 --batch-cache-off --repeats 2 2>&1 |
        tee "$L/study7b_out16.log" | tail -4
      # Every rounded input written back, as before 2026-11-27 evening (Kernels::last_read; the
      # same bits; since 2026-11-28 also K's rotated rows stored and q read as fp32), standard only.
      echo "-- KVPARITY_CUDA_SKIP_DEAD_WRITES=0"
      KVPARITY_CUDA_SKIP_DEAD_WRITES=0 tmo 120 "$K" bench --device cuda --synth llama2-7b --dtype fp16 --kernels standard \
        --prompt-tokens 128 --decode-tokens 8 --cache-off-tokens 200 --batch-size 64 --batch-cache-off --repeats 2 2>&1 |
        tee "$L/study7b_dead_writes.log" | tail -4 ;;
    upload)
      # The 7B checkpoint's upload from disk (memory-mapped, so pageable memory) through the
      # driver's own staging (KVPARITY_CUDA_STAGED_UPLOAD=0) and through kvparity's pinned buffers
      # filled by host threads (the default; the same bytes, CudaUpload.*), each twice, alternated: a
      # short bench each, its "cuda uploads" line. The GSM8K study's first batch carries this upload.
      stage upload
      synth7b || continue
      for v in 0 1 0 1; do
        echo "-- KVPARITY_CUDA_STAGED_UPLOAD=$v"
        KVPARITY_CUDA_STAGED_UPLOAD=$v tmo 90 "$K" bench --device cuda --model /tmp/l7 --dtype fp16 \
          --kernels standard --prompt-tokens 16 --decode-tokens 4 --cache-off-tokens 1 --repeats 1 2>&1 |
          tee "$L/upload_$v.log" | grep -E "cuda uploads|rror"
      done ;;
    gsm8k)
      # The study at 7B shape: synthetic weights, the Llama-2 tokenizer, 0-shot, 256 new tokens,
      # greedy, cache OFF vs ON, in batches of GSM8K_BATCH (default 16: a batch's records land when
      # it ends, and a batch of 64 x 256 tokens under `standard` outlasts most calls) into a folder
      # kept on the machine, so the stage run again on the warm machine resumes: one folder per
      # kernels / flips / GEMM setting (a folder refuses a resume with other settings).
      # GSM8K_FLIPS=0: --no-flips (no teacher-forced pass; under standard, one cache-OFF pass not two).
      # The folder's timing.jsonl (copied into the logs) splits each batch's time by side, pass time
      # against the host's loop, with rows per second; the log's tail has the totals.
      stage gsm8k
      synth7b || continue
      gk=${GSM8K_KERNELS:-standard} gf=${GSM8K_FLIPS:-1}
      t1=$(date +%s) gdir=/tmp/kvp_gsm8k_${gk//,/+}_flips${gf}_${KVPARITY_CUDA_GEMM:-auto}_out${KVPARITY_CUDA_GEMM_OUT16:-0}
      flips=(); [ "$gf" = 0 ] && flips=(--no-flips)
      tmo 600 "$K" eval gsm8k --data "$KVPARITY_SHARED/data/gsm8k/test.jsonl" --model /tmp/l7 \
        --tokenizer "$KVPARITY_SHARED/models/llama2-tokenizer" --shots 0 --max-new-tokens 256 --limit ${GSM8K_LIMIT:-128} \
        --batch-size ${GSM8K_BATCH:-16} --device cuda --dtypes fp16 --kernels "$gk" "${flips[@]}" --out "$gdir" \
        --no-report >>"$L/gsm8k.log" 2>&1
      rc=$?; t2=$(date +%s)
      echo "eval rc=$rc, $((t2 - t1)) s; records: $(wc -l < "$gdir/gsm8k.jsonl" 2>/dev/null)"; tail -6 "$L/gsm8k.log"
      cp -r "$gdir" "$L/gsm_${gk//,/+}_flips${gf}_out${KVPARITY_CUDA_GEMM_OUT16:-0}" ;;
  esac
  pack
done
