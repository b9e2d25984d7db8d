// kiln: realization contexts: whether an op runs now (eager), is recorded
// for later (lazy), or is recorded into a graph being built (graph). Every
// op goes through the current context (tensor/op_table.h: apply). Semantics
// follow MAX's max.experimental.realization_context.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../tensor/op_table.h"
#include "../tensor/realize_hook.h"
#include "graph.h"
#include "pytree.h"

namespace kiln {

class RealizationContext;
namespace detail {
/// Shared between a context and the states it created, so a state can tell
/// when its context is gone (ctx becomes null).
struct ContextLink {
  RealizationContext* ctx = nullptr;
};
}  // namespace detail

/// What an unrealized tensor is: its graph value(s) (one per shard) and the
/// context that can realize it.
class RealizationState {
 public:
  RealizationState(std::vector<GraphValue> values, std::shared_ptr<detail::ContextLink> link,
                   std::shared_ptr<void> keep_alive = nullptr)
      : values(std::move(values)), link_(std::move(link)), keep_alive_(std::move(keep_alive)) {}
  std::vector<GraphValue> values;
  /// The owning context, or null when it no longer exists.
  RealizationContext* context() const { return link_ ? link_->ctx : nullptr; }
  const std::shared_ptr<detail::ContextLink>& link() const { return link_; }

 private:
  std::shared_ptr<detail::ContextLink> link_;
  std::shared_ptr<void> keep_alive_;  // lazy contexts live as long as their tensors
};

/// The protocol every context implements.
class RealizationContext {
 public:
  RealizationContext();
  virtual ~RealizationContext();
  RealizationContext(const RealizationContext&) = delete;
  RealizationContext& operator=(const RealizationContext&) = delete;

  /// The graph ops are recorded into.
  virtual Graph& graph() = 0;
  /// Realizes every live unrealized tensor of this context. Throws
  /// RealizationError while this context is current, or for a graph context.
  virtual void realize_all() = 0;
  /// Makes a realized tensor usable in this context's graph (a constant in a
  /// graph context). An unrealized tensor is an error.
  virtual std::shared_ptr<RealizationState> add_source(const Tensor& t) = 0;
  /// As add_source, for a tensor the graph may write (a constant in a graph context).
  virtual std::shared_ptr<RealizationState> add_mutable_source(const Tensor& t) { return add_source(t); }
  /// A tensor backed by `values` of this context's graph. `device` defaults
  /// to the first value's device.
  virtual Tensor create_unrealized(std::vector<GraphValue> values, std::optional<Device> mapping = std::nullopt);
  /// Runs or records one op (called by apply()).
  virtual Tensor apply_op(OpId op, std::span<const Tensor> in, const Attrs& attrs);

  /// True when this context is the innermost one on this thread's stack.
  bool is_current() const;
  /// The graph value standing for `t` here: its own value if it belongs to
  /// this context, else (after realizing it if needed) add_source(t).
  GraphValue value_of(const Tensor& t);

  /// In-place writes (tensor/mutation.h): true when graph value `v` was made
  /// by a view op (reshape, slice, ...) of another value of this context.
  bool is_view_value(int32_t v) const { return view_base_.count(v) != 0; }
  /// Records that `old_value` was superseded by an in-place write: a view
  /// taken of it before the write, and no longer held by a live tensor, can
  /// no longer be read (RealizationError).
  void mark_superseded(int32_t old_value) {
    superseded_.insert(old_value);
    superseded_at_.emplace(old_value, graph().num_nodes());
  }
  /// Per value an in-place write superseded, the graph's node count when it
  /// was first superseded: nodes from that index on were recorded after the
  /// write (stage() uses it to know what a function reads after writing an
  /// argument: jit/write_alias.h).
  const std::map<int32_t, size_t>& superseded_at() const { return superseded_at_; }
  /// The value a chain of view ops started from (v itself when not a view).
  int32_t view_root(int32_t v) const;

  // Writes through views. Eagerly a view shares its base's memory, so a
  // write through it changes the base and every other view of the base.
  // Traced, the tensors that share memory that way form an alias group: the
  // base (a tensor holding a root value) and the views taken of it, directly
  // or from its views. A write through a view is recorded as one scatter
  // into the root value (the view ops replayed on 0, 1, 2, ... give the
  // positions); the base is rebound to the new value, and every live view
  // of the group to its view ops replayed on it. A whole-tensor write into a
  // base rebinds its group's views the same way. Other tensors that happen
  // to hold the same value (a copy) are separate memory eagerly, and stay.

