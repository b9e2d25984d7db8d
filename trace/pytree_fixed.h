// kiln: pytrees whose structure is a property of the C++ type alone.
//
// A Tensor, and std::tuple / std::pair / std::array / KILN_PYTREE structs
// made only of such types, flatten to the same TreeDef whatever their value:
// no static (non-tensor) leaf, no container whose length is known only at
// run time (std::vector, std::map, std::optional). For those types
// (FixedTree<T>::value) the TreeDef is built once per type (fixed_treedef<T>,
// a function-local static: its address identifies the structure for the
// whole run), the tensor leaves are gathered without building a TreeDef or
// any path string, and a result is rebuilt from its leaves by position
// (rebuild(p): p a `const Tensor*` copies the leaves, a `Tensor*` moves
// them out). gather(v, out) writes the leaves to `out`: a `Tensor*` gets
// copies of the handles, a `const Tensor**` their addresses in `v` (no
// handle copied: a compiled call reads its arguments where they are).
// This is what keeps a compiled call on struct arguments (a training step's
// parameters and momenta) free of per-call allocation and string work; the
// general pytree.h path stays for every other type and for error messages.
#pragma once
#include <array>
#include <cstddef>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "pytree.h"

namespace kiln::detail {

template <class T> struct FixedTree : std::false_type {
  static constexpr size_t leaves = 0;  // (so a container's count compiles; only used when value)
};

template <>
struct FixedTree<Tensor> : std::true_type {
  static constexpr size_t leaves = 1;
  static void build(TreeDef& d) { d.kind = TreeDef::Kind::leaf; }
  static void gather(const Tensor& v, Tensor*& out) { *out++ = v; }
  static void gather(const Tensor& v, const Tensor**& out) { *out++ = &v; }
  // P: const Tensor* (the leaves copied) or Tensor* (moved out)
  template <class P> static Tensor rebuild(P& in) { return std::move(*in++); }
};

template <class... Ts>
struct FixedTree<std::tuple<Ts...>> : std::bool_constant<(FixedTree<std::remove_cvref_t<Ts>>::value && ...)> {
  using T = std::tuple<Ts...>;
  static constexpr size_t leaves = (size_t{0} + ... + FixedTree<std::remove_cvref_t<Ts>>::leaves);
  static void build(TreeDef& d) {
    d.kind = TreeDef::Kind::tuple;
    d.children.resize(sizeof...(Ts));
    [[maybe_unused]] size_t i = 0;
    ((FixedTree<std::remove_cvref_t<Ts>>::build(d.children[i++])), ...);
  }
  template <class Out>
  static void gather(const T& v, Out*& out) {
    std::apply([&](const auto&... e) { (FixedTree<std::remove_cvref_t<decltype(e)>>::gather(e, out), ...); }, v);
  }
  template <class P> static T rebuild(P& in) {  // braced initialisation runs left to right
    return T{FixedTree<std::remove_cvref_t<Ts>>::rebuild(in)...};
  }
};

template <class A, class B>
struct FixedTree<std::pair<A, B>> : std::bool_constant<FixedTree<A>::value && FixedTree<B>::value> {
  static constexpr size_t leaves = FixedTree<A>::leaves + FixedTree<B>::leaves;
  static void build(TreeDef& d) { FixedTree<std::tuple<A, B>>::build(d); }
  template <class Out>
  static void gather(const std::pair<A, B>& v, Out*& out) {
    FixedTree<A>::gather(v.first, out);
    FixedTree<B>::gather(v.second, out);
  }
  template <class P> static std::pair<A, B> rebuild(P& in) {
    A a = FixedTree<A>::rebuild(in);
    return {std::move(a), FixedTree<B>::rebuild(in)};
  }
};

template <class E, size_t N>
struct FixedTree<std::array<E, N>> : std::bool_constant<FixedTree<E>::value> {
  static constexpr size_t leaves = N * FixedTree<E>::leaves;
  static void build(TreeDef& d) {
    d.kind = TreeDef::Kind::tuple;
    d.children.resize(N);
    for (auto& c : d.children) FixedTree<E>::build(c);
  }
  template <class Out>
  static void gather(const std::array<E, N>& v, Out*& out) {
    for (const E& e : v) FixedTree<E>::gather(e, out);
  }
  template <class P> static std::array<E, N> rebuild(P& in) {
    std::array<E, N> r;
    for (E& e : r) e = FixedTree<E>::rebuild(in);
    return r;
  }
};

template <class P> struct FieldType;
template <class C, class M> struct FieldType<std::pair<const char*, M C::*>> { using type = std::remove_cvref_t<M>; };

/// KILN_PYTREE structs: fixed when every field is.
template <class T>
  requires requires { PyTreeFields<T>::fields(); }
struct FixedTree<T> {
  using Fields = decltype(PyTreeFields<T>::fields());
  template <size_t I> using F = typename FieldType<std::tuple_element_t<I, Fields>>::type;
  template <size_t... I>
  static constexpr bool all(std::index_sequence<I...>) { return (FixedTree<F<I>>::value && ...); }
  template <size_t... I>
  static constexpr size_t count(std::index_sequence<I...>) {
    if constexpr (sizeof...(I) == 0) return 0;
    else return (FixedTree<F<I>>::leaves + ...);
  }
  using Seq = std::make_index_sequence<std::tuple_size_v<Fields>>;
  static constexpr bool value = all(Seq{});
  static constexpr size_t leaves = value ? count(Seq{}) : 0;
  static void build(TreeDef& d) {
    d.kind = TreeDef::Kind::record;
    d.value = PyTreeFields<T>::type_name();
    std::apply(
        [&](auto... f) {
          ((d.keys.push_back(f.first), d.children.emplace_back(),
            FixedTree<std::remove_cvref_t<decltype(std::declval<T>().*(f.second))>>::build(d.children.back())),
           ...);
        },
        PyTreeFields<T>::fields());
  }
  template <class Out>
  static void gather(const T& v, Out*& out) {
    std::apply([&](auto... f) { (FixedTree<std::remove_cvref_t<decltype(v.*(f.second))>>::gather(v.*(f.second), out), ...); },
               PyTreeFields<T>::fields());
  }
  template <class P> static T rebuild(P& in) {  // as PyTree<T>::unflatten: value-initialised, then field by field
    T r{};
    std::apply([&](auto... f) { ((r.*(f.second) = FixedTree<std::remove_cvref_t<decltype(r.*(f.second))>>::rebuild(in)), ...); },
               PyTreeFields<T>::fields());
    return r;
  }
};

template <class T> inline constexpr bool fixed_tree_v = FixedTree<std::remove_cvref_t<T>>::value;

/// The TreeDef every value of T flattens to (T must be fixed_tree_v), built
/// on first use and kept for the run; equal to tree_flatten(v).second.
template <class T>
const TreeDef& fixed_treedef() {
  static const TreeDef def = [] {
    TreeDef d;
    FixedTree<T>::build(d);
    return d;
  }();
  return def;
}

/// Whether `tree` is fixed_treedef<T>() (T must be fixed_tree_v): a full
/// compare the first time, then one pointer compare for the same tree
/// object (the last tree found equal is kept per thread, so its address
/// cannot be reused by another tree meanwhile). A compiled call's result
/// tree is one object shared by all its calls (CallResult::tree).
template <class T>
bool is_fixed_treedef(const std::shared_ptr<const TreeDef>& tree) {
  thread_local std::shared_ptr<const TreeDef> seen;
  if (tree == seen) return tree != nullptr;
  if (!tree || !(*tree == fixed_treedef<T>())) return false;
  seen = tree;
  return true;
}

/// The tensor leaves of `v` in flattening order (tree_flatten(v).first),
/// with no TreeDef built.
template <class T>
std::array<Tensor, FixedTree<T>::leaves> fixed_leaves(const T& v) {
  std::array<Tensor, FixedTree<T>::leaves> out;
  Tensor* p = out.data();
  FixedTree<T>::gather(v, p);
  return out;
}

}  // namespace kiln::detail
