#include "stage.h"

#include "../tensor/realize_hook.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <set>

#include "made_in_trace.h"
#include "read_after_write.h"
#include "weak_scalar.h"

namespace kiln {

uint64_t content_hash(const Tensor& t) {
  // A compiled call hashes each captured constant on every call (a scalar
  // of the function, x * 0.5f, is one): a realized contiguous one is read
  // where it is, from its storage, without a handle copied or data_ptr()'s
  // realization checks (11 scalars of the digits step: ~0.2 us a call).
  Tensor copy;
  const unsigned char* p = nullptr;
  size_t n = 0;
  if (t.is_realized()) {
    const detail::TensorImpl& i = t.impl();
    if (i.storage && i.device.is_cpu() && is_contiguous(i.shape, i.strides)) {
      int64_t numel = 1;
      for (int64_t d : i.shape) numel *= d;
      const size_t item = size_of(i.dtype);
      p = static_cast<const unsigned char*>(i.storage.data()) + static_cast<size_t>(i.offset) * item;
      n = static_cast<size_t>(numel) * item;
    }
  }
  if (!p) {
    const Tensor& c = t.is_realized() && t.is_contiguous() ? t : (copy = t.contiguous());
    p = static_cast<const unsigned char*>(c.data_ptr());
    n = static_cast<size_t>(c.numel()) * c.itemsize();
  }
  return content_hash_bytes(p, n);
}

}  // namespace kiln

