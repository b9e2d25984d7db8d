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
#include "small_vector.h"
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
using ValueList = SmallVector<int32_t, 4>;

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
