#pragma once
// How long work reports how far it got: done of total (units the caller names). Empty: nobody asks.
// The library calls it; only the command line decides whether, and how, to show it.
#include <cstddef>
#include <functional>

namespace kvp {

using Progress = std::function<void(size_t done, size_t total)>;

}  // namespace kvp
