// kiln: pytrees. Nested C++ values (std::tuple, std::pair, std::vector,
// std::array, std::map<std::string, T>, std::optional and structs that opt in
// with KILN_PYTREE) are flattened into tensor leaves plus a TreeDef that
// records the structure. Non-tensor leaves (numbers, strings, enums, DType,
// Device) are static: their value is part of the TreeDef, so it is part of a
// compiled function's cache key. Each leaf has a path such as `0.1.hi`
// (tuple/vector index, map key or field name), used in error messages.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../tensor/tensor.h"

namespace kiln {

/// The structure of a flattened value.
struct TreeDef {
  enum class Kind : uint8_t {
    leaf,         ///< a Tensor (or TensorLayout spec)
    static_leaf,  ///< a non-tensor value, kept in `value`
    tuple,        ///< std::tuple / std::pair / std::array
    list,         ///< std::vector
    dict,         ///< std::map<std::string, T>, keys in `keys` (sorted)
    none,         ///< empty std::optional
    record,       ///< KILN_PYTREE struct: type name in `value`, fields in `keys`
  };
  Kind kind = Kind::leaf;
  std::string value;
  std::vector<std::string> keys;
  std::vector<TreeDef> children;

  /// Number of tensor leaves.
  size_t num_leaves() const;
  /// Paths of the tensor leaves in flattening order ("0.1.hi"; "" for a bare leaf).
  std::vector<std::string> leaf_paths() const;
  /// A printed form, e.g. `(T, [T, T], {a: T, b: 3}, Params{w: T, b: T}, None)`.
  std::string str() const;
  friend bool operator==(const TreeDef&, const TreeDef&) = default;
};

/// A tensor leaf's spec: its layout (and the path, for messages).
namespace detail {

struct LeafSink {
  std::vector<Tensor>* tensors = nullptr;         // when flattening tensors
  std::vector<TensorLayout>* layouts = nullptr;   // when flattening specs
  std::vector<std::string> path;                  // current path
  std::string path_str() const;
};

/// Supplies tensor leaves in order while rebuilding.
struct LeafSource {
  const Tensor* leaves = nullptr;
  size_t n = 0, next = 0;
  const Tensor& take();
};

template <class T> struct PyTree;
template <class T> struct PyTreeFields;  // specialised by KILN_PYTREE

template <class T> inline constexpr bool is_static_leaf_v =
    std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::string> || std::is_same_v<T, Device>;

template <class T>
std::string static_repr(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) return "\"" + v + "\"";
  else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
  else if constexpr (std::is_same_v<T, DType>) return std::string(name(v));
  else if constexpr (std::is_same_v<T, Device>) return v.str();
  else if constexpr (std::is_enum_v<T>) return std::to_string(static_cast<long long>(v));
  // One-byte integers (int8_t, uint8_t, char) as numbers, never as raw bytes.
  else if constexpr (std::is_same_v<T, char> || std::is_same_v<T, signed char> || std::is_same_v<T, unsigned char>)
    return std::to_string(static_cast<int>(v));
  else {
    std::ostringstream os;
    os.precision(17);
    os << v;
    return os.str();
  }
}

template <class T>
T static_parse(const std::string& s) {
  if constexpr (std::is_same_v<T, std::string>) return s.size() >= 2 ? s.substr(1, s.size() - 2) : s;
  else if constexpr (std::is_same_v<T, bool>) return s == "true";
  else if constexpr (std::is_same_v<T, DType>) return dtype_from_name(s);
  else if constexpr (std::is_same_v<T, Device>) return Device::parse(s);
  else if constexpr (std::is_enum_v<T>) return static_cast<T>(std::stoll(s));
  else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(std::stod(s));
  else return static_cast<T>(std::stoll(s));
}

template <class T>
void flatten_node(const T& v, TreeDef& def, LeafSink& sink) {
  PyTree<T>::flatten(v, def, sink);
}

template <class Out, class In>
Out rebuild_node(const In& in, LeafSource& src) {
  return PyTree<Out>::template rebuild<In>(in, src);
}

template <class T>
T unflatten_node(const TreeDef& def, LeafSource& src, const std::string& path) {
  return PyTree<T>::unflatten(def, src, path);
}

[[noreturn]] void tree_error(const std::string& msg);
std::string join_path(const std::string& a, const std::string& b);

template <class T>
struct PyTree {
  static_assert(is_static_leaf_v<T>,
                "kiln pytree: this type is neither a Tensor, a container kiln knows, nor a static value; "
                "opt a struct in with KILN_PYTREE(Type, field, ...)");
  static void flatten(const T& v, TreeDef& def, LeafSink&) {
    def.kind = TreeDef::Kind::static_leaf;
    def.value = static_repr(v);
  }
  template <class In>
  static T rebuild(const In& in, LeafSource&) {
    if constexpr (std::is_convertible_v<In, T>) return static_cast<T>(in);
    else tree_error("expected a static value, got a tensor");
  }
  static T unflatten(const TreeDef& def, LeafSource&, const std::string& path) {
    if (def.kind == TreeDef::Kind::leaf)
      tree_error("at '" + (path.empty() ? std::string("the result") : path) +
                 "': a tensor cannot convert to this non-tensor type (convert to kiln::Tensor, or use .tensor() or "
                 "as<...>() with tensor types)");
    if (def.kind != TreeDef::Kind::static_leaf) tree_error("at '" + path + "': expected a static value");
    return static_parse<T>(def.value);
  }
};

template <>
struct PyTree<Tensor> {
  static void flatten(const Tensor& v, TreeDef& def, LeafSink& sink);
  template <class In>
  static Tensor rebuild(const In&, LeafSource& src) {
    static_assert(std::is_base_of_v<Tensor, In> || std::is_same_v<In, TensorLayout>,
                  "kiln pytree: a Tensor argument needs a TensorLayout (or example Tensor) spec");
    return src.take();
  }
  static Tensor unflatten(const TreeDef& def, LeafSource& src, const std::string& path);
};

/// An IndexedTensor (`x[i]`, `x.index({...})`) is a tensor leaf: its value
/// goes in or out; rebuilt as an argument it is its own base (an assignment
/// to it writes into it).
template <>
struct PyTree<IndexedTensor> {
  static void flatten(const IndexedTensor& v, TreeDef& def, LeafSink& sink) { PyTree<Tensor>::flatten(v, def, sink); }
  template <class In>
  static IndexedTensor rebuild(const In& in, LeafSource& src) {
    return IndexedTensor::whole(PyTree<Tensor>::rebuild<In>(in, src));
  }
  static IndexedTensor unflatten(const TreeDef& def, LeafSource& src, const std::string& path) {
    return IndexedTensor::whole(PyTree<Tensor>::unflatten(def, src, path));
  }
};

template <>
struct PyTree<TensorLayout> {
  static void flatten(const TensorLayout& v, TreeDef& def, LeafSink& sink);
};

template <class... Ts>
struct PyTree<std::tuple<Ts...>> {
  using T = std::tuple<Ts...>;
  static void flatten(const T& v, TreeDef& def, LeafSink& sink) {
    def.kind = TreeDef::Kind::tuple;
    def.children.resize(sizeof...(Ts));
    [&]<size_t... I>(std::index_sequence<I...>) {
      ((sink.path.push_back(std::to_string(I)), flatten_node(std::get<I>(v), def.children[I], sink),
        sink.path.pop_back()),
       ...);
    }(std::index_sequence_for<Ts...>{});
  }
  template <class In>
  static T rebuild(const In& in, LeafSource& src) {
    static_assert(std::tuple_size_v<In> == sizeof...(Ts), "kiln pytree: tuple arity of spec and argument differ");
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return T{rebuild_node<Ts>(std::get<I>(in), src)...};
    }(std::index_sequence_for<Ts...>{});
  }
  static T unflatten(const TreeDef& def, LeafSource& src, const std::string& path) {
    if (def.kind != TreeDef::Kind::tuple || def.children.size() != sizeof...(Ts))
      tree_error("at '" + path + "': expected a tuple of " + std::to_string(sizeof...(Ts)) + ", got " + def.str());
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return T{unflatten_node<Ts>(def.children[I], src, join_path(path, std::to_string(I)))...};
    }(std::index_sequence_for<Ts...>{});
  }
};

