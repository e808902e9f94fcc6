#pragma once
// One object per owner among those still held: what every holder of one owner shares, made on the
// first request and gone with its last holder.
//
// The CUDA kernels keep their device copies of a model's weights in one of these, keyed by the
// model: a study runs the cache-ON and cache-OFF sides (and the teacher-forced pass) as engines of
// their own on one model, and each engine holding its own copy put a 7B model on the GPU twice
// (27 GB instead of 13.5) and uploaded it twice. Keying by the owner, not by the weights' host
// addresses, keeps each copy bound to the object whose bytes it mirrors: an owner outlives the
// objects made for it, so while a copy lives its owner does, and no other object can sit at its
// address.
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace kvp {

template <class T>
class SharedByOwner {
 public:
  // The object held for `owner`, or make()'s (a std::shared_ptr<T>) if none is held any longer.
  // A null owner shares with nobody.
  template <class Make>
  std::shared_ptr<T> get(const void* owner, Make&& make) {
    if (owner == nullptr) return std::forward<Make>(make)();
    std::lock_guard<std::mutex> lock(mu_);
    forget_expired();
    std::weak_ptr<T>& w = held_[owner];
    if (std::shared_ptr<T> p = w.lock()) return p;
    std::shared_ptr<T> p = std::forward<Make>(make)();
    w = p;
    return p;
  }

  // How many owners' objects are still held.
  size_t held() {
    std::lock_guard<std::mutex> lock(mu_);
    forget_expired();
    return held_.size();
  }

 private:
  void forget_expired() {
    std::erase_if(held_, [](const auto& e) { return e.second.expired(); });
  }

  std::mutex mu_;
  std::unordered_map<const void*, std::weak_ptr<T>> held_;
};

}  // namespace kvp
