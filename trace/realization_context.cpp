#include "realization_context.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "../tensor/creation.h"
#include "../tensor/ops.h"
#include "../tensor/realize_hook.h"
#include "../tensor/scalar_operand.h"
#include "read_after_write.h"
#include "weak_scalar.h"

namespace kiln {

namespace {
thread_local std::vector<RealizationContext*> t_stack;

std::mutex g_default_mu;
std::shared_ptr<RealizationContext> g_default;           // null = built-in eager
std::atomic<RealizationContext*> g_default_raw{nullptr};  // fast-path read of g_default

EagerRealizationContext& builtin_eager() {
  static EagerRealizationContext ctx;
  return ctx;
}

// Which threads have each lazy context open (on their scope stack), and how
// many times: a lazy context records into unlocked bookkeeping, so a thread
// other than the one recording must not realize it while it is open
// (LazyRealizationContext::realize_all refuses instead of racing).
std::mutex g_open_lazy_mu;
std::map<const RealizationContext*, std::map<std::thread::id, int>> g_open_lazy;

void push(RealizationContext* c) {
  if (dynamic_cast<LazyRealizationContext*>(c)) {
    std::lock_guard<std::mutex> lock(g_open_lazy_mu);
    ++g_open_lazy[c][std::this_thread::get_id()];
  }
  t_stack.push_back(c);
}
void pop(RealizationContext* c) {
  // Normally the top; tolerate out-of-order destruction rather than corrupt the stack.
  auto it = std::find(t_stack.rbegin(), t_stack.rend(), c);
  if (it == t_stack.rend()) return;
  t_stack.erase(std::next(it).base());
  if (dynamic_cast<LazyRealizationContext*>(c)) {
    std::lock_guard<std::mutex> lock(g_open_lazy_mu);
    auto o = g_open_lazy.find(c);
    if (o != g_open_lazy.end()) {
      auto th = o->second.find(std::this_thread::get_id());
      if (th != o->second.end() && --th->second == 0) o->second.erase(th);
      if (o->second.empty()) g_open_lazy.erase(o);
    }
  }
}
// True when lazy context `c` is open (on the scope stack) in a thread other than this one.
bool open_in_other_thread(const RealizationContext* c) {
  std::lock_guard<std::mutex> lock(g_open_lazy_mu);
  auto o = g_open_lazy.find(c);
  if (o == g_open_lazy.end()) return false;
  for (const auto& [id, n] : o->second)
    if (id != std::this_thread::get_id() && n > 0) return true;
  return false;
}
}  // namespace

namespace {
// The strides eager code would see for `t` (a tensor of context `c`, or a
// realized tensor about to become its source), when known: replayed through
// the eager view rules from its root's. For a graph context, traced_layout;
// for a lazy one, a source's own strides and an op result's contiguous ones
// (its values are the eager kernels' results). `cls_known` false when not
// even the class is known.
struct KnownLayout {
  std::optional<Strides> strides;
  StrideClass cls = StrideClass::general;
  bool cls_known = false;
};
KnownLayout known_layout(RealizationContext& c, const Tensor& t);
// The layout recorded for root value `from` of graph context `c` becomes
// that of `to` (its new value after an in-place write: the same memory
// eagerly). No-op for other contexts.
void inherit_layout(RealizationContext& c, int32_t from, int32_t to);
// True when root value `v` of graph context `c` has a layout other than the
// contiguous one a new op result gets (an argument or captured tensor laid
// out otherwise, or of unknown strides): a write into it must keep it.
bool keeps_layout(RealizationContext& c, int32_t v);

// True when eager's reshape by `attrs` of a tensor of `shape` is a view
// whatever its strides: it is one for strides no two axes of which can merge.
bool reshape_always_view(const Shape& shape, const Attrs& attrs) {
  Strides pad(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    pad[i] = acc;
    if (__builtin_mul_overflow(acc, 2 * std::max<int64_t>(shape[i], 1), &acc)) return false;
  }
  Shape s2;
  Strides st2;
  return detail::view_strides(OpId::Reshape, shape, pad, attrs, s2, st2);
}

// Set while apply_op records the parts of a reshape it handles itself.
thread_local bool t_plain_reshape = false;
}  // namespace

// ---- hooks used by tensor/ ----------------------------------------------------------
RealizationContext* detail::active_context() {
  if (!t_stack.empty()) return t_stack.back();
  return g_default_raw.load(std::memory_order_acquire);
}

bool detail::recording_graph() {
  RealizationContext* c = active_context();
  return c != nullptr && dynamic_cast<GraphRealizationContext*>(c) != nullptr;
}

Tensor detail::context_apply(RealizationContext* ctx, OpId op, std::span<const Tensor> in, const Attrs& attrs) {
  return ctx->apply_op(op, in, attrs);
}

Tensor detail::recorded_copy(const Tensor& t, bool always) {
  const auto st = t.impl().state.get();
  RealizationContext* cur = active_context();
  if (!st || !cur || st->context() != cur) return Tensor();
  Attrs a;
  a.dtype = t.dtype();
  if (always) return apply(OpId::Cast, t, a);
  // As eagerly, a value whose layout is contiguous (a view included: y[1],
  // a reshape) is returned itself, so writes through the result reach what
  // it views; a non-contiguous one is copied. Where the layout is not known,
  // eagerly it may be either: the copy is recorded, marked ambiguous.
  const KnownLayout l = known_layout(*cur, t);
  if (l.cls_known && l.cls == StrideClass::contiguous) return t;
  Tensor r = apply(OpId::Cast, t, a);
  if (!l.cls_known) cur->mark_ambiguous(r.impl().state->values[0].id, "contiguous()");
  return r;
}

namespace {
// The tensor detail::realize_tensor is realizing, for
// LazyRealizationContext::realize_all: when an op of the scope fails, only a
// read of a tensor that depends on it throws (null: realize_all was called
// directly, and any failure throws).
thread_local const detail::TensorImpl* t_realize_target = nullptr;
}  // namespace

void detail::realize_tensor(const Tensor& t) {
  // A copy of the state: another thread reading this tensor may realize it
  // (and release the state) meanwhile; the copy keeps the context alive.
  const auto st = t.impl().state.get();
  if (!st) return;
  RealizationContext* c = st->context();
  if (!c) throw RealizationError("realize: the realization context that recorded this tensor no longer exists");
  const detail::TensorImpl* outer = t_realize_target;
  t_realize_target = &t.impl();
  try {
    c->realize_all();
  } catch (...) {
    t_realize_target = outer;
    throw;
  }
  t_realize_target = outer;
  if (t.impl().state) throw RealizationError("realize: the tensor's context did not realize it");
}

void detail::realize_for(const Tensor& t, const char* who) {
  const auto st = t.impl().state.get();
  if (!st) return;
  if (auto* g = dynamic_cast<GraphRealizationContext*>(st->context()))
    throw RealizationError(std::string(who) + ": the tensor is a traced value of graph '" + g->graph().name() +
                           "' (inside jit/compile/stage), and values exist only when the compiled function runs, so " +
                           who + " has nothing to read while tracing; return the tensor from the function and read "
                           "the call's result (for a choice on values inside the function, use where())");
  realize_tensor(t);
}

namespace {
// What a lazy context needs for being read from several threads at once
// (kept here, beside the list of live contexts, not in the class).
struct LazyLock {
  // Realization (realize_all, snapshot_sources_in, handing values over) holds it.
  std::mutex mu;
  // Values computed for results no thread has read yet: tensor -> (the tensor, its value).
  struct Parked {
    std::weak_ptr<detail::TensorImpl> tensor;
    Tensor value;
  };
  std::unordered_map<const detail::TensorImpl*, Parked> parked;
};
// Live lazy contexts, for before_memory_write (an eager write into a buffer a
// lazy scope recorded as a source), each with its LazyLock.
std::mutex g_lazy_mu;
std::map<LazyRealizationContext*, std::unique_ptr<LazyLock>> g_lazy;
std::atomic<int> g_lazy_count{0};

// The LazyLock of live context `c` (stable until c is destroyed).
LazyLock& lazy_lock(const LazyRealizationContext* c) {
  std::lock_guard<std::mutex> lock(g_lazy_mu);
  return *g_lazy.at(const_cast<LazyRealizationContext*>(c));
}

// `p` takes the value `v` computed for it (it becomes realized).
void hand_over(detail::TensorImpl& p, const Tensor& v) {
  const detail::TensorImpl& r = v.impl();
  // Other threads may be reading p meanwhile (copies of one handle share
  // it): they read storage and strides only once they see it realized,
  // which reset() publishes (release); offset and device they may read at
  // any time (inline accessors), so those are written only where they change.
  p.storage = r.storage;
  p.strides = r.strides;
  if (p.offset != r.offset) p.offset = r.offset;
  if (!(p.device == r.device)) p.device = r.device;
  p.state.reset();  // may release the last reference to the context: callers hold one
}

// Hands every parked value of `L`, context `c`'s, to its tensor (L.mu held).
void hand_over_all(LazyLock& L, const RealizationContext* c) {
  for (auto& [key, pk] : L.parked)
    if (auto p = pk.tensor.lock(); p && p->state.pending() && p->state->context() == c) hand_over(*p, pk.value);
  L.parked.clear();
}

// Hands the parked value of `t` to it (L.mu held); false when there is none.
bool hand_over_one(LazyLock& L, const detail::TensorImpl* t) {
  auto it = L.parked.find(t);
  if (it == L.parked.end()) return false;
  auto p = it->second.tensor.lock();
  if (p.get() != t) {  // a dead tensor's entry, its address now another tensor's
    L.parked.erase(it);
    return false;
  }
  const Tensor v = std::move(it->second.value);
  L.parked.erase(it);
  // drop the entries of tensors that died meanwhile (and their values)
  for (auto e = L.parked.begin(); e != L.parked.end();) e = e->second.tensor.expired() ? L.parked.erase(e) : std::next(e);
  hand_over(*p, v);
  return true;
}
}  // namespace

// ---- in-place writes (tensor/mutation.cpp) -------------------------------------------------
namespace {
// An in-place write into an argument traced for a broadcast layout (stride
// 0 on an axis of extent > 1), or through a view of one, is refused while
// tracing with the message eager gives, naming the user's op (at call time
// only the write-back's copy_ would see it). The graph context of the trace
// knows its broadcast arguments (GraphRealizationContext::set_broadcast_arguments).
void check_not_broadcast_argument(RealizationContext& cur, const Tensor& dst, const char* who) {
  auto* g = dynamic_cast<GraphRealizationContext*>(&cur);
  if (!g) return;
  const int arg = g->broadcast_argument(cur.view_root(dst.impl().state->values[0].id));
  if (arg < 0) return;
  throw ValueError(std::string(who) + ": the destination (shape " + shape_str(dst.shape()) + ") is argument " +
                   std::to_string(arg) + " or a view of it, traced for a broadcast layout whose elements share "
                   "memory (a stride 0); write into a tensor of its own, e.g. x.clone(), or pass the argument "
                   "contiguous");
}

// How graph context `g` already read its constant `c` (the captured
// realized tensor `t`), or empty when it did not: when the trace only took
// views of it (view ops, and views of those: a view reads nothing), or read
// only elements that `written` flags (one flag per element of t, row-major;
// null: none) -- the elements a write through a view is about to overwrite,
// which `x[...] += v` reads first. A read of other elements would compute
// with the contents at that point, while the write turns the tensor into a
// mutable source. A subgraph call whose body captured the tensor reads it
// too (the body holds a copy of it: matched by dtype, shape and bytes).
std::string constant_read(GraphRealizationContext& g, int32_t c, const Tensor& t, const std::vector<char>* written);
// Makes the captured realized tensor `t` a mutable source of `g` before a
// write into it, naming `who`: `view` is the value of the view written
// through and `written` the elements it covers (see constant_read), or -1
// and null for a whole-tensor write. A tensor embedded as a constant that
// was not read (see constant_read) becomes one all the same; otherwise a
// RealizationError says what read it.
void make_mutable_for_write(GraphRealizationContext& g, const Tensor& t, const char* who, int32_t view,
                            const std::vector<char>* written);
// The elements add_mutable_source may find read already (set by
// make_mutable_for_write around its call).
thread_local const std::vector<char>* t_written_region = nullptr;

// A write into a value marked ambiguous, or through a view of one, is refused.
void check_not_ambiguous(RealizationContext& cur, const Tensor& dst, const char* who) {
  if (!cur.has_ambiguous()) return;
  const Graph& g = cur.graph();
  int32_t v = dst.impl().state->values[0].id;
  const int32_t root = cur.view_root(v);
  for (;;) {
    if (const std::string* a = cur.ambiguous_mark(v))
      throw RealizationError(
          std::string(who) + ": the destination (shape " + shape_str(dst.shape()) + ") is, or is a view of, the " +
          "result of " + *a + " (graph value %" + std::to_string(v) + ") of a view of an argument traced " +
          "for a non-contiguous stride class; whether that result is a view or a copy depends on the argument's " +
          "runtime strides, so whether this write reaches the argument cannot be decided while tracing. Write " +
          "into a copy (.clone()) or pass a contiguous argument");
    if (v == root) return;
    v = g.node(static_cast<size_t>(g.producer(v))).inputs[0];
  }
}

// In a lazy scope, `view` (a view value of `lz`) whose root is a realized
// tensor (a source) is bound now to that tensor's eager view (the view ops
// replayed on it), so a write through it lands in the tensor's memory as it
// does eagerly (the lazy context snapshots what it recorded reading first).
// A view of a lazy op result is left alone (written functionally). (A
// fallback: apply_op takes a view of a realized tensor at once in a lazy
// scope, and functional_write gives a lazy tensor a value of its own, so an
// unrealized view rooted at a source is not expected here.)
void bind_lazy_view_of_source(RealizationContext& lz, const Tensor& view) {
  const Graph& g = lz.graph();
  int32_t v = view.impl().state->values[0].id;
  const int32_t root = lz.view_root(v);
  const Node& rn = g.node(static_cast<size_t>(g.producer(root)));
  if (rn.kind != NodeKind::constant || !rn.data.defined()) return;
  std::vector<const Node*> chain;
  for (; v != root; v = g.node(static_cast<size_t>(g.producer(v))).inputs[0])
    chain.push_back(&g.node(static_cast<size_t>(g.producer(v))));
  Tensor t = rn.data;
  {
    detail::EagerGuard eager;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) t = apply((*it)->op, t, (*it)->attrs);
  }
  if (t.buffer() != rn.data.buffer()) return;  // not a view of the tensor after all: keep it lazy
  auto& im = const_cast<detail::TensorImpl&>(view.impl());
  im.storage = t.impl().storage;
  im.strides = t.impl().strides;
  im.offset = t.impl().offset;
  im.device = t.impl().device;
  im.state.reset();
}
}  // namespace

