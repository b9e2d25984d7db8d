#include "jit_function.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "../tensor/realize_hook.h"
#include "../trace/text_diff.h"
#include "plan.h"
#include "write_alias.h"

namespace kiln::detail {

namespace {
const char* class_name(StrideClass c) {
  static const char* n[] = {"contiguous", "broadcast", "transposed", "general"};
  return n[static_cast<int>(c)];
}
}  // namespace

std::string jit_key(const TreeDef& tree, const std::vector<TensorLayout>& layouts) {
  std::string k = tree.str();
  for (const auto& l : layouts) {
    k += '|';
    k += TensorType(l).str();
    k += class_name(l.stride_class);
  }
  return k;
}

bool write_alias_observed(const CompiledCallable& fn, std::span<const Tensor> leaves) {
  const StagedGraph& s = fn.staged();
  return find_write_alias(leaves, s.writes, s.write_reads, s.same_as, fn.weights(), s.captured).has_value();
}

bool write_alias_observed(const StagedGraph& s, const std::map<std::string, Tensor>& weights,
                          std::span<const Tensor> leaves) {
  // The weights the callable compiled from `s` would bind (CompiledCallable's constructor).
  std::map<std::string, Tensor> w = weights;
  for (const auto& [name, t] : s.mutable_weights) w.emplace(name, t);
  for (const auto& [name, t] : s.bound_weights) w.emplace(name, t);
  return find_write_alias(leaves, s.writes, s.write_reads, s.same_as, w, s.captured).has_value();
}

std::vector<int32_t> identical_alias(const std::vector<Tensor>& leaves) {
  auto g = identical_alias_groups(leaves);
  return g ? *g : std::vector<int32_t>{};
}

std::string alias_key(const std::vector<int32_t>& same_as) {
  std::string k;
  for (size_t j = 0; j < same_as.size(); ++j)
    if (same_as[j] >= 0) k += (k.empty() ? "alias " : ",") + std::to_string(j) + "=" + std::to_string(same_as[j]);
  return k;
}

Tensor jit_number_tensor(const Scalar& s, DType d, size_t position) {
  const std::string where = "jit: argument " + std::to_string(position) + ": the number " + s.str();
  if (s.kind == ScalarKind::integer && s.above_int64)
    throw ValueError(where + " is out of range for int64, the dtype of the 0-d tensor jit makes of an integer passed "
                          "for a Tensor parameter (int64 holds up to 9223372036854775807); pass a 0-d tensor instead, "
                          "e.g. full({}, value, DType::uint64)");
  Tensor t = full({}, s, d);
  if (s.kind == ScalarKind::floating && std::isfinite(s.value) && std::isinf(t.item<double>()))
    throw ValueError(where + " is out of range for " + std::string(name(d)) +
                     ", the dtype of the 0-d tensor jit makes of a floating number passed for a Tensor parameter (it "
                     "would become " + (s.value < 0 ? "-inf" : "inf") +
                     "); pass a 0-d tensor instead, e.g. full({}, value, DType::float64)");
  return t;
}

void jit_undefined_argument(const TreeDef& tree, size_t i) {
  const std::vector<std::string> paths = tree.leaf_paths();
  const std::string path = i < paths.size() && !paths[i].empty() ? paths[i] : std::to_string(i);
  throw ValueError("jit: argument " + path + ": an undefined tensor (a default-constructed Tensor, which has no "
                   "dtype or shape to compile for); pass a tensor with data");
}

std::string JitCache::explain(const TreeDef& tree, const std::vector<TensorLayout>& layouts,
                              const std::string& alias) const {
  if (lru_.empty()) return "first call: nothing cached yet";
  const Entry& e = lru_.front();
  std::string r;
  auto add = [&](const std::string& s) { r += (r.empty() ? "" : "; ") + s; };
  if (alias != e.alias) {
    auto say = [](const std::string& a) {
      return a.empty() ? std::string("separate arguments") : "identical arguments (" + a.substr(6) + ")";
    };
    add("aliasing: " + say(alias) + " written in place vs cached " + say(e.alias));
  }
  if (!(tree == e.tree)) add("tree structure " + tree.str() + " vs cached " + e.tree.str());
  auto paths = tree.leaf_paths();
  for (size_t i = 0; i < layouts.size() && i < e.layouts.size(); ++i) {
    const auto &a = layouts[i], &b = e.layouts[i];
    std::string p = "arg " + (paths.size() > i && !paths[i].empty() ? paths[i] : std::to_string(i)) + ": ";
    if (a.dtype != b.dtype) add(p + "dtype " + std::string(name(a.dtype)) + " vs cached " + std::string(name(b.dtype)));
    if (a.shape != b.shape) add(p + "shape " + shape_str(a.shape) + " vs cached " + shape_str(b.shape));
    if (!(a.device == b.device)) add(p + "device " + a.device.str() + " vs cached " + b.device.str());
    if (a.stride_class != b.stride_class)
      add(p + "stride class " + class_name(a.stride_class) + " vs cached " + class_name(b.stride_class));
  }
  if (layouts.size() != e.layouts.size())
    add(std::to_string(layouts.size()) + " tensor arguments vs cached " + std::to_string(e.layouts.size()));
  return r.empty() ? "evicted entry" : r;
}

std::shared_ptr<const CompiledCallable> JitCache::get(const TreeDef& tree, const std::vector<TensorLayout>& layouts,
                                                      const std::function<std::shared_ptr<const CompiledCallable>()>& compile_fn,
                                                      const std::string& alias) {
  // An entry matches on its fields (the key of ARCHITECTURE.md): compared
  // field by field, so a hit builds no key string (a cached call's cost).
  auto same = [&](const Entry& e) { return e.alias == alias && e.layouts == layouts && e.tree == tree; };
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it)
      if (same(*it)) {
        if (it != lru_.begin()) lru_.splice(lru_.begin(), lru_, it);
        return lru_.front().fn;
      }
    last_miss_ = explain(tree, layouts, alias);
    if (opts_.error_on_recompile && stats_.compiles > 0)
      throw ValueError("jit: recompilation is disabled (error_on_recompile) and this call misses the cache: " +
                       last_miss_);
  }
  // Compile outside the lock: other threads keep using cached entries.
  std::shared_ptr<const CompiledCallable> fn = compile_fn();
  if (!fn) return nullptr;  // not to be cached (the caller runs another entry)
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& e : lru_)
    if (same(e)) return e.fn;  // another thread compiled it meanwhile
  ++stats_.compiles;
  Entry e;
  e.key = alias.empty() ? jit_key(tree, layouts) : jit_key(tree, layouts) + "|" + alias;
  e.tree = tree;
  e.layouts = layouts;
  e.alias = alias;
  e.fn = fn;
  lru_.push_front(std::move(e));
  while (lru_.size() > opts_.max_entries) {
    lru_.pop_back();  // the last reference to its code goes with it (unless a caller still runs it)
    ++stats_.evictions;
  }
  return fn;
}

