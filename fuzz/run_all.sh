#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) into build-fuzz if needed, makes seed corpora
# (fuzz/make_corpus.sh) and runs every target for SECONDS, then prints executions and findings.
# The build leaves CUDA out: where nvcc is found, it would be handed clang's -fsanitize=fuzzer flags.
# Usage: fuzz/run_all.sh [SECONDS=60] [target ...]
# Env: FUZZ_BUILD (build dir, default build-fuzz), FUZZ_WORK (corpora and findings, default
#      build-fuzz/work), KVPARITY_SHARED (shared models used as extra seeds, default ../shared),
#      FUZZ_JOBS (parallel builds, default 2), FUZZ_PARALLEL (targets fuzzing at once, default
#      the cores), FUZZ_NO_BUILD=1 (run the targets as built).
# Exit status: 0 when no target found a crash, leak, timeout or out-of-memory; 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-60}"
shift || true
BUILD="${FUZZ_BUILD:-build-fuzz}"
WORK="${FUZZ_WORK:-$BUILD/work}"
ALL=(fuzz_gguf fuzz_safetensors fuzz_safetensors_index fuzz_hf_config
     fuzz_llama2c fuzz_tokenizer_bin fuzz_tokenizer_model fuzz_tokenizer_json fuzz_tokenize fuzz_chat_template)
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=("${ALL[@]}")

CXX_CLANG="${FUZZ_CXX:-$(command -v clang++ || command -v clang++-14)}"
if [ -z "$CXX_CLANG" ]; then echo "error: clang++ not found (scripts/setup.sh installs clang and libclang-rt-dev)" >&2; exit 2; fi
if [ "${FUZZ_NO_BUILD:-0}" = 1 ]; then
  :  # use the targets as they are
elif [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCMAKE_CXX_COMPILER="$CXX_CLANG" -DKVPARITY_FUZZ=ON \
    -DKVPARITY_BUILD_TESTS=OFF -DKVPARITY_BUILD_BENCH=OFF -DKVPARITY_CUDA=OFF -DKVPARITY_PYTHON=OFF >/dev/null || exit 2
fi
[ "${FUZZ_NO_BUILD:-0}" = 1 ] || cmake --build "$BUILD" --target fuzz_all -j"${FUZZ_JOBS:-2}" || exit 2

# Seeds are written by a kvparity binary: the Release one in build/ when there is one.
KVP="${FUZZ_KVPARITY:-build/kvparity}"
if [ ! -x "$KVP" ]; then
  cmake --build "$BUILD" --target kvparity -j"${FUZZ_JOBS:-2}" || exit 2
  KVP="$BUILD/kvparity"
fi
bash fuzz/make_corpus.sh "$WORK/seeds" "$KVP" >/dev/null || exit 2

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# Each target alone on a core: FUZZ_PARALLEL targets at once (default: the cores), each for SECS.
run_target() {
  local t=$1 corpus="$WORK/corpus/$1" found="$WORK/findings/$1" log="$WORK/$1.log"
  mkdir -p "$corpus" "$found"
  local seeds=()
  [ -d "$WORK/seeds/$t" ] && seeds+=("$WORK/seeds/$t")
  [ -d "fuzz/corpus/$t" ] && seeds+=("fuzz/corpus/$t")
  [ -d "fuzz/regressions/$t" ] && seeds+=("fuzz/regressions/$t")
  # -rss_limit_mb / -malloc_limit_mb: an input that makes a parser allocate far beyond its size
  # counts as a finding; -timeout: one input taking longer than 10 s is a hang.
  "$BUILD/fuzz/$t" "$corpus" "${seeds[@]}" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2560 \
    -malloc_limit_mb=1024 -max_len=1048576 -print_final_stats=1 -artifact_prefix="$found/" \
    >"$log" 2>&1
  echo $? >"$WORK/$t.rc"
}
PARALLEL="${FUZZ_PARALLEL:-$(nproc)}"
running=0
for t in "${TARGETS[@]}"; do
  if ((running >= PARALLEL)); then
    wait -n
    running=$((running - 1))
  fi
  rm -f "$WORK/$t.rc"  # none written: the target did not finish (counted as a failure)
  run_target "$t" &
  running=$((running + 1))
done
wait

status=0
rows=()
for t in "${TARGETS[@]}"; do
  found="$WORK/findings/$t"
  log="$WORK/$t.log"
  rc=$(cat "$WORK/$t.rc" 2>/dev/null || echo 2)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  nfind=$(find "$found" -type f | wc -l)
  ncorp=$(find "$WORK/corpus/$t" -type f | wc -l)
  [ "$rc" -ne 0 ] && status=1
  rows+=("$(printf '%-24s %12s %8s %8s %9s %4s' "$t" "${execs:-?}" "${cov:-?}" "$ncorp" "$nfind" "$rc")")
  if [ "$rc" -ne 0 ]; then
    echo "== $t failed (rc $rc); log $log; last lines:" >&2
    grep -E 'ERROR|SUMMARY|terminate|what\(\)|Test unit written' "$log" | head -8 >&2
  fi
done
printf '\n%-24s %12s %8s %8s %9s %4s\n' target executions cov new findings rc
printf '%s\n' "${rows[@]}"
# libFuzzer writes to the first corpus folder only the inputs this run found new coverage with;
# the seeds and fuzz/corpus/ it loads stay where they are. A 0 in `new` is a run the committed
# corpus already covered (fuzz_llama2c's fixed-layout parser, typically), not an empty corpus.
echo "(${SECS} s per target; new: inputs this run added to $WORK/corpus/<target>/; findings in $WORK/findings/<target>/)"
exit $status