namespace {
// In a lazy context, the graph's value count when the current functional
// write began (begin_write): a written value with a smaller id existed
// before the write -- another tensor may hold it (`t.copy_(u)`) -- and
// functional_write records a copy of it (see there).
thread_local size_t t_lazy_write_mark = 0;
}  // namespace

detail::WriteMode detail::begin_write(const Tensor& dst, const char* who) {
  RealizationContext* cur = active_context();
  if (cur && dynamic_cast<LazyRealizationContext*>(cur)) t_lazy_write_mark = cur->graph().num_values();
  if (const auto st = dst.impl().state.get()) {
    RealizationContext* owner = st->context();
    if (owner && owner == cur && dynamic_cast<LazyRealizationContext*>(cur) && cur->is_view_value(st->values[0].id))
      bind_lazy_view_of_source(*cur, dst);  // a view of a realized tensor: written eagerly, as outside lazy()
    if (dst.is_realized()) {
      // (bound above) falls through to the eager write below
    } else if (owner && owner == cur) {
      check_not_broadcast_argument(*cur, dst, who);
      check_not_ambiguous(*cur, dst, who);
      if (cur->is_view_value(st->values[0].id)) cur->check_view_write(dst, who);
      return WriteMode::functional;
    }
    dst.realize();  // another context's tensor: realize it there (throws where that is impossible)
  }
  if (auto* g = dynamic_cast<GraphRealizationContext*>(cur)) {
    make_mutable_for_write(*g, dst, who, -1, nullptr);
    return WriteMode::functional;
  }
  return WriteMode::eager;
}

namespace {
// `value` as a tensor of `cur` that is no view of another value: a tensor
// written whole takes the value, and must not then alias the value's root
// (a later write through it would land there). A same-dtype Cast is a copy.
Tensor own_value(RealizationContext& cur, const Tensor& value) {
  if (value.is_realized() || !value.impl().state || value.impl().state->context() != &cur ||
      !cur.is_view_value(value.impl().state->values[0].id))
    return value;
  Attrs a;
  a.dtype = value.dtype();
  return apply(OpId::Cast, value, a);
}
}  // namespace

void detail::functional_write(const Tensor& dst, const Tensor& value) {
  RealizationContext& cur = current_realization_context();
  // Eagerly the destination keeps its memory, and so its layout: where that
  // is not an op result's, the new value is a fresh copy that inherits it
  // (views rebound onto it then report eager's layout).
  auto fresh = [&](int32_t old, Tensor v) {
    if (!keeps_layout(cur, old)) return v;
    Attrs a;
    a.dtype = v.dtype();
    return apply(OpId::Cast, v, a);
  };
  if (dst.is_realized()) {
    auto& g = dynamic_cast<GraphRealizationContext&>(cur);
    const int32_t old = g.add_source(dst)->values[0].id;
    const int32_t now = cur.value_of(fresh(old, own_value(cur, value))).id;
    if (keeps_layout(cur, old)) inherit_layout(cur, old, now);
    g.set_mutable_value(dst, now);
    cur.follow_write(nullptr, old, now);
    return;
  }
  auto& st = dst.impl().state;
  const int32_t old = st->values[0].id;
  if (cur.is_view_value(old)) return cur.write_through_view(dst, value);
  const bool keep = keeps_layout(cur, old);
  Tensor v = fresh(old, own_value(cur, value));
  // Lazily, every tensor holding a graph value is given that value's memory
  // when realized. Eagerly `t.copy_(u)` copies: t must not share u's memory
  // afterwards (nor a realized source's: t.copy_(x) would make t x itself).
  // So a value that existed before this write (held by u, or realized) is
  // copied (a same-dtype Cast); a value this write computed (`t.add_(1)`)
  // has no other holder and is taken as it is.
  if (dynamic_cast<LazyRealizationContext*>(&cur) &&
      (v.is_realized() || v.impl().state->link() != st->link() ||
       static_cast<size_t>(v.impl().state->values[0].id) < t_lazy_write_mark)) {
    Attrs a;
    a.dtype = v.dtype();
    v = apply(OpId::Cast, v, a);
  }
  if (!v.is_realized() && v.impl().state->link() == st->link()) {
    st = v.impl().state.get();
  } else {
    st = cur.add_source(v.is_realized() ? v : v.realize());
  }
  if (keep) inherit_layout(cur, old, st->values[0].id);
  cur.follow_write(&dst, old, st->values[0].id);
}

