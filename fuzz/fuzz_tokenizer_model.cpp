// libFuzzer entry point; the body is kvp::fuzz::run_tokenizer_model in fuzz_targets.h, which the
// regression test (tests/test_hostile_regressions.cpp) also runs over fuzz/regressions/fuzz_tokenizer_model/.
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return kvp::fuzz::run_tokenizer_model(data, size);
}