template <class A, class B>
struct PyTree<std::pair<A, B>> {
  using T = std::pair<A, B>;
  static void flatten(const T& v, TreeDef& def, LeafSink& sink) {
    PyTree<std::tuple<A, B>>::flatten(std::tuple<A, B>(v.first, v.second), def, sink);
  }
  template <class In>
  static T rebuild(const In& in, LeafSource& src) {
    return T{rebuild_node<A>(std::get<0>(in), src), rebuild_node<B>(std::get<1>(in), src)};
  }
  static T unflatten(const TreeDef& def, LeafSource& src, const std::string& path) {
    auto t = PyTree<std::tuple<A, B>>::unflatten(def, src, path);
    return T{std::get<0>(t), std::get<1>(t)};
  }
};

template <class E, size_t N>
struct PyTree<std::array<E, N>> {
  using T = std::array<E, N>;
  static void flatten(const T& v, TreeDef& def, LeafSink& sink) {
    def.kind = TreeDef::Kind::tuple;
    def.children.resize(N);
    for (size_t i = 0; i < N; ++i) {
      sink.path.push_back(std::to_string(i));
      flatten_node(v[i], def.children[i], sink);
      sink.path.pop_back();
    }
  }
  template <class In>
  static T rebuild(const In& in, LeafSource& src) {
    T r;
    for (size_t i = 0; i < N; ++i) r[i] = rebuild_node<E>(in[i], src);
    return r;
  }
  static T unflatten(const TreeDef& def, LeafSource& src, const std::string& path) {
    if (def.kind != TreeDef::Kind::tuple || def.children.size() != N)
      tree_error("at '" + path + "': expected a tuple of " + std::to_string(N) + ", got " + def.str());
    T r;
    for (size_t i = 0; i < N; ++i) r[i] = unflatten_node<E>(def.children[i], src, join_path(path, std::to_string(i)));
    return r;
  }
};