void detail::before_memory_write(const Buffer& b) {
  if (g_lazy_count.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(g_lazy_mu);
  for (auto& [c, L] : g_lazy) {
    // Another thread may be realizing c (it holds L->mu, never g_lazy_mu).
    std::lock_guard<std::mutex> cl(L->mu);
    c->snapshot_sources_in(b);
  }
}

detail::EagerGuard::EagerGuard() { push(&builtin_eager()); }
detail::EagerGuard::~EagerGuard() { pop(&builtin_eager()); }

// ---- RealizationContext ---------------------------------------------------------------
RealizationContext::RealizationContext() : link_(std::make_shared<detail::ContextLink>()) { link_->ctx = this; }
RealizationContext::~RealizationContext() { link_->ctx = nullptr; }

bool RealizationContext::is_current() const { return !t_stack.empty() && t_stack.back() == this; }

Tensor RealizationContext::create_unrealized(std::vector<GraphValue> values, std::optional<Device> mapping) {
  if (values.empty()) throw ValueError("create_unrealized: needs at least one graph value");
  for (const auto& v : values)
    if (v.graph != &graph())
      throw RealizationError("create_unrealized: value %" + std::to_string(v.id) + " belongs to graph '" +
                             (v.graph ? v.graph->name() : std::string("?")) + "', not to this context's graph '" +
                             graph().name() + "'");
  auto impl = std::make_shared<detail::TensorImpl>();
  const TensorType& ty = values[0].type();
  impl->dtype = ty.dtype;
  impl->shape = ty.shape;
  impl->device = mapping ? *mapping : ty.device;
  impl->state = std::make_shared<RealizationState>(std::move(values), link_);
  return Tensor(std::move(impl));
}

// ---- weak runtime scalars (trace/weak_scalar.h) ---------------------------------
namespace {
struct WeakEntry {
  ScalarKind kind = ScalarKind::floating;
  int32_t materialized = -1;  // the value read as its kind's default dtype, once made
};
// Per graph value (graph, id) of the traces on this thread (a graph
// context's entries go with it), and the realized 0-d tensors marked weak.
thread_local std::map<std::pair<const Graph*, int32_t>, WeakEntry> t_weak;
thread_local std::map<const detail::TensorImpl*, ScalarKind> t_weak_realized;
// Set while the weak rules apply an op themselves: value_of then gives a
// weak value as it is (float64 / int64 / bool).
thread_local bool t_weak_raw = false;
// Range checks of number inputs per graph (trace/weak_scalar.h): graph ->
// (input value, dtype, op); erased with the graph's context.
thread_local std::map<const Graph*, std::vector<std::tuple<int32_t, DType, OpId>>> t_weak_checks;
// Set by a WeakEagerScope: realized tensors marked weak, held until the
// scope ends (so that no other tensor reuses a marked address meanwhile).
thread_local std::vector<Tensor>* t_weak_keep = nullptr;

struct WeakRaw {
  bool old = t_weak_raw;
  WeakRaw() { t_weak_raw = true; }
  ~WeakRaw() { t_weak_raw = old; }
};
bool any_weak() { return !t_weak.empty() || !t_weak_realized.empty(); }
ScalarKind kind_of_dtype(DType d) { return detail::weak_kind_of(d); }
DType weak_default(ScalarKind k) { return detail::weak_default_dtype(k); }
// The weak kind of `t` in context `c`, if any.
std::optional<ScalarKind> weak_kind_in(const RealizationContext& c, const Tensor& t) {
  if (!t.defined()) return std::nullopt;
  if (t.is_realized()) {
    auto it = t_weak_realized.find(&t.impl());
    return it == t_weak_realized.end() ? std::nullopt : std::optional<ScalarKind>(it->second);
  }
  const auto st = t.impl().state.get();
  if (!st || st->context() != &c || st->values.empty()) return std::nullopt;
  auto it = t_weak.find({st->values[0].graph, st->values[0].id});
  return it == t_weak.end() ? std::nullopt : std::optional<ScalarKind>(it->second.kind);
}
void mark_weak_value(const Tensor& r) {
  if (!r.defined()) return;
  if (r.is_realized()) {  // an eager op's result in a WeakEagerScope
    if (t_weak_keep) {
      t_weak_realized[&r.impl()] = kind_of_dtype(r.dtype());
      t_weak_keep->push_back(r);
    }
    return;
  }
  if (!r.impl().state) return;
  const GraphValue& v = r.impl().state->values[0];
  t_weak[{v.graph, v.id}] = WeakEntry{kind_of_dtype(r.dtype())};
}

// An integer weak value `w` cast to the integer dtype `t` by `op`: a value
// known now (realized) is checked now; a number input of c's graph gets a
// check per call (StagedGraph::number_checks); a computed value is not
// checked (its value exists only in the compiled code).
void weak_range_check(RealizationContext& c, const Tensor& w, DType t, OpId op) {
  if (w.is_realized()) {
    detail::check_weak_number(w, t, op, "");
    return;
  }
  const GraphValue& v = w.impl().state->values[0];
  const auto& ins = c.graph().input_ids();
  if (v.graph == &c.graph() && std::find(ins.begin(), ins.end(), v.id) != ins.end())
    t_weak_checks[v.graph].emplace_back(v.id, t, op);
}

// The weak rules of an op (see trace/weak_scalar.h); nullopt: the op reads
// no weak value, or not elementwise (value_of then reads each weak value as
// its kind's default dtype).
std::optional<Tensor> apply_weak(RealizationContext& c, OpId op, std::span<const Tensor> in, const Attrs& attrs) {
  const OpInfo& info = op_info(op);
  const bool elementwise = info.category == OpCategory::Unary || info.category == OpCategory::Binary ||
                           info.category == OpCategory::Ternary;
  const bool view = info.category == OpCategory::View && in.size() == 1;
  if (!elementwise && !view) return std::nullopt;
  std::vector<std::optional<ScalarKind>> kinds(in.size());
  bool any = false;
  for (size_t i = 0; i < in.size(); ++i) any |= (kinds[i] = weak_kind_in(c, in[i])).has_value();
  if (!any) return std::nullopt;
  // Beside a weak value, a C++ scalar operand (`s * 2.0`) is weak too.
  for (size_t i = 0; i < in.size(); ++i)
    if (!kinds[i] && in[i].defined() && &in[i].impl() == detail::t_scalar_operand.impl)
      kinds[i] = detail::t_scalar_operand.kind;
  const WeakRaw raw;
  if (view) {
    Tensor r = c.apply_op(op, in, attrs);
    mark_weak_value(r);
    return r;
  }
  if (op == OpId::Cast) return c.apply_op(op, in, attrs);  // an explicit dtype: a tensor, from the exact value
  const size_t first = op == OpId::Where ? 1 : 0;  // where's condition takes no part in promotion
  bool strong = false;
  DType d = DType::bool_;
  for (size_t i = first; i < in.size(); ++i)
    if (!kinds[i]) {
      d = strong ? promote_types(d, in[i].dtype()) : in[i].dtype();
      strong = true;
    }
  if (!strong) {  // weak values (and C++ scalars) only: weak again, computed exactly
    Tensor r = c.apply_op(op, in, attrs);
    if (info.dtype_rule != DTypeRule::Compare && info.dtype_rule != DTypeRule::ToBool) mark_weak_value(r);
    return r;
  }
  // As eager stores a scalar operand (with_scalar): the tensor's dtype
  // within its kind; a number of a higher kind casts the tensor too.
  DType t = d;
  for (size_t i = first; i < in.size(); ++i)
    if (kinds[i]) t = promote_with_scalar(t, *kinds[i]);
  std::vector<Tensor> args(in.begin(), in.end());
  for (size_t i = first; i < args.size(); ++i)
    if (args[i].dtype() != t) {
      // An integer number stored into a narrower integer dtype: eager refuses
      // a value out of its range (scalar.h), so the number is checked.
      if (kinds[i] == ScalarKind::integer && is_integral(t) && t != DType::int64 &&
          &args[i].impl() != detail::t_scalar_operand.impl)
        weak_range_check(c, args[i], t, op);
      Attrs a;
      a.dtype = t;
      const Tensor one[1] = {args[i]};
      args[i] = c.apply_op(OpId::Cast, one, a);
    }
  return c.apply_op(op, args, attrs);
}
}  // namespace

ScalarKind detail::weak_kind_of(DType d) {
  return d == DType::bool_ ? ScalarKind::boolean : is_floating(d) ? ScalarKind::floating : ScalarKind::integer;
}

DType detail::weak_default_dtype(ScalarKind k) {
  return k == ScalarKind::floating ? DType::float32 : k == ScalarKind::integer ? DType::int64 : DType::bool_;
}

void detail::mark_weak_scalar(const Tensor& t) {
  if (!t.defined()) return;
  if (t.is_realized() && !t_weak_keep) t_weak_realized[&t.impl()] = kind_of_dtype(t.dtype());
  else mark_weak_value(t);
}

Tensor detail::weak_cast(const Tensor& w, DType d, OpId op) {
  const std::optional<ScalarKind> k = weak_scalar_kind(w);
  if (k == ScalarKind::integer && is_integral(d) && d != DType::int64)
    weak_range_check(current_realization_context(), w, d, op);
  const WeakRaw raw;
  Attrs a;
  a.dtype = d;
  return apply(OpId::Cast, w, a);  // a value of its own (not marked weak), even where d is w's dtype
}

detail::WeakRawScope::WeakRawScope() : old_(t_weak_raw) { t_weak_raw = true; }
detail::WeakRawScope::~WeakRawScope() { t_weak_raw = old_; }

std::vector<std::tuple<int32_t, DType, OpId>> detail::weak_number_checks(const Graph* g) {
  auto it = t_weak_checks.find(g);
  return it == t_weak_checks.end() ? std::vector<std::tuple<int32_t, DType, OpId>>{} : it->second;
}

bool detail::weak_number_fits(const Tensor& number, DType d) {
  // (per cached call: the fields read directly; data_ptr() costs more than the rest)
  const detail::TensorImpl& im = number.impl();
  if (im.dtype != DType::int64 || im.state.pending() || !im.device.is_cpu()) return true;
  const int64_t v = static_cast<const int64_t*>(im.storage.data())[im.offset];
  switch (d) {
    case DType::int8: return v >= INT8_MIN && v <= INT8_MAX;
    case DType::int16: return v >= INT16_MIN && v <= INT16_MAX;
    case DType::int32: return v >= INT32_MIN && v <= INT32_MAX;
    case DType::uint8: return v >= 0 && v <= UINT8_MAX;
    case DType::uint16: return v >= 0 && v <= UINT16_MAX;
    case DType::uint32: return v >= 0 && v <= UINT32_MAX;
    case DType::uint64: return v >= 0;
    default: return true;
  }
}

void detail::check_weak_number(const Tensor& number, DType d, OpId op, const std::string& path) {
  if (weak_number_fits(number, d)) return;
  // A number's leaf path ends in its tree node's ".value" (jit_function.h).
  const std::string suffix = ".value";
  const bool node = path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  const std::string arg = node ? path.substr(0, path.size() - suffix.size()) : path;
  throw ValueError("jit: " + std::string(op_name(op)) + ": the number " +
                   std::to_string(*static_cast<const int64_t*>(number.data_ptr())) +
                   (arg.empty() ? std::string() : " (argument " + arg + ")") + " is out of range for " +
                   std::string(name(d)) + ", the dtype of the integer tensor it meets; eager raises for the number "
                   "written in (a tensor's integer dtype wins over a number, as in numpy 2, which raises rather "
                   "than wrap): cast the tensor to a wider dtype first, e.g. x.to(DType::int64)");
}

// jit's eager run with weak numbers (WeakEagerScope): the weak rules of
// apply_weak on realized tensors; any other op reads a weak input as its
// kind's default dtype.
namespace {
class WeakEagerContext final : public EagerRealizationContext {
 public:
  Tensor apply_op(OpId op, std::span<const Tensor> in, const Attrs& attrs) override {
    if (t_weak_raw || !any_weak()) return detail::eager_execute(op, in, attrs);
    if (std::optional<Tensor> r = apply_weak(*this, op, in, attrs)) return *std::move(r);
    std::vector<Tensor> args(in.begin(), in.end());
    for (Tensor& a : args)
      if (auto k = weak_kind_in(*this, a); k && a.dtype() != weak_default(*k)) {
        const WeakRaw raw;
        a = cast(a, weak_default(*k));
      }
    return detail::eager_execute(op, args, attrs);
  }
};
}  // namespace

struct detail::WeakEagerScope::State {
  std::vector<Tensor>* old_keep = nullptr;
  std::vector<Tensor> keep;
  WeakEagerContext ctx;
  std::optional<RealizationScope> scope;
};

detail::WeakEagerScope::WeakEagerScope(std::span<const Tensor> numbers) {
  if (numbers.empty()) return;  // nothing weak: the plain eager run
  st_ = std::make_unique<State>();
  st_->old_keep = t_weak_keep;
  t_weak_keep = &st_->keep;
  for (const Tensor& n : numbers) mark_weak_value(n);
  st_->scope.emplace(st_->ctx);
}

void detail::WeakEagerScope::finish(std::vector<Tensor>& outs) {
  if (!st_) return;
  for (Tensor& t : outs)
    if (auto k = weak_kind_in(st_->ctx, t); k && t.dtype() != weak_default(*k)) {
      const WeakRaw raw;
      t = cast(t, weak_default(*k));
    }
}

detail::WeakEagerScope::~WeakEagerScope() {
  if (!st_) return;
  st_->scope.reset();
  for (const Tensor& t : st_->keep) t_weak_realized.erase(&t.impl());
  t_weak_keep = st_->old_keep;
}

void detail::unmark_weak_scalar(const Tensor& t) {
  if (t.defined()) t_weak_realized.erase(&t.impl());
}

std::optional<ScalarKind> detail::weak_scalar_kind(const Tensor& t) {
  if (!any_weak()) return std::nullopt;
  return weak_kind_in(current_realization_context(), t);
}

GraphValue RealizationContext::value_of(const Tensor& t) {
  const auto st = t.impl().state.get();
  GraphValue v;
  if (st && st->link() == link_) {
    v = st->values[0];
  } else {
    if (st) t.realize();  // another context's tensor: realize it there, then it is a source here
    v = add_source(t)->values[0];
  }
  if (t_weak_raw || !any_weak()) return v;
  // A weak value read other than by the weak rules: as its kind's default dtype.
  auto it = t_weak.find({v.graph, v.id});
  if (it == t_weak.end()) {
    if (!t.is_realized()) return v;
    auto r = t_weak_realized.find(&t.impl());
    if (r == t_weak_realized.end()) return v;
    it = t_weak.emplace(std::make_pair(v.graph, v.id), WeakEntry{r->second}).first;
  }
  WeakEntry& e = it->second;  // (std::map: stays valid while entries are added)
  if (e.materialized < 0) {
    e.materialized = v.id;
    if (v.type().dtype != weak_default(e.kind)) {
      const WeakRaw raw;
      Attrs a;
      a.dtype = weak_default(e.kind);
      const Tensor one[1] = {create_unrealized({v})};
      e.materialized = value_of(apply_op(OpId::Cast, one, a)).id;
    }
  }
  return {v.graph, e.materialized};
}

Tensor RealizationContext::apply_op(OpId op, std::span<const Tensor> in, const Attrs& attrs) {
  if (!t_weak_raw && any_weak())
    if (std::optional<Tensor> r = apply_weak(*this, op, in, attrs)) return *std::move(r);
  // In a lazy scope, a view of a realized tensor is taken at once, as
  // eagerly: a realized tensor sharing its memory (a view costs nothing to
  // make). Recorded, it would be a value computed from the tensor's contents
  // at recording time -- a detached copy that misses later writes into the
  // tensor, and whose own writes miss the tensor. Writes into realized
  // tensors run eagerly in a lazy scope (begin_write), so a realized tensor
  // has no pending write to wait for. A tensor of another (ended) lazy scope
  // is realized first, as any read of it would. A reshape that eagerly
  // copies is recorded (below) like any op result.
  if (in.size() == 1 && !t_plain_reshape && op_info(op).category == OpCategory::View &&
      dynamic_cast<LazyRealizationContext*>(this)) {
    const Tensor& x = in[0];
    const auto xs = x.defined() ? x.impl().state.get() : nullptr;  // (another thread may realize x meanwhile)
    const bool other = xs && xs->link() != link_;
    if (other) x.realize();  // throws where that is impossible (a graph context's value)
    if (x.defined() && x.is_realized()) {
      Shape s2;
      Strides st2;
      if (op != OpId::Reshape || detail::view_strides(op, x.shape(), x.strides(), attrs, s2, st2))
        return detail::eager_execute(op, in, attrs);
    }
  }
  // Reshape decides view or copy as eagerly, from the input's strides where
  // they are known; where not, and it could be either, it is marked ambiguous.
  if (op == OpId::Reshape && in.size() == 1 && !t_plain_reshape &&
      (in[0].is_realized() || [&] {
        const auto st = in[0].impl().state.get();  // null: realized meanwhile by another thread
        return st && st->link() == link_;
      }())) {
    const KnownLayout l = known_layout(*this, in[0]);
    bool copy = false, ambiguous = false;
    if (l.strides) {
      Shape s2;
      Strides st2;
      copy = !detail::view_strides(op, in[0].shape(), *l.strides, attrs, s2, st2);
    } else {
      // Reshapes compose: a reshape of a reshape that is a view (of a value
      // whose strides are unknown) is a view whenever a single reshape of the
      // first one's input would be, for any strides ([4] -> [2, 2] -> [4] of
      // a strided [4]: a split, then the merge of that split).
      Shape from = in[0].shape();
      if (!in[0].is_realized()) {
        const Graph& gr = graph();
        int32_t v = in[0].impl().state->values[0].id;
        for (;;) {
          const Node& p = gr.node(static_cast<size_t>(gr.producer(v)));
          if (p.kind != NodeKind::op || p.op != OpId::Reshape || p.inputs.empty() || ambiguous_mark(v)) break;
          v = p.inputs[0];
        }
        from = gr.type(v).shape;
      }
      ambiguous = !reshape_always_view(from, attrs);
    }
    if (copy || ambiguous) {
      t_plain_reshape = true;
      Tensor r;
      try {
        r = apply_op(op, in, attrs);
      } catch (...) {
        t_plain_reshape = false;
        throw;
      }
      t_plain_reshape = false;
      if (ambiguous) {
        mark_ambiguous(r.impl().state->values[0].id, "reshape");
        return r;
      }
      // Eagerly a copy in row-major order: a value of its own, so writes
      // into it do not reach the input. A same-dtype Cast is a copy.
      Attrs a;
      a.dtype = in[0].dtype();
      const Tensor arg[1] = {r};
      return apply_op(OpId::Cast, arg, a);
    }
  }
  GraphValue vals[8];
  std::vector<GraphValue> many;
  std::span<const GraphValue> args;
  if (in.size() <= 8) {
    for (size_t i = 0; i < in.size(); ++i) vals[i] = value_of(in[i]);
    args = std::span<const GraphValue>(vals, in.size());
  } else {
    for (const auto& t : in) many.push_back(value_of(t));
    args = many;
  }
  // A view of a value an in-place write superseded is stale unless a live
  // alias group holds the tensor read: the written group's views were
  // rebound, and another group's (a copy of the value: separate memory
  // eagerly) still legitimately holds it.
  if (!superseded_.empty())
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i].is_realized() || !group_of(in[i])) check_readable(args[i].id, op);
  GraphValue out = graph().add_op(op, args, attrs);
  if (op_info(op).category != OpCategory::View || args.empty()) return create_unrealized({out});
  const int32_t root = view_root(args[0].id);
  view_base_[out.id] = root;
  Tensor t = create_unrealized({out});
  // The alias group the view joins: its input's, or a new one with the input as the base.
  std::shared_ptr<AliasGroup> g;
  if (in[0].is_realized()) {
    auto& sg = source_groups_[root];
    if (!sg) sg = std::make_shared<AliasGroup>();
    g = sg;
  } else if (in[0].impl().state->link() == link_) {
    g = group_of(in[0]);
    if (!g && args[0].id == root) {
      g = std::make_shared<AliasGroup>();
      g->base = in[0].impl_ptr();
      groups_[&in[0].impl()] = g;
    }
  }
  if (g) {
    g->views.erase(std::remove_if(g->views.begin(), g->views.end(), [](const auto& w) { return w.expired(); }),
                   g->views.end());
    g->views.push_back(t.impl_ptr());
    groups_[&t.impl()] = g;
  }
  return t;
}

