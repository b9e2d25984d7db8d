// kiln: jit(fn): compiles on first use and caches compiled callables by the
// key of ARCHITECTURE.md: per tensor argument its dtype, shape, device and
// stride class; the argument tree structure; and the static (non-tensor)
// arguments, whose values are part of the tree.
//
// Scalars: a C++ number passed for a parameter declared `Tensor` is a runtime
// argument: it becomes a 0-d tensor (float64 for a floating value, int64 for
// an integer, bool for a bool: the number exactly), so a new value reuses the
// compiled code. It is weak in type promotion, as the same number written in
// the function eagerly (`x * 0.1`) and as numpy's Python scalars: combined
// with a tensor by an elementwise op it takes that tensor's dtype within its
// kind (float32 x * s is float32, the number rounded to float32 as eagerly;
// float64 x * s computes with the double; float16 stays float16; int32 x * 3
// stays int32), numbers combined with each other (and with C++ constants)
// stay weak (an integer number times 2.5 is a weak float64), and read any
// other way (returned, reduced) a number is the default dtype's tensor of
// its kind (float32, int64, bool). An integer number that meets a narrower
// integer tensor (int8 x + s) is checked per call, before the compiled code
// runs: out of the tensor's range it is a ValueError naming the op, the
// number and the dtype, as eager `x + 300` raises. Passed on to a subgraph
// call it stays weak in the body; to a CompiledCallable called in the trace
// it is a 0-d tensor of the parameter's dtype, as at the top level. See
// trace/weak_scalar.h for the rules and their one limit (a value computed
// from integer numbers, `x + s * 2`, is not range-checked by a compiled
// call: it wraps as cast() does). A 0-d tensor passed instead is a tensor
// (numpy 2's NEP 50: float32 x * a float64 0-d tensor is float64), cached
// apart. A
// parameter declared as a C++ number (`double`, `int`, ...) declares the
// argument static: its value is traced into the code and is part of the key.
//
// Aliasing guard (as torch.compile guards on its inputs' aliasing): when the
// compiled function writes in place a tensor that shares memory with another
// one it reads (two arguments, or an argument and a captured tensor or
// weight: `f(x, x)`, `f(x[0:3], x[1:4])`), the call gives eager's answer:
// identical arguments (same memory, dtype, shape, strides) are traced as one
// tensor, a compile of its own cached under a key that records which
// arguments are one (JitStats::compiles counts it); any other overlap runs
// the function eagerly (JitStats::eager_calls), with its numbers weak as in
// the trace (the same dtypes and checks). Arguments that share memory
// but that the function only reads, or that do not overlap (disjoint slices
// of one buffer), take the ordinary cached path; a function that writes no
// argument pays nothing for the check.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../tensor/creation.h"
#include "../trace/pytree_fixed.h"
#include "../trace/weak_scalar.h"
#include "compiled_callable.h"