  /// Checks that a write through the view value `v` held by `view` can be
  /// recorded, naming `who`. Where the view's root is a captured realized
  /// tensor (a constant of a graph context) that the trace has not read yet
  /// (taking views of it reads nothing, nor does reading only the elements
  /// this write overwrites, as `x[...] += v` does), the tensor becomes a
  /// mutable source first (add_mutable_source) and the write is then
  /// recorded as a scatter into it. Throws RealizationError when the view
  /// is not known to alias a base, when its root is a captured tensor the
  /// trace already read (an op read it, a subgraph call's body captured it,
  /// or it is a result of the graph: the message says which), a bound
  /// weight or another constant; ValueError when the view repeats an
  /// element (a broadcast view, which eagerly cannot be written either).
  void check_view_write(const Tensor& view, const char* who);
  /// Records `value` (the view's dtype and shape) written through `view`
  /// (an unrealized view value of this context), as described above.
  void write_through_view(const Tensor& view, const Tensor& value);
  /// After `holder` (not a view) was rebound from `old_value` to
  /// `new_value` by a whole-tensor write: marks old_value superseded and
  /// rebinds the live views of holder's alias group. `holder` is null for a
  /// realized tensor (a graph context's mutable source).
  void follow_write(const Tensor* holder, int32_t old_value, int32_t new_value);

  /// Marks value `v` ambiguous: eagerly, whether it is a view or a copy
  /// depends on strides the trace does not know (a reshape or contiguous()
  /// of a view of an argument traced for a non-contiguous stride class);
  /// `who` names the op that made it. An in-place write into it, or through
  /// a view of it, is then refused (RealizationError, see tensor/mutation.h).
  void mark_ambiguous(int32_t v, std::string who) { ambiguous_[v] = std::move(who); }
  /// The op that made value `v` ambiguous (see mark_ambiguous), or null.
  const std::string* ambiguous_mark(int32_t v) const {
    auto it = ambiguous_.find(v);
    return it == ambiguous_.end() ? nullptr : &it->second;
  }
  /// True when some value of this context is marked ambiguous.
  bool has_ambiguous() const { return !ambiguous_.empty(); }

  // Thread safety: a context's recording bookkeeping (the maps above and
  // below) is not locked. A graph context is used only by the thread that
  // traces into it (it is that thread's current context from construction
  // to destruction); a lazy one records on the one thread that has it open.
  // Realizing a lazy context is locked (LazyRealizationContext::realize_all):
  // once its scope has ended, several threads may read its results at once.
  // Different contexts may be used by different threads at once.

 protected:
  /// True when a write may rebind the (non-view) value `root`: an op result
  /// or an argument. A graph context also accepts a mutable source.
  virtual bool root_writable(int32_t root) const;
  /// Rebinds the realized tensor (a graph context's mutable source) that
  /// currently stands for `root` to `new_root`; false when there is none.
  virtual bool rebind_source(int32_t /*root*/, int32_t /*new_root*/) { return false; }
  /// Forgets the view and write bookkeeping (a lazy context starting a fresh graph).
  void reset_write_tracking() {
    view_base_.clear();
    superseded_.clear();
    superseded_at_.clear();
    groups_.clear();
    source_groups_.clear();
    ambiguous_.clear();
  }
  std::shared_ptr<detail::ContextLink> link_;

