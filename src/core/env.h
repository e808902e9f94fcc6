#pragma once
// The environment variables a run reads (the GPU backend's KVPARITY_CUDA_* switches). A value is
// checked like an option: one the variable does not take is a usage error naming it (exit 2),
// never a silent default. No fmt here: the CUDA sources include this header.
#include <atomic>

namespace kvp {

// "0" or "1"; unset or empty: `unset`.
bool env_switch(const char* name, bool unset);
// A decimal integer in [lo, hi]; unset or empty: `unset`.
int env_int(const char* name, int unset, int lo, int hi);

// A switch read from the environment at its first use rather than at static initialisation, so
// that a bad value is an error the command reports, not a crash before main; or set by code.
class EnvSwitch {
 public:
  constexpr EnvSwitch(const char* name, bool unset) : name_(name), unset_(unset) {}
  bool on() {
    int v = value_.load();
    if (v < 0) value_ = v = env_switch(name_, unset_) ? 1 : 0;
    return v == 1;
  }
  void set(bool on) { value_ = on ? 1 : 0; }

 private:
  const char* name_;
  bool unset_;
  std::atomic<int> value_{-1};  // -1: not read yet
};

}  // namespace kvp
