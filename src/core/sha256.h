#pragma once
// SHA-256 digests (OpenSSL's libcrypto) of result bits: what two machines compare when they check
// that they computed the same logits, without shipping the logits.
#include <cstddef>
#include <memory>
#include <string>

namespace kvp {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  void update(const void* data, size_t bytes);
  // The digest of everything updated so far, as 64 lowercase hex digits (the object stays usable).
  std::string hex() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

std::string sha256_hex(const void* data, size_t bytes);

}  // namespace kvp