 private:
  void check_readable(int32_t v, OpId op) const;
  /// The view ops (op, attrs) leading from `root` to `v`, in order.
  std::vector<std::pair<OpId, Attrs>> view_chain(int32_t root, int32_t v) const;
  struct AliasGroup {
    std::weak_ptr<detail::TensorImpl> base;  ///< null for a realized base (a source)
    std::vector<std::weak_ptr<detail::TensorImpl>> views;
  };
  /// The alias group `t` is the base or a view of, or null.
  std::shared_ptr<AliasGroup> group_of(const Tensor& t) const;
  /// Rebinds the live views of `g` (views of `old_root`) to their view ops replayed on `new_root`.
  void rebind_views(AliasGroup& g, int32_t old_root, int32_t new_root);
  std::map<int32_t, int32_t> view_base_;  // view value -> its root value
  std::set<int32_t> superseded_;          // values rebound away by in-place writes
  std::map<int32_t, size_t> superseded_at_;  // ... and the node count when first rebound away
  // unrealized base or view tensor -> its alias group (entries checked against the group's weak pointers)
  std::map<const detail::TensorImpl*, std::shared_ptr<AliasGroup>> groups_;
  // root value of a realized base (a source) -> the alias group of its views
  std::map<int32_t, std::shared_ptr<AliasGroup>> source_groups_;
  std::map<int32_t, std::string> ambiguous_;  // value -> the op that made it ambiguous (mark_ambiguous)
};

/// Runs each op at once with the eager kernels (the default context).
class EagerRealizationContext : public RealizationContext {
 public:
  EagerRealizationContext();
  ~EagerRealizationContext() override;
  Graph& graph() override { return graph_; }
  void realize_all() override {}
  std::shared_ptr<RealizationState> add_source(const Tensor& t) override;
  Tensor apply_op(OpId op, std::span<const Tensor> in, const Attrs& attrs) override;

 private:
  Graph graph_{"main"};
};

/// Records ops; tensors realize on demand (item(), to_vector, printing,
/// data access, realize()), all live tensors of the context together, so a
/// shared dependency is computed once; tensors that died are dropped.
///
/// Threads: once the scope has ended, several threads may read its
/// unrealized results at once, the same result included (through one handle
/// or copies of it). The computation runs once, under the context's lock;
/// the others wait for it and take their values. A result becomes realized
/// (is_realized()) in the first thread that reads it, and the others then
/// see it realized: the tensor's state is read atomically (one acquire load
/// on the fast path; detail::PendingState, tensor/tensor.h). The values of
/// results no thread has read yet are kept by the context (reading one runs
/// nothing) and handed over on first read. Writing into a result while
/// another thread reads it is a data race, as for any tensor.
class LazyRealizationContext : public RealizationContext,
                               public std::enable_shared_from_this<LazyRealizationContext> {
 public:
  LazyRealizationContext();
  ~LazyRealizationContext() override;
  Graph& graph() override { return *graph_; }
  /// Computes every live unrealized tensor of this context (each needed op
  /// runs once, with the eager kernels; ops no live tensor needs are
  /// skipped). An op that fails (an index out of range, say) fails only the
  /// tensors that depend on it: the others are computed, and those stay
  /// unrealized (their part of the graph is kept; each read of one runs that
  /// part again and throws the op's error). Called directly, it realizes
  /// every tensor it computed and rethrows the first failure; called to read
  /// one tensor (realize(), item(), ...), it throws only that tensor's
  /// failure and hands the other values over when their tensors are read
  /// (all at once where this context is the default one or open on this
  /// thread; see the class comment). Throws RealizationError while this
  /// context is current on this thread, or open (recording) on another.
  void realize_all() override;
  std::shared_ptr<RealizationState> add_source(const Tensor& t) override;
  Tensor create_unrealized(std::vector<GraphValue> values, std::optional<Device> mapping = std::nullopt) override;
  /// Op nodes executed by realizations so far (for tests and diagnostics).
  int64_t ops_executed() const { return ops_executed_; }
  /// Before an eager write into `b`: recorded sources stored in `b` keep
  /// their old contents (a copy), and later reads record the new ones.
  void snapshot_sources_in(const Buffer& b);

 private:
  std::unique_ptr<Graph> graph_;
  std::map<int32_t, Tensor> snapshots_;  // constant value -> its contents at recording time
  std::vector<std::weak_ptr<detail::TensorImpl>> pending_;
  std::map<const detail::TensorImpl*, int32_t> sources_;  // realized tensor -> its constant value
  int64_t ops_executed_ = 0;
};

/// Records ops into `graph`; never realizes. Constructing one makes it the
/// current context of this thread until it is destroyed (RAII).
class GraphRealizationContext : public RealizationContext {
 public:
  explicit GraphRealizationContext(Graph& graph, std::vector<GraphValue> signal_buffers = {}, std::string prefix = "");
  ~GraphRealizationContext() override;

