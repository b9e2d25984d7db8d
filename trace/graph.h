// kiln: the graph IR. A Graph is a list of nodes in topological order; each
// node produces typed SSA values. One node kind per op-table row (plus
// inputs, constants, named weights and subgraph calls), so every layer that
// reads the op table reads graphs too.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <iterator>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../tensor/op_table.h"
#include "../tensor/tensor.h"

namespace kiln {

/// The static type of a graph value: dtype, shape and device.
struct TensorType {
  DType dtype = DType::float32;
  Shape shape;
  Device device = Device::cpu();
  TensorType() = default;
  TensorType(DType dtype, Shape shape, Device device = Device::cpu())
      : dtype(dtype), shape(std::move(shape)), device(device) {}
  explicit TensorType(const TensorLayout& l) : dtype(l.dtype), shape(l.shape), device(l.device) {}
  TensorLayout layout() const { return TensorLayout(dtype, shape, device); }
  /// Sets `out` to layout() without a new TensorLayout: `out.shape` keeps
  /// its capacity, so a loop that refills the same layouts (an op's operand
  /// layouts for infer_layout, once per node) stops allocating.
  void layout_into(TensorLayout& out) const {
    out.dtype = dtype;
    out.shape.assign(shape.begin(), shape.end());
    out.device = device;
    out.stride_class = StrideClass::contiguous;
  }
  /// "float32[3, 4] cpu"
  std::string str() const;
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

class Graph;

/// A graph output past a traced function's results that a compiled call
/// writes back when it ends (in-place writes, tensor/mutation.h): the final
/// value of argument leaf `argument`, or (argument < 0) of the mutable
/// source bound as weight `weight` (GraphRealizationContext::add_mutable_source).
struct WriteBack {
  int32_t argument = -1;
  std::string weight;
  friend bool operator==(const WriteBack&, const WriteBack&) = default;
};

/// A value in a graph: a handle (graph, id). Valid while the graph lives.
struct GraphValue {
  Graph* graph = nullptr;
  int32_t id = -1;
  const TensorType& type() const;
  friend bool operator==(const GraphValue&, const GraphValue&) = default;
};

enum class NodeKind : uint8_t {
  input,     ///< graph argument
  op,        ///< an op-table row
  constant,  ///< embedded tensor data
  weight,    ///< named external tensor, bound at compile time (name relative to the call prefix)
  call,      ///< call of a subgraph definition, with a name prefix for its weights
};

/// A node's operand or result value ids: a vector of int32_t that keeps up
/// to 4 ids inside the node (longer lists, e.g. a call's, on the heap). Most
/// nodes then own no heap block for their operands, so a walk over a big
/// graph reads the node array in order instead of chasing two pointers per
/// node, and removing a node frees two blocks fewer. Same size as a
/// std::vector; converts to and from std::vector<int32_t>, compares with ==,
/// and views as a std::span<const int32_t>.
class ValueList {
 public:
  using value_type = int32_t;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = int32_t&;
  using const_reference = const int32_t&;
  using pointer = int32_t*;
  using const_pointer = const int32_t*;
  using iterator = int32_t*;
  using const_iterator = const int32_t*;