int32_t RealizationContext::view_root(int32_t v) const {
  auto it = view_base_.find(v);
  return it == view_base_.end() ? v : it->second;
}

std::shared_ptr<RealizationContext::AliasGroup> RealizationContext::group_of(const Tensor& t) const {
  auto it = groups_.find(&t.impl());
  if (it == groups_.end()) return nullptr;
  const AliasGroup& g = *it->second;
  // The key may be the address of a tensor that died: check the group really holds t.
  if (g.base.lock() == t.impl_ptr()) return it->second;
  for (const auto& w : g.views)
    if (w.lock() == t.impl_ptr()) return it->second;
  return nullptr;
}

std::vector<std::pair<OpId, Attrs>> RealizationContext::view_chain(int32_t root, int32_t v) const {
  std::vector<std::pair<OpId, Attrs>> chain;
  const Graph& g = const_cast<RealizationContext*>(this)->graph();
  while (v != root) {
    const Node& n = g.node(static_cast<size_t>(g.producer(v)));
    chain.emplace_back(n.op, n.attrs);
    v = n.inputs[0];
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

namespace {
// The row-major position in the root (of shape `root_shape`) of every
// element of the view that `chain` makes of it: the view ops applied, now,
// to 0, 1, 2, ... (int64, contiguous, the view's shape).
Tensor view_positions(const std::vector<std::pair<OpId, Attrs>>& chain, const Shape& root_shape) {
  detail::EagerGuard eager;
  Tensor p = reshape(arange(checked_numel(root_shape), DType::int64), root_shape);
  for (const auto& [op, a] : chain) p = apply(op, p, a);
  return p.contiguous();
}
}  // namespace

bool RealizationContext::root_writable(int32_t root) const {
  const Graph& g = const_cast<RealizationContext*>(this)->graph();
  const NodeKind k = g.node(static_cast<size_t>(g.producer(root))).kind;
  return k == NodeKind::op || k == NodeKind::input || k == NodeKind::call;
}

void RealizationContext::check_view_write(const Tensor& view, const char* who) {
  const int32_t v = view.impl().state->values[0].id;
  const int32_t root = view_root(v);
  if (!group_of(view))
    throw RealizationError(std::string(who) + ": writing through a view of a traced tensor (graph value %" +
                           std::to_string(v) + ") whose base this trace does not know is not supported; write into "
                           "the whole tensor (e.g. x.copy_(where(mask, value, x))), or run eagerly");
  if (!root_writable(root)) {
    const Graph& gr = graph();
    const Node& rn = gr.node(static_cast<size_t>(gr.producer(root)));
    auto* g = dynamic_cast<GraphRealizationContext*>(this);
    if (g && rn.kind == NodeKind::constant) {
      // A captured realized tensor: it becomes a mutable source (or the
      // refusal says what read it), its constant node turned into the
      // mutable source's weight, so the view is a view of that now.
      for (const auto& [t, c] : g->sources())
        if (c == root) {
          const Tensor pos = view_positions(view_chain(root, v), graph().type(root).shape);
          std::vector<char> written(static_cast<size_t>(checked_numel(graph().type(root).shape)), 0);
          for (int64_t p : pos.to_vector<int64_t>()) written[static_cast<size_t>(p)] = 1;
          make_mutable_for_write(*g, t, who, v, &written);
          break;
        }
    }
    if (root_writable(root)) return check_view_write(view, who);
    if (rn.kind == NodeKind::weight)
      throw RealizationError(std::string(who) + ": writing through a view (graph value %" + std::to_string(v) +
                             ") of weight '" + rn.name + "' (graph value %" + std::to_string(root) + "), which this "
                             "trace holds as a constant bound when the call starts (a module parameter or a compiled "
                             "callable's weight), cannot be recorded; write into a copy (.clone()), pass the tensor "
                             "in as an argument, or run eagerly");
    throw RealizationError(std::string(who) + ": writing through a view (graph value %" + std::to_string(v) +
                           ") of a value this trace holds as a constant (graph value %" + std::to_string(root) +
                           ") cannot be recorded; write into a copy (.clone()), pass the tensor in as an argument, "
                           "or run eagerly");
  }
  const Tensor pos = view_positions(view_chain(root, v), graph().type(root).shape);
  std::vector<char> seen(static_cast<size_t>(checked_numel(graph().type(root).shape)), 0);
  for (int64_t p : pos.to_vector<int64_t>()) {
    if (seen[static_cast<size_t>(p)])
      throw ValueError(std::string(who) + ": the destination (shape " + shape_str(pos.shape()) + ") is a broadcast "
                       "view whose elements share memory (graph value %" + std::to_string(v) + "); write into a "
                       "tensor of its own, e.g. x.clone()");
    seen[static_cast<size_t>(p)] = 1;
  }
}

void RealizationContext::write_through_view(const Tensor& view, const Tensor& value) {
  const int32_t v = view.impl().state->values[0].id;
  const int32_t root = view_root(v);
  const std::shared_ptr<AliasGroup> g = group_of(view);
  if (!g) throw RealizationError("in-place write: the view's base is not known (graph value %" + std::to_string(v) + ")");
  const TensorType rt = graph().type(root);
  const Tensor pos = view_positions(view_chain(root, v), rt.shape);
  const int64_t n = checked_numel(rt.shape), m = pos.numel();
  if (m == 0) return;  // nothing written
  const Tensor base = create_unrealized({GraphValue{&graph(), root}});
  const Tensor written = scatter(reshape(base, {n}), 0, reshape(pos, {m}), reshape(value, {m}));
  Attrs a;
  a.dtype = rt.dtype;
  // Traced, a reshape is a view: the base would then hold a view value. A
  // same-dtype Cast is a copy, a value of its own.
  const Tensor fresh = apply(OpId::Cast, reshape(written, rt.shape), a);
  const int32_t now = fresh.impl().state->values[0].id;
  inherit_layout(*this, root, now);  // the same memory eagerly: views rebound below keep eager's layout
  mark_superseded(root);
  if (auto b = g->base.lock(); b && b->state && b->state->link() == link_ && b->state->values[0].id == root) {
    b->state = fresh.impl().state.get();
  } else if (rebind_source(root, now)) {
    auto it = source_groups_.find(root);
    if (it != source_groups_.end()) {
      source_groups_[now] = it->second;
      source_groups_.erase(root);
    }
  }
  rebind_views(*g, root, now);
}

void RealizationContext::follow_write(const Tensor* holder, int32_t old_value, int32_t new_value) {
  mark_superseded(old_value);
  std::shared_ptr<AliasGroup> g;
  if (holder) {
    g = group_of(*holder);
    if (!g || g->base.lock() != holder->impl_ptr()) return;  // no views taken of it
  } else {
    auto it = source_groups_.find(old_value);
    if (it == source_groups_.end()) return;
    g = it->second;
    source_groups_.erase(it);
    source_groups_[new_value] = g;
  }
  rebind_views(*g, old_value, new_value);
}

void RealizationContext::rebind_views(AliasGroup& g, int32_t old_root, int32_t new_root) {
  std::vector<std::weak_ptr<detail::TensorImpl>> views = g.views;  // apply_op below may add to g
  for (auto& w : views) {
    std::shared_ptr<detail::TensorImpl> h = w.lock();
    if (!h || !h->state || h->state->link() != link_) continue;
    const int32_t hv = h->state->values[0].id;
    if (view_root(hv) != old_root || hv == old_root) continue;  // rebound elsewhere since
    // The old chain's values, root first, and which of them were ambiguous.
    std::vector<int32_t> old_vals;
    {
      const Graph& gr = graph();
      for (int32_t v = hv; v != old_root; v = gr.node(static_cast<size_t>(gr.producer(v))).inputs[0])
        old_vals.push_back(v);
      std::reverse(old_vals.begin(), old_vals.end());
    }
    std::vector<std::string> marks(old_vals.size());
    for (size_t k = 0; k < old_vals.size(); ++k)
      if (const std::string* m = ambiguous_mark(old_vals[k])) marks[k] = *m;
    Tensor t = create_unrealized({GraphValue{&graph(), new_root}});
    size_t k = 0;
    t_plain_reshape = true;  // the same views again, on the new value
    try {
      for (const auto& [op, a] : view_chain(old_root, hv)) {
        const Tensor arg[1] = {t};
        t = RealizationContext::apply_op(op, arg, a);
        if (k < marks.size() && !marks[k].empty()) mark_ambiguous(t.impl().state->values[0].id, marks[k]);
        ++k;
      }
    } catch (...) {
      t_plain_reshape = false;
      throw;
    }
    t_plain_reshape = false;
    h->state = t.impl().state.get();
  }
}

void RealizationContext::check_readable(int32_t v, OpId op) const {
  const int32_t root = view_root(v);
  if (root != v && superseded_.count(root))
    throw RealizationError(std::string(op_name(op)) + ": reads a view (graph value %" + std::to_string(v) +
                           ") taken of a tensor before that tensor was written in place; traced, the view would "
                           "keep the old value while eagerly it sees the write. Take the view after the write");
}

// ---- Eager ----------------------------------------------------------------------------
EagerRealizationContext::EagerRealizationContext() = default;
EagerRealizationContext::~EagerRealizationContext() = default;

std::shared_ptr<RealizationState> EagerRealizationContext::add_source(const Tensor& t) {
  if (!t.is_realized()) throw RealizationError("add_source: only realized tensors may be graph sources");
  return std::make_shared<RealizationState>(std::vector<GraphValue>{graph_.add_constant(t, false)}, link_);
}

Tensor EagerRealizationContext::apply_op(OpId op, std::span<const Tensor> in, const Attrs& attrs) {
  return detail::eager_execute(op, in, attrs);
}

// ---- Lazy -----------------------------------------------------------------------------
LazyRealizationContext::LazyRealizationContext() : graph_(std::make_unique<Graph>("lazy")) {
  std::lock_guard<std::mutex> lock(g_lazy_mu);
  g_lazy.emplace(this, std::make_unique<LazyLock>());
  g_lazy_count.store(static_cast<int>(g_lazy.size()), std::memory_order_release);
}
LazyRealizationContext::~LazyRealizationContext() {
  {
    std::lock_guard<std::mutex> lock(g_open_lazy_mu);
    g_open_lazy.erase(this);  // a scope left open past its context must not name a later context at this address
  }
  std::lock_guard<std::mutex> lock(g_lazy_mu);
  g_lazy.erase(this);
  g_lazy_count.store(static_cast<int>(g_lazy.size()), std::memory_order_release);
}

std::shared_ptr<RealizationState> LazyRealizationContext::add_source(const Tensor& t) {
  if (!t.is_realized()) throw RealizationError("add_source: only realized tensors may be graph sources");
  const detail::TensorImpl* key = &t.impl();
  auto it = sources_.find(key);
  int32_t v;
  if (it != sources_.end()) {
    v = it->second;
  } else {
    // No copy: a lazy region reads its sources when it is realized. The
    // constant node keeps the tensor alive, so the key cannot be reused. A
    // non-contiguous tensor (a transposed view, say) is stored as a
    // contiguous copy made now instead: the node does not keep the tensor,
    // whose address a later tensor may then take, so it is not remembered
    // (each use records its own copy; the copy already holds the contents
    // at recording time, so a later write needs no snapshot of it).
    v = graph_->add_constant(t, false).id;
    if (graph_->node(static_cast<size_t>(graph_->producer(v))).data.is_same(t)) sources_[key] = v;
  }
  return std::make_shared<RealizationState>(std::vector<GraphValue>{{graph_.get(), v}}, link_, weak_from_this().lock());
}

void LazyRealizationContext::snapshot_sources_in(const Buffer& b) {
  // (Called by before_memory_write with this context's LazyLock held: an
  // eager write on any thread lands here while another may be realizing.)
  for (auto it = sources_.begin(); it != sources_.end();) {
    const int32_t v = it->second;
    const Tensor& data = snapshots_.count(v) ? snapshots_.at(v) : graph_->node(graph_->producer(v)).data;
    if (data.buffer() == b) {
      if (!snapshots_.count(v)) snapshots_[v] = data.clone();
      it = sources_.erase(it);  // a later read of the tensor records its new contents
    } else {
      ++it;
    }
  }
}

Tensor LazyRealizationContext::create_unrealized(std::vector<GraphValue> values, std::optional<Device> mapping) {
  Tensor t = RealizationContext::create_unrealized(std::move(values), mapping);
  auto& st = t.impl().state;
  st = std::make_shared<RealizationState>(st->values, link_, weak_from_this().lock());
  pending_.emplace_back(t.impl_ptr());
  return t;
}

void LazyRealizationContext::realize_all() {
  if (is_current())
    throw RealizationError(
        "realize: can't realize a tensor before its realization context is completed (leave the kiln::lazy() scope "
        "first)");
  // Thread M records into an open kiln::lazy() scope while this thread reads
  // one of its tensors: realizing here would race with M's recording (the
  // graph and the pending list are not locked), so refuse.
  if (open_in_other_thread(this))
    throw RealizationError(
        "realize: the tensor belongs to a kiln::lazy() scope that is still open in another thread, which may be "
        "recording into it; read it after that scope ends, or from the thread that opened it");
  // The states released below may hold the last reference to this context
  // (declared before the lock, so the context outlives it).
  auto self = weak_from_this().lock();
  // Several threads may read this context's results at once (its scope has
  // ended: open_in_other_thread above): one computes, the others wait here.
  LazyLock& L = lazy_lock(this);
  std::lock_guard<std::mutex> lock(L.mu);
  const detail::TensorImpl* target = t_realize_target;
  // A thread may write into a tensor's handle only when it reads that tensor
  // (another thread may be reading its own result's handle meanwhile): the
  // values of the others are parked, and handed over when they are read. All
  // of them at once where this thread may record into the context again (it
  // is open on this thread's stack, or the default context), and when
  // realize_all is called directly.
  const bool publish_all =
      !target || std::find(t_stack.begin(), t_stack.end(), this) != t_stack.end() ||
      g_default_raw.load(std::memory_order_acquire) == this;
  if (publish_all) hand_over_all(L, this);
  else if (hand_over_one(L, target)) return;  // computed by an earlier read
  Graph& g = *graph_;
  // Live tensors still waiting for a value; dead ones are simply dropped.
  std::vector<std::shared_ptr<detail::TensorImpl>> live;
  for (auto& w : pending_)
    if (auto p = w.lock(); p && p->state && p->state->link() == link_ && !L.parked.count(p.get()))
      live.push_back(std::move(p));
  if (live.empty()) return;
  std::vector<char> need(g.num_values(), 0);
  for (auto& p : live) need[p->state->values[0].id] = 1;
  std::vector<char> run(g.num_nodes(), 0);
  for (size_t i = g.num_nodes(); i-- > 0;) {
    const Node& n = g.node(i);
    bool used = false;
    for (int32_t v : n.outputs) used = used || need[v];
    if (!used) continue;
    run[i] = 1;
    for (int32_t v : n.inputs) need[v] = 1;
  }
  // Until the compiler handles lazy regions, run node by node with the eager
  // kernels; each needed node runs exactly once. An op that fails (gather
  // with an index out of range, say) fails only the values that depend on
  // it: the others are computed and their tensors realized, so reading a
  // tensor that does not depend on a failing op never throws that op's
  // error. The tensors that depend on it stay unrealized (their part of the
  // graph is kept) and each read of one runs that part again and throws the
  // op's error.
  std::vector<Tensor> val(g.num_values());
  std::vector<std::exception_ptr> failed(g.num_values());  // value -> the error of the op it depends on
  std::exception_ptr first_failure;
  std::vector<Tensor> args;
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    if (!run[i]) continue;
    const Node& n = g.node(i);
    if (n.kind == NodeKind::constant) {
      auto snap = snapshots_.find(n.outputs[0]);
      val[n.outputs[0]] = snap != snapshots_.end() ? snap->second : n.data;
    } else if (n.kind == NodeKind::op) {
      std::exception_ptr err;
      for (int32_t v : n.inputs)
        if (failed[v]) err = failed[v];
      if (!err) {
        args.clear();
        for (int32_t v : n.inputs) args.push_back(val[v]);
        try {
          val[n.outputs[0]] = detail::eager_execute(n.op, args, n.attrs);
          ++ops_executed_;
        } catch (...) {
          err = std::current_exception();
          if (!first_failure) first_failure = err;
        }
      }
      if (err)
        for (int32_t v : n.outputs) failed[v] = err;
    } else {
      throw RealizationError("realize: a lazy graph cannot contain inputs, weights or calls");
    }
  }
  std::vector<std::weak_ptr<detail::TensorImpl>> still_pending;
  std::exception_ptr target_failure;
  for (auto& p : live) {
    const int32_t id = p->state->values[0].id;
    if (failed[id]) {
      still_pending.emplace_back(p);
      if (p.get() == t_realize_target) target_failure = failed[id];
      continue;
    }
    if (publish_all || p.get() == target) hand_over(*p, val[id]);
    else L.parked[p.get()] = LazyLock::Parked{p, val[id]};
  }
  if (!still_pending.empty()) {
    // Keep the graph (and the sources, snapshots and write bookkeeping it
    // relies on) for the tensors that failed; the realized ones left it.
    pending_ = std::move(still_pending);
    if (target_failure) std::rethrow_exception(target_failure);
    if (!t_realize_target) std::rethrow_exception(first_failure);
    return;
  }
  // Everything recorded so far is realized, parked (its value kept; the
  // graph is not needed for it) or dead: start a fresh graph. (Nothing can
  // record against a parked tensor: recording needs the context open, and
  // opening it hands the parked values over first.)
  pending_.clear();
  sources_.clear();
  snapshots_.clear();
  reset_write_tracking();
  graph_ = std::make_unique<Graph>("lazy");
}

// ---- Graph ----------------------------------------------------------------------------
GraphRealizationContext::GraphRealizationContext(Graph& graph, std::vector<GraphValue> signal_buffers,
                                                 std::string prefix)
    : graph_(&graph), signal_buffers_(std::move(signal_buffers)), prefix_(std::move(prefix)) {
  push(this);
}

namespace {
// The layout of `root` (not a view) of graph context `g`.
detail::TracedLayout root_layout(GraphRealizationContext& g, int32_t root) {
  if (const detail::TracedLayout* set = g.value_layout(root)) return *set;
  const Graph& gr = g.graph();
  const Node& n = gr.node(static_cast<size_t>(gr.producer(root)));
  detail::TracedLayout l;
  const Shape& shape = gr.type(root).shape;
  switch (n.kind) {
    case NodeKind::input:
      l.cls = StrideClass::general;
      l.why = "it is (a view of) an argument whose strides the trace does not know";
      return l;
    case NodeKind::constant:
      for (const auto& [t, v] : g.sources())
        if (v == root) {
          l.strides = t.strides();
          l.cls = t.stride_class();
          return l;
        }
      break;
    case NodeKind::weight:
      for (const auto& m : g.mutable_sources())
        if (m.weight == n.name) {
          l.strides = m.tensor.strides();
          l.cls = m.tensor.stride_class();
          return l;
        }
      break;
    default: break;  // an op or a call result: computed into a new contiguous tensor
  }
  l.strides = contiguous_strides(shape);
  return l;
}
}  // namespace

std::optional<detail::TracedLayout> detail::traced_layout(const Tensor& t) {
  const auto st = t.impl().state.get();
  if (!st || st->values.size() != 1) return std::nullopt;
  auto* g = dynamic_cast<GraphRealizationContext*>(st->context());
  if (!g || st->values[0].graph != &g->graph()) return std::nullopt;
  const Graph& gr = g->graph();
  int32_t v = st->values[0].id;
  const int32_t root = g->view_root(v);
  std::vector<int32_t> chain;  // the view values from t's back to the root's
  while (v != root) {
    chain.push_back(v);
    v = gr.node(static_cast<size_t>(gr.producer(v))).inputs[0];
  }
  TracedLayout l = root_layout(*g, root);
  if (chain.empty()) return l;
  if (!l.strides) {
    // A view of a root whose strides are not known: eagerly even its class
    // depends on them (x.transpose() of a transposed x may be contiguous).
    l.cls = StrideClass::general;
    l.cls_known = false;
    return l;
  }
  Shape shape = gr.type(root).shape;
  Strides strides = *l.strides;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const Node& n = gr.node(static_cast<size_t>(gr.producer(*it)));
    Shape s2;
    Strides st2;
    view_strides(n.op, shape, strides, n.attrs, s2, st2);
    shape = std::move(s2);
    strides = std::move(st2);
  }
  l.cls = stride_class_of(shape, strides);
  l.strides = std::move(strides);
  return l;
}

