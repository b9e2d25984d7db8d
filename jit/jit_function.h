// kiln: jit(fn): compiles on first use and caches compiled callables by the
// key of ARCHITECTURE.md: per tensor argument its dtype, shape, device and
// stride class; the argument tree structure; and the static (non-tensor)
// arguments, whose values are part of the tree.
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "compiled_callable.h"

namespace kiln {

struct JitOptions {
  /// Most compiled entries kept (least recently used ones are dropped and
  /// their code freed).
  size_t max_entries = 64;
  /// Make a compile after the first one an error (ValueError with the
  /// explanation of the miss): for code that must not recompile.
  bool error_on_recompile = false;
  /// Passed to each compile.
  CompileOptions compile;
};

struct JitStats {
  int64_t hits = 0, misses = 0, compiles = 0, evictions = 0;
  /// Bytes of generated machine code held by the cached entries.
  size_t code_bytes = 0;
  size_t entries = 0;
};

namespace detail {
/// The cache behind a jit function (thread-safe).
class JitCache {
 public:
  explicit JitCache(JitOptions opts) : opts_(std::move(opts)) {}
  /// Looks up `key`; on a miss runs `compile_fn` (outside the lock) and inserts.
  std::shared_ptr<const CompiledCallable> get(const TreeDef& tree, const std::vector<TensorLayout>& layouts,
                                              const std::function<CompiledCallable()>& compile_fn);
  JitStats stats() const;
  void clear();
  /// Why the last miss missed, field by field against the most recent entry
  /// ("arg 0: shape [32, 64] vs cached [16, 64]"); empty before any miss.
  std::string last_miss_explanation() const;
  const JitOptions& options() const { return opts_; }

 private:
  struct Entry {
    std::string key;
    TreeDef tree;
    std::vector<TensorLayout> layouts;
    std::shared_ptr<const CompiledCallable> fn;
  };
  std::string explain(const TreeDef& tree, const std::vector<TensorLayout>& layouts) const;
  JitOptions opts_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recent first
  JitStats stats_;
  std::string last_miss_;
};
std::string jit_key(const TreeDef& tree, const std::vector<TensorLayout>& layouts);
}  // namespace detail

/// The callable returned by jit(fn). Copies share one cache.
template <class F>
class JitFunction {
 public:
  JitFunction(F fn, JitOptions opts) : fn_(std::move(fn)), cache_(std::make_shared<detail::JitCache>(std::move(opts))) {}

  /// Compiles for these arguments' layouts on a miss, then runs.
  template <class... Args>
  CallResult operator()(const Args&... args) const {
    auto [leaves, tree] = tree_flatten(std::forward_as_tuple(args...));
    std::vector<TensorLayout> layouts;
    layouts.reserve(leaves.size());
    for (const auto& t : leaves) {
      if (!t.defined()) throw ValueError("jit: an argument is an undefined tensor");
      layouts.push_back(t.layout());
    }
    auto fn = cache_->get(tree, layouts, [&] {
      const auto& co = cache_->options().compile;
      return compile(fn_, co)(args...);
    });
    return fn->call_flat(leaves, tree);
  }
  JitStats stats() const { return cache_->stats(); }
  void clear() { cache_->clear(); }
  std::string last_miss_explanation() const { return cache_->last_miss_explanation(); }

 private:
  F fn_;
  std::shared_ptr<detail::JitCache> cache_;
};

/// jit(fn): see JitFunction. Tensor arguments are traced by layout (dtype,
/// shape, device, stride class); other arguments are static.
template <class F>
JitFunction<F> jit(F fn, JitOptions opts = {}) {
  return JitFunction<F>(std::move(fn), std::move(opts));
}

}  // namespace kiln
