// kiln: printing for the interactive prompts (kiln-repl on Cling, clang-repl).
// Not part of <kiln/kiln.h>: the REPL includes it at startup.
//
// kiln::repl::to_repl_string(x) gives the text a prompt shows for x: a header
// line, then the value as kiln's operator<< writes it. Overloads:
//   Tensor          "float32, [2, 3], cpu" then the numpy-style values
//                   (summarised for large tensors, as operator<< does)
//   TensorLayout    "TensorLayout(float32, [2, 3], cpu, contiguous)"
//   CallResult      each result tensor as above ("result i of n:" before each when several)
//   DType, Device   their names ("float32", "cpu")
//   StagedGraph     "StagedGraph <signature>" then the graph's IR (StagedGraph::ir())
//   CompiledCallable "CompiledCallable <signature>"
//   Timing          timeit()'s result: "median 41.2 us, best 39.8 us (2048 calls in 0.10 s)"
//   JitStats        "JitStats{hits: 1, misses: 1, compiles: 1, evictions: 0, entries: 1, code_bytes: 96}"
// A signature reads "(float32[2, 3] cpu, float32[3] cpu) -> float32[2, 3] cpu":
// the tensor leaves in flattening order; the trees are printed only when they
// are not a flat tuple of tensors.
// kiln::repl::show(x) writes to_repl_string(x) and a newline to std::cout (what
// clang-repl users call: it prints no values by itself). Under Cling
// (__CLING__), cling::printValue overloads make a bare expression at the
// prompt print the same text.
#pragma once
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <kiln/kiln.h>
#include <kiln/timeit.h>

namespace kiln::repl {

/// "float32[2, 3] cpu" (the form kiln's error messages use).
inline std::string layout_brief(const TensorLayout& l) {
  std::ostringstream os;
  os << l.dtype << shape_str(l.shape) << " " << l.device;
  return os.str();
}

/// "(a, b) -> c": the leaves of one side of a signature.
inline std::string leaves_brief(const std::vector<TensorLayout>& ls, bool parens) {
  std::string s = parens || ls.size() != 1 ? "(" : "";
  for (size_t i = 0; i < ls.size(); ++i) s += (i ? ", " : "") + layout_brief(ls[i]);
  return s + (parens || ls.size() != 1 ? ")" : "");
}

/// The signature of a staged or compiled function (see the file comment).
inline std::string signature_brief(const std::vector<TensorLayout>& in, const TreeDef& in_tree,
                                   const std::vector<TensorLayout>& out, const TreeDef& out_tree) {
  std::string s = leaves_brief(in, true) + " -> " + leaves_brief(out, false);
  // Static arguments and nested results live in the trees only: show them then.
  const bool flat_in = in_tree.kind == TreeDef::Kind::tuple && [&] {
    for (const auto& c : in_tree.children)
      if (c.kind != TreeDef::Kind::leaf) return false;
    return true;
  }();
  if (!flat_in || out_tree.kind != TreeDef::Kind::leaf)
    s += "  [arguments " + in_tree.str() + ", result " + out_tree.str() + "]";
  return s;
}

inline std::string to_repl_string(const Tensor& t) {
  if (!t.defined()) return "undefined tensor";
  std::ostringstream os;
  os << t.dtype() << ", " << shape_str(t.shape()) << ", " << t.device() << "\n" << t;
  return os.str();
}
inline std::string to_repl_string(const TensorLayout& l) {
  std::ostringstream os;
  os << l;
  return os.str();
}
inline std::string to_repl_string(const CallResult& r) {
  if (r.leaves.size() == 1) return to_repl_string(r.leaves[0]);
  std::string s = "CallResult of " + std::to_string(r.leaves.size()) + " tensors " + (r.tree ? r.tree->str() : TreeDef{}.str());
  for (size_t i = 0; i < r.leaves.size(); ++i)
    s += "\nresult " + std::to_string(i) + ": " + to_repl_string(r.leaves[i]);
  return s;
}
inline std::string to_repl_string(DType d) { return std::string(name(d)); }
inline std::string to_repl_string(Device d) { return d.str(); }
inline std::string to_repl_string(const StagedGraph& s) {
  std::string ir = s.graph ? s.ir() : std::string("(no graph)");
  if (!ir.empty() && ir.back() == '\n') ir.pop_back();
  return "StagedGraph " + signature_brief(s.in_layouts, s.in_tree, s.out_layouts, s.out_tree) + "\n" + ir;
}
inline std::string to_repl_string(const CompiledCallable& c) {
  return "CompiledCallable " + signature_brief(c.in_layouts(), c.in_tree(), c.out_layouts(), c.out_tree());
}
inline std::string to_repl_string(const JitStats& s) {
  return "JitStats{hits: " + std::to_string(s.hits) + ", misses: " + std::to_string(s.misses) +
         ", compiles: " + std::to_string(s.compiles) + ", evictions: " + std::to_string(s.evictions) +
         ", entries: " + std::to_string(s.entries) + ", code_bytes: " + std::to_string(s.code_bytes) + "}";
}

inline std::string to_repl_string(const Timing& t) { return t.str(); }
/// Anything else that has an operator<< (numbers, strings, ...); bools as true/false.
template <class T>
  requires requires(std::ostream& os, const T& v) { os << v; }
std::string to_repl_string(const T& x) {
  std::ostringstream os;
  os << std::boolalpha << x;
  return os.str();
}

/// Prints x as the prompt would (to_repl_string) and a newline, to std::cout.
template <class T>
void show(const T& x) {
  std::cout << to_repl_string(x) << std::endl;
}

}  // namespace kiln::repl

#ifdef __CLING__
// Cling's value printer calls cling::printValue(&value) for a bare expression.
namespace cling {
inline std::string printValue(const kiln::Tensor* x) { return kiln::repl::to_repl_string(*x); }
inline std::string printValue(const kiln::TensorLayout* x) { return kiln::repl::to_repl_string(*x); }
inline std::string printValue(const kiln::CallResult* x) { return kiln::repl::to_repl_string(*x); }
inline std::string printValue(const kiln::DType* x) { return kiln::repl::to_repl_string(*x); }
inline std::string printValue(const kiln::Device* x) { return kiln::repl::to_repl_string(*x); }
inline std::string printValue(const kiln::StagedGraph* x) { return kiln::repl::to_repl_string(*x); }
inline std::string printValue(const kiln::CompiledCallable* x) { return kiln::repl::to_repl_string(*x); }
inline std::string printValue(const kiln::JitStats* x) { return kiln::repl::to_repl_string(*x); }
inline std::string printValue(const kiln::Timing* x) { return kiln::repl::to_repl_string(*x); }
}  // namespace cling
#endif