void detail::set_traced_value_layout(int32_t value, const TracedLayout& l) {
  auto* g = dynamic_cast<GraphRealizationContext*>(active_context());
  if (!g) return;
  g->set_value_layout(value, l);
}

std::optional<Strides> detail::class_strides(const Shape& shape, StrideClass cls) {
  if (cls == StrideClass::contiguous) return contiguous_strides(shape);
  // A transposed 2-d layout with both extents > 1 is the transpose of a
  // contiguous one (with an extent 1 it would be contiguous).
  if (cls == StrideClass::transposed && shape.size() == 2 && shape[0] > 1 && shape[1] > 1)
    return Strides{1, shape[0]};
  return std::nullopt;
}

namespace {
KnownLayout known_layout(RealizationContext& c, const Tensor& t) {
  KnownLayout k;
  if (t.is_realized()) {  // (becomes) a source of the context: its own strides
    k.strides = t.strides();
    k.cls = t.stride_class();
    k.cls_known = true;
    return k;
  }
  if (auto l = detail::traced_layout(t)) {
    k.strides = std::move(l->strides);
    k.cls = l->cls;
    k.cls_known = l->cls_known;
    return k;
  }
  if (!dynamic_cast<LazyRealizationContext*>(&c) || t.impl().state->values.size() != 1) return k;
  // A lazy value: its root is a source (its own strides) or an op result
  // (the eager kernel's contiguous output); views replay eager's rules.
  const Graph& gr = c.graph();
  int32_t v = t.impl().state->values[0].id;
  const int32_t root = c.view_root(v);
  std::vector<int32_t> chain;
  for (; v != root; v = gr.node(static_cast<size_t>(gr.producer(v))).inputs[0]) chain.push_back(v);
  const Node& rn = gr.node(static_cast<size_t>(gr.producer(root)));
  Shape shape = gr.type(root).shape;
  Strides strides = rn.kind == NodeKind::constant && rn.data.defined() ? rn.data.strides() : contiguous_strides(shape);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const Node& n = gr.node(static_cast<size_t>(gr.producer(*it)));
    Shape s2;
    Strides st2;
    detail::view_strides(n.op, shape, strides, n.attrs, s2, st2);
    shape = std::move(s2);
    strides = std::move(st2);
  }
  k.cls = detail::stride_class_of(shape, strides);
  k.cls_known = true;
  k.strides = std::move(strides);
  return k;
}

