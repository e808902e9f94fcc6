#include "lab/load_bench.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/model.h"

namespace kvp {
namespace {

constexpr size_t kPage = 4096;
volatile uint64_t g_sink = 0;  // where the touched bytes' sum goes, so the reads stay

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One read per page; the sum is returned so the compiler keeps the reads.
uint64_t touch_pages(const void* p, size_t n) {
  const auto* b = static_cast<const volatile uint8_t*>(p);
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i += kPage) sum += b[i];
  if (n > 0) sum += b[n - 1];
  return sum;
}

// The floor: a plain private read-only mapping of the whole file, every page touched once. The
// unmapping is not timed (the loaded model's is not either).
double map_and_touch_s(const std::string& path, uint64_t* sink) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  const size_t n = size_t(st.st_size);
  const double t0 = now_s();
  void* p = n > 0 ? ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  if (p == MAP_FAILED) {
    ::close(fd);
    fail("{}: mmap failed: {}", path, std::strerror(errno));
  }
  *sink += touch_pages(p, n);
  const double t = now_s() - t0;
  if (p != nullptr) ::munmap(p, n);
  ::close(fd);
  return t;
}

// Every file the checkpoint's tensors live in: an HF directory's model.safetensors or its shards.
double map_and_touch_s(const std::vector<std::string>& files, uint64_t* sink) {
  double t = 0;
  for (const std::string& f : files) t += map_and_touch_s(f, sink);
  return t;
}

}  // namespace

std::vector<LoadTiming> measure_load(const std::string& path, const std::vector<DType>& dtypes, int repeats) {
  uint64_t sink = 0;
  const std::vector<std::string> files = open_checkpoint(path).files;
  double file_bytes = 0;
  for (const std::string& f : files) {
    struct stat st {};
    if (::stat(f.c_str(), &st) == 0) file_bytes += double(st.st_size);
  }
  map_and_touch_s(files, &sink);  // warms the page cache
  std::vector<LoadTiming> rows;
  for (DType dt : dtypes) {
    LoadTiming r;
    r.dtype = std::string(dtype_name(dt));
    r.map_touch_s = r.load_s = r.ready_s = 1e30;
    // The floor and the load alternate, so drifting machine conditions hit both alike.
    for (int rep = 0; rep < std::max(1, repeats); ++rep) {
      r.map_touch_s = std::min(r.map_touch_s, map_and_touch_s(files, &sink));
      const double t0 = now_s();
      std::shared_ptr<Model> model = Model::from_checkpoint(open_checkpoint(path), dt);
      const double t1 = now_s();
      const ModelWeights& w = model->weights;
      sink += touch_pages(w.embed.data, w.embed.nbytes());
      for (const auto& [p, n] : w.matrix_ranges()) sink += touch_pages(p, n);
      const double t2 = now_s();
      r.load_s = std::min(r.load_s, t1 - t0);
      r.ready_s = std::min(r.ready_s, t2 - t0);
    }
    r.file_bytes = file_bytes;
    rows.push_back(r);
  }
  g_sink = sink;
  return rows;
}

std::string load_table(const std::vector<LoadTiming>& rows) {
  std::string s = fmt::format("{:<5} {:>10} {:>12} {:>9} {:>9} {:>14}\n", "dtype", "file MB", "map+touch s", "load s",
                              "ready s", "ready/floor");
  for (const auto& r : rows)
    s += fmt::format("{:<5} {:>10.1f} {:>12.3f} {:>9.3f} {:>9.3f} {:>13.2f}x\n", r.dtype, r.file_bytes / 1e6,
                     r.map_touch_s, r.load_s, r.ready_s, r.ratio());
  return s;
}

std::string load_json(const std::vector<LoadTiming>& rows) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& r : rows)
    arr.push_back({{"dtype", r.dtype},
                   {"file_bytes", r.file_bytes},
                   {"map_touch_s", r.map_touch_s},
                   {"load_s", r.load_s},
                   {"ready_s", r.ready_s},
                   {"ready_over_map_touch", r.ratio()}});
  return arr.dump(2);
}

}  // namespace kvp
