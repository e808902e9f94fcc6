// libFuzzer entry point; the body is kvp::fuzz::run_chat_template in fuzz_targets.h, which the
// regression test (tests/test_hostile_regressions.cpp) also runs over fuzz/corpus/fuzz_chat_template/.
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return kvp::fuzz::run_chat_template(data, size);
}
