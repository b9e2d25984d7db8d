#include "compiled_callable.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <ostream>
#include <set>
#include <string_view>
#include <typeinfo>

#include "../tensor/creation.h"
#include "../tensor/mutation.h"
#include "../tensor/realize_hook.h"
#include "../trace/read_after_write.h"
#include "../trace/weak_scalar.h"
#include "call_plan.h"
#include "mef.h"
#include "mef_graph.h"
#include "mef_plan.h"
#include "plan.h"
#include "write_alias.h"
#include "write_in_place.h"

namespace kiln {

namespace {
const char* class_name(StrideClass c) {
  static const char* n[] = {"contiguous", "broadcast", "transposed", "general"};
  return n[static_cast<int>(c)];
}
std::string layout_str(const TensorLayout& l) {
  return TensorType(l).str() + " (" + class_name(l.stride_class) + ")";
}
std::string arg_path(const std::vector<std::string>& paths, size_t i) { return paths.at(i).empty() ? "0" : paths[i]; }

// Where two argument trees first differ: the path ("1", "0.w") and the two
// nodes; false when they are equal.
bool first_difference(const TreeDef& a, const TreeDef& b, const std::string& path, std::string& at, const TreeDef*& da,
                      const TreeDef*& db) {
  if (a.kind != b.kind || a.value != b.value || a.keys != b.keys || a.children.size() != b.children.size()) {
    at = path;
    da = &a;
    db = &b;
    return true;
  }
  for (size_t i = 0; i < a.children.size(); ++i) {
    const std::string child = a.keys.empty() ? std::to_string(i) : a.keys[i];
    if (first_difference(a.children[i], b.children[i], path.empty() ? child : path + "." + child, at, da, db))
      return true;
  }
  return false;
}

// "compiled call: tree structure mismatch ...", saying where, and what to do
// when the difference is a non-tensor value the callable was compiled with.
[[noreturn]] void throw_tree_mismatch(const TreeDef& want, const TreeDef& got) {
  std::string msg = "compiled call: tree structure mismatch: expected " + want.str() + ", got " + got.str();
  std::string at;
  const TreeDef *w = nullptr, *g = nullptr;
  if (first_difference(want, got, "", at, w, g)) {
    const std::string where = at.empty() ? "the arguments" : "argument " + at;
    if (w->kind == TreeDef::Kind::static_leaf && g->kind == TreeDef::Kind::static_leaf)
      msg += ": " + where + " is the value " + w->value + " this callable was compiled with, got " + g->value +
             " (a non-tensor argument is compiled into the code; pass a Tensor to vary it, compile again for the "
             "new value, or use jit(fn), which compiles once per value)";
    else
      msg += " (first difference at " + where + ": expected " + w->str() + ", got " + g->str() + ")";
  }
  throw ValueError(msg);
}

// t.stride_class() == want, with the common case (a realized argument
// expected contiguous) one call: stride_class_of's own first test.
bool stride_class_is(const Tensor& t, StrideClass want) {
  if (want == StrideClass::contiguous && t.is_realized()) return is_contiguous(t.impl().shape, t.impl().strides);
  return t.stride_class() == want;
}

// Whether t has w's dtype, shape, device and (check_strides) stride class:
// one pass over the impl's fields (the shape compared inline, no memcmp
// call for the few dimensions of a typical argument).
inline bool layout_matches(const Tensor& t, const TensorLayout& w, bool check_strides) {
  const detail::TensorImpl& im = t.impl();
  if (im.dtype != w.dtype || !(im.device == w.device)) return false;
  const size_t nd = im.shape.size();
  if (nd != w.shape.size()) return false;
  const int64_t* a = im.shape.data();
  const int64_t* b = w.shape.data();
  for (size_t d = 0; d < nd; ++d)
    if (a[d] != b[d]) return false;
  if (!check_strides) return true;
  if (w.stride_class == StrideClass::contiguous && im.state == nullptr) {
    // realized: contiguous strides, as is_contiguous(shape, strides) decides
    const int64_t* st = im.strides.data();
    int64_t expect = 1;
    bool ok = true;
    for (size_t d = nd; d-- > 0;) {
      if (a[d] != 1 && st[d] != expect) {
        ok = false;
        break;
      }
      expect *= a[d];
    }
    if (ok) return true;
    return is_contiguous(im.shape, im.strides);  // the reference rule (e.g. empty tensors)
  }
  return stride_class_is(t, w.stride_class);
}

// The aliasing guard (jit/write_alias.h) of a call that writes in place:
// ValueError when a written tensor shares memory with another the call
// reads, or when a callable traced for identical arguments (jit) gets
// arguments that are not. Nothing to do for a function that writes nothing.
void check_aliasing(const CompiledCallable& c, detail::TensorRefs args, const char* entry) {
  const StagedGraph& s = c.staged();
  auto who = [&] { return std::string(entry) + " of '" + c.engine_model().artifact().graph().name() + "'"; };
  for (size_t j = 0; j < s.same_as.size() && j < args.size(); ++j)
    if (s.same_as[j] >= 0 && !detail::identical_tensors(args[j], args[static_cast<size_t>(s.same_as[j])])) {
      const std::vector<std::string> paths = s.in_tree.leaf_paths();
      throw ValueError(who() + ": this callable was traced with argument " + arg_path(paths, j) +
                       " the same tensor as argument " + arg_path(paths, static_cast<size_t>(s.same_as[j])) +
                       " (jit's aliasing guard), but this call passes different tensors; pass the same tensor in "
                       "both places, or compile the function again");
    }
  if (s.writes.empty()) return;
  if (auto a = detail::find_write_alias(args, s.writes, s.write_reads, s.same_as, c.weights(), s.captured))
    throw ValueError(detail::write_alias_message(who(), *a, s.in_tree, s.captured,
                                                 c.engine_model().artifact().loaded_from_mef()));
}
}  // namespace

Tensor CallResult::tensor() const {
  if (leaves.size() != 1)
    throw ValueError("CallResult::tensor: the call returned " + std::to_string(leaves.size()) +
                     " tensors; use as<...>() with the result type");
  return leaves[0];
}

std::ostream& operator<<(std::ostream& os, const CallResult& r) {
  if (r.leaves.size() == 1) return os << r.leaves[0];
  os << "(";
  for (size_t i = 0; i < r.leaves.size(); ++i) os << (i ? ", " : "") << r.leaves[i];
  return os << ")";
}

CompiledCallable::CompiledCallable(StagedGraph staged, std::map<std::string, Tensor> weights,
                                   std::shared_ptr<InferenceSession> session)
    : staged_(std::move(staged)),
      weights_(std::move(weights)),
      session_(session ? std::move(session) : InferenceSession::default_session()) {
  if (!staged_.graph) throw ValueError("CompiledCallable: the staged graph is empty");
  for (const auto& [name, t] : staged_.mutable_weights) weights_.emplace(name, t);  // an explicit binding wins
  for (const auto& [name, t] : staged_.bound_weights) weights_.emplace(name, t);
  const engine::Signature sig = signature();
  auto artifact = engine::compile_graph(staged_.graph, *session_, &sig);
  model_ = std::make_shared<engine::Model>(artifact, weights_, "compile");
  plan_in_place();
}

// The callable's write-back state: the counters, and per write a handle on
// the weight it writes back (weights_'s entry, found once instead of by name
// on each call; undefined for an argument's write or an unbound weight).
struct CompiledCallable::WriteCounters {
  std::atomic<int64_t> in_place{0}, copied{0}, bytes{0};
  std::vector<Tensor> written_weights;
};

void CompiledCallable::plan_in_place() {
  counters_ = std::make_shared<WriteCounters>();
  call_plan_ = detail::make_call_plan(staged_, model_->artifact().graph());
  if (staged_.writes.empty()) return;
  for (const WriteBack& w : staged_.writes) {
    auto it = w.argument >= 0 ? weights_.end() : weights_.find(w.weight);
    counters_->written_weights.push_back(it == weights_.end() ? Tensor() : it->second);
  }
  const size_t nres = model_->artifact().graph().output_ids().size() - staged_.writes.size();
  in_place_ = codegen::in_place_writes(model_->artifact().plan(), nres, staged_.writes);
}

CompiledCallable::WriteBackStats CompiledCallable::write_back_stats() const {
  return {counters_->in_place.load(), counters_->copied.load(), counters_->bytes.load()};
}

namespace {
// The tensor write `w` writes back: argument w.argument, or `weight` (the
// bound weight it names; null when that is undefined: not bound).
const Tensor* write_destination(const WriteBack& w, const Tensor& weight, detail::TensorRefs args) {
  if (w.argument >= 0) return &args[static_cast<size_t>(w.argument)];
  return weight.defined() ? &weight : nullptr;
}
}  // namespace

std::vector<const Tensor*> CompiledCallable::destinations(detail::TensorRefs args) const {
  std::vector<const Tensor*> d;
  d.reserve(staged_.writes.size());
  for (size_t k = 0; k < staged_.writes.size(); ++k)
    d.push_back(write_destination(staged_.writes[k], counters_->written_weights[k], args));
  return d;
}

std::vector<Tensor> CompiledCallable::run_model(detail::TensorRefs args, bool checked) const {
  std::vector<Tensor> out;
  if (!staged_.writes.empty()) {
    const size_t nout = model_->artifact().graph().output_ids().size();
    const size_t first = nout - staged_.writes.size();
    const std::vector<const Tensor*> dst = destinations(args);
    // A destination sharing memory with any other argument or weight keeps
    // the copy: the graph may read that operand after the write. (Other
    // arguments by position: borrowed leaves may be one object, c(x, x).)
    // Operand j: argument j, then the bound weights.
    const std::vector<Tensor>& bound = model_->bound_weights();
    auto shares = [&](const Tensor& d, int32_t self, size_t j) {
      if (j < args.size()) return static_cast<int32_t>(j) != self && may_share_memory(args[j], d);
      const Tensor& w = bound[j - args.size()];  // a mutable weight is bound as its own old value
      return may_share_memory(w, d) && !(w.buffer() == d.buffer() && w.offset() == d.offset() && w.shape() == d.shape());
    };
    // Many writes and operands (50 captured tensors, each written): the
    // operands sorted by memory once, and only those overlapping d tested.
    const size_t noperands = args.size() + bound.size();
    const bool indexed = staged_.writes.size() * noperands > detail::MemoryOverlaps::kWorthwhilePairs;
    std::optional<detail::MemoryOverlaps> index;
    auto shared = [&](const Tensor& d, int32_t self) {
      if (!indexed) {
        for (size_t j = 0; j < noperands; ++j)
          if (shares(d, self, j)) return true;
        return false;
      }
      if (!index) {
        index.emplace();
        index->reserve(noperands);
        for (size_t j = 0; j < noperands; ++j)
          index->add(j < args.size() ? args[j] : bound[j - args.size()], static_cast<int32_t>(j));
        index->build();
      }
      bool any = false;
      index->for_each_candidate(d, [&](int32_t j) { any = any || shares(d, self, static_cast<size_t>(j)); });
      return any;
    };
    for (size_t k = 0; k < staged_.writes.size(); ++k) {
      const Tensor* d = dst[k];
      if (!in_place_[k] || !d || !d->is_realized() || !d->is_contiguous() || shared(*d, staged_.writes[k].argument))
        continue;
      if (out.empty()) out.resize(nout);
      out[first + k] = *d;
      detail::before_memory_write(d->buffer());  // a lazy scope that recorded it keeps the old contents
    }
  }
  model_->run_into(args, out, checked && call_plan_->inputs_are_graph_inputs);
  return out;
}

// ---- export and rebuilding ----------------------------------------------------------------

engine::Signature CompiledCallable::signature() const {
  return engine::Signature{staged_.in_layouts, staged_.in_tree, staged_.out_layouts, staged_.out_tree, staged_.writes};
}

void CompiledCallable::export_mef(const std::string& path, bool include_source_graph) const {
  if (!staged_.same_as.empty())
    throw ValueError("export_mef: this callable was traced for arguments that are one tensor (jit's aliasing guard, "
                     "StagedGraph::same_as), which a MEF file cannot record; export a callable compiled for separate "
                     "arguments");
  const engine::CompiledModel& art = model_->artifact();
  mef::Contents c;
  c.graph_text = art.graph().to_text();
  c.graph_binary = mef::encode_graph_binary(art.graph());
  c.signature = signature();
  c.weights = art.weight_slots();
  if (include_source_graph) c.source_text = art.source_graph().to_text();
  c.code = mef::code_of(art.plan());
  c.plan = mef::encode_plan(art.plan());
  if (const codegen::CudaExecutable* cx = art.cuda_plan()) c.cubin = cx->stored_module();
  mef::write_file_atomically(path, mef::encode(c), "export_mef");
}

namespace {
void check_signature_against(const Graph& g, const std::vector<TensorLayout>& in_layouts, const TreeDef& in_tree,
                             const std::vector<TensorLayout>& out_layouts, const TreeDef& out_tree, const char* who,
                             size_t nwrites = 0) {
  auto check = [&](const std::vector<int32_t>& ids, const std::vector<TensorLayout>& ls, const char* what) {
    if (ls.size() != ids.size())
      throw ValueError(std::string(who) + ": " + std::to_string(ls.size()) + " " + what + " layouts given, the graph has " +
                       std::to_string(ids.size()));
    for (size_t i = 0; i < ids.size(); ++i)
      if (!(TensorType(ls[i]) == g.type(ids[i])))
        throw ValueError(std::string(who) + ": " + what + " " + std::to_string(i) + " is " + TensorType(ls[i]).str() +
                         " in the layouts given but " + g.type(ids[i]).str() + " in the graph");
  };
  check(g.input_ids(), in_layouts, "argument");
  check(g.output_ids(), out_layouts, "result");
  if (in_tree.num_leaves() != in_layouts.size())
    throw ValueError(std::string(who) + ": in_tree " + in_tree.str() + " has " + std::to_string(in_tree.num_leaves()) +
                     " tensor leaves for " + std::to_string(in_layouts.size()) + " in_layouts");
  if (out_tree.num_leaves() + nwrites != out_layouts.size())
    throw ValueError(std::string(who) + ": out_tree " + out_tree.str() + " has " + std::to_string(out_tree.num_leaves()) +
                     " tensor leaves for " + std::to_string(out_layouts.size()) + " out_layouts");
}

}  // namespace

CompiledCallable::CompiledCallable(FromParts, StagedGraph staged, std::map<std::string, Tensor> weights,
                                   std::shared_ptr<InferenceSession> session, std::shared_ptr<engine::Model> model)
    : staged_(std::move(staged)),
      weights_(std::move(weights)),
      session_(session ? std::move(session) : InferenceSession::default_session()),
      model_(std::move(model)) {
  plan_in_place();
}

namespace {
// Strict, as PyTorch's load_state_dict(strict=True): `weights` must name
// exactly the artifact's weights (from_mef, and from_compiled when it binds
// them). A name the file does not list (a typo, or a file of another variant
// of the model: one without a bias, say) was dropped silently; every
// mismatch is listed at once. `who` starts the message.
void check_weight_names(const engine::CompiledModel& art, const std::map<std::string, Tensor>& weights,
                        const std::string& who, bool file) {
  const std::string holder = file ? "the file" : "the artifact";
  std::string missing, unexpected;
  for (const auto& [name, type] : art.weight_slots())
    if (!weights.count(name)) missing += (missing.empty() ? "'" : ", '") + name + "' (" + type.str() + ")";
  std::set<std::string_view> listed;
  for (const auto& slot : art.weight_slots()) listed.insert(slot.first);
  for (const auto& [name, t] : weights)
    if (!listed.count(name)) unexpected += (unexpected.empty() ? "'" : ", '") + name + "'";
  // A missing write-back weight is no tensor of the user's registry but one
  // the traced function captured and wrote in place; say what to bind.
  std::string written_missing;
  if (const engine::Signature* sig = art.signature())
    for (const WriteBack& w : sig->writes)
      if (w.argument < 0 && !weights.count(w.weight))
        written_missing += (written_missing.empty() ? "; '" : ", '") + w.weight + "'";
  if (!written_missing.empty())
    written_missing += " " + std::string(written_missing.find(',') == std::string::npos ? "is a tensor" : "are tensors") +
                       " the traced function captured and wrote in place (a write-back weight): bind the tensor "
                       "each call should read and write back under that name";
  if (!missing.empty() || !unexpected.empty())
    throw ValueError(who + ": the weights given do not match " + holder + "'s" +
                     (missing.empty() ? std::string() : "; missing: " + missing) +
                     (unexpected.empty() ? std::string()
                                         : "; unexpected (" + holder + "'s graph reads no weight of that name): " +
                                               unexpected) +
                     " (" + holder + " lists " + std::to_string(art.weight_slots().size()) + " weight(s): " +
                     (file ? "engine::read(path)->weight_slots())" : "its weight_slots())") + written_missing);
}
}  // namespace

CompiledCallable CompiledCallable::from_compiled(std::shared_ptr<const engine::CompiledModel> artifact,
                                                 std::shared_ptr<engine::Model> engine_model,
                                                 std::vector<TensorLayout> in_layouts, TreeDef in_tree,
                                                 std::vector<TensorLayout> out_layouts, TreeDef out_tree,
                                                 std::map<std::string, Tensor> weights) {
  if (!artifact) throw ValueError("from_compiled: the artifact is null");
  std::vector<WriteBack> writes;
  if (artifact->signature()) writes = artifact->signature()->writes;
  check_signature_against(artifact->graph(), in_layouts, in_tree, out_layouts, out_tree, "from_compiled", writes.size());
  if (engine_model && engine_model->artifact_ptr() != artifact)
    throw ValueError("from_compiled: engine_model was initialised from another artifact");
  if (!engine_model) {
    check_weight_names(*artifact, weights, "from_compiled", artifact->loaded_from_mef());
    engine_model = std::make_shared<engine::Model>(artifact, weights, "from_compiled");
  }
  StagedGraph s;
  s.in_layouts = std::move(in_layouts);
  s.in_tree = std::move(in_tree);
  s.out_layouts = std::move(out_layouts);
  s.out_tree = std::move(out_tree);
  s.writes = std::move(writes);
  return CompiledCallable(FromParts{}, std::move(s), std::move(weights), nullptr, std::move(engine_model));
}

CompiledCallable CompiledCallable::from_engine_model(StagedGraph staged,
                                                     std::shared_ptr<const engine::CompiledModel> artifact,
                                                     std::shared_ptr<engine::Model> engine_model,
                                                     std::map<std::string, Tensor> weights) {
  if (!artifact) throw ValueError("from_engine_model: the artifact is null");
  if (!engine_model) throw ValueError("from_engine_model: engine_model is null (use from_compiled to bind weights)");
  if (engine_model->artifact_ptr() != artifact)
    throw ValueError("from_engine_model: engine_model was initialised from another artifact");
  check_signature_against(artifact->graph(), staged.in_layouts, staged.in_tree, staged.out_layouts, staged.out_tree,
                          "from_engine_model", staged.writes.size());
  return CompiledCallable(FromParts{}, std::move(staged), std::move(weights), nullptr, std::move(engine_model));
}

CompiledCallable CompiledCallable::from_mef(const std::string& path, std::map<std::string, Tensor> weights,
                                            std::shared_ptr<InferenceSession> session) {
  auto art = engine::read(path, session);
  const engine::Signature& s = *art->signature();
  check_weight_names(*art, weights, "from_mef '" + path + "'", true);
  // Two write-back weights bound to one tensor (or overlapping ones): each
  // would be read and written back separately, losing a write (tester t17
  // F2); refused here, where the binding is made, as a call would refuse it.
  if (auto a = detail::find_write_alias({}, s.writes, {}, {}, weights, {}))
    throw ValueError(detail::write_alias_message("from_mef '" + path + "'", *a, s.in_tree, {}, true));
  auto model = std::make_shared<engine::Model>(art, weights, "from_mef '" + path + "'",
                                               "the weights given to from_mef (its `weights` map)");
  CompiledCallable c =
      from_compiled(art, std::move(model), s.in_layouts, s.in_tree, s.out_layouts, s.out_tree, std::move(weights));
  if (session) c.session_ = std::move(session);
  return c;
}

namespace {
// content_hash(t), computed here without a call for the common captured
// constant (a scalar of the function, x * 0.5f: a realized 0-d or
// contiguous tensor in host memory), else by content_hash itself.
inline uint64_t captured_hash(const Tensor& t) {
  if (t.is_realized()) {
    const detail::TensorImpl& i = t.impl();
    if (i.storage && i.device.is_cpu()) {
      const size_t nd = i.shape.size();
      const int64_t* sh = i.shape.data();
      const int64_t* st = i.strides.data();
      int64_t numel = 1;
      bool plain = i.strides.size() == nd;  // contiguous strides (a dimension of 1 may have any)
      for (size_t d = nd; plain && d-- > 0;) {
        if (sh[d] != 1 && st[d] != numel) plain = false;
        numel *= sh[d];
      }
      if (plain && numel > 0) {
        const size_t item = size_of(i.dtype);
        return content_hash_bytes(static_cast<const unsigned char*>(i.storage.data()) + static_cast<size_t>(i.offset) * item,
                                  static_cast<size_t>(numel) * item);
      }
    }
  }
  return content_hash(t);
}
}  // namespace

void CompiledCallable::check_captured() const {
  for (size_t i = 0; i < staged_.captured.size(); ++i) {
    const CapturedConstant& c = staged_.captured[i];
    if (captured_hash(c.source) != c.hash) {
      // A tensor also bound as a weight that the function captured itself
      // (`lin.state_dict().at("weight")`, not the module's call): say so.
      std::string bound;
      for (const auto& [name, w] : weights_)
        if (w.defined() && w.is_realized() && w.buffer() == c.source.buffer() && w.offset() == c.source.offset() &&
            w.shape() == c.source.shape() && w.strides() == c.source.strides() && w.dtype() == c.source.dtype()) {
          bound = name;
          break;
        }
      throw ValueError("compiled call: the captured tensor " +
                       TensorType(c.source.dtype(), c.source.shape(), c.source.device()).str() +
                       " (captured tensor " + std::to_string(i) +
                       " of the function, in the order it first used them) changed since the function was traced" +
                       (c.source.buffer().version() != c.version ? std::string(" (it was written in place)") : "") +
                       "; its old value is baked into the compiled code. " +
                       (bound.empty()
                            ? std::string("Pass the tensor as an argument, or bind it as a named weight "
                                          "(CompileOptions::weights), or compile again")
                            : "It is bound as weight '" + bound +
                                  "', but the function captured the tensor itself rather than reading the weight "
                                  "(a module's call reads its parameters as weights): read it through the module, "
                                  "pass it as an argument, or compile again"));
    }
  }
}

CallResult CompiledCallable::inline_call(GraphRealizationContext& outer, detail::TensorRefs leaves) const {
  check_captured();
  // Its captured tensors become the outer trace's captured constants, so the
  // outer compiled call checks them before each call as this one does (their
  // values are baked into the constants copied in below).
  for (const CapturedConstant& c : staged_.captured) (void)outer.value_of(c.source);
  // The optimised graph: calls already inlined, weights named in full.
  const Graph& g = model_->artifact().graph();
  Graph& og = outer.graph();
  std::set<std::string> written;
  for (const WriteBack& w : staged_.writes) {
    if (w.argument < 0) written.insert(w.weight);
    else if (leaves[static_cast<size_t>(w.argument)].is_realized())
      outer.add_mutable_source(leaves[static_cast<size_t>(w.argument)]);  // before its first read below
  }
  // The aliasing guard, traced: the graph reads each argument as a separate
  // value, so an argument it writes must not be (a view of) the same tensor
  // as another argument of this call.
  for (size_t k = 0; k < staged_.writes.size(); ++k) {
    const WriteBack& w = staged_.writes[k];
    if (w.argument < 0) continue;
    const WriteReads* rd = staged_.write_reads.size() == staged_.writes.size() ? &staged_.write_reads[k] : nullptr;
    const size_t i = static_cast<size_t>(w.argument);
    const Tensor& d = leaves[i];
    const int32_t droot = d.is_realized() ? -1 : outer.view_root(outer.value_of(d).id);
    for (size_t j = 0; j < leaves.size(); ++j) {
      if (j == i || (j < staged_.same_as.size() && staged_.same_as[j] >= 0 &&
                     (staged_.same_as[j] == static_cast<int32_t>(i) || staged_.same_as[j] == staged_.same_as[i])))
        continue;
      if (rd && j < rd->arguments.size() && !rd->arguments[j]) continue;  // not read after the write
      const Tensor& o = leaves[j];
      const bool overlap = o.impl_ptr() == d.impl_ptr() || may_share_memory(o, d) ||
                           (droot >= 0 && !o.is_realized() && outer.view_root(outer.value_of(o).id) == droot);
      if (overlap) {
        detail::WriteAlias a;
        a.written = w.argument;
        a.other_argument = static_cast<int32_t>(j);
        throw ValueError(detail::write_alias_message("compiled call of '" + g.name() + "' inside a trace", a,
                                                     staged_.in_tree, staged_.captured,
                                                     model_->artifact().loaded_from_mef()));
      }
    }
  }
  std::vector<int32_t> map(g.num_values(), -1);
  const auto& ins = g.input_ids();
  for (size_t i = 0; i < ins.size(); ++i) map[static_cast<size_t>(ins[i])] = outer.value_of(leaves[i]).id;
  auto val = [&](int32_t v) {
    const int32_t m = map.at(static_cast<size_t>(v));
    if (m < 0) throw ValueError("compiled call inside a trace: value %" + std::to_string(v) + " is used before defined");
    return GraphValue{&og, m};
  };
  for (const Node& n : g.nodes()) {
    switch (n.kind) {
      case NodeKind::input:
        break;
      case NodeKind::op: {
        if (n.outputs.size() != 1)
          throw ValueError("compiled call inside a trace: op node with " + std::to_string(n.outputs.size()) +
                           " results cannot be inlined");
        std::vector<GraphValue> in;
        for (int32_t v : n.inputs) in.push_back(val(v));
        map[static_cast<size_t>(n.outputs[0])] = og.add_op(n.op, in, n.attrs).id;
        break;
      }
      case NodeKind::constant:
        map[static_cast<size_t>(n.outputs[0])] = og.add_constant(n.data, /*copy=*/false).id;
        break;
      case NodeKind::weight: {
        auto it = weights_.find(n.name);
        if (it == weights_.end())
          throw ValueError("compiled call inside a trace: weight '" + n.name + "' is not bound");
        const Tensor& t = it->second;
        if (written.count(n.name)) {  // a mutable source it writes: one of the outer trace's too
          map[static_cast<size_t>(n.outputs[0])] = outer.add_mutable_source(t)->values[0].id;
          break;
        }
        // A weight of the outer graph bound to the same tensor (renamed on a clash).
        std::string name = n.name;
        for (int k = 1; !outer.weight_name_free(name, t); ++k) name = n.name + "_" + std::to_string(k);
        outer.bind_weight(name, t);
        map[static_cast<size_t>(n.outputs[0])] = og.add_weight(name, g.type(n.outputs[0])).id;
        break;
      }
      case NodeKind::call:
        throw ValueError("compiled call inside a trace: unexpected call node (the optimised graph is flat)");
    }
  }
  const auto& outs = g.output_ids();
  const size_t nres = outs.size() - staged_.writes.size();
  CallResult r;
  for (size_t i = 0; i < nres; ++i) r.leaves.push_back(outer.create_unrealized({val(outs[i])}));
  r.tree = call_plan_->out_tree;
  // The inlined nodes precede the write-backs below, so the outer trace's
  // StagedGraph::write_reads would count every read they make as one before
  // the writes: note, in the outer trace's values, what this callable reads
  // after each write (per its own write_reads; every argument and weight
  // when it has none, as a callable read back from MEF).
  {
    std::map<std::string, int32_t> weight_value;  // this graph's weight name -> the outer value
    for (const Node& n : g.nodes())
      if (n.kind == NodeKind::weight && !n.outputs.empty() && map[static_cast<size_t>(n.outputs[0])] >= 0)
        weight_value[n.name] = map[static_cast<size_t>(n.outputs[0])];
    std::vector<int32_t> arg_value(leaves.size());  // before the write-backs
    for (size_t j = 0; j < leaves.size(); ++j) arg_value[j] = outer.value_of(leaves[j]).id;
    for (size_t k = 0; k < staged_.writes.size(); ++k) {
      const WriteBack& w = staged_.writes[k];
      const WriteReads* rd = staged_.write_reads.size() == staged_.writes.size() ? &staged_.write_reads[k] : nullptr;
      int32_t dst;
      if (w.argument >= 0) {
        dst = arg_value[static_cast<size_t>(w.argument)];
      } else if (auto it = weight_value.find(w.weight); it != weight_value.end()) {
        dst = it->second;
      } else {
        dst = outer.add_mutable_source(weights_.at(w.weight))->values[0].id;
      }
      dst = outer.view_root(dst);
      for (size_t j = 0; j < leaves.size(); ++j)
        if (static_cast<int32_t>(j) != w.argument && (!rd || (j < rd->arguments.size() && rd->arguments[j])))
          detail::note_read_after_write(outer, dst, arg_value[j]);
      for (size_t c = 0; c < staged_.captured.size(); ++c)
        if (!rd || (c < rd->captured.size() && rd->captured[c]))
          detail::note_read_after_write(outer, dst, outer.value_of(staged_.captured[c].source).id);
      for (const auto& [name, v] : weight_value)
        if (name != w.weight && (!rd || std::find(rd->weights.begin(), rd->weights.end(), name) != rd->weights.end()))
          detail::note_read_after_write(outer, dst, v);
    }
  }
  // Its in-place writes become writes of the outer trace (functionalised there).
  for (size_t k = 0; k < staged_.writes.size(); ++k) {
    const WriteBack& w = staged_.writes[k];
    const Tensor v = outer.create_unrealized({val(outs[nres + k])});
    Tensor dst = w.argument >= 0 ? leaves[static_cast<size_t>(w.argument)] : weights_.at(w.weight);
    dst.copy_(v);
  }
  // A result that is a written value is the tensor written, as eagerly.
  for (const auto& [i, k] : call_plan_->written_results) {
    const WriteBack& w = staged_.writes[k];
    if (i < r.leaves.size()) r.leaves[i] = w.argument >= 0 ? leaves[static_cast<size_t>(w.argument)] : weights_.at(w.weight);
  }
  // A view of a written value is that view of the tensor written (recorded
  // in the outer trace, so it joins that tensor's alias group), as eagerly.
  for (const auto& vw : call_plan_->views_of_written) {
    const WriteBack& w = staged_.writes[vw.write];
    if (vw.result >= r.leaves.size()) continue;
    Tensor t = w.argument >= 0 ? leaves[static_cast<size_t>(w.argument)] : weights_.at(w.weight);
    for (const auto& [op, attrs] : vw.chain) t = apply(op, t, attrs);
    r.leaves[vw.result] = std::move(t);
  }
  // A captured tensor returned unwritten (or a view of it) is that tensor, as
  // eagerly (the view recorded in the outer trace, which captures it too).
  for (const auto& cr : call_plan_->captured_results) {
    if (cr.result >= r.leaves.size()) continue;
    Tensor t = staged_.captured[cr.captured].source;
    for (const auto& [op, attrs] : cr.chain) t = apply(op, t, attrs);
    r.leaves[cr.result] = std::move(t);
  }
  return r;
}

namespace {
// The number a static leaf printed (static_repr: integers, including int8_t,
// uint8_t and char, and bools exactly; floating values with 17 digits, so
// exactly too, subnormals, infinities and NaN included); false when it is not
// one. A floating value that prints as an integer is read as one, except
// -0.0 ("-0", which no integer prints as), which keeps its sign.
bool parse_number(const std::string& v, Scalar& out) {
  if (v == "true" || v == "false") {
    out = Scalar(v == "true");
    return true;
  }
  if (v.empty()) return false;
  const char* b = v.data();
  const char* e = b + v.size();
  const bool floating = v == "-0" || v.find_first_of(".eEni") != std::string::npos;  // 2.5, 1e+20, inf, nan
  if (floating) {
    double d = 0.0;
    auto [p, ec] = std::from_chars(b, e, d);
    if (ec == std::errc::result_out_of_range && p == e) {  // a subnormal, where from_chars reports underflow
      char* end = nullptr;
      d = std::strtod(b, &end);
      if (end != e) return false;
    } else if (ec != std::errc() || p != e) {
      return false;
    }
    out = Scalar(d);
    return true;
  }
  if (v[0] == '-') {
    int64_t i = 0;
    auto [p, ec] = std::from_chars(b, e, i);
    if (ec != std::errc() || p != e) return false;
    out = Scalar(i);
    return true;
  }
  uint64_t u = 0;
  auto [p, ec] = std::from_chars(b, e, u);
  if (ec != std::errc() || p != e) return false;
  out = u > static_cast<uint64_t>(INT64_MAX) ? Scalar(u) : Scalar(static_cast<int64_t>(u));
  return true;
}

// The values an integer dtype holds, "-128..127".
std::string integer_range(DType d) {
  switch (d) {
    case DType::int8: return "-128..127";
    case DType::uint8: return "0..255";
    case DType::int16: return "-32768..32767";
    case DType::uint16: return "0..65535";
    case DType::int32: return "-2147483648..2147483647";
    case DType::uint32: return "0..4294967295";
    case DType::uint64: return "0..18446744073709551615";
    default: return "-9223372036854775808..9223372036854775807";
  }
}

// A C++ number given for a 0-d tensor parameter (a static leaf where the
// compiled signature has a tensor leaf) becomes a 0-d tensor of the
// parameter's dtype; returns false when `tree` differs from the signature in
// any other way (leaves and tree are then untouched).
bool numbers_as_tensors(const StagedGraph& staged_, std::vector<Tensor>& leaves, TreeDef& tree) {
  const TreeDef& want = staged_.in_tree;
  if (tree.kind != TreeDef::Kind::tuple || want.kind != TreeDef::Kind::tuple ||
      tree.children.size() != want.children.size())
    return false;
  std::vector<Tensor> new_leaves;
  TreeDef new_tree = tree;
  size_t got_leaf = 0, want_leaf = 0;
  for (size_t k = 0; k < tree.children.size(); ++k) {
    const TreeDef& c = tree.children[k];
    const TreeDef& w = want.children[k];
    Scalar s;
    if (c.kind == TreeDef::Kind::static_leaf && w.kind == TreeDef::Kind::leaf && parse_number(c.value, s)) {
      const TensorLayout& l = staged_.in_layouts.at(want_leaf);
      const char* kind = s.kind == ScalarKind::boolean ? " bool number"
                         : s.kind == ScalarKind::integer ? "n integer number"
                                                         : " floating number";
      if (!l.shape.empty())
        throw ValueError("compiled call: argument " + std::to_string(k) + ": a C++ number (" + c.value +
                         ") for a tensor parameter of type " + TensorType(l.dtype, l.shape, l.device).str() +
                         "; only a 0-d parameter accepts a number: pass a tensor");
      if (promote_with_scalar(l.dtype, s.kind) != l.dtype)
        throw ValueError("compiled call: argument " + std::to_string(k) + ": a" + kind + " (" + c.value +
                         ") for a 0-d " + std::string(name(l.dtype)) +
                         " parameter would change its dtype; pass a 0-d tensor (full({}, value, DType::" +
                         std::string(name(l.dtype)) + "))");
      if (is_integral(l.dtype) && s.kind == ScalarKind::integer) {
        bool fits = true;
        try {
          check_scalar_fits(s, l.dtype, "compiled call");
        } catch (const ValueError&) {
          fits = false;
        }
        if (!fits)
          throw ValueError("compiled call: argument " + std::to_string(k) + ": the number " + c.value +
                           " is out of range for a 0-d " + std::string(name(l.dtype)) + " parameter (" +
                           std::string(name(l.dtype)) + " holds " + integer_range(l.dtype) +
                           "); pass a value in that range, or compile the function with a wider integer dtype "
                           "for this parameter");
      }
      Tensor t = full({}, s, l.dtype, l.device);
      // A finite number a floating dtype cannot hold would become inf.
      if (is_floating(l.dtype) && std::isfinite(s.value) && std::isinf(t.item<double>()))
        throw ValueError("compiled call: argument " + std::to_string(k) + ": the number " + c.value +
                         " is out of range for a 0-d " + std::string(name(l.dtype)) + " parameter (it would become " +
                         (s.value < 0 ? "-inf" : "inf") + "); pass a value the dtype can hold, or a 0-d tensor");
      new_leaves.push_back(std::move(t));
      new_tree.children[k] = TreeDef{};                      // a tensor leaf
      ++want_leaf;
      continue;
    }
    const size_t n = c.num_leaves();
    for (size_t j = 0; j < n; ++j) new_leaves.push_back(leaves.at(got_leaf + j));
    got_leaf += n;
    want_leaf += w.num_leaves();
  }
  if (!(new_tree == want)) return false;
  leaves = std::move(new_leaves);
  tree = std::move(new_tree);
  return true;
}

}  // namespace

CallResult CompiledCallable::call_flat(const std::vector<Tensor>& leaves, const TreeDef& tree) const {
  return call_checked(leaves, tree, false);
}

namespace {
void return_captured(const detail::CallPlan& plan, const StagedGraph& staged, std::vector<Tensor>& results) {
  // A result that is a captured tensor the function does not write, or a
  // view of one (`return state;`, `return state[1];`), is that tensor (that
  // view of it, eager's strides), as eagerly: not the graph's copy of the
  // baked-in constant (the same contents: check_captured hashed it).
  for (const auto& cr : plan.captured_results) {
    if (cr.result >= results.size()) continue;
    Tensor t = staged.captured[cr.captured].source;
    for (const auto& [op, attrs] : cr.chain) t = detail::eager_execute(op, std::span<const Tensor>(&t, 1), attrs);
    results[cr.result] = std::move(t);
  }
}
}  // namespace

CallResult CompiledCallable::call_checked(detail::TensorRefs leaves, const TreeDef& tree, bool fixed_tree) const {
  // Nested tracing: called while a function is traced, the compiled graph is
  // inlined into that trace (as jax.jit inside jax.jit) rather than run.
  RealizationContext& ctx = current_realization_context();
  // (the common eager context first: one type compare, no dynamic_cast)
  const bool eager_ctx = typeid(ctx) == typeid(EagerRealizationContext);
  auto* outer = eager_ctx ? nullptr : dynamic_cast<GraphRealizationContext*>(&ctx);
  if (!eager_ctx && !outer && dynamic_cast<LazyRealizationContext*>(&ctx)) {
    // In a lazy scope the call runs now, as eagerly: its lazy arguments are
    // realized first (the scope's recorded ops up to them run), and its
    // results are realized tensors the scope then records as sources.
    detail::EagerGuard eager;
    return call_checked(leaves, tree, fixed_tree);
  }
  const auto& want = staged_.in_layouts;
  if (outer) {
    // A jit runtime number of the outer trace for a 0-d parameter: a 0-d
    // tensor of the parameter's dtype from its exact value, as a number
    // passed at the top level (numbers_as_tensors; trace/weak_scalar.h).
    std::vector<Tensor> conv;
    for (size_t i = 0; i < leaves.size() && i < want.size(); ++i)
      if (auto k = detail::weak_scalar_kind(leaves[i]); k && want[i].shape.empty()) {
        if (conv.empty()) conv = leaves.to_vector();
        if (promote_with_scalar(want[i].dtype, *k) != want[i].dtype)
          throw ValueError("compiled call inside a trace: argument " + arg_path(tree.leaf_paths(), i) +
                           ": a number (a jit runtime number) for a 0-d " + std::string(name(want[i].dtype)) +
                           " parameter would change its dtype; pass a 0-d tensor (cast it to " +
                           std::string(name(want[i].dtype)) + ")");
        conv[i] = detail::weak_cast(leaves[i], want[i].dtype, OpId::Cast);
      }
    if (!conv.empty()) return call_checked(conv, tree, fixed_tree);
  }
  std::atomic<const TreeDef*>& seen = call_plan_->fixed_in_tree;
  if (!(fixed_tree && seen.load(std::memory_order_relaxed) == &tree)) {
    if (!(tree == staged_.in_tree)) {
      // A number for a 0-d tensor parameter: a 0-d tensor of its dtype (as jit does).
      std::vector<Tensor> l2 = leaves.to_vector();
      TreeDef t2 = tree;
      if (numbers_as_tensors(staged_, l2, t2)) return call_flat(l2, t2);
      if (tree.kind == TreeDef::Kind::tuple && staged_.in_tree.kind == TreeDef::Kind::tuple &&
          tree.children.size() != staged_.in_tree.children.size())
        throw ValueError("compiled call: expected " + std::to_string(staged_.in_tree.children.size()) +
                         " positional argument(s), got " + std::to_string(tree.children.size()));
      throw_tree_mismatch(staged_.in_tree, tree);
    }
    if (fixed_tree) seen.store(&tree, std::memory_order_relaxed);  // static storage: valid for the run
  }
  // leaf paths (strings) only for an error message
  auto path = [&](size_t i) { return arg_path(tree.leaf_paths(), i); };
  for (size_t i = 0; i < leaves.size(); ++i) {
    const Tensor& t = leaves[i];
    if (!t.defined()) throw ValueError("compiled call: argument " + path(i) + ": an undefined tensor");
    if (!layout_matches(t, want[i], !outer))  // a traced value has no strides yet
      throw ValueError("compiled call: argument " + path(i) + ": expected " + layout_str(want[i]) + ", got " +
                       layout_str(t.layout()) +
                       (layout_matches(t, want[i], false)
                            ? " (the stride class is part of what a CompiledCallable is compiled for: compile for "
                              "this layout, pass a tensor of the expected one, or use jit(fn), which compiles once "
                              "per layout)"
                            : " (a CompiledCallable runs the layouts it was compiled for: compile for this one, or "
                              "use jit(fn), which compiles once per layout)"));
  }
  if (outer) return inline_call(*outer, leaves);
  // jit's runtime numbers that met a narrower integer tensor (trace/weak_scalar.h).
  for (const StagedGraph::NumberCheck& c : staged_.number_checks)
    if (!detail::weak_number_fits(leaves[c.leaf], c.dtype))
      detail::check_weak_number(leaves[c.leaf], c.dtype, c.op, path(c.leaf));
  check_captured();
  check_aliasing(*this, leaves, "compiled call");
  CallResult r;
  // A result eager makes new is new here too: the compiled graph copies one
  // the optimiser reduced to an argument or weight (jit/fresh_results.h).
  r.leaves = run_model(leaves, true);  // as given: op steps see eager's layouts; fused steps make operands contiguous
  r.tree = call_plan_->out_tree;
  if (!staged_.writes.empty()) write_back(r.leaves, leaves);
  return_captured(*call_plan_, staged_, r.leaves);
  return r;
}

void CompiledCallable::write_back(std::vector<Tensor>& results, detail::TensorRefs args) const {
  const size_t first = results.size() - staged_.writes.size();
  auto dst = [&](size_t k) { return write_destination(staged_.writes[k], counters_->written_weights[k], args); };
  // A result that is (a view of) a tensor about to be written keeps the value
  // it had in the call (a view of an argument returned before the write, or
  // a result computed into the destination's memory), except the results
  // that are the written tensor itself (set below).
  const auto& written = call_plan_->written_results;
  const auto& views = call_plan_->views_of_written;
  for (size_t i = 0, wi = 0, vi = 0; i < first; ++i) {
    while (wi < written.size() && written[wi].first < i) ++wi;
    if (wi < written.size() && written[wi].first == i) continue;
    while (vi < views.size() && views[vi].result < i) ++vi;
    if (vi < views.size() && views[vi].result == i && dst(views[vi].write)) continue;
    for (size_t k = 0; k < staged_.writes.size(); ++k)
      if (const Tensor* d = dst(k); d && may_share_memory(results[i], *d)) {
        results[i] = results[i].clone();
        break;
      }
  }
  for (size_t k = 0; k < staged_.writes.size(); ++k) {
    const WriteBack& w = staged_.writes[k];
    const Tensor& value = results[first + k];
    if (const Tensor* d = dst(k);
        d && d->is_realized() && value.data_ptr() == d->data_ptr() && value.strides() == d->strides()) {
      ++counters_->in_place;  // computed straight into the destination
      d->buffer().bump_version();
      continue;
    }
    ++counters_->copied;
    counters_->bytes += value.numel() * static_cast<int64_t>(value.itemsize());
    if (w.argument >= 0) {
      args[static_cast<size_t>(w.argument)].copy_(value);
    } else {
      const Tensor* d = dst(k);
      if (!d)
        throw ValueError("compiled call: mutable weight '" + w.weight + "' is not bound, so its update cannot be "
                         "written back (pass it in the weights registry)");
      d->copy_(value);
    }
  }
  // A result that is a written value is the tensor written (`x.exp_();
  // return x;` returns x), as eagerly: the argument as the caller passed it,
  // or the bound mutable weight.
  for (const auto& [i, k] : written)
    if (i < first)
      if (const Tensor* d = dst(k)) results[i] = *d;
  // A result that is a view of a written value is that view of the tensor
  // written (`x.mul_(2); return x[1];`), as eagerly: its view ops replayed on
  // the caller's tensor after the write-back (any layout: the eager view
  // rules give the strides, and a reshape eager would copy copies here too).
  for (const auto& vw : views)
    if (vw.result < first)
      if (const Tensor* d = dst(vw.write)) {
        Tensor t = *d;
        for (const auto& [op, attrs] : vw.chain) t = detail::eager_execute(op, std::span<const Tensor>(&t, 1), attrs);
        results[vw.result] = std::move(t);
      }
  results.resize(first);
}

std::vector<Tensor> CompiledCallable::execute_raw(std::span<const Tensor> inputs) const {
  check_aliasing(*this, inputs, "execute_raw");
  std::vector<Tensor> out = run_model(inputs);
  if (!staged_.writes.empty()) write_back(out, inputs);
  return out;
}

std::vector<Buffer> CompiledCallable::execute_raw(const std::vector<Buffer>& buffers) const {
  const auto& want = staged_.in_layouts;
  if (buffers.size() != want.size())
    throw ValueError("execute_raw: expected " + std::to_string(want.size()) + " buffers, got " +
                     std::to_string(buffers.size()));
  std::vector<Tensor> in;
  in.reserve(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    const TensorType t(want[i].dtype, want[i].shape, want[i].device);
    const size_t need = static_cast<size_t>(checked_numel(want[i].shape)) * size_of(want[i].dtype);
    const size_t got = buffers[i] ? buffers[i].nbytes() : 0;
    auto where = [&] {
      return "execute_raw: buffer " + std::to_string(i) + " (argument " + arg_path(staged_.in_tree.leaf_paths(), i) +
             ", " + t.str() + ")";
    };
    if (got < need)
      throw ValueError(where() + ": expected at least " + std::to_string(need) + " bytes (a contiguous " + t.str() +
                       "), got " + (buffers[i] ? "a buffer of " + std::to_string(got) + " bytes"
                                               : std::string("an empty Buffer")) +
                       "; pass one buffer per in_layouts() entry, in order, each holding that tensor contiguously");
    if (buffers[i] && !(buffers[i].device() == want[i].device))
      throw DeviceError(where() + ": expected a buffer on " + want[i].device.str() + ", got one on " +
                        buffers[i].device().str());
    in.emplace_back(buffers[i], want[i].dtype, want[i].shape, contiguous_strides(want[i].shape), 0);
  }
  check_aliasing(*this, in, "execute_raw");
  std::vector<Tensor> out = run_model(in);
  if (!staged_.writes.empty()) write_back(out, in);
  std::vector<Buffer> r;
  for (auto& t : out) {
    Tensor c = t.contiguous();
    // A view into a larger storage (e.g. an output aliasing part of an input) gets its own buffer.
    if (c.offset() != 0 || c.buffer().nbytes() != static_cast<size_t>(c.numel()) * c.itemsize()) c = c.clone();
    r.push_back(c.buffer());
  }
  return r;
}

}  // namespace kiln
