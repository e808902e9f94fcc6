#pragma once
// Factories for each kernel policy; make_kernels() in kernels.cpp dispatches to these.
#include <memory>

#include "kernels/kernels.h"

namespace kvp {

std::unique_ptr<Kernels> make_reference_kernels();
std::unique_ptr<Kernels> make_standard_kernels(ThreadPool* pool);
std::unique_ptr<Kernels> make_invariant_kernels(ThreadPool* pool);
std::unique_ptr<Kernels> make_portable_kernels(ThreadPool* pool);

}  // namespace kvp
