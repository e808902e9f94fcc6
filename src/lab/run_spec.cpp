#include "lab/run_spec.h"

#include <charconv>
#include <vector>

#include "core/error.h"

namespace kvp {
namespace {

constexpr const char* kKeys = "cache, dtype, kv-dtype, kernels, threads, batch-size, prefill-chunk, device, simd";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int parse_int_value(std::string_view v, const std::string& option, std::string_view key, int lo, int hi) {
  int x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || x < lo || x > hi)
    fail_usage("{}: {}={}: expected an integer in [{}, {}]", option, key, v, lo, hi);
  return x;
}

}  // namespace

std::string RunSettings::spec() const {
  return fmt::format("cache={},dtype={},kv-dtype={},kernels={},threads={},batch-size={},prefill-chunk={}{}{}",
                     cache == CacheMode::On ? "on" : "off", dtype_name(dtype), kv_dtype.name(), policy_name(kernels),
                     threads, batch_size, prefill_chunk, device == Device::Cpu ? "" : ",device=" + device_name(device),
                     simd == SimdTarget::Auto ? "" : ",simd=" + simd_name(simd));
}

EngineOptions RunSettings::engine_options() const {
  EngineOptions e;
  e.kernels = kernels;
  e.device = device;
  e.threads = threads;
  e.kv_dtype = kv_dtype;
  e.prefill_chunk = prefill_chunk;
  e.simd = simd;
  return e;
}

RunSpec RunSpec::parse(std::string_view text, const std::string& option) {
  RunSpec s;
  s.option_ = option;
  std::vector<std::string> seen;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string_view item = trim(text.substr(start, comma == std::string_view::npos ? text.npos : comma - start));
    start = comma == std::string_view::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) {
      if (text.empty() || trim(text).empty()) break;  // "" is the empty SPEC: the command's options
      fail_usage("{}: '{}' has an empty item; a SPEC is key=value[,key=value...] with keys {}", option, text, kKeys);
    }
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      fail_usage("{}: '{}' is not key=value (keys: {})", option, item, kKeys);
    const std::string key(trim(item.substr(0, eq)));
    const std::string value(trim(item.substr(eq + 1)));
    for (const auto& k : seen)
      if (k == key) fail_usage("{}: key '{}' is given twice", option, key);
    seen.push_back(key);
    if (value.empty()) fail_usage("{}: key '{}' has no value", option, key);
    if (key == "cache") {
      if (value != "on" && value != "off") fail_usage("{}: cache={}: expected on or off", option, value);
      s.cache_ = value == "on" ? CacheMode::On : CacheMode::Off;
    } else if (key == "dtype") {
      if (value != "fp32" && value != "fp16" && value != "bf16")
        fail_usage("{}: dtype={}: expected fp32, fp16 or bf16", option, value);
      s.dtype_ = parse_dtype(value);
    } else if (key == "kv-dtype") {
      const auto kv = parse_kv_type(value);
      if (!kv) fail_usage("{}: kv-dtype={}: expected fp32, fp16, bf16, q8_0, q4_0, fp8_e4m3 or fp8_e5m2", option, value);
      s.kv_dtype_ = *kv;
    } else if (key == "kernels") {
      if (value != "reference" && value != "standard" && value != "invariant" && value != "portable")
        fail_usage("{}: kernels={}: expected reference, standard, invariant or portable", option, value);
      s.kernels_ = parse_policy(value);
    } else if (key == "threads") {
      s.threads_ = parse_int_value(value, option, key, 1, 256);
    } else if (key == "batch-size") {
      s.batch_size_ = parse_int_value(value, option, key, 1, 4096);
    } else if (key == "prefill-chunk") {
      s.prefill_chunk_ = parse_int_value(value, option, key, 0, 1 << 30);
    } else if (key == "device") {
      if (value != "cpu" && value != "cuda") fail_usage("{}: device={}: expected cpu or cuda", option, value);
      s.device_ = parse_device(value, option);
    } else if (key == "simd") {
      if (value != "auto" && value != "avx512" && value != "avx2" && value != "scalar")
        fail_usage("{}: simd={}: expected auto, avx512, avx2 or scalar", option, value);
      s.simd_ = parse_simd(value, option);
    } else {
      fail_usage("{}: unknown key '{}' (keys: {})", option, key, kKeys);
    }
  }
  return s;
}