namespace kiln {

struct JitOptions {
  /// Most compiled entries kept (least recently used ones are dropped and
  /// their code freed); at least 1 (0 throws ValueError at jit()).
  size_t max_entries = 64;
  /// Make a compile after the first one an error (ValueError with the
  /// explanation of the miss): for code that must not recompile.
  bool error_on_recompile = false;
  /// Passed to each compile.
  CompileOptions compile;
  /// Debug mode for captured values: on the first call served from the cache
  /// and then every 16th, trace the function again and throw ValueError when
  /// the new graph differs from the cached one (a captured C++ number,
  /// container or tensor *variable* changed since tracing, which the
  /// compiled function cannot see), naming the first differing constant.
  /// The re-trace also traces every call of a subgraph body (as_subgraph,
  /// nn::Module calls) again, where a body without constants is otherwise
  /// traced once per key and reused: a call whose body traces differently
  /// from the one serving its key (it branches on a captured C++ value that
  /// changed between calls) throws ValueError naming the body and the first
  /// differing line. Costs a trace per sampled call. Also on when the
  /// environment variable KILN_JIT_CHECK_CAPTURES is 1.
  bool check_captures = false;
};

/// What a jit function did, counted per call: every call that returns (other
/// than one inlined into an outer trace, which runs nothing) is exactly one
/// of a hit, a miss or an eager call, so hits + misses + eager_calls = calls
/// that returned. A call that throws (a bad argument, such as an index out of
/// range; a captured tensor that changed; check_captures or
/// error_on_recompile refusing it) counts as none of the three; a graph it
/// compiled before throwing stays cached and is counted in `compiles`.
struct JitStats {
  /// Calls run by an entry already in the cache (compiled by an earlier call).
  int64_t hits = 0;
  /// Calls that found no entry for their arguments and ran the one they
  /// compiled (or that another thread compiled meanwhile).
  int64_t misses = 0;
  /// Graphs compiled and cached (a miss compiles one; a call with identical
  /// arguments that a function writes compiles only the entry traced with
  /// them as one tensor, see the file comment).
  int64_t compiles = 0;
  /// Entries dropped to keep at most JitOptions::max_entries.
  int64_t evictions = 0;
  /// Calls run eagerly by the aliasing guard (a write the compiled code could
  /// not order against a read of overlapping memory; see the file comment),
  /// counted neither as hits nor as misses; an entry compiled on the way is
  /// counted in `compiles`.
  int64_t eager_calls = 0;
  /// Bytes of generated machine code held by the cached entries.
  size_t code_bytes = 0;
  size_t entries = 0;
};

namespace detail {
/// The cache behind a jit function (thread-safe).
class JitCache {
 public:
  explicit JitCache(JitOptions opts) : opts_(std::move(opts)) {
    if (opts_.max_entries == 0)
      throw ValueError("jit: JitOptions::max_entries must be at least 1 (the entry being called is kept), got 0");
  }
  /// Looks up `key`; on a miss runs `compile_fn` (outside the lock) and
  /// inserts what it returns; a null return is not cached (get returns null).
  /// `alias` (alias_key) is the aliasing pattern the entry is traced for
  /// ("" for separate arguments). Counts compiles, not hits or misses (the
  /// caller counts each call once: count_hit, count_miss, count_eager_call).
  std::shared_ptr<const CompiledCallable> get(const TreeDef& tree, const std::vector<TensorLayout>& layouts,
                                              const std::function<std::shared_ptr<const CompiledCallable>()>& compile_fn,
                                              const std::string& alias = {});
  /// The entry for exactly these fields, or null; compiles and counts nothing.
  std::shared_ptr<const CompiledCallable> find(const TreeDef& tree, const std::vector<TensorLayout>& layouts,
                                               const std::string& alias);
  /// The cached-call fast path of arguments whose tree is their types'
  /// alone (trace/pytree_fixed.h): `fixed_tree` is fixed_treedef<T>() of
  /// their tuple type (static storage) and `leaves` the defined tensors
  /// gathered from them. On a hit (an entry for separate arguments whose
  /// tree and per-leaf dtype, shape, device and stride class match, compared
  /// field by field; the tree by address once an entry has matched it)
  /// returns the entry, building nothing and allocating nothing; on a miss
  /// returns null (the caller then calls get(), which explains the miss).
  /// Counts nothing.
  std::shared_ptr<const CompiledCallable> find_fixed(const TreeDef& fixed_tree, std::span<const Tensor> leaves);
  /// Counts a call run by a cached entry (JitStats::hits). The caller counts
  /// a call once it has returned (a call that throws counts nothing).
  void count_hit() { hits_.fetch_add(1, std::memory_order_relaxed); }
  /// Counts a call that compiled its entry (JitStats::misses).
  void count_miss() { misses_.fetch_add(1, std::memory_order_relaxed); }
  /// Counts a call the aliasing guard ran eagerly.
  void count_eager_call() { eager_.fetch_add(1, std::memory_order_relaxed); }
  JitStats stats() const;
  void clear();
  /// Why the last miss missed, field by field against the most recent entry
  /// ("arg 0: shape [32, 64] vs cached [16, 64]"); empty before any miss.
  std::string last_miss_explanation() const;
  const JitOptions& options() const { return opts_; }
  /// Counts a cached call and says whether this one is re-traced
  /// (JitOptions::check_captures or KILN_JIT_CHECK_CAPTURES=1).
  bool sample_capture_check();