template <class E>
struct PyTree<std::vector<E>> {
  using T = std::vector<E>;
  static void flatten(const T& v, TreeDef& def, LeafSink& sink) {
    def.kind = TreeDef::Kind::list;
    def.children.resize(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      sink.path.push_back(std::to_string(i));
      flatten_node(static_cast<const E&>(v[i]), def.children[i], sink);
      sink.path.pop_back();
    }
  }
  template <class In>
  static T rebuild(const In& in, LeafSource& src) {
    T r;
    r.reserve(in.size());
    for (const auto& x : in) r.push_back(rebuild_node<E>(x, src));
    return r;
  }
  static T unflatten(const TreeDef& def, LeafSource& src, const std::string& path) {
    if (def.kind != TreeDef::Kind::list) tree_error("at '" + path + "': expected a list, got " + def.str());
    T r;
    for (size_t i = 0; i < def.children.size(); ++i)
      r.push_back(unflatten_node<E>(def.children[i], src, join_path(path, std::to_string(i))));
    return r;
  }
};

template <class E>
struct PyTree<std::map<std::string, E>> {
  using T = std::map<std::string, E>;
  static void flatten(const T& v, TreeDef& def, LeafSink& sink) {
    def.kind = TreeDef::Kind::dict;
    for (const auto& [k, x] : v) {  // std::map iterates in sorted key order
      def.keys.push_back(k);
      def.children.emplace_back();
      sink.path.push_back(k);
      flatten_node(x, def.children.back(), sink);
      sink.path.pop_back();
    }
  }
  template <class In>
  static T rebuild(const In& in, LeafSource& src) {
    T r;
    for (const auto& [k, x] : in) r.emplace(k, rebuild_node<E>(x, src));
    return r;
  }
  static T unflatten(const TreeDef& def, LeafSource& src, const std::string& path) {
    if (def.kind != TreeDef::Kind::dict) tree_error("at '" + path + "': expected a dict, got " + def.str());
    T r;
    for (size_t i = 0; i < def.children.size(); ++i)
      r.emplace(def.keys[i], unflatten_node<E>(def.children[i], src, join_path(path, def.keys[i])));
    return r;
  }
};