bool keeps_layout(RealizationContext& c, int32_t v) {
  auto* g = dynamic_cast<GraphRealizationContext*>(&c);
  if (!g || g->is_view_value(v)) return false;
  const Graph& gr = g->graph();
  // An argument with no layout set: nothing to keep.
  if (gr.node(static_cast<size_t>(gr.producer(v))).kind == NodeKind::input && !g->value_layout(v)) return false;
  const detail::TracedLayout l = root_layout(*g, v);
  return !l.strides || *l.strides != contiguous_strides(g->graph().type(v).shape);
}

void inherit_layout(RealizationContext& c, int32_t from, int32_t to) {
  auto* g = dynamic_cast<GraphRealizationContext*>(&c);
  if (!g) return;
  g->set_value_layout(to, root_layout(*g, from));
}
}  // namespace

void GraphRealizationContext::note_read_after_write(int32_t written, int32_t read) {
  auto& v = reads_after_write_[written];
  if (std::find(v.begin(), v.end(), read) == v.end()) v.push_back(read);
}

std::vector<int32_t> GraphRealizationContext::reads_after_write(int32_t written) const {
  auto it = reads_after_write_.find(written);
  return it == reads_after_write_.end() ? std::vector<int32_t>{} : it->second;
}

void detail::note_read_after_write(GraphRealizationContext& ctx, int32_t written, int32_t read) {
  ctx.note_read_after_write(written, read);
}

