#!/usr/bin/env bash
# One call on a lent GPU machine (README, "GPU (CUDA)"): run from the repository root
# after ../shared/tools/device-pack libssl-dev libssl3 filled .devkit/, carrying .devkit and, to
# skip the build there, .devbin/ (kvparity, kvparity_cuda_tests, kvparity_bench built here with
# nvcc; see `make_devbin` below). Stages are named on the command line; each writes $OUT/<stage>.log.
#   scripts/gpu_session.sh tests bench7b ...
# Stages: info, build (native build into build-cuda, used when .devbin's binaries do not run),
#   tests [gtest filter], bench11b, bench7b, fusion7b, ring7b, attn7b, ops11b, ops7b, batch7b, policies11b, policies7b,
#   compare7b, gsm8k, sanitize [gtest filter]. Env: GSM8K_KERNELS (default standard; issue 14's pair
#   is standard,invariant), GSM8K_LIMIT, GSM8K_TIMEOUT, OPS_KERNELS (ops stages; e.g. standard,invariant).
# Here:  make_devbin:  ninja -C build kvparity kvparity_cuda_tests kvparity_bench &&
#                      mkdir -p .devbin && cp build/kvparity build/kvparity_cuda_tests build/kvparity_bench .devbin/
set -uo pipefail
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
source .devkit/setup.sh >/dev/null
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=$d:$LD_LIBRARY_PATH
done
BIN=.devbin
usable() { "$BIN/kvparity" --version >/dev/null 2>&1 && "$BIN/kvparity_cuda_tests" --gtest_list_tests >/dev/null 2>&1; }
native_build() {
  cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVPARITY_SHARED="$KVPARITY_SHARED" \
    -DKVPARITY_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKVPARITY_PYTHON=OFF >"$OUT/build.log" 2>&1 &&
    cmake --build build-cuda -j16 --target kvparity kvparity_cuda_tests kvparity_bench >>"$OUT/build.log" 2>&1
  local rc=$?
  tail -5 "$OUT/build.log"
  BIN=build-cuda
  return $rc
}
if ! usable; then
  echo "carried binaries do not run here:"; ldd "$BIN/kvparity" 2>&1 | grep -i "not found" | head
  native_build || { echo "native build failed"; exit 1; }
