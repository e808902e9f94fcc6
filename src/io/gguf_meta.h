#pragma once
// Typed access to a GGUF file's metadata for the Checkpoint builders (gguf_checkpoint.cpp and the
// families' own readers); every error names the key and the file.
#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "io/gguf.h"

namespace kvp {

class GgufMeta {
 public:
  GgufMeta(const GgufFile& g, const std::string& name) : g_(g), name_(name) {}
  const GgufValue* find(const std::string& k) const {
    auto it = g_.kv.find(k);
    return it == g_.kv.end() ? nullptr : &it->second;
  }
  int64_t integer(const std::string& k, const GgufValue& v, int64_t lo, int64_t hi) const {
    int64_t x;
    if (v.type == GgufType::U8 || v.type == GgufType::U16 || v.type == GgufType::U32 || v.type == GgufType::U64) {
      if (v.u > uint64_t(INT64_MAX)) fail("{}: key '{}' = {} is out of range", name_, k, v.u);
      x = int64_t(v.u);
    } else if (v.type == GgufType::I8 || v.type == GgufType::I16 || v.type == GgufType::I32 ||
               v.type == GgufType::I64) {
      x = v.i;
    } else if (v.type == GgufType::Array) {
      fail("{}: key '{}' is a per-layer array, which is not supported (one value for all layers only)", name_, k);
    } else {
      fail("{}: key '{}' must be an integer, is {}", name_, k, gguf_type_name(v.type));
    }
    if (x < lo || x > hi) fail("{}: key '{}' = {} is out of range [{}, {}]", name_, k, x, lo, hi);
    return x;
  }
  int get_int(const std::string& k) const {
    const GgufValue* v = find(k);
    if (v == nullptr) fail("{}: missing required key '{}'", name_, k);
    return int(integer(k, *v, 0, INT32_MAX));
  }
  int get_int(const std::string& k, int dflt) const {
    const GgufValue* v = find(k);
    return v == nullptr ? dflt : int(integer(k, *v, 0, INT32_MAX));
  }
  // llama.cpp writes "no such token" as 0xFFFFFFFF in a u32 (its -1 as uint32_t) and reads it back as -1.
  int get_id(const std::string& k) const {
    const GgufValue* v = find(k);
    if (v == nullptr) return -1;
    if ((v->type == GgufType::U32 && v->u == 0xFFFFFFFFu) || (v->type == GgufType::U64 && v->u == UINT64_MAX))
      return -1;
    return int(integer(k, *v, -1, INT32_MAX));
  }
  double get_num(const std::string& k, double dflt, bool required = false) const {
    const GgufValue* v = find(k);
    if (v == nullptr) {
      if (required) fail("{}: missing required key '{}'", name_, k);
      return dflt;
    }
    if (v->is_float()) return v->f;
    return double(integer(k, *v, INT64_MIN, INT64_MAX));
  }
  bool get_bool(const std::string& k, bool dflt) const {
    const GgufValue* v = find(k);
    if (v == nullptr) return dflt;
    if (v->type != GgufType::Bool) fail("{}: key '{}' must be a bool, is {}", name_, k, gguf_type_name(v->type));
    return v->u != 0;
  }
  std::string get_str(const std::string& k, const std::string& dflt, bool required = false) const {
    const GgufValue* v = find(k);
    if (v == nullptr) {
      if (required) fail("{}: missing required key '{}'", name_, k);
      return dflt;
    }
    if (v->type != GgufType::String) fail("{}: key '{}' must be a string, is {}", name_, k, gguf_type_name(v->type));
    return v->s;
  }
  const GgufValue* get_array(const std::string& k, GgufType elem) const {
    const GgufValue* v = find(k);
    if (v == nullptr) return nullptr;
    if (v->type != GgufType::Array || v->elem != elem)
      fail("{}: key '{}' must be an array of {}", name_, k, gguf_type_name(elem));
    return v;
  }

 private:
  const GgufFile& g_;
  const std::string& name_;
};

// YaRN's factor and the ramp's betas as llama.cpp's keys carry them (<arch>.rope.scaling.factor,
// required; yarn_beta_fast / yarn_beta_slow, 32 and 1 when absent), each checked positive.
struct GgufYarnRamp {
  double factor = 1.0, beta_fast = 32.0, beta_slow = 1.0;
};
inline GgufYarnRamp read_gguf_yarn_ramp(const GgufMeta& m, const std::string& A, const std::string& name) {
  GgufYarnRamp r;
  r.factor = m.get_num(A + "rope.scaling.factor", 0.0, true);
  if (!(r.factor > 0.0) || !std::isfinite(r.factor))
    fail("{}: key '{}rope.scaling.factor' = {} must be a positive number", name, A, r.factor);
  r.beta_fast = m.get_num(A + "rope.scaling.yarn_beta_fast", 32.0);
  r.beta_slow = m.get_num(A + "rope.scaling.yarn_beta_slow", 1.0);
  if (!(r.beta_fast > 0.0 && r.beta_slow > 0.0) || !std::isfinite(r.beta_fast) || !std::isfinite(r.beta_slow))
    fail("{}: keys '{}rope.scaling.yarn_beta_fast' / '_slow' = {} / {} must be positive", name, A, r.beta_fast,
         r.beta_slow);
  return r;
}

}  // namespace kvp