template <class E>
struct PyTree<std::optional<E>> {
  using T = std::optional<E>;
  static void flatten(const T& v, TreeDef& def, LeafSink& sink) {
    if (!v) {
      def.kind = TreeDef::Kind::none;
      return;
    }
    flatten_node(*v, def, sink);
  }
  template <class In>
  static T rebuild(const In& in, LeafSource& src) {
    if constexpr (requires { in.has_value(); }) {
      if (!in) return std::nullopt;
      return rebuild_node<E>(*in, src);
    } else {
      return rebuild_node<E>(in, src);
    }
  }
  static T unflatten(const TreeDef& def, LeafSource& src, const std::string& path) {
    if (def.kind == TreeDef::Kind::none) return std::nullopt;
    return unflatten_node<E>(def, src, path);
  }
};

/// Structs registered with KILN_PYTREE: fields flattened in declaration order.
template <class T>
  requires requires { PyTreeFields<T>::fields(); }
struct PyTree<T> {
  static void flatten(const T& v, TreeDef& def, LeafSink& sink) {
    def.kind = TreeDef::Kind::record;
    def.value = PyTreeFields<T>::type_name();
    std::apply(
        [&](auto... f) {
          ((def.keys.push_back(f.first), def.children.emplace_back(), sink.path.push_back(f.first),
            flatten_node(v.*(f.second), def.children.back(), sink), sink.path.pop_back()),
           ...);
        },
        PyTreeFields<T>::fields());
  }
  template <class In>
  static T rebuild(const In& in, LeafSource& src) {
    static_assert(std::is_same_v<In, T>, "kiln pytree: a struct argument's spec must be the same struct");
    T r = in;
    std::apply([&](auto... f) { ((r.*(f.second) = rebuild_node<std::decay_t<decltype(r.*(f.second))>>(in.*(f.second), src)), ...); },
               PyTreeFields<T>::fields());
    return r;
  }
  static T unflatten(const TreeDef& def, LeafSource& src, const std::string& path) {
    if (def.kind != TreeDef::Kind::record || def.value != PyTreeFields<T>::type_name())
      tree_error("at '" + path + "': expected " + PyTreeFields<T>::type_name() + ", got " + def.str());
    T r{};
    size_t i = 0;
    std::apply(
        [&](auto... f) {
          ((r.*(f.second) = unflatten_node<std::decay_t<decltype(r.*(f.second))>>(def.children[i], src,
                                                                                   join_path(path, f.first)),
            ++i),
           ...);
        },
        PyTreeFields<T>::fields());
    return r;
  }
};

}  // namespace detail

/// Flattens `v` into its tensor leaves (in order) and its structure.
template <class T>
std::pair<std::vector<Tensor>, TreeDef> tree_flatten(const T& v) {
  std::vector<Tensor> leaves;
  TreeDef def;
  detail::LeafSink sink;
  sink.tensors = &leaves;
  detail::flatten_node(v, def, sink);
  return {std::move(leaves), std::move(def)};
}

/// Flattens a tree of specs (TensorLayout, or Tensor taken by its layout).
template <class T>
std::pair<std::vector<TensorLayout>, TreeDef> tree_flatten_layouts(const T& v) {
  std::vector<TensorLayout> leaves;
  TreeDef def;
  detail::LeafSink sink;
  sink.layouts = &leaves;
  detail::flatten_node(v, def, sink);
  return {std::move(leaves), std::move(def)};
}

