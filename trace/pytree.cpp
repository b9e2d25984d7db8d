#include "pytree.h"

namespace kiln {

namespace detail {

std::string LeafSink::path_str() const {
  std::string r;
  for (const auto& p : path) r = join_path(r, p);
  return r;
}

const Tensor& LeafSource::take() {
  if (next >= n) tree_error("tree_unflatten: the tree needs more tensor leaves than the " + std::to_string(n) + " given");
  return leaves[next++];
}

void tree_error(const std::string& msg) { throw ValueError("pytree: " + msg); }

std::string join_path(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

void PyTree<Tensor>::flatten(const Tensor& v, TreeDef& def, LeafSink& sink) {
  def.kind = TreeDef::Kind::leaf;
  if (sink.tensors) {
    sink.tensors->push_back(v);
  } else {
    if (!v.defined()) tree_error("at '" + sink.path_str() + "': an undefined tensor cannot be a spec");
    sink.layouts->push_back(v.layout());
  }
}

Tensor PyTree<Tensor>::unflatten(const TreeDef& def, LeafSource& src, const std::string& path) {
  if (def.kind != TreeDef::Kind::leaf) tree_error("at '" + path + "': expected a tensor, got " + def.str());
  return src.take();
}

void PyTree<TensorLayout>::flatten(const TensorLayout& v, TreeDef& def, LeafSink& sink) {
  def.kind = TreeDef::Kind::leaf;
  if (sink.layouts) sink.layouts->push_back(v);
  else tree_error("at '" + sink.path_str() + "': a TensorLayout is a spec, not a tensor value");
}

}  // namespace detail

size_t TreeDef::num_leaves() const {
  if (kind == Kind::leaf) return 1;
  size_t n = 0;
  for (const auto& c : children) n += c.num_leaves();
  return n;
}

namespace {
void collect_paths(const TreeDef& d, const std::string& path, std::vector<std::string>& out) {
  if (d.kind == TreeDef::Kind::leaf) {
    out.push_back(path);
    return;
  }
  for (size_t i = 0; i < d.children.size(); ++i) {
    std::string k = (d.kind == TreeDef::Kind::dict || d.kind == TreeDef::Kind::record) ? d.keys[i] : std::to_string(i);
    collect_paths(d.children[i], detail::join_path(path, k), out);
  }
}
}  // namespace

std::vector<std::string> TreeDef::leaf_paths() const {
  std::vector<std::string> r;
  collect_paths(*this, "", r);
  return r;
}

std::string TreeDef::str() const {
  switch (kind) {
    case Kind::leaf: return "T";
    case Kind::static_leaf: return value;
    case Kind::none: return "None";
    default: break;
  }
  std::string open = kind == Kind::tuple ? "(" : kind == Kind::list ? "[" : kind == Kind::dict ? "{" : value + "{";
  std::string close = kind == Kind::tuple ? ")" : kind == Kind::list ? "]" : "}";
  std::string r = open;
  for (size_t i = 0; i < children.size(); ++i) {
    if (i) r += ", ";
    if (kind == Kind::dict || kind == Kind::record) r += keys[i] + ": ";
    r += children[i].str();
  }
  if (kind == Kind::tuple && children.size() == 1) r += ",";
  return r + close;
}

}  // namespace kiln