  Graph& graph() override { return *graph_; }
  /// Always throws RealizationError ("can't realize from a graph context").
  void realize_all() override;
  /// Embeds a realized tensor as a constant; an unrealized one throws RealizationError.
  /// A tensor already added by add_mutable_source gives its current value.
  std::shared_ptr<RealizationState> add_source(const Tensor& t) override;
  /// Adds a realized tensor as a mutable value of the graph: a named weight
  /// ("<prefix>mutable.<n>") read from the tensor's memory on every call, so
  /// writes made to it between calls are seen. In-place writes to it while
  /// recording are functionalised (a new SSA value per write; the tensor then
  /// stands for the newest); mutable_sources() lists the final values, which
  /// compile() writes back into the tensor when a call ends. Calling it again
  /// for the same tensor gives its current value. A tensor already embedded
  /// as a constant (add_source) that the trace has not read yet -- it only
  /// took views of it (a view reads nothing) -- becomes a mutable source all
  /// the same: its constant node turns into the weight, so those views read
  /// the tensor's memory at call time. Throws RealizationError for an
  /// unrealized tensor, or one the trace already read as a constant (an op
  /// read it or a view of it, a subgraph call's body captured it, or it is a
  /// result of the graph; its value at that point would be baked in): make
  /// it mutable before its first read (write into it first, or call this).
  std::shared_ptr<RealizationState> add_mutable_source(const Tensor& t) override;
  /// A realized tensor added by add_mutable_source, its weight's name and its current (newest) value.
  struct MutableSource {
    Tensor tensor;
    std::string weight;
    int32_t value = -1;
    bool written = false;  ///< an in-place write was recorded
  };
  /// The mutable sources, in the order added.
  const std::vector<MutableSource>& mutable_sources() const { return mutable_; }
  /// In-place writes: `t` (a mutable source, see add_mutable_source) now stands for `v`.
  void set_mutable_value(const Tensor& t, int32_t v);
  /// True when `t`'s impl is a mutable source of this context.
  bool is_mutable_source(const Tensor& t) const;

  const std::string& prefix() const { return prefix_; }
  const std::vector<GraphValue>& signal_buffers() const { return signal_buffers_; }
  /// Realized tensors embedded by add_source, in order, with their constant's value id.
  std::vector<std::pair<Tensor, int32_t>> sources() const;
  /// Named weights the trace bound to tensors by itself (no registry): the
  /// parameters an nn::Module reads (named by their path from the module the
  /// trace entered first, i.e. its state_dict() keys) and the weights of a
  /// compiled callable inlined by a nested call. Full names (a subgraph
  /// body's relative names with the call's prefix); shared with the contexts
  /// of subgraph bodies; compile() binds them (an explicit
  /// CompileOptions::weights entry wins).
  std::shared_ptr<std::map<std::string, Tensor>> bound_weights = std::make_shared<std::map<std::string, Tensor>>();
  /// Records that weight `name` is bound to `t` (realized, contiguous).
  /// Throws ValueError when `name` is already bound to another tensor (two
  /// different tensors would otherwise be read as one weight).
  void bind_weight(const std::string& name, const Tensor& t);
  /// True when weight `name` is unbound or bound to `t` (and the graph has no
  /// other weight of that name).
  bool weight_name_free(const std::string& name, const Tensor& t) const;
  /// Subgraph dedup table (key -> subgraph name); null means calls are inlined.
  std::shared_ptr<std::map<std::string, std::string>> subgraph_cache;
  /// Output tree per dedup key, to rebuild a cached call's results without
  /// tracing the body again.
  std::map<std::string, TreeDef> subgraph_out_defs;
  /// Every subgraph call traces its body again and a trace that differs from
  /// the body serving its key throws ValueError (StageOptions::check_subgraph_bodies).
  bool check_subgraph_bodies = false;