std::shared_ptr<const CompiledCallable> JitCache::find(const TreeDef& tree, const std::vector<TensorLayout>& layouts,
                                                       const std::string& alias) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = lru_.begin(); it != lru_.end(); ++it)
    if (it->alias == alias && it->layouts == layouts && it->tree == tree) {
      if (it != lru_.begin()) lru_.splice(lru_.begin(), lru_, it);
      return lru_.front().fn;
    }
  return nullptr;
}

namespace {
// Leaf t has layout l: dtype, shape, device and stride class, the class of
// a realized leaf expected contiguous found by one contiguity test (as
// stride_class_of starts), so nothing is built or allocated.
bool leaf_matches(const Tensor& t, const TensorLayout& l) {
  if (t.dtype() != l.dtype || t.shape() != l.shape || !(t.device() == l.device)) return false;
  if (l.stride_class == StrideClass::contiguous && t.is_realized())
    return kiln::is_contiguous(t.impl().shape, t.impl().strides);
  return covering_stride_class(t) == l.stride_class;
}
}  // namespace

std::shared_ptr<const CompiledCallable> JitCache::find_fixed(const TreeDef& fixed_tree,
                                                             std::span<const Tensor> leaves) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    Entry& e = *it;
    if (!e.alias.empty() || e.layouts.size() != leaves.size()) continue;
    bool same = true;
    for (size_t i = 0; i < leaves.size() && same; ++i) same = leaf_matches(leaves[i], e.layouts[i]);
    if (!same) continue;
    if (e.fixed_tree != &fixed_tree) {
      if (!(e.tree == fixed_tree)) continue;
      e.fixed_tree = &fixed_tree;  // static storage: later calls compare the address
    }
    if (it != lru_.begin()) lru_.splice(lru_.begin(), lru_, it);
    return lru_.front().fn;
  }
  return nullptr;
}

JitStats JitCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  JitStats s = stats_;
  s.hits = hits_.load(std::memory_order_relaxed);
  s.misses = misses_.load(std::memory_order_relaxed);
  s.eager_calls = eager_.load(std::memory_order_relaxed);
  s.entries = lru_.size();
  s.code_bytes = 0;
  for (const auto& e : lru_) s.code_bytes += e.fn->engine_model().artifact().plan().code_bytes();
  return s;
}

void JitCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  lru_.clear();
  last_miss_.clear();
}

std::string JitCache::last_miss_explanation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_miss_;
}

bool JitCache::sample_capture_check() {
  static const bool env = [] {
    const char* e = std::getenv("KILN_JIT_CHECK_CAPTURES");
    return e != nullptr && std::strcmp(e, "1") == 0;
  }();
  if (!opts_.check_captures && !env) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return cached_calls_++ % 16 == 0;
}

void check_same_trace(const StagedGraph& cached, const StagedGraph& now) {
  const std::string a = cached.ir(), b = now.ir();
  if (a == b) return;
  // The first differing line of the two texts: a constant (its %id, bytes
  // and type) when a captured value changed.
  throw ValueError("jit: check_captures: the function traced differently on this call than when it was compiled "
                   "(a captured C++ number, container or tensor variable changed since tracing, or the function "
                   "draws random numbers; the compiled function keeps the traced values: pass them as arguments): "
                   "graph " + first_differing_line(a, b));
}

}  // namespace kiln::detail