 private:
  struct Entry {
    std::string key;
    TreeDef tree;
    /// A fixed_treedef equal to `tree` that find_fixed matched (null: none yet).
    const TreeDef* fixed_tree = nullptr;
    std::vector<TensorLayout> layouts;
    std::string alias;
    std::shared_ptr<const CompiledCallable> fn;
  };
  std::string explain(const TreeDef& tree, const std::vector<TensorLayout>& layouts, const std::string& alias) const;
  JitOptions opts_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recent first
  JitStats stats_;  // compiles and evictions (under mu_); the per-call counts are below
  std::atomic<int64_t> hits_{0}, misses_{0}, eager_{0};
  std::string last_miss_;
  int64_t cached_calls_ = 0;
};
/// Throws ValueError naming the first line (constant) where the graph traced
/// now differs from the cached callable's (JitOptions::check_captures).
void check_same_trace(const StagedGraph& cached, const StagedGraph& now);
std::string jit_key(const TreeDef& tree, const std::vector<TensorLayout>& layouts);
/// The aliasing guard (jit/write_alias.h): true when `fn` writes in place a
/// tensor that shares memory with another tensor this call reads.
bool write_alias_observed(const CompiledCallable& fn, std::span<const Tensor> leaves);
/// The same for `s` before it is compiled with the registry `weights`.
bool write_alias_observed(const StagedGraph& s, const std::map<std::string, Tensor>& weights,
                          std::span<const Tensor> leaves);
/// StageOptions::same_as for `leaves` when every pair that may share memory
/// is identical (same memory, dtype, shape, strides); empty otherwise.
std::vector<int32_t> identical_alias(const std::vector<Tensor>& leaves);
/// The cache-key part for a same_as pattern: "alias 1=0,3=2".
std::string alias_key(const std::vector<int32_t>& same_as);
/// The 0-d tensor of dtype `d` jit makes of the number `s` passed as
/// argument `position` for a Tensor parameter; ValueError naming jit and the
/// position when `d` cannot hold it (an integer above int64's range, a
/// finite floating number float32 would make infinite).
Tensor jit_number_tensor(const Scalar& s, DType d, size_t position);

/// A number passed for a Tensor parameter (jit_number_tensor's 0-d tensor):
/// a Tensor to the function, a weak input to the trace (trace/weak_scalar.h)
/// and a node of its own ("number") in the argument tree, so the cache keeps
/// calls with numbers apart from calls with 0-d tensors.
struct RuntimeNumber : Tensor {
  explicit RuntimeNumber(Tensor t) : Tensor(std::move(t)) {}
};
inline void number_treedef(TreeDef& d) {
  d.kind = TreeDef::Kind::record;
  d.value = "number";
  d.keys = {"value"};
  d.children.resize(1);
}
template <>
struct PyTree<RuntimeNumber> {
  static void flatten(const RuntimeNumber& v, TreeDef& def, LeafSink& sink) {
    number_treedef(def);
    sink.path.push_back("value");
    PyTree<Tensor>::flatten(v, def.children[0], sink);
    sink.path.pop_back();
  }
  template <class In>
  static RuntimeNumber rebuild(const In& in, LeafSource& src) {
    return RuntimeNumber(PyTree<Tensor>::rebuild<In>(in, src));
  }
  static RuntimeNumber unflatten(const TreeDef& def, LeafSource& src, const std::string& path) {
    if (def.kind != TreeDef::Kind::record || def.value != "number" || def.children.size() != 1)
      tree_error("at '" + path + "': expected a number, got " + def.str());
    return RuntimeNumber(PyTree<Tensor>::unflatten(def.children[0], src, join_path(path, "value")));
  }
};
template <>
struct FixedTree<RuntimeNumber> : std::true_type {
  static constexpr size_t leaves = 1;
  static void build(TreeDef& d) { number_treedef(d); }
  static void gather(const Tensor& v, Tensor*& out) { *out++ = v; }
  static void gather(const Tensor& v, const Tensor**& out) { *out++ = &v; }
  template <class P> static RuntimeNumber rebuild(P& in) { return RuntimeNumber(std::move(*in++)); }
};
/// A Tensor parameter traced from a number: the graph input, marked weak.
template <class Out>
  requires std::is_same_v<Out, Tensor>
Out rebuild_node(const RuntimeNumber& in, LeafSource& src) {
  Tensor t = PyTree<Tensor>::rebuild<RuntimeNumber>(in, src);
  mark_weak_scalar(t);
  return t;
}
template <class T> void collect_number(const T&, std::vector<Tensor>&) {}
inline void collect_number(const RuntimeNumber& n, std::vector<Tensor>& out) { out.push_back(n); }
/// "jit: argument <path>: an undefined tensor ..." for leaf `i` of `tree`.
[[noreturn]] void jit_undefined_argument(const TreeDef& tree, size_t i);
}  // namespace detail

/// The callable returned by jit(fn). Copies share one cache.
template <class F>
class JitFunction {
 public:
  JitFunction(F fn, JitOptions opts) : fn_(std::move(fn)), cache_(std::make_shared<detail::JitCache>(std::move(opts))) {}

  /// Compiles for these arguments' layouts on a miss, then runs.
  template <class... Args>
  CallResult operator()(const Args&... args) const {
    using Params = typename detail::fn_traits<F>::args;
    if constexpr (std::tuple_size_v<Params> == sizeof...(Args))
      return call_args(std::index_sequence_for<Args...>{}, args...);
    else
      return call_converted(args...);  // compile() reports the arity mismatch
  }
  JitStats stats() const { return cache_->stats(); }
  void clear() { cache_->clear(); }
  std::string last_miss_explanation() const { return cache_->last_miss_explanation(); }