  /// The layout set for root value `v` (an argument's, from its stride
  /// class: detail::set_traced_value_layout; or the layout a value written in
  /// place inherits from the memory it replaces), or null when none was set
  /// (detail::traced_layout then derives it from the value's producer).
  const detail::TracedLayout* value_layout(int32_t v) const {
    auto it = layouts_.find(v);
    return it == layouts_.end() ? nullptr : &it->second;
  }
  /// Sets the layout of root value `v` (see value_layout).
  void set_value_layout(int32_t v, detail::TracedLayout l) { layouts_[v] = std::move(l); }
  /// Records that the traced function reads value `read` after writing the
  /// destination whose value before the write was `written` (a view root),
  /// where the graph's node order does not show it (trace/read_after_write.h).
  void note_read_after_write(int32_t written, int32_t read);
  /// The values noted for `written` by note_read_after_write, in the order
  /// first noted (empty when none).
  std::vector<int32_t> reads_after_write(int32_t written) const;
  /// Registers this graph's input values whose arguments are traced for a
  /// broadcast layout (a stride 0 on an axis of extent > 1), value id ->
  /// argument index (trace/stage.cpp, when the trace starts): an in-place
  /// write into one of them, or through a view of one, then throws
  /// ValueError naming the writing op, as eagerly (a broadcast tensor's
  /// elements share memory). Kept by the context, so it ends with the trace.
  void set_broadcast_arguments(std::map<int32_t, int> args) { broadcast_args_ = std::move(args); }
  /// The argument index registered for input value `v` by
  /// set_broadcast_arguments, or -1 when `v` is not such an argument.
  int broadcast_argument(int32_t v) const {
    auto it = broadcast_args_.find(v);
    return it == broadcast_args_.end() ? -1 : it->second;
  }

 protected:
  bool root_writable(int32_t root) const override;
  bool rebind_source(int32_t root, int32_t new_root) override;

 private:
  Graph* graph_;
  std::vector<GraphValue> signal_buffers_;
  std::string prefix_;
  std::map<const detail::TensorImpl*, int32_t> sources_;
  std::vector<Tensor> pinned_;
  // Indices into pinned_ by the address of their first element, in pinning
  // order: the candidates of same_view (a scan of pinned_ per source made
  // long traces quadratic: 10,000 ops with a constant each compiled in
  // 2.3 s). Indices, not handles: a source's use count tells whether the
  // traced function made it (trace/made_in_trace.h).
  std::multimap<const void*, size_t> pinned_at_;
  std::vector<MutableSource> mutable_;
  std::map<const detail::TensorImpl*, size_t> mutable_index_;  // impl -> index into mutable_
  std::map<int32_t, detail::TracedLayout> layouts_;             // root value -> its layout (value_layout)
  std::map<int32_t, std::vector<int32_t>> reads_after_write_;   // written value -> values read after the write
  std::map<int32_t, int> broadcast_args_;  // input value traced for a broadcast layout -> argument index
};

/// The innermost context on this thread, or the default one.
RealizationContext& current_realization_context();
/// True when the innermost context records into a graph (not eager/lazy).
bool in_graph_context();

/// Makes `ctx` current on this thread until destroyed (contexts nest).
class RealizationScope {
 public:
  explicit RealizationScope(RealizationContext& ctx);
  ~RealizationScope();
  RealizationScope(const RealizationScope&) = delete;
  RealizationScope& operator=(const RealizationScope&) = delete;

 private:
  RealizationContext* ctx_;
};

/// A lazy region: `{ auto scope = kiln::lazy(); ... }`. Tensors made inside
/// stay unrealized until needed after the scope ends.
class LazyScope {
 public:
  LazyScope();
  ~LazyScope();
  LazyScope(const LazyScope&) = delete;
  LazyScope& operator=(const LazyScope&) = delete;
  LazyRealizationContext& context() { return *ctx_; }

 private:
  std::shared_ptr<LazyRealizationContext> ctx_;
  std::optional<RealizationScope> scope_;
};
[[nodiscard]] LazyScope lazy();

/// Undoes a set_default_realization_context when restore() is called.
class [[nodiscard]] DefaultContextHandle {
 public:
  explicit DefaultContextHandle(std::shared_ptr<RealizationContext> previous) : previous_(std::move(previous)) {}
  void restore();

 private:
  std::shared_ptr<RealizationContext> previous_;
  bool restored_ = false;
};
/// Replaces the process-wide default context (used when no scope is active;
/// null restores the built-in eager context). Returns a handle that undoes it.
DefaultContextHandle set_default_realization_context(std::shared_ptr<RealizationContext> ctx);

}  // namespace kiln
