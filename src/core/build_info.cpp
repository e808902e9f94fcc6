#include "core/build_info.h"

#include "kvp_source_commit.h"  // generated into the build folder (cmake/source_commit.cmake)

namespace kvp {

const std::string& build_description() {
  static const std::string text = std::string("kvparity ") + KVP_VERSION + " (commit " + KVP_SOURCE_COMMIT + ", " +
                                  KVP_COMPILER + ", " + KVP_CUDA_TOOLKIT + ")";
  return text;
}

const char* version_number() { return KVP_VERSION; }

}  // namespace kvp