namespace kiln::detail {

TraceSession::TraceSession(const std::string& name, const std::vector<TensorLayout>& in_layouts,
                           bool allow_subgraphs, std::vector<int32_t> same_as, bool check_subgraph_bodies)
    : graph_(std::make_shared<Graph>(name)), same_as_(std::move(same_as)) {
  if (!same_as_.empty()) {
    if (same_as_.size() != in_layouts.size())
      throw ValueError("stage: same_as has " + std::to_string(same_as_.size()) + " entries for " +
                       std::to_string(in_layouts.size()) + " tensor arguments");
    for (size_t j = 0; j < same_as_.size(); ++j) {
      const int32_t i = same_as_[j];
      if (i == -1) continue;
      if (i < 0 || static_cast<size_t>(i) >= j || same_as_[static_cast<size_t>(i)] != -1 ||
          !(in_layouts[static_cast<size_t>(i)] == in_layouts[j]))
        throw ValueError("stage: same_as[" + std::to_string(j) + "] = " + std::to_string(i) +
                         " is not an earlier argument of the same layout that is itself not an alias");
    }
  }
  for (const auto& l : in_layouts) graph_->add_input(TensorType(l));
  ctx_.emplace(*graph_);
  if (allow_subgraphs) ctx_->subgraph_cache = std::make_shared<std::map<std::string, std::string>>();
  ctx_->check_subgraph_bodies = check_subgraph_bodies;
  for (const auto& v : graph_->inputs()) inputs_.push_back(ctx_->create_unrealized({v}));
  std::map<int32_t, int> broadcast;
  for (size_t i = 0; i < in_layouts.size(); ++i)
    if (in_layouts[i].stride_class == StrideClass::broadcast) broadcast[graph_->input_ids()[i]] = static_cast<int>(i);
  ctx_->set_broadcast_arguments(std::move(broadcast));
  // Identical arguments are one traced tensor: the same handle, so a write
  // through one is the other's new value too (and its views' base).
  for (size_t j = 0; j < same_as_.size(); ++j)
    if (same_as_[j] >= 0) inputs_[j] = inputs_[static_cast<size_t>(same_as_[j])];
  // What an argument reports for its layout while traced (Tensor::strides,
  // stride_class): its stride class; strides only where the class determines
  // them (contiguous, transposed 2-d: the key does not say which axes a
  // transposed argument of more axes permutes).
  for (size_t i = 0; i < in_layouts.size(); ++i) {
    detail::TracedLayout l;
    l.cls = in_layouts[i].stride_class;
    l.strides = detail::class_strides(in_layouts[i].shape, l.cls);  // where the class determines them
    if (!l.strides)
      l.why = "argument " + std::to_string(i) + " was traced for any layout of its non-contiguous stride class; "
              "its strides are not part of the compiled key";
    detail::set_traced_value_layout(graph_->input_ids()[i], l);
  }
}

TraceSession::~TraceSession() = default;

void check_specs(const std::vector<TensorLayout>& layouts, const TreeDef& tree) {
  for (size_t i = 0; i < layouts.size(); ++i) {
    auto arg = [&] {
      const std::vector<std::string> paths = tree.leaf_paths();
      return "stage: argument " + (i < paths.size() ? paths[i] : std::to_string(i)) + ": shape " +
             shape_str(layouts[i].shape);
    };
    int64_t n = 1;
    bool overflow = false, empty = false;
    for (int64_t d : layouts[i].shape) {
      if (d < 0) throw ShapeError(arg() + " has a negative extent");
      empty = empty || d == 0;
      overflow = overflow || __builtin_mul_overflow(n, d, &n);
    }
    if (empty) continue;  // 0 elements, whatever the other extents are
    if (overflow) throw ShapeError(arg() + " has more elements than int64 can count");
    if (n > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(size_of(layouts[i].dtype)))
      throw ShapeError(arg() + " of " + std::string(name(layouts[i].dtype)) + " needs more bytes than memory can address");
  }
}

namespace {
// First path whose leaf is static (not a tensor), or "" when none.
bool find_static(const TreeDef& d, const std::string& path, std::string& where, std::string& what) {
  if (d.kind == TreeDef::Kind::static_leaf || d.kind == TreeDef::Kind::none) {
    where = path.empty() ? "(the result itself)" : path;
    what = d.kind == TreeDef::Kind::none ? "an empty optional" : d.value;
    return true;
  }
  for (size_t i = 0; i < d.children.size(); ++i) {
    std::string k = (d.kind == TreeDef::Kind::dict || d.kind == TreeDef::Kind::record) ? d.keys[i] : std::to_string(i);
    if (find_static(d.children[i], join_path(path, k), where, what)) return true;
  }
  return false;
}
}  // namespace

std::vector<WriteReads> TraceSession::write_reads(const StagedGraph& s, size_t nresults) const {
  std::vector<WriteReads> r;
  if (s.writes.empty()) return r;
  const Graph& g = *graph_;
  const auto& nodes = g.nodes();
  // Each value's view root (a value made by view ops shares its root's memory).
  std::vector<int32_t> root(g.num_values());
  for (size_t v = 0; v < root.size(); ++v) root[v] = static_cast<int32_t>(v);
  std::map<int32_t, std::string> weight_of;  // weight value -> name
  for (const Node& n : nodes) {
    if (n.kind == NodeKind::weight && !n.outputs.empty()) weight_of[n.outputs[0]] = n.name;
    if (n.kind == NodeKind::op && op_info(n.op).category == OpCategory::View && !n.inputs.empty())
      for (int32_t o : n.outputs) root[static_cast<size_t>(o)] = root[static_cast<size_t>(n.inputs[0])];
  }
  std::map<int32_t, size_t> arg_of, captured_of;  // root value -> leaf / captured index
  const auto& gin = g.input_ids();
  for (size_t i = 0; i < gin.size(); ++i) arg_of.emplace(gin[i], i);
  for (size_t c = 0; c < s.captured.size(); ++c) captured_of.emplace(s.captured[c].value, c);
  const auto& at = ctx_->superseded_at();
  for (const WriteBack& w : s.writes) {
    WriteReads wr;
    wr.arguments.assign(gin.size(), 0);
    wr.captured.assign(s.captured.size(), 0);
    std::set<std::string> weights;
    auto mark = [&](int32_t v) {
      const int32_t rt = root[static_cast<size_t>(v)];
      if (auto it = arg_of.find(rt); it != arg_of.end()) wr.arguments[it->second] = 1;
      if (auto it = captured_of.find(rt); it != captured_of.end()) wr.captured[it->second] = 1;
      if (auto it = weight_of.find(rt); it != weight_of.end()) weights.insert(it->second);
    };
    // The node count when the destination was first written (0, every read, when unknown).
    int32_t first = -1;
    if (w.argument >= 0) {
      first = gin[static_cast<size_t>(w.argument)];
    } else {
      for (const auto& [v, name] : weight_of)
        if (name == w.weight) first = v;
    }
    size_t from = 0;
    if (auto it = at.find(first); first >= 0 && it != at.end()) from = it->second;
    for (size_t k = from; k < nodes.size(); ++k)
      for (int32_t v : nodes[k].inputs) mark(v);
    // Reads the nodes' order does not show (a compiled callable inlined before its write-backs).
    if (first >= 0)
      for (int32_t v : reads_after_write(*ctx_, first)) mark(v);
    const auto& outs = g.output_ids();
    for (size_t k = 0; k < nresults && k < outs.size(); ++k) mark(outs[k]);
    for (const WriteBack& o : s.writes) {  // written too: the order of the write-backs would show
      if (o.argument >= 0) wr.arguments[static_cast<size_t>(o.argument)] = 1;
      else weights.insert(o.weight);
    }
    wr.weights.assign(weights.begin(), weights.end());
    r.push_back(std::move(wr));
  }
  return r;
}

StagedGraph TraceSession::finish(const std::vector<Tensor>& outs, TreeDef out_tree, TreeDef in_tree,
                                 std::vector<TensorLayout> in_layouts) {
  std::string where, what;
  if (find_static(out_tree, "", where, what))
    throw ValueError("stage: output " + where + " is not a tensor (got " + what +
                     "); a staged function must return tensors only");
  auto paths = out_tree.leaf_paths();
  for (size_t i = 0; i < outs.size(); ++i)
    if (!outs[i].defined())
      throw ValueError("stage: output " + (paths[i].empty() ? std::string("(the result itself)") : paths[i]) +
                       " is an undefined tensor");
  StagedGraph s;
  // In-place writes: an argument whose handle now stands for a new value, and
  // every written mutable source, become extra outputs written back per call.
  std::vector<Tensor> all = outs;
  // A weak runtime number (or a value computed from numbers only) returned
  // is the default dtype's tensor of its kind (trace/weak_scalar.h).
  for (Tensor& t : all)
    if (!t.is_realized() && weak_scalar_kind(t)) t = ctx_->create_unrealized({ctx_->value_of(t)});
  // A result that is a mutable source (a realized tensor written while
  // tracing, `state.add_(x); return state;`) is its final value, not a
  // constant of its contents at trace time.
  // Any other realized result (a captured tensor returned as it is) is a
  // captured source like those the function read (StagedGraph::captured):
  // one constant per tensor, and the compiled call knows which tensor it is
  // (returned as that tensor: jit/call_plan.h).
  for (Tensor& t : all)
    if (t.is_realized()) {
      bool is_mutable = false;
      for (const auto& m : ctx_->mutable_sources())
        if (m.tensor.is_same(t)) {
          t = ctx_->create_unrealized({GraphValue{graph_.get(), m.value}});
          is_mutable = true;
          break;
        }
      if (!is_mutable) t = ctx_->create_unrealized(ctx_->add_source(t)->values);
    }
  const auto& gin = graph_->input_ids();
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (!same_as_.empty() && same_as_[i] >= 0) continue;  // written back through the first of its group
    const auto& st = inputs_[i].impl().state;
    if (st && st->values[0].graph == graph_.get() && st->values[0].id != gin[i]) {
      all.push_back(inputs_[i]);
      s.writes.push_back({static_cast<int32_t>(i), ""});
    }
  }
  for (const auto& m : ctx_->mutable_sources()) {
    s.mutable_weights[m.weight] = m.tensor;
    if (!m.written) continue;
    all.push_back(ctx_->create_unrealized({GraphValue{graph_.get(), m.value}}));
    s.writes.push_back({-1, m.weight});
  }
  graph_->output(all);
  s.bound_weights = *ctx_->bound_weights;
  for (auto& [t, v] : ctx_->sources()) s.captured.push_back({t, content_hash(t), v, t.buffer().version()});
  // Which of them the function made itself: held by nothing but the trace
  // (the context's pin and s.captured) and the results being handed out (the
  // caller's flattened `outs` and the result object it was flattened from,
  // one handle each per leaf). Recorded now, while the count says so: a copy
  // of the StagedGraph made later holds the tensor too (jit/call_plan.h).
  // (A result object holding more, an IndexedTensor's base, is not told
  // apart: call_plan's count at compile time decides as before.)
  for (const CapturedConstant& c : s.captured) {
    long held = 2;
    for (const Tensor& o : outs) held += o.is_same(c.source) ? 2 : 0;
    if (c.source.impl_ptr().use_count() <= held) note_made_in_trace(c.source);
  }
  s.write_reads = write_reads(s, outs.size());
  for (const auto& [v, d, op] : weak_number_checks(graph_.get()))  // (weak_scalar.h)
    for (size_t i = 0; i < gin.size(); ++i)
      if (gin[i] == v) s.number_checks.push_back({i, d, op});
  ctx_.reset();
  s.graph = graph_;
  s.in_layouts = std::move(in_layouts);
  s.in_tree = std::move(in_tree);
  for (int32_t v : graph_->output_ids()) s.out_layouts.push_back(graph_->type(v).layout());
  s.out_tree = std::move(out_tree);
  s.same_as = same_as_;
  return s;
}

namespace {
std::mutex g_made_mu;
// By address; the weak_ptr tells a later tensor at a reused address apart.
// Expired entries are swept when the map has doubled since the last sweep
// (a sweep per note made a trace with n constants quadratic).
std::unordered_map<const TensorImpl*, std::weak_ptr<TensorImpl>> g_made;
size_t g_sweep_at = 64;
bool same_owner(const std::weak_ptr<TensorImpl>& w, const std::shared_ptr<TensorImpl>& p) {
  return !w.owner_before(p) && !p.owner_before(w);
}
}  // namespace

void note_made_in_trace(const Tensor& t) {
  std::lock_guard<std::mutex> lock(g_made_mu);
  if (g_made.size() >= g_sweep_at) {
    std::erase_if(g_made, [](const auto& e) { return e.second.expired(); });
    g_sweep_at = std::max<size_t>(64, 2 * g_made.size());
  }
  g_made[t.impl_ptr().get()] = t.impl_ptr();
}

bool made_in_trace(const Tensor& t) {
  std::lock_guard<std::mutex> lock(g_made_mu);
  const auto it = g_made.find(t.impl_ptr().get());
  return it != g_made.end() && same_owner(it->second, t.impl_ptr());
}

}  // namespace kiln::detail
