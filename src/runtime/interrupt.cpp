#include "runtime/interrupt.h"

#include <atomic>

namespace kvp {
namespace {
std::atomic<InterruptCheck> g_check{nullptr};
}  // namespace

void set_interrupt_check(InterruptCheck check) { g_check.store(check); }

void check_interrupt() {
  if (const InterruptCheck f = g_check.load(std::memory_order_relaxed)) f();
}

}  // namespace kvp