RunSettings RunSpec::resolve(const RunDefaults& d) const {
  RunSettings r;
  r.cache = cache_.value_or(d.cache);
  r.dtype = dtype_.value_or(d.dtype);
  r.kv_dtype = kv_dtype_.value_or(d.kv_dtype.value_or(KvType::of(r.dtype)));
  r.kernels = kernels_.value_or(d.kernels);
  r.threads = threads_.value_or(d.threads);
  r.batch_size = batch_size_.value_or(d.batch_size);
  r.prefill_chunk = prefill_chunk_.value_or(d.prefill_chunk);
  r.device = device_.value_or(d.device);
  require_device(r.device);
  r.simd = simd_.value_or(d.simd);
  require_simd(r.simd);
  if (r.cache == CacheMode::Off && !r.kv_dtype.is_dtype()) {
    if (kv_dtype_)
      fail_usage("{}: kv-dtype={} with cache=off: the cache-OFF path keeps no cache, so its K/V are never stored "
                 "in {} (compare against a cache=on side to measure the quantisation)",
                 option_, r.kv_dtype.name(), r.kv_dtype.name());
    r.kv_dtype = KvType::of(r.dtype);
  }
  if (r.cache == CacheMode::Off && prefill_chunk_ && r.prefill_chunk > 0)
    fail_usage("{}: prefill-chunk={} with cache=off: the cache-OFF path recomputes the whole sequence in one pass",
               option_, r.prefill_chunk);
  if (r.kernels == KernelPolicy::Reference && r.threads > 1 && (threads_ || kernels_))
    fail_usage("{}: threads={} with kernels=reference: the reference kernels run on one thread", option_, r.threads);
  return r;
}

std::string RunSpec::text() const {
  std::vector<std::string> parts;
  if (cache_) parts.push_back(std::string("cache=") + (*cache_ == CacheMode::On ? "on" : "off"));
  if (dtype_) parts.push_back(fmt::format("dtype={}", dtype_name(*dtype_)));
  if (kv_dtype_) parts.push_back("kv-dtype=" + kv_dtype_->name());
  if (kernels_) parts.push_back(fmt::format("kernels={}", policy_name(*kernels_)));
  if (threads_) parts.push_back(fmt::format("threads={}", *threads_));
  if (batch_size_) parts.push_back(fmt::format("batch-size={}", *batch_size_));
  if (prefill_chunk_) parts.push_back(fmt::format("prefill-chunk={}", *prefill_chunk_));
  if (device_) parts.push_back("device=" + device_name(*device_));
  if (simd_) parts.push_back("simd=" + simd_name(*simd_));
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

std::string sides_key(const RunSettings& b, const RunSettings& c) {
  auto pair = [](std::string_view x, std::string_view y) {
    return x == y ? std::string(x) : fmt::format("{}->{}", x, y);
  };
  std::string key = pair(dtype_name(b.dtype), dtype_name(c.dtype)) + "/kv=" + pair(b.kv_dtype.name(), c.kv_dtype.name()) +
                    "/" + pair(policy_name(b.kernels), policy_name(c.kernels));
  auto on_off = [](CacheMode m) { return std::string(m == CacheMode::On ? "on" : "off"); };
  if (!(b.cache == CacheMode::Off && c.cache == CacheMode::On)) key += "/cache=" + pair(on_off(b.cache), on_off(c.cache));
  auto number = [&](const char* name, int x, int y) {
    if (x != y) key += fmt::format("/{}={}->{}", name, x, y);
  };
  number("threads", b.threads, c.threads);
  number("batch-size", b.batch_size, c.batch_size);
  number("prefill-chunk", b.prefill_chunk, c.prefill_chunk);
  if (b.device != c.device) key += "/device=" + device_name(b.device) + "->" + device_name(c.device);
  if (b.simd != c.simd) key += "/simd=" + simd_name(b.simd) + "->" + simd_name(c.simd);
  return key;
}

}  // namespace kvp
