#pragma once
// A std::allocator that hands out cache-line-aligned storage, for the activation rows SIMD kernels
// read whole vectors from. With malloc's 16-byte alignment such a row can start mid cache line, and
// then every 64-byte vector load of it straddles two lines; where it started depended on which
// allocation came before it. (On the Zen 5 host the difference was within run-to-run noise for
// TinyLlama decode; the alignment removes a variable, not a measured bottleneck.)
#include <cstddef>
#include <new>

namespace kvp {

template <class T>
struct CacheAlignedAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};

  CacheAlignedAllocator() = default;
  template <class U>
  CacheAlignedAllocator(const CacheAlignedAllocator<U>&) noexcept {}

  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t) noexcept { ::operator delete(p, kAlign); }

  template <class U>
  bool operator==(const CacheAlignedAllocator<U>&) const noexcept { return true; }
};

}  // namespace kvp