 private:
  // A number for a Tensor parameter becomes a weak runtime 0-d tensor input.
  template <size_t I, class P, class A>
  static auto runtime_scalar(const A& a) {
    if constexpr (std::is_same_v<P, Tensor> && std::is_arithmetic_v<A>) {
      const DType d = std::is_same_v<A, bool> ? DType::bool_ : std::is_integral_v<A> ? DType::int64 : DType::float64;
      return detail::RuntimeNumber(detail::jit_number_tensor(Scalar(a), d, I));
    } else {
      return std::cref(a);
    }
  }
  template <size_t... I, class... Args>
  CallResult call_args(std::index_sequence<I...>, const Args&... args) const {
    using Params = typename detail::fn_traits<F>::args;
    return call_converted(unwrap(runtime_scalar<I, std::tuple_element_t<I, Params>>(args))...);
  }
  template <class T>
  static const T& unwrap(const std::reference_wrapper<const T>& r) { return r.get(); }
  static const Tensor& unwrap(const Tensor& t) { return t; }
  static const detail::RuntimeNumber& unwrap(const detail::RuntimeNumber& t) { return t; }

  template <class... Args>
  CallResult call_converted(const Args&... args) const {
    // Nested tracing (as jax.jit inside jax.jit): called while another
    // function is being traced, the function is traced into that graph
    // (its ops inlined) instead of being compiled and run.
    if (auto* outer = dynamic_cast<GraphRealizationContext*>(&current_realization_context())) {
      for (const auto& [name, t] : cache_->options().compile.weights) outer->bind_weight(name, t);
      // Numbers stay weak in the outer trace (its constants) for this call.
      struct Numbers {
        std::vector<Tensor> n;
        ~Numbers() {
          for (const Tensor& t : n) detail::unmark_weak_scalar(t);
        }
      } numbers;
      (detail::collect_number(args, numbers.n), ...);
      for (const Tensor& t : numbers.n) detail::mark_weak_scalar(t);
      F f = fn_;
      auto result = f(args...);
      auto [outs, out_tree] = tree_flatten(result);
      return CallResult{std::move(outs), std::make_shared<const TreeDef>(std::move(out_tree))};
    }
    using Sig = std::tuple<std::remove_cvref_t<Args>...>;
    if constexpr (detail::FixedTree<Sig>::value) {
      // Argument types whose tree is their type's alone (tensors, tuples and
      // KILN_PYTREE structs of tensors), as CompiledCallable's call: the
      // leaves gathered into an array, the cache searched field by field,
      // the call checked against the type's tree once per entry; no TreeDef,
      // layouts vector or path string per call. A miss builds what get() needs.
      std::array<Tensor, detail::FixedTree<Sig>::leaves> leaves;
      Tensor* p = leaves.data();
      (detail::FixedTree<std::remove_cvref_t<Args>>::gather(args, p), ...);
      const TreeDef& tree = detail::fixed_treedef<Sig>();
      for (size_t i = 0; i < leaves.size(); ++i)
        if (!leaves[i].defined()) detail::jit_undefined_argument(tree, i);
      if (auto fn = cache_->find_fixed(tree, leaves)) {
        if (!fn->staged().writes.empty() && detail::write_alias_observed(*fn, leaves))
          return call_aliased(std::vector<Tensor>(leaves.begin(), leaves.end()), tree, layouts_of(leaves), args...);
        if (cache_->sample_capture_check()) {
          const auto& co = cache_->options().compile;
          detail::check_same_trace(fn->staged(), stage(fn_, StageOptions{co.name, co.allow_subgraphs, {}, true})(args...));
        }
        CallResult r = fn->call_fixed(leaves, tree);
        cache_->count_hit();  // once it ran: a call that throws counts nothing
        return r;
      }
      return call_general(std::vector<Tensor>(leaves.begin(), leaves.end()), tree, args...);
    } else {
      auto [leaves, tree] = tree_flatten(std::forward_as_tuple(args...));
      for (size_t i = 0; i < leaves.size(); ++i)
        if (!leaves[i].defined()) detail::jit_undefined_argument(tree, i);
      return call_general(leaves, tree, args...);
    }
  }

  static std::vector<TensorLayout> layouts_of(std::span<const Tensor> leaves) {
    std::vector<TensorLayout> layouts;
    layouts.reserve(leaves.size());
    for (const Tensor& t : leaves) layouts.push_back(t.layout());
    return layouts;
  }