std::vector<int32_t> detail::reads_after_write(const GraphRealizationContext& ctx, int32_t written) {
  return ctx.reads_after_write(written);
}

GraphRealizationContext::~GraphRealizationContext() {
  pop(this);
  for (auto it = t_weak.lower_bound({graph_, INT32_MIN}); it != t_weak.end() && it->first.first == graph_;)
    it = t_weak.erase(it);
  t_weak_checks.erase(graph_);
}

void GraphRealizationContext::realize_all() {
  throw RealizationError("realize: can't realize from a graph context (graph '" + graph_->name() +
                         "'); its tensors are symbolic values until the graph is compiled and called");
}

namespace {
// Two handles of one view (same memory, offset, dtype, shape, strides):
// eagerly one tensor, so the trace makes them one source. (Separate handles
// of one view are common: each `w[1]` or `w.index(...)` of a captured
// tensor makes a handle of its own.)
bool same_view(const Tensor& a, const Tensor& b) {
  return a.is_realized() && b.is_realized() && a.buffer() == b.buffer() && a.offset() == b.offset() && a.dtype() == b.dtype() && a.shape() == b.shape() &&
         a.strides() == b.strides();
}
// The mutable source that `t` is (by handle, else an identical view of it), or null.
template <class Index, class Sources>
auto* find_mutable(const Index& index, Sources& mut, const Tensor& t) {
  if (auto m = index.find(&t.impl()); m != index.end()) return &mut[m->second];
  for (auto& m : mut)
    if (same_view(m.tensor, t)) return &m;
  return static_cast<decltype(&mut[0])>(nullptr);
}
}  // namespace

std::shared_ptr<RealizationState> GraphRealizationContext::add_source(const Tensor& t) {
  if (!t.is_realized())
    throw RealizationError("add_source: only realized tensors may be graph sources (this tensor is unrealized)");
  const detail::TensorImpl* key = &t.impl();
  if (const MutableSource* m = find_mutable(mutable_index_, mutable_, t))
    return std::make_shared<RealizationState>(std::vector<GraphValue>{{graph_, m->value}}, link_);
  auto it = sources_.find(key);
  int32_t v = -1;
  if (it != sources_.end()) {
    v = it->second;
  } else {
    const auto [first, last] = pinned_at_.equal_range(t.data_ptr());
    for (auto q = first; q != last; ++q)
      if (same_view(pinned_[q->second], t))
        v = sources_.at(&pinned_[q->second].impl());  // another handle of a view already embedded
  }
  if (v < 0) {
    v = graph_->add_constant(t).id;
    sources_[key] = v;
    pinned_at_.emplace(t.data_ptr(), pinned_.size());
    pinned_.push_back(t);  // keep the key's address from being reused
  }
  return std::make_shared<RealizationState>(std::vector<GraphValue>{{graph_, v}}, link_);
}

namespace {
// True when subgraph `body` holds a constant with `t`'s dtype, shape and
// bytes (a copy of it, as a body's captured tensors are). A tensor not in
// host memory is assumed captured (refusing is the safe answer).
bool body_captures(const Graph& body, const Tensor& t) {
  Tensor tc;
  for (const Node& n : body.nodes()) {
    if (n.kind != NodeKind::constant || !n.data.defined() || n.data.dtype() != t.dtype() || n.data.shape() != t.shape())
      continue;
    if (!t.device().is_cpu() || !n.data.device().is_cpu()) return true;
    if (!tc.defined()) {
      detail::EagerGuard eager;
      tc = t.contiguous();
    }
    const size_t nb = static_cast<size_t>(t.numel()) * t.itemsize();
    if (nb == 0 || std::memcmp(n.data.data_ptr(), tc.data_ptr(), nb) == 0) return true;
  }
  return false;
}

std::string constant_read(GraphRealizationContext& g, int32_t c, const Tensor& t, const std::vector<char>* written) {
  const Graph& gr = g.graph();
  const Shape& shape = gr.type(c).shape;
  // True when view value `u` of c covers only elements `written` flags.
  auto inside_written = [&](int32_t u) {
    if (!written || u == c) return false;
    std::vector<std::pair<OpId, Attrs>> chain;
    for (int32_t x = u; x != c;) {
      const Node& n = gr.node(static_cast<size_t>(gr.producer(x)));
      chain.emplace_back(n.op, n.attrs);
      x = n.inputs[0];
    }
    std::reverse(chain.begin(), chain.end());
    for (int64_t p : view_positions(chain, shape).to_vector<int64_t>())
      if (!(*written)[static_cast<size_t>(p)]) return false;
    return true;
  };
  std::set<int32_t> views{c};  // c and the views taken of it, directly or of its views
  for (size_t i = static_cast<size_t>(gr.producer(c)) + 1; i < gr.num_nodes(); ++i) {
    const Node& n = gr.node(i);
    const bool view_op = n.kind == NodeKind::op && op_info(n.op).category == OpCategory::View;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const int32_t u = n.inputs[k];
      if (!views.count(u) || (k == 0 && view_op) || inside_written(u)) continue;
      std::string by = n.kind == NodeKind::op     ? std::string(op_name(n.op))
                       : n.kind == NodeKind::call ? "a call of subgraph '" + n.name + "'"
                                                  : std::string("a graph node");
      if (!n.outputs.empty()) by += " (graph value %" + std::to_string(n.outputs[0]) + ")";
      return by + " read it" + (u != c ? " through a view (graph value %" + std::to_string(u) + ")" : "");
    }
    if (view_op && !n.inputs.empty() && views.count(n.inputs[0]))
      for (int32_t o : n.outputs) views.insert(o);
    if (n.kind == NodeKind::call)
      if (const Graph* body = gr.root()->subgraph(n.name); body && body_captures(*body, t))
        return "the body of subgraph call '" + n.name + "' captured it";
  }
  for (int32_t o : gr.output_ids())
    if (views.count(o)) return "it is a result of the graph";
  return {};
}

void make_mutable_for_write(GraphRealizationContext& g, const Tensor& t, const char* who, int32_t view,
                            const std::vector<char>* written) {
  // A mutable source is bound (and written back) as a contiguous weight, so
  // a captured non-contiguous view (a transpose, a column, a reversed view)
  // cannot be one; say so here, naming the op, instead of the compile's
  // "weight 'mutable.0' must be contiguous" (tester t17 F3).
  if (!g.is_mutable_source(t) && t.is_realized() && !t.is_contiguous()) {
    std::string st;
    for (int64_t x : t.strides()) st += (st.empty() ? "" : ", ") + std::to_string(x);
    throw RealizationError(
        std::string(who) + ": writing " +
        (view >= 0 ? "through a view (graph value %" + std::to_string(view) + ") of" : std::string("into")) +
        " a captured tensor that is a non-contiguous view (" + TensorType(t.dtype(), t.shape(), t.device()).str() +
        ", strides [" + st + "]) is not supported in a traced function: a captured tensor written in place "
        "becomes a source read and written back whole, which needs contiguous memory; capture its base (the "
        "contiguous tensor it is a view of) and take the view inside the function, pass the view as an argument, "
        "or run eagerly (a .contiguous() copy would not write the original)");
  }
  if (!g.is_mutable_source(t))
    for (const auto& [s, c] : g.sources())
      if (&s.impl() == &t.impl()) {
        const std::string why = constant_read(g, c, t, written);
        if (!why.empty())
          throw RealizationError(
              std::string(who) + ": writing " +
              (view >= 0 ? "through a view (graph value %" + std::to_string(view) + ") of" : std::string("into")) +
              " a captured realized tensor (" + TensorType(t.dtype(), t.shape(), t.device()).str() +
              ") that this trace already holds as a constant (graph value %" + std::to_string(c) + "): " + why +
              " before this write, so the graph computes with the contents it had then and the write cannot reach "
              "that read; write into the tensor (or through a view of it) before anything else reads it (it then "
              "becomes a mutable source, read and written back by every call), pass it in as an argument, or run "
              "eagerly");
        break;
      }
  t_written_region = written;
  try {
    g.add_mutable_source(t);
  } catch (...) {
    t_written_region = nullptr;
    throw;
  }
  t_written_region = nullptr;
}
}  // namespace

