#include "pytree.h"

#include <string_view>

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
  if (def.kind != TreeDef::Kind::leaf && path.empty() && def.num_leaves() > 1) {
    // The whole value asked for as one Tensor (`Tensor y = run(x);` on a call
    // that returned a tuple): name the count and the conversion to use.
    std::string hint = "as<...>() with a type of that structure";
    bool flat = def.kind == TreeDef::Kind::tuple;
    for (const TreeDef& c : def.children) flat = flat && c.kind == TreeDef::Kind::leaf;
    if (flat) {
      hint = "as<std::tuple<";
      for (size_t i = 0; i < def.children.size(); ++i) hint += i ? ", Tensor" : "Tensor";
      hint += ">>()";
    }
    tree_error("expected a single tensor, got " + def.str() + ": the function returned " +
               std::to_string(def.num_leaves()) + " tensors; convert the result with " + hint +
               " (or read its leaves)");
  }
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

namespace {
// `s` with `"` and `\` escaped, and control bytes (tab, newline, ...) as
// \t, \n, \r or \xHH, so a printed tree shows where each string ends.
std::string escaped(std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  std::string r;
  r.reserve(s.size());
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': r += "\\\""; break;
      case '\\': r += "\\\\"; break;
      case '\n': r += "\\n"; break;
      case '\t': r += "\\t"; break;
      case '\r': r += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          r += "\\x";
          r += hex[u >> 4];
          r += hex[u & 15];
        } else {
          r += ch;
        }
    }
  }
  return r;
}

// A dict key or field name: bare when it is made of letters, digits, `_`,
// `-` and `.` only (`{alpha: T}`), else quoted and escaped (`{"a, b": T}`).
std::string key_str(const std::string& k) {
  bool bare = !k.empty();
  for (const char ch : k)
    bare = bare && ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                    ch == '-' || ch == '.');
  return bare ? k : "\"" + escaped(k) + "\"";
}

// A static leaf's printed form: a string (kept quoted in `value`) quoted
// with its contents escaped; other values (numbers, names) as they are.
std::string static_str(const std::string& v) {
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"')
    return "\"" + escaped(std::string_view(v).substr(1, v.size() - 2)) + "\"";
  return escaped(v);
}
}  // namespace

std::string TreeDef::str() const {
  switch (kind) {
    case Kind::leaf: return "T";
    case Kind::static_leaf: return static_str(value);
    case Kind::none: return "None";
    default: break;
  }
  std::string open =
      kind == Kind::tuple ? "(" : kind == Kind::list ? "[" : kind == Kind::dict ? "{" : escaped(value) + "{";
  std::string close = kind == Kind::tuple ? ")" : kind == Kind::list ? "]" : "}";
  std::string r = open;
  for (size_t i = 0; i < children.size(); ++i) {
    if (i) r += ", ";
    if ((kind == Kind::dict || kind == Kind::record) && i < keys.size()) r += key_str(keys[i]) + ": ";
    r += children[i].str();
  }
  if (kind == Kind::tuple && children.size() == 1) r += ",";
  return r + close;
}

}  // namespace kiln
