#pragma once
// Which build computed a result: kept in results folders (beside, never inside, the settings a
// resumed run is checked against) and printed by --version, so that numbers can be traced to the
// source and toolchain that produced them.
#include <string>

namespace kvp {

// "kvparity 0.1.0 (commit 63852f1a2b3c, GNU 12.2.0, CUDA 13.0)": the version, the source's
// `git describe --always --dirty` when built from a git checkout ("unknown" otherwise), the
// compiler, and the CUDA toolkit ("without CUDA" in a build without it).
const std::string& build_description();
// "0.1.0": the version alone (the project's, CMakeLists.txt).
const char* version_number();

}  // namespace kvp