  ValueList() noexcept {}
  ValueList(std::initializer_list<int32_t> il) { assign(il.begin(), il.end()); }
  ValueList(const std::vector<int32_t>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit, as the old vector
  ValueList(const ValueList& o) { assign(o.begin(), o.end()); }
  ValueList(ValueList&& o) noexcept { steal(o); }
  ValueList& operator=(const ValueList& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  ValueList& operator=(ValueList&& o) noexcept {
    if (this != &o) {
      release();
      steal(o);
    }
    return *this;
  }
  ValueList& operator=(std::initializer_list<int32_t> il) {
    assign(il.begin(), il.end());
    return *this;
  }
  ~ValueList() { release(); }

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_t capacity() const noexcept { return cap_; }
  int32_t* data() noexcept { return cap_ > kInline ? heap_ : inline_; }
  const int32_t* data() const noexcept { return cap_ > kInline ? heap_ : inline_; }
  iterator begin() noexcept { return data(); }
  iterator end() noexcept { return data() + size_; }
  const_iterator begin() const noexcept { return data(); }
  const_iterator end() const noexcept { return data() + size_; }
  const_iterator cbegin() const noexcept { return begin(); }
  const_iterator cend() const noexcept { return end(); }
  int32_t& operator[](size_t i) noexcept { return data()[i]; }
  const int32_t& operator[](size_t i) const noexcept { return data()[i]; }
  int32_t& at(size_t i) {
    if (i >= size_) throw std::out_of_range("ValueList::at");
    return data()[i];
  }
  const int32_t& at(size_t i) const {
    if (i >= size_) throw std::out_of_range("ValueList::at");
    return data()[i];
  }
  int32_t& front() noexcept { return data()[0]; }
  const int32_t& front() const noexcept { return data()[0]; }
  int32_t& back() noexcept { return data()[size_ - 1]; }
  const int32_t& back() const noexcept { return data()[size_ - 1]; }

  void push_back(int32_t v) {
    if (size_ == cap_) grow(2 * static_cast<size_t>(cap_));
    data()[size_++] = v;
  }
  void emplace_back(int32_t v) { push_back(v); }
  void pop_back() noexcept { --size_; }
  void clear() noexcept { size_ = 0; }
  void reserve(size_t n) {
    if (n > cap_) grow(n);
  }
  void resize(size_t n, int32_t v = 0) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data()[i] = v;
    size_ = static_cast<uint32_t>(n);
  }
  template <class It>
  void assign(It first, It last) {
    clear();
    if constexpr (std::is_base_of_v<std::forward_iterator_tag,
                                    typename std::iterator_traits<It>::iterator_category>)
      reserve(static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) push_back(*first);
  }

  operator std::vector<int32_t>() const { return std::vector<int32_t>(begin(), end()); }  // NOLINT: implicit
  friend bool operator==(const ValueList& a, const ValueList& b) noexcept {
    if (a.size_ != b.size_) return false;
    for (uint32_t i = 0; i < a.size_; ++i)
      if (a[i] != b[i]) return false;
    return true;
  }

 private:
  static constexpr uint32_t kInline = 4;
  void grow(size_t n) {
    if (n > UINT32_MAX) throw std::length_error("ValueList: too many values");
    int32_t* p = new int32_t[n];
    for (uint32_t i = 0; i < size_; ++i) p[i] = data()[i];
    release();
    heap_ = p;
    cap_ = static_cast<uint32_t>(n);
  }
  void release() noexcept {
    if (cap_ > kInline) delete[] heap_;
    cap_ = kInline;
  }
  // Requires cap_ == kInline (released): takes o's ids, leaves o empty.
  void steal(ValueList& o) noexcept {
    size_ = o.size_;
    if (o.cap_ > kInline) {
      heap_ = o.heap_;
      cap_ = o.cap_;
    } else {
      for (uint32_t i = 0; i < o.size_; ++i) inline_[i] = o.inline_[i];
    }
    o.size_ = 0;
    o.cap_ = kInline;
  }
  uint32_t size_ = 0, cap_ = kInline;  // cap_ == kInline: the ids are in inline_
  union {
    int32_t inline_[kInline] = {};
    int32_t* heap_;
  };
};

/// One node. Which fields are used depends on `kind`.
struct Node {
  NodeKind kind = NodeKind::op;
  OpId op{};                    ///< kind == op
  Attrs attrs;                  ///< kind == op
  ValueList inputs;             ///< value ids read
  ValueList outputs;            ///< value ids defined
  std::string name;             ///< weight name / called subgraph name
  std::string prefix;           ///< call prefix ("layers.3.")
  bool placeholder = false;     ///< weight: resolved through the caller's prefix
  Tensor data;                  ///< constant: realized, contiguous
};

/// A graph under construction or finished. Subgraph definitions live in the
/// root graph (`subgraphs()`), called by name from `call` nodes.
class Graph {
 public:
  explicit Graph(std::string name = "graph", std::vector<TensorType> input_types = {});
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) = delete;

  const std::string& name() const { return name_; }
  /// The argument values, in order.
  std::vector<GraphValue> inputs() const;
  /// Appends an argument (used while staging).
  GraphValue add_input(const TensorType& t);
  /// Sets the results. Tensors must be unrealized values of this graph (a
  /// realized tensor becomes a constant). Throws ValueError otherwise.
  void output(const Tensor& t);
  void output(const std::vector<Tensor>& ts);
  void output_values(const std::vector<GraphValue>& vs);
  std::vector<GraphValue> outputs() const;

  /// Appends a node for op-table row `op`; its type comes from infer_layout
  /// (so shape and dtype errors surface while recording).
  GraphValue add_op(OpId op, std::span<const GraphValue> in, const Attrs& attrs = {});
  /// Embeds `data` (realized) as a constant. With `copy` the graph owns a
  /// private contiguous copy (later writes to `data` do not change it);
  /// without, it references `data` (made contiguous if needed).
  GraphValue add_constant(const Tensor& data, bool copy = true);
  /// A named external tensor of type `t`. Adding the same name twice returns
  /// the same value (and throws ValueError if the types differ).
  GraphValue add_weight(const std::string& name, const TensorType& t, bool placeholder = false);
  /// Calls subgraph `callee` (defined in this graph's root) on `in`.
  std::vector<GraphValue> add_call(const std::string& callee, std::span<const GraphValue> in,
                                   const std::string& prefix = "");

