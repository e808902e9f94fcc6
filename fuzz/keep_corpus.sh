#!/usr/bin/env bash
# Replaces the committed corpora fuzz/corpus/<target>/ with a libFuzzer merge (-merge=1: the
# smallest set of inputs that keeps all coverage) of themselves and a fuzzing run's corpora.
# Only inputs grown from the project's own seeds may be committed, never bytes derived from
# ../shared: run the fuzzers without the shared models first, in a work dir of their own:
#   KVPARITY_SHARED=/nonexistent FUZZ_WORK=build-fuzz/own fuzz/run_all.sh 300
#   fuzz/keep_corpus.sh build-fuzz/own
# Usage: fuzz/keep_corpus.sh WORK [MAX_LEN=16384]   (FUZZ_BUILD: the fuzz build, default build-fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
WORK="$1"
MAX_LEN="${2:-16384}"
BUILD="${FUZZ_BUILD:-build-fuzz}"
if find "$WORK/seeds" \( -name '*stories260K*' -o -name '*aidreams260K*' -o -name 'llama2.bin' -o -name 'llama2.model' \) | grep -q .; then
  echo "error: $WORK was seeded from ../shared; rerun with KVPARITY_SHARED=/nonexistent" >&2
  exit 1
fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"
for dir in "$WORK"/corpus/*/; do
  t=$(basename "$dir")
  [ -x "$BUILD/fuzz/$t" ] || { echo "error: $BUILD/fuzz/$t not built" >&2; exit 1; }
  new=$(mktemp -d)
  # Inputs longer than MAX_LEN are left out so the repository stays small.
  "$BUILD/fuzz/$t" -merge=1 -max_len="$MAX_LEN" "$new" ${dir%/} $( [ -d "fuzz/corpus/$t" ] && echo "fuzz/corpus/$t") \
    >"$WORK/$t.merge.log" 2>&1
  rm -rf "fuzz/corpus/$t"
  mkdir -p "fuzz/corpus/$t"
  find "$new" -type f -size -"$((MAX_LEN + 1))"c -exec cp {} "fuzz/corpus/$t/" \;
  rm -rf "$new"
  printf '%-24s %5d inputs %8s\n' "$t" "$(ls "fuzz/corpus/$t" | wc -l)" "$(du -sh "fuzz/corpus/$t" | cut -f1)"
done
