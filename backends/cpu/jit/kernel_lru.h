// kiln (internal): a bounded, thread-safe map from a problem key to the
// generated kernel made for it, evicting the least recently used entry when
// full. Holders share ownership of a kernel (std::shared_ptr): a compiled
// plan's step, or an eager call while it runs, keeps a kernel alive after
// its entry is evicted, and the next lookup of that key makes the kernel
// again (generation is deterministic, so the same code and bits). A key's
// kernel therefore depends on the key only, never on how many other keys the
// process looked up before (a bounded cache that refused new keys once full
// made eager's choice of kernel depend on the process's history).
//
// A lookup that finds its key allocates nothing: one map search, a list
// splice (the recency order) and a reference count increment, under one
// mutex. A miss calls `make` under the mutex (a kernel is made once even
// when threads ask for it together); its result (null included: a problem
// without a generated form) is cached.
#pragma once
#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace kiln::codegen {

template <class Key, class Kernel>
class KernelLru {
 public:
  explicit KernelLru(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  /// The kernel cached for `key` (now the most recently used), or `make()`'s
  /// (std::shared_ptr<const Kernel>, may be null) cached for it, evicting the
  /// least recently used entry when the cache holds `capacity` entries. An
  /// exception from make() leaves the cache as it was.
  template <class Make>
  std::shared_ptr<const Kernel> get(const Key& key, Make&& make) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      if (it->second != order_.begin()) order_.splice(order_.begin(), order_, it->second);
      return it->second->second;
    }
    std::shared_ptr<const Kernel> k = make();
    insert_locked(key, k);
    return k;
  }

  /// Caches `make()` for `key` when it has no entry (evicting as get does);
  /// returns whether it inserted. make() may return null: nothing is then
  /// cached (the key is made on its first get).
  template <class Make>
  bool put_if_absent(const Key& key, Make&& make) {
    std::lock_guard<std::mutex> lock(mu_);
    if (index_.count(key)) return false;
    std::shared_ptr<const Kernel> k = make();
    if (!k) return false;
    insert_locked(key, std::move(k));
    return true;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return index_.size();
  }
  size_t capacity() const { return capacity_; }
  /// Entries evicted so far (process-wide for the caches kiln keeps).
  size_t evictions() const {
    std::lock_guard<std::mutex> lock(mu_);
    return evictions_;
  }

 private:
  using Order = std::list<std::pair<Key, std::shared_ptr<const Kernel>>>;
  void insert_locked(const Key& key, std::shared_ptr<const Kernel> k) {
    if (index_.size() >= capacity_) {
      // the least recently used entry; its kernel lives on while anything holds it
      index_.erase(order_.back().first);
      order_.pop_back();
      ++evictions_;
    }
    order_.emplace_front(key, std::move(k));
    index_.emplace(key, order_.begin());
  }
  mutable std::mutex mu_;
  const size_t capacity_;
  Order order_;  // most recently used first
  std::map<Key, typename Order::iterator> index_;
  size_t evictions_ = 0;
};

}  // namespace kiln::codegen
