#pragma once
// The lab's studies as Python calls: kvparity.compare, eval_gsm8k, merge, profile, patch and inspect. Each takes its
// command's options as keyword arguments (the CLI's names, '_' for '-'; an unknown one is refused
// with the name probably meant) and returns, as a dict, the JSON the command writes. A folder given
// as out= is checked before the work and written after it, as the command's --out.
#include <pybind11/pybind11.h>

namespace kvp::python {

void add_study_calls(pybind11::module_& m);

}  // namespace kvp::python