  // The call through the general cache lookup (tree and layouts built):
  // every call of a type that is not fixed, and a fixed one's miss.
  template <class... Args>
  CallResult call_general(const std::vector<Tensor>& leaves, const TreeDef& tree, const Args&... args) const {
    const std::vector<TensorLayout> layouts = layouts_of(leaves);
    const auto& co = cache_->options().compile;
    bool compiled = false;
    auto fn = cache_->find(tree, layouts, {});
    if (!fn) {
      // Identical arguments with no entry for separate ones: a function that
      // writes one runs the entry traced with them as one tensor (call_aliased).
      const std::vector<int32_t> same_as = detail::identical_alias(leaves);
      if (!same_as.empty())
        if (auto afn = cache_->find(tree, layouts, detail::alias_key(same_as));
            afn && !detail::write_alias_observed(*afn, leaves))
          return call_aliased(leaves, tree, layouts, args...);
      fn = cache_->get(tree, layouts, [&]() -> std::shared_ptr<const CompiledCallable> {
        compiled = true;
        StagedGraph s = stage(fn_, StageOptions{co.name, co.allow_subgraphs, {}})(args...);
        // A function that writes one of identical arguments runs the entry
        // traced with them as one tensor: this one would never run it.
        if (!same_as.empty() && !s.writes.empty() && detail::write_alias_observed(s, co.weights, leaves))
          return nullptr;
        return std::make_shared<const CompiledCallable>(std::move(s), co.weights, co.session);
      });
    }
    // The aliasing guard: only a function that writes in place looks.
    if (!fn || (!fn->staged().writes.empty() && detail::write_alias_observed(*fn, leaves)))
      return call_aliased(leaves, tree, layouts, args...);
    if (!compiled && cache_->sample_capture_check())
      detail::check_same_trace(fn->staged(), stage(fn_, StageOptions{co.name, co.allow_subgraphs, {}, true})(args...));
    CallResult r = fn->call_flat(leaves, tree);
    compiled ? cache_->count_miss() : cache_->count_hit();
    return r;
  }

  // A call whose writes would be observed through shared memory: identical
  // arguments get a compile traced with them as one tensor; anything else
  // (a partial overlap, or a captured tensor or weight passed as an
  // argument) runs eagerly.
  template <class... Args>
  CallResult call_aliased(const std::vector<Tensor>& leaves, const TreeDef& tree,
                          const std::vector<TensorLayout>& layouts, const Args&... args) const {
    const std::vector<int32_t> same_as = detail::identical_alias(leaves);
    if (!same_as.empty()) {
      const auto& co = cache_->options().compile;
      bool compiled = false;
      auto fn = cache_->get(
          tree, layouts,
          [&] {
            compiled = true;
            return std::make_shared<const CompiledCallable>(
                stage(fn_, StageOptions{co.name, co.allow_subgraphs, same_as})(args...), co.weights, co.session);
          },
          detail::alias_key(same_as));
      if (!detail::write_alias_observed(*fn, leaves)) {
        if (!compiled && cache_->sample_capture_check())
          detail::check_same_trace(fn->staged(),
                                   stage(fn_, StageOptions{co.name, co.allow_subgraphs, same_as, true})(args...));
        CallResult r = fn->call_flat(leaves, tree);
        compiled ? cache_->count_miss() : cache_->count_hit();
        return r;
      }
    }
    // The numbers are weak in the eager run, as in the trace (trace/weak_scalar.h).
    std::vector<Tensor> numbers;
    (detail::collect_number(args, numbers), ...);
    detail::WeakEagerScope weak(numbers);
    F f = fn_;
    auto result = f(args...);
    auto [outs, out_tree] = tree_flatten(result);
    weak.finish(outs);
    cache_->count_eager_call();
    return CallResult{std::move(outs), std::make_shared<const TreeDef>(std::move(out_tree))};
  }

  F fn_;
  std::shared_ptr<detail::JitCache> cache_;
};

/// jit(fn): see JitFunction. Tensor arguments are traced by layout (dtype,
/// shape, device, stride class); other arguments are static. Parameters of
/// nn modules that fn calls become named weights bound automatically (no
/// registry; their names are the modules' paths). Called while another
/// function is traced (jit or compile), the function is inlined into that
/// trace. For a module itself, `jit(model)` (a shared_ptr, or std::ref of a
/// module) is in nn/jit_module.h.
template <class F>
JitFunction<F> jit(F fn, JitOptions opts = {}) {
  return JitFunction<F>(std::move(fn), std::move(opts));
}

}  // namespace kiln