/// Rebuilds a T with structure `def` from tensor leaves; static leaves are
/// parsed back from the TreeDef. Throws ValueError when the structure or the
/// leaf count does not match.
template <class T>
T tree_unflatten(const TreeDef& def, const std::vector<Tensor>& leaves) {
  detail::LeafSource src{leaves.data(), leaves.size(), 0};
  T r = detail::unflatten_node<T>(def, src, "");
  if (src.next != src.n)
    detail::tree_error("tree_unflatten: " + std::to_string(src.n) + " leaves given, the tree uses " +
                       std::to_string(src.next));
  return r;
}

}  // namespace kiln

// ---- KILN_PYTREE(Type, field, ...) ------------------------------------------------
#define KILN_PT_FIELD(T, f) std::pair<const char*, decltype(&T::f)>(#f, &T::f)
#define KILN_PT_EXPAND(x) x
#define KILN_PT_F1(T, a) KILN_PT_FIELD(T, a)
#define KILN_PT_F2(T, a, ...) KILN_PT_FIELD(T, a), KILN_PT_EXPAND(KILN_PT_F1(T, __VA_ARGS__))
#define KILN_PT_F3(T, a, ...) KILN_PT_FIELD(T, a), KILN_PT_EXPAND(KILN_PT_F2(T, __VA_ARGS__))
#define KILN_PT_F4(T, a, ...) KILN_PT_FIELD(T, a), KILN_PT_EXPAND(KILN_PT_F3(T, __VA_ARGS__))
#define KILN_PT_F5(T, a, ...) KILN_PT_FIELD(T, a), KILN_PT_EXPAND(KILN_PT_F4(T, __VA_ARGS__))
#define KILN_PT_F6(T, a, ...) KILN_PT_FIELD(T, a), KILN_PT_EXPAND(KILN_PT_F5(T, __VA_ARGS__))
#define KILN_PT_F7(T, a, ...) KILN_PT_FIELD(T, a), KILN_PT_EXPAND(KILN_PT_F6(T, __VA_ARGS__))
#define KILN_PT_F8(T, a, ...) KILN_PT_FIELD(T, a), KILN_PT_EXPAND(KILN_PT_F7(T, __VA_ARGS__))
#define KILN_PT_F9(T, a, ...) KILN_PT_FIELD(T, a), KILN_PT_EXPAND(KILN_PT_F8(T, __VA_ARGS__))
#define KILN_PT_F10(T, a, ...) KILN_PT_FIELD(T, a), KILN_PT_EXPAND(KILN_PT_F9(T, __VA_ARGS__))
#define KILN_PT_F11(T, a, ...) KILN_PT_FIELD(T, a), KILN_PT_EXPAND(KILN_PT_F10(T, __VA_ARGS__))
#define KILN_PT_F12(T, a, ...) KILN_PT_FIELD(T, a), KILN_PT_EXPAND(KILN_PT_F11(T, __VA_ARGS__))
#define KILN_PT_PICK(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, N, ...) N
#define KILN_PT_FIELDS(T, ...)                                                                                \
  KILN_PT_EXPAND(KILN_PT_PICK(__VA_ARGS__, KILN_PT_F12, KILN_PT_F11, KILN_PT_F10, KILN_PT_F9, KILN_PT_F8,      \
                              KILN_PT_F7, KILN_PT_F6, KILN_PT_F5, KILN_PT_F4, KILN_PT_F3, KILN_PT_F2,          \
                              KILN_PT_F1)(T, __VA_ARGS__))

/// Registers a struct (at global namespace scope) as a pytree node with up to
/// 12 fields: `struct Params { Tensor w, b; int k; }; KILN_PYTREE(Params, w, b, k)`.
#define KILN_PYTREE(Type, ...)                                                      \
  template <>                                                                       \
  struct kiln::detail::PyTreeFields<Type> {                                         \
    static std::string type_name() { return #Type; }                              \
    static auto fields() { return std::make_tuple(KILN_PT_FIELDS(Type, __VA_ARGS__)); } \
  }
