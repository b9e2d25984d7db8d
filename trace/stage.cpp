#include "stage.h"

#include "../tensor/realize_hook.h"

#include <cstring>
#include <limits>

namespace kiln {

uint64_t content_hash(const Tensor& t) {
  Tensor c = t.contiguous();
  const auto* p = static_cast<const unsigned char*>(c.data_ptr());
  size_t n = static_cast<size_t>(c.numel()) * c.itemsize();
  uint64_t h = 1469598103934665603ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h ^ n;
}

}  // namespace kiln

namespace kiln::detail {

TraceSession::TraceSession(const std::string& name, const std::vector<TensorLayout>& in_layouts,
                           bool allow_subgraphs)
    : graph_(std::make_shared<Graph>(name)) {
  for (const auto& l : in_layouts) graph_->add_input(TensorType(l));
  ctx_.emplace(*graph_);
  if (allow_subgraphs) ctx_->subgraph_cache = std::make_shared<std::map<std::string, std::string>>();
  for (const auto& v : graph_->inputs()) inputs_.push_back(ctx_->create_unrealized({v}));
  // What an argument reports for its layout while traced (Tensor::strides,
  // stride_class): its stride class; strides only for a contiguous one (the
  // key does not say which axes a transposed argument permutes).
  for (size_t i = 0; i < in_layouts.size(); ++i) {
    detail::TracedLayout l;
    l.cls = in_layouts[i].stride_class;
    if (l.cls == StrideClass::contiguous)
      l.strides = contiguous_strides(in_layouts[i].shape);
    else
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
  const auto& gin = graph_->input_ids();
  for (size_t i = 0; i < inputs_.size(); ++i) {
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
  ctx_.reset();
  s.graph = graph_;
  s.in_layouts = std::move(in_layouts);
  s.in_tree = std::move(in_tree);
  for (int32_t v : graph_->output_ids()) s.out_layouts.push_back(graph_->type(v).layout());
  s.out_tree = std::move(out_tree);
  return s;
}

}  // namespace kiln::detail