fi
K="$BIN/kvparity"
stage() { echo "== $1 ($(date +%T))"; }
# ab VAR "VALUES" NAME TIMEOUT GREP BENCH-ARGS...: the 7B fp16 bench once per value of an environment
# switch that changes speed, not bits; each log in $OUT/NAME_VALUE.log, its last lines (or GREP's).
ab() {
  local var=$1 values=$2 name=$3 limit=$4 pat=$5 v
  shift 5
  for v in $values; do
    echo "-- $var=$v"
    env "$var=$v" timeout "$limit" "$K" bench --device cuda --synth llama2-7b --dtype fp16 "$@" 2>&1 |
      tee "$OUT/${name}_$v.log" | if [ -n "$pat" ]; then grep -E "$pat"; else tail -4; fi
  done
}
while [ $# -gt 0 ]; do
  s=$1; shift
  case $s in
    info)
      stage info
      nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv | tee "$OUT/info.log"
      "$K" --version | tee -a "$OUT/info.log" ;;
    build) stage build; native_build; K="$BIN/kvparity" ;;
    tests)
      f='*'; if [ $# -gt 0 ] && [[ $1 != -* ]] && [[ $1 == *[.*]* ]]; then f=$1; shift; fi
      stage "tests $f"
      timeout 400 "$BIN/kvparity_cuda_tests" --gtest_filter="$f" >"$OUT/tests.log" 2>&1
      echo "rc=$?"; grep -E "^\[  (FAILED|PASSED) |measured|Failure|error|Expected|Which is|actual" "$OUT/tests.log" | head -60 ;;
    sanitize)
      f=${1:-'CudaBackend.Batch*'}; shift || true
      stage "sanitize $f"
      timeout 300 compute-sanitizer --tool memcheck --print-limit 20 "$BIN/kvparity_cuda_tests" --gtest_filter="$f" \
        >"$OUT/sanitize.log" 2>&1
      echo "rc=$?"; grep -E "ERROR SUMMARY|Invalid|PASSED|FAILED" "$OUT/sanitize.log" | head -20 ;;
    bench11b)
      stage bench11b
      timeout 300 "$K" bench --device cuda --synth tinyllama-1.1b --dtype fp16 --prompt-tokens 512 --decode-tokens 128 \
        --cache-off-tokens 512 --repeats 3 2>&1 | tee "$OUT/bench11b.log" | tail -8 ;;
    bench7b)
      stage bench7b
      timeout 400 "$K" bench --device cuda --synth llama2-7b --dtype fp16 --prompt-tokens 512 --decode-tokens 128 \
        --cache-off-tokens 512 --repeats 3 2>&1 | tee "$OUT/bench7b.log" | tail -8 ;;
    ops11b|ops7b)
      stage $s
      m=tinyllama-1.1b; [ $s = ops7b ] && m=llama2-7b
      timeout 400 "$K" bench --device cuda --synth $m --dtype fp16 --kernels "${OPS_KERNELS:-standard}" \
        --prompt-tokens 512 --decode-tokens 32 --cache-off-tokens 512 --repeats 1 --op-times 2>&1 |
        tee "$OUT/$s.log" | tail -90 ;;
    policies11b|policies7b)
      # standard vs the fixed-order policies (invariant: tensor-core GEMM; portable: CUDA cores).
      stage $s
      m=tinyllama-1.1b; [ $s = policies7b ] && m=llama2-7b
      timeout 500 "$K" bench --device cuda --synth $m --dtype fp16 --kernels standard,invariant,portable \
        --prompt-tokens 512 --decode-tokens 64 --cache-off-tokens 512 --repeats 2 2>&1 | tee "$OUT/$s.log" | tail -12 ;;
    compare7b)
      # Issue 14: standard fp16 diverges between cache ON and OFF at 7B shape, invariant never does.
      stage compare7b
      [ -d /tmp/l7 ] || "$K" synth --preset llama2-7b --dtype fp16 --out /tmp/l7 >/dev/null 2>"$OUT/synth.log"
      timeout 500 "$K" compare --model /tmp/l7 --tokenizer "$KVPARITY_SHARED/models/llama2-tokenizer" \
        --prompts builtin:stories --device cuda --kernels standard,invariant --dtype fp16 --max-new-tokens 256 \
        --out "$OUT/compare7b" >"$OUT/compare7b.log" 2>&1
      echo "rc=$?"; tail -12 "$OUT/compare7b.log" ;;
    fusion7b)
      # The decode step with the rounding points folded (default) and launched one by one
      # (KVPARITY_CUDA_FUSION=0): same bits, fewer graph nodes; the last line names the nodes.
      stage fusion7b
      ab KVPARITY_CUDA_FUSION "0 1" fusion7b 200 "decode|graph" --prompt-tokens 64 --decode-tokens 128 \
        --cache-off-tokens 64 --repeats 3 ;;
    ring7b)
      # The invariant decode GEMM: shared-memory ring (default) vs register prefetch
      # (KVPARITY_CUDA_GEMM_RING=0), batch 1 and 64, beside standard: the same bits either way.
      stage ring7b
      ab KVPARITY_CUDA_GEMM_RING "0 1" ring7b 280 "" --kernels standard,invariant --prompt-tokens 64 \
        --decode-tokens 64 --cache-off-tokens 64 --repeats 2 --batch-size 64 ;;
    attn7b)
      # The flash attention with the next K/V tile's copies overlapping this one (default) vs one
      # stage (KVPARITY_CUDA_ATTN_STAGES=1): prefill and cache-OFF over 512, standard and invariant.
      stage attn7b
      ab KVPARITY_CUDA_ATTN_STAGES "1 2" attn7b 250 "" --kernels standard,invariant --prompt-tokens 512 \
        --decode-tokens 32 --cache-off-tokens 512 --repeats 2 ;;
    batch7b)
      stage batch7b
      timeout 300 "$K" bench --device cuda --synth llama2-7b --dtype fp16 --prompt-tokens 512 --decode-tokens 128 \
        --cache-off-tokens 512 --repeats 2 --batch-size 64 2>&1 | tee "$OUT/batch7b.log" | tail -4 ;;
    gsm8k)
      # The study at 7B shape: synthetic weights, the Llama-2 tokenizer, 0-shot, 256 new tokens,
      # greedy, cache OFF vs ON, batches of 64 (results appended per problem: a cut run still counts).
      stage gsm8k
      t0=$(date +%s)
      [ -d /tmp/l7 ] || "$K" synth --preset llama2-7b --dtype fp16 --out /tmp/l7 >/dev/null 2>"$OUT/synth.log" ||
        { tail -3 "$OUT/synth.log"; continue; }
      t1=$(date +%s); echo "synth: $((t1 - t0)) s"
      timeout ${GSM8K_TIMEOUT:-400} "$K" eval gsm8k --data "$KVPARITY_SHARED/data/gsm8k/test.jsonl" --model /tmp/l7 \
        --tokenizer "$KVPARITY_SHARED/models/llama2-tokenizer" --shots 0 --max-new-tokens 256 --limit ${GSM8K_LIMIT:-128} \
        --batch-size 64 --device cuda --dtypes fp16 --kernels "${GSM8K_KERNELS:-standard}" --out "$OUT/gsm" --no-report >"$OUT/gsm8k.log" 2>&1
      rc=$?; t2=$(date +%s)
      echo "eval rc=$rc, $((t2 - t1)) s; records: $(wc -l < "$OUT/gsm/gsm8k.jsonl" 2>/dev/null)"; tail -5 "$OUT/gsm8k.log" ;;
    *) echo "unknown stage $s"; exit 2 ;;
  esac
done