  /// Defines a subgraph in this root graph (throws ValueError on a duplicate name).
  Graph& define_subgraph(const std::string& name, std::vector<TensorType> input_types);
  /// A name not used by this graph or its subgraphs: base, base_1, base_2, ...
  std::string unique_subgraph_name(const std::string& base) const;
  const Graph* subgraph(const std::string& name) const;
  Graph* subgraph(const std::string& name);
  void remove_subgraph(const std::string& name);
  const std::map<std::string, std::unique_ptr<Graph>>& subgraphs() const { return subgraphs_; }
  Graph* root() { return root_ ? root_ : this; }
  const Graph* root() const { return root_ ? root_ : this; }

  // ---- inspection ----
  size_t num_nodes() const { return nodes_.size(); }
  size_t num_values() const { return value_type_.size(); }
  const Node& node(size_t i) const { return nodes_[i]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const TensorType& type(int32_t value) const { return type_table_[value_type_.at(static_cast<size_t>(value))]; }
  /// Index of the node defining `value`.
  int32_t producer(int32_t value) const { return producer_.at(static_cast<size_t>(value)); }
  const std::vector<int32_t>& output_ids() const { return outputs_; }
  const std::vector<int32_t>& input_ids() const { return inputs_; }
  /// Number of op nodes per op name (for summaries).
  std::map<std::string, int> op_counts() const;

  /// Checks that every value is defined once before use, types match
  /// infer_layout for every op node, calls match their callee's signature,
  /// outputs exist, and subgraphs verify. Throws ValueError naming the node.
  void verify() const;

  /// Readable text form; `parse` reads it back to an equal graph.
  std::string to_text() const;
  /// Graphviz DOT (render with `dot -Tsvg`).
  std::string to_dot() const;
  /// Parses `to_text` output; throws ValueError with the line number.
  static std::unique_ptr<Graph> parse(std::string_view text);
  /// Structural equality (names, nodes, types, attrs, constant bytes, subgraphs).
  bool equals(const Graph& o) const;

  /// Replaces the node list (used by passes). `nodes` must define every value
  /// it uses; types of surviving values are kept. Unused values are dropped
  /// and ids renumbered densely; `outputs` are remapped.
  void rebuild(std::vector<Node> nodes, std::vector<int32_t> outputs);
  /// Removes the nodes flagged in `removed` (one flag per node), like
  /// rebuild() with the others, but in one walk over the node list: the
  /// survivors move down in place. Throws ValueError, leaving the graph
  /// unusable, when a kept node reads a removed value or an output was removed.
  void remove_nodes(const std::vector<char>& removed, std::vector<int32_t> outputs);
  /// Mutable access for passes that rewrite in place.
  std::vector<Node>& mutable_nodes() { return nodes_; }
  std::vector<int32_t>& mutable_outputs() { return outputs_; }
  int32_t new_value(const TensorType& t, int32_t producer_node);
  /// Values sharing one type: add_type() enters `t` in the graph's type
  /// table once, new_value_of_type() defines a value of that entry. A reader
  /// of a file whose types come from a table (a MEF's GRPB section) then
  /// copies each distinct shape once, not once per value.
  uint32_t add_type(TensorType t);
  int32_t new_value_of_type(uint32_t type_index, int32_t producer_node);
  /// Room for `n` values in all, so defining them does not reallocate.
  void reserve_values(size_t n);

 private:
  friend struct GraphParser;
  int32_t push_node(Node n, const std::vector<TensorType>& out_types);
  void renumber(std::vector<Node>& nodes, const std::vector<char>* removed, std::vector<int32_t> outputs);
  std::string name_;
  Graph* root_ = nullptr;  // null for a root graph
  std::vector<Node> nodes_;
  // Value types, interned: value v has type type_table_[value_type_[v]].
  // new_value() adds an entry per value (as a per-value array would);
  // add_type() lets values share one. Entries of removed values stay until
  // the graph goes (renumber() remaps only the indices).
  std::vector<TensorType> type_table_;
  std::vector<uint32_t> value_type_;  // per value
  std::vector<int32_t> producer_;   // per value: defining node
  std::vector<int32_t> inputs_, outputs_;
  std::map<std::string, int32_t> weights_;  // name -> value
  std::map<std::string, std::unique_ptr<Graph>> subgraphs_;
};

std::ostream& operator<<(std::ostream& os, const Graph& g);

}  // namespace kiln
