#include "compiled_callable.h"

#include "plan.h"

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
}  // namespace

Tensor CallResult::tensor() const {
  if (leaves.size() != 1)
    throw ValueError("CallResult::tensor: the call returned " + std::to_string(leaves.size()) +
                     " tensors; use as<...>() with the result type");
  return leaves[0];
}

CompiledCallable::CompiledCallable(StagedGraph staged, std::map<std::string, Tensor> weights,
                                   std::shared_ptr<InferenceSession> session)
    : staged_(std::move(staged)),
      weights_(std::move(weights)),
      session_(session ? std::move(session) : InferenceSession::default_session()) {
  if (!staged_.graph) throw ValueError("CompiledCallable: the staged graph is empty");
  auto artifact = engine::compile_graph(staged_.graph, *session_);
  model_ = std::make_shared<engine::Model>(artifact, weights_);
  for (const auto& l : staged_.in_layouts) needs_copy_.push_back(!l.is_contiguous());
}

void CompiledCallable::check_captured() const {
  for (size_t i = 0; i < staged_.captured.size(); ++i) {
    const CapturedConstant& c = staged_.captured[i];
    if (content_hash(c.source) != c.hash)
      throw ValueError("compiled call: captured constant " + std::to_string(i) + " (" +
                       TensorType(c.source.dtype(), c.source.shape(), c.source.device()).str() +
                       ", graph value %" + std::to_string(c.value) +
                       ") changed since the function was traced; its old value is baked into the compiled code. "
                       "Pass the tensor as an argument, or bind it as a named weight (CompileOptions::weights), "
                       "or compile again");
  }
}

CallResult CompiledCallable::call_flat(const std::vector<Tensor>& leaves, const TreeDef& tree) const {
  const auto& want = staged_.in_layouts;
  if (!(tree == staged_.in_tree)) {
    if (tree.kind == TreeDef::Kind::tuple && staged_.in_tree.kind == TreeDef::Kind::tuple &&
        tree.children.size() != staged_.in_tree.children.size())
      throw ValueError("compiled call: expected " + std::to_string(staged_.in_tree.children.size()) +
                       " positional argument(s), got " + std::to_string(tree.children.size()));
    throw ValueError("compiled call: tree structure mismatch: expected " + staged_.in_tree.str() + ", got " +
                     tree.str());
  }
  const auto paths = tree.leaf_paths();
  std::vector<Tensor> inputs(leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) {
    const Tensor& t = leaves[i];
    if (!t.defined()) throw ValueError("argument " + arg_path(paths, i) + ": an undefined tensor");
    const TensorLayout got = t.layout();
    const TensorLayout& w = want[i];
    if (got.dtype != w.dtype || got.shape != w.shape || !(got.device == w.device) ||
        got.stride_class != w.stride_class)
      throw ValueError("argument " + arg_path(paths, i) + ": expected " + layout_str(w) + ", got " + layout_str(got));
    inputs[i] = needs_copy_[i] ? t.contiguous() : t;
  }
  check_captured();
  CallResult r;
  r.leaves = model_->execute(inputs);
  r.tree = staged_.out_tree;
  return r;
}

std::vector<Tensor> CompiledCallable::execute_raw(std::span<const Tensor> inputs) const {
  return model_->execute(inputs);
}

std::vector<Buffer> CompiledCallable::execute_raw(const std::vector<Buffer>& buffers) const {
  const auto& want = staged_.in_layouts;
  if (buffers.size() != want.size())
    throw ValueError("execute_raw: expected " + std::to_string(want.size()) + " buffers, got " +
                     std::to_string(buffers.size()));
  std::vector<Tensor> in;
  in.reserve(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i)
    in.emplace_back(buffers[i], want[i].dtype, want[i].shape, contiguous_strides(want[i].shape), 0);
  std::vector<Tensor> out = model_->execute(in);
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