std::shared_ptr<RealizationState> GraphRealizationContext::add_mutable_source(const Tensor& t) {
  if (!t.defined() || !t.is_realized())
    throw RealizationError("add_mutable_source: only realized tensors may be mutable graph sources");
  const detail::TensorImpl* key = &t.impl();
  if (find_mutable(mutable_index_, mutable_, t)) return add_source(t);
  // A tensor embedded as a constant that was not read yet (the trace only
  // took views of it, or read elements a write through a view is about to
  // overwrite: make_mutable_for_write) becomes a mutable source all the
  // same: its constant node turns into the mutable source's weight node, so
  // the views taken of it (and those reads) read the tensor at call time.
  const std::vector<char>* written = t_written_region;
  t_written_region = nullptr;
  // Another handle of a view already embedded and not read yet is the same
  // tensor (one source); one already read stays a separate source, so the
  // write is recorded and the compiled call's aliasing guard sees the two
  // (jit runs such a call eagerly, as before).
  const Tensor* src = &t;  // the handle kept (its impl is the key)
  if (!sources_.count(key)) {
    const auto [first, last] = pinned_at_.equal_range(t.data_ptr());
    for (auto it = first; it != last; ++it) {
      const Tensor& q = pinned_[it->second];
      if (same_view(q, t) && constant_read(*this, sources_.at(&q.impl()), q, written).empty()) {
        key = &q.impl();
        src = &q;
        break;
      }
    }
  }
  if (auto s = sources_.find(key); s != sources_.end()) {
    const std::string why = constant_read(*this, s->second, t, written);
    if (!why.empty())
      throw RealizationError("add_mutable_source: the tensor (" + TensorType(t.dtype(), t.shape(), t.device()).str() +
                             ") was already read as a constant of graph '" + graph_->name() + "' (" + why +
                             "; its value at that point is baked in); make it mutable before its first read, e.g. "
                             "write into it before reading it or call add_mutable_source first");
    const int32_t c = s->second;
    MutableSource m;
    m.tensor = *src;  // (before pinned_ below drops src)
    m.weight = prefix_ + "mutable." + std::to_string(mutable_.size());
    m.value = c;
    // (Graph::add_weight's name index does not learn of this weight; the
    // name is new, and passes rebuild the index from the nodes.)
    Node& n = graph_->mutable_nodes()[static_cast<size_t>(graph_->producer(c))];
    n.kind = NodeKind::weight;
    n.name = m.weight;
    n.placeholder = false;
    n.data = Tensor();
    sources_.erase(s);
    auto p = std::find_if(pinned_.begin(), pinned_.end(), [&](const Tensor& q) { return &q.impl() == key; });
    if (p != pinned_.end()) {  // mutable_ keeps the tensor (and so the key) alive now
      pinned_.erase(p);
      pinned_at_.clear();  // the indices after it moved (rare: a constant turned mutable)
      for (size_t i = 0; i < pinned_.size(); ++i) pinned_at_.emplace(pinned_[i].data_ptr(), i);
    }
    mutable_index_[key] = mutable_.size();
    mutable_.push_back(std::move(m));
    return add_source(t);
  }
  MutableSource m;
  m.tensor = t;
  m.weight = prefix_ + "mutable." + std::to_string(mutable_.size());
  m.value = graph_->add_weight(m.weight, TensorType(t.dtype(), t.shape(), t.device())).id;
  mutable_index_[key] = mutable_.size();
  mutable_.push_back(std::move(m));
  return add_source(t);
}

void GraphRealizationContext::set_mutable_value(const Tensor& t, int32_t v) {
  MutableSource* mp = find_mutable(mutable_index_, mutable_, t);
  if (!mp)
    throw RealizationError("in-place write: the tensor is not a mutable source of graph '" + graph_->name() + "'");
  MutableSource& m = *mp;
  mark_superseded(m.value);
  m.value = v;
  m.written = true;
}

namespace {
bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.buffer() == b.buffer() && a.offset() == b.offset() && a.shape() == b.shape() && a.dtype() == b.dtype() &&
         a.strides() == b.strides();
}
}  // namespace

bool GraphRealizationContext::weight_name_free(const std::string& name, const Tensor& t) const {
  auto it = bound_weights->find(name);
  if (it != bound_weights->end()) return same_tensor(it->second, t);
  for (const Node& n : graph_->root()->nodes())
    if (n.kind == NodeKind::weight && n.name == name) return false;  // a registry weight or a mutable source
  return true;
}

void GraphRealizationContext::bind_weight(const std::string& name, const Tensor& t) {
  auto [it, added] = bound_weights->emplace(name, t);
  if (added) return;
  const Tensor& b = it->second;
  if (same_tensor(b, t)) return;
  throw ValueError("trace: weight name '" + name + "' stands for two different tensors (" +
                   TensorType(b.dtype(), b.shape(), b.device()).str() + " and " +
                   TensorType(t.dtype(), t.shape(), t.device()).str() +
                   "); register each module once under the module being traced, or pass weights explicitly");
}

bool GraphRealizationContext::is_mutable_source(const Tensor& t) const {
  return find_mutable(mutable_index_, mutable_, t) != nullptr;
}

bool GraphRealizationContext::root_writable(int32_t root) const {
  for (const MutableSource& m : mutable_)
    if (m.value == root) return true;
  return RealizationContext::root_writable(root);
}

bool GraphRealizationContext::rebind_source(int32_t root, int32_t new_root) {
  for (const MutableSource& m : mutable_)
    if (m.value == root) {
      set_mutable_value(m.tensor, new_root);
      return true;
    }
  return false;
}

std::vector<std::pair<Tensor, int32_t>> GraphRealizationContext::sources() const {
  std::vector<std::pair<Tensor, int32_t>> r;
  for (const Tensor& t : pinned_) r.emplace_back(t, sources_.at(&t.impl()));
  return r;
}

// ---- scopes and defaults -----------------------------------------------------------------
RealizationContext& current_realization_context() {
  if (RealizationContext* c = detail::active_context()) return *c;
  return builtin_eager();
}

bool in_graph_context() { return dynamic_cast<GraphRealizationContext*>(&current_realization_context()) != nullptr; }

RealizationScope::RealizationScope(RealizationContext& ctx) : ctx_(&ctx) {
  // Re-opening an ended lazy context: ops may now record against its
  // results, so the values kept for results not read yet go to them first.
  if (auto* l = dynamic_cast<LazyRealizationContext*>(ctx_)) {
    LazyLock& L = lazy_lock(l);
    std::lock_guard<std::mutex> lock(L.mu);
    hand_over_all(L, l);
  }
  push(ctx_);
}
RealizationScope::~RealizationScope() { pop(ctx_); }

LazyScope::LazyScope() : ctx_(std::make_shared<LazyRealizationContext>()) {
  // Inside a trace every op is already recorded into the graph and compiled
  // together; a lazy context under it could only realize the trace's
  // symbolic values (impossible), which failed later with "realize: can't
  // realize from a graph context" naming nothing the user wrote (tester t17 F6).
  if (in_graph_context())
    throw RealizationError("kiln::lazy(): a lazy scope opened inside a traced function (jit, compile or a subgraph "
                           "trace, recording graph '" + current_realization_context().graph().name() +
                           "') is not supported: the trace already defers and fuses every op in it; remove the "
                           "lazy() scope from the traced function (or open it around the call instead)");
  scope_.emplace(*ctx_);
}
LazyScope::~LazyScope() { scope_.reset(); }
LazyScope lazy() { return LazyScope(); }

void DefaultContextHandle::restore() {
  if (restored_) return;
  restored_ = true;
  std::lock_guard<std::mutex> lock(g_default_mu);
  g_default = previous_;
  g_default_raw.store(g_default.get(), std::memory_order_release);
}

DefaultContextHandle set_default_realization_context(std::shared_ptr<RealizationContext> ctx) {
  std::lock_guard<std::mutex> lock(g_default_mu);
  auto prev = g_default;
  g_default = std::move(ctx);
  g_default_raw.store(g_default.get(), std::memory_order_release);
  return DefaultContextHandle(std::move(prev));
}

// ---- Tensor and Graph members that need contexts ---------------------------------------------
Tensor Tensor::from_graph_value(const GraphValue& v) {
  RealizationContext& ctx = current_realization_context();
  if (v.graph != &ctx.graph())
    throw RealizationError("from_graph_value: the value belongs to graph '" +
                           (v.graph ? v.graph->name() : std::string("?")) +
                           "' but the current context records into '" + ctx.graph().name() +
                           "' (enter a GraphRealizationContext for that graph first)");
  return ctx.create_unrealized({v});
}

void Graph::output(const Tensor& t) { output(std::vector<Tensor>{t}); }

void Graph::output(const std::vector<Tensor>& ts) {
  std::vector<GraphValue> vs;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    if (!t.defined()) throw ValueError("Graph::output: result " + std::to_string(i) + " is an undefined tensor");
    const auto st = t.impl().state.get();
    if (st && st->values[0].graph == this) {
      vs.push_back(st->values[0]);
    } else if (!st) {
      vs.push_back(add_constant(t));
    } else {
      throw ValueError("Graph::output: result " + std::to_string(i) + " is a value of graph '" +
                       st->values[0].graph->name() + "', not of '" + name_ + "'");
    }
  }
  output_values(vs);
}

}  // namespace kiln
