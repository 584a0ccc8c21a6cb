// The indirection buffers a convolution layer keeps, one per input shape (and kernel): least recently used first
// out once the cache holds more than kIndirectionCacheEntries buffers or kIndirectionCacheBytes in all, the one
// just used always kept (its call is using it). A model calls a layer on a few shapes, whose buffers then cost
// nothing after the first call; a caller sweeping many large shapes keeps memory bounded. Entries are shared: a
// call still using an evicted buffer keeps it alive. Thread-safe. Baseline header.
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace nnkern {

constexpr size_t kIndirectionCacheEntries = 8;
constexpr size_t kIndirectionCacheBytes = size_t(64) << 20;

// Entry: an immutable buffer with `size_t bytes() const`.
template <typename Entry>
class IndirectionCache {
 public:
  // The cached entry for which match(entry) holds, else build() (under the lock: concurrent calls on a new shape
  // build it once), cached.
  template <typename Match, typename Build>
  std::shared_ptr<const Entry> get(Match match, Build build) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < entries_.size(); ++i) {
      std::shared_ptr<const Entry> e = entries_[i];
      if (!match(*e)) continue;
      entries_.erase(entries_.begin() + ptrdiff_t(i));  // most recently used last
      entries_.push_back(e);
      return e;
    }
    std::shared_ptr<const Entry> e = build();
    ++builds_;
    entries_.push_back(e);
    bytes_ += e->bytes();
    while (entries_.size() > 1 && (entries_.size() > kIndirectionCacheEntries || bytes_ > kIndirectionCacheBytes)) {
      bytes_ -= entries_.front()->bytes();
      entries_.erase(entries_.begin());
    }
    return e;
  }

  size_t builds() const {  // how many buffers were built (the tests' cache probe)
    std::lock_guard<std::mutex> lock(mu_);
    return builds_;
  }
  size_t bytes() const {  // what the cache holds now
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_;
  }

 private:
  mutable std::mutex mu_;
  mutable std::vector<std::shared_ptr<const Entry>> entries_;  // most recently used last
  mutable size_t bytes_ = 0, builds_ = 0;
};

}  // namespace nnkern
