#include "core/sha256.h"

#include <openssl/evp.h>

#include <stdexcept>

namespace kvp {

struct Sha256::State {
  EVP_MD_CTX* ctx = nullptr;
  ~State() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : s_(std::make_unique<State>()) {
  s_->ctx = EVP_MD_CTX_new();
  if (s_->ctx == nullptr || EVP_DigestInit_ex(s_->ctx, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256: OpenSSL could not initialise a digest");
}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(const void* data, size_t bytes) {
  if (bytes > 0 && EVP_DigestUpdate(s_->ctx, data, bytes) != 1) throw std::runtime_error("SHA-256: update failed");
}

std::string Sha256::hex() const {
  // Finalising consumes a context, so a copy is finalised.
  EVP_MD_CTX* copy = EVP_MD_CTX_new();
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  const bool ok = copy != nullptr && EVP_MD_CTX_copy_ex(copy, s_->ctx) == 1 && EVP_DigestFinal_ex(copy, md, &len) == 1;
  EVP_MD_CTX_free(copy);
  if (!ok) throw std::runtime_error("SHA-256: finalising failed");
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += digits[md[i] >> 4];
    out += digits[md[i] & 15];
  }
  return out;
}

std::string sha256_hex(const void* data, size_t bytes) {
  Sha256 h;
  h.update(data, bytes);
  return h.hex();
}

}  // namespace kvp
